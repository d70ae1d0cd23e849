"""The ladder table: every cell of docs/flows/escalation.md's table, overrides, and the thresholds' configuration."""

from __future__ import annotations

import pytest

from goldfive_core import (
    ConfigError,
    DefaultSteerer,
    Drift,
    DriftKind,
    DriftSeverity,
    InMemorySink,
    InterventionLevel,
    Session,
    SteeringConfig,
)

K = DriftKind
# The ladder table written out again, independently of goldfive_core.ladder: (info, warning, critical first, repeat).
DESIGN_ROWS: dict[DriftKind, tuple[int, int, int, int]] = {
    K.INTENT_DIVERGENCE: (0, 1, 4, 4),
    K.REFINE_VALIDATION_FAILED: (0, 0, 4, 4),
    K.RUNAWAY_DELEGATION: (0, 0, 3, 4),
    K.HUMAN_INTERVENTION_REQUIRED: (0, 0, 4, 5),
    K.TASK_TIMEOUT: (0, 0, 4, 4),
    K.TOO_MANY_STEPS: (0, 0, 4, 4),
    K.RESOURCE_EXHAUSTED: (0, 0, 4, 4),
    K.LLM_CALL_TIMEOUT: (0, 0, 4, 4),
    K.LOOPING_TOOL_CALL: (0, 2, 3, 4),
    K.LOOPING_REASONING: (0, 2, 3, 4),
    K.PLAN_DIVERGENCE: (0, 0, 0, 0),
    K.NEW_WORK_DISCOVERED: (0, 0, 0, 0),
}
DESIGN_DEFAULT = (0, 1, 3, 4)

CELLS = [
    (kind, column, expected)
    for kind in DriftKind
    for column, expected in zip(
        ("INFO", "WARNING", "CRITICAL first", "CRITICAL repeat"), DESIGN_ROWS.get(kind, DESIGN_DEFAULT), strict=True
    )
]


def _steerer(**kwargs: object) -> DefaultSteerer:
    session = Session(config=SteeringConfig(), sinks=[InMemorySink()])
    return DefaultSteerer(session, None, **kwargs)  # type: ignore[arg-type]


def _lookup(steerer: DefaultSteerer, kind: DriftKind, column: str) -> InterventionLevel:
    severity = {"INFO": DriftSeverity.INFO, "WARNING": DriftSeverity.WARNING}.get(column, DriftSeverity.CRITICAL)
    return steerer._ladder_level_for(kind, severity, 2 if column == "CRITICAL repeat" else 1)


@pytest.mark.parametrize(("kind", "column", "expected"), CELLS, ids=[f"{k.name}-{c}" for k, c, _ in CELLS])
def test_every_cell_of_the_design_table(kind: DriftKind, column: str, expected: int) -> None:
    assert _lookup(_steerer(), kind, column) == expected


def test_the_table_covers_every_kind_either_by_row_or_by_the_default_row() -> None:
    assert len(CELLS) == 4 * len(DriftKind)
    assert len([k for k in DriftKind if k not in DESIGN_ROWS]) > 20  # the default row is exercised broadly


@pytest.mark.parametrize("severity", list(DriftSeverity))
async def test_handle_drift_applies_the_cell_the_table_names(severity: DriftSeverity) -> None:
    sink = InMemorySink()
    session = Session(config=SteeringConfig(), sinks=[sink])
    steerer = DefaultSteerer(session, None)
    first = await steerer.handle_drift(Drift(K.NEW_WORK_DISCOVERED, severity, "x", task_id="t"))
    level = await steerer.handle_drift(Drift(K.INTENT_DIVERGENCE, severity, "off course", task_id="t"))
    assert first is InterventionLevel.OBSERVE
    assert level == {DriftSeverity.INFO: 0, DriftSeverity.WARNING: 1, DriftSeverity.CRITICAL: 4}[severity]
    assert [e.drift_detected.ladder_level for e in sink.of("drift_detected")][:2] == [0, level]


async def test_repeat_means_the_same_kind_and_task_seen_critical_before() -> None:
    session = Session(config=SteeringConfig(max_reinvokes=0), sinks=[InMemorySink()])
    steerer = DefaultSteerer(session, None)
    a1 = await steerer.handle_drift(Drift(K.RUNAWAY_DELEGATION, DriftSeverity.WARNING, "w", task_id="a"))
    a2 = await steerer.handle_drift(Drift(K.RUNAWAY_DELEGATION, DriftSeverity.CRITICAL, "c", task_id="a"))
    b1 = await steerer.handle_drift(Drift(K.RUNAWAY_DELEGATION, DriftSeverity.CRITICAL, "c", task_id="b"))
    assert (a1, a2, b1) == (InterventionLevel.OBSERVE, InterventionLevel.CANCEL_REINVOKE, 3)
    assert steerer.occurrences(K.RUNAWAY_DELEGATION, DriftSeverity.CRITICAL, "a") == 1
    a3 = await steerer.handle_drift(Drift(K.RUNAWAY_DELEGATION, DriftSeverity.CRITICAL, "c", task_id="a"))
    assert a3 is InterventionLevel.PAUSE_ESCALATE


def test_rows_are_overridable_through_config_and_the_constructor() -> None:
    config = SteeringConfig(ladder={K.PLAN_DIVERGENCE: (0, 2, 2, 2), None: (1, 1, 1, 1)})
    session = Session(config=config)
    steerer = DefaultSteerer(session, None)
    assert steerer._ladder_level_for(K.PLAN_DIVERGENCE, DriftSeverity.WARNING, 1) is InterventionLevel.NUDGE
    assert steerer._ladder_level_for(K.TOOL_ERROR, DriftSeverity.CRITICAL, 5) is InterventionLevel.ABSORB
    assert steerer._ladder_level_for(K.LOOPING_TOOL_CALL, DriftSeverity.WARNING, 1) is InterventionLevel.NUDGE  # kept
    own = DefaultSteerer(session, None, ladder={K.LOOPING_TOOL_CALL: (0, 5, 5, 5)})
    assert own._ladder_level_for(K.LOOPING_TOOL_CALL, DriftSeverity.WARNING, 1) is InterventionLevel.TERMINATE
    assert own._ladder_level_for(K.PLAN_DIVERGENCE, DriftSeverity.WARNING, 1) is InterventionLevel.OBSERVE


@pytest.mark.parametrize(
    ("ladder", "message"),
    [
        ({K.TOOL_ERROR: (0, 1, 3)}, "must be 4 levels"),
        ({K.TOOL_ERROR: (0, 1, 3, 6)}, "6 is not a level"),
        ({"TOOL_ERROR": (0, 1, 3, 4)}, "ladder keys must be DriftKind"),
    ],
)
def test_a_bad_ladder_is_a_config_error_naming_the_problem(ladder: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SteeringConfig(ladder=ladder)  # type: ignore[arg-type]


def test_thresholds_have_defaults_and_env_overrides() -> None:
    default = SteeringConfig.from_env({})
    assert (default.loop_warning_repeats, default.loop_critical_repeats) == (3, 5)
    assert (default.max_steps, default.max_transfers, default.max_reinvokes) == (200, 10, 2)
    assert default.pause_escalate_deadline_s is None
    env = {
        "GOLDFIVE_STEER_LOOP_WARNING_REPEATS": "4",
        "GOLDFIVE_STEER_LOOP_CRITICAL_REPEATS": "8",
        "GOLDFIVE_STEER_MAX_STEPS": "none",
        "GOLDFIVE_STEER_MAX_TRANSFERS": "3",
        "GOLDFIVE_STEER_MAX_REINVOKES": "0",
        "GOLDFIVE_STEER_PAUSE_ESCALATE_DEADLINE_S": "2.5",
        "GOLDFIVE_STEER_LADDER": "ignored: rows are code, not environment",
    }
    config = SteeringConfig.from_env(env)
    assert (config.loop_warning_repeats, config.loop_critical_repeats) == (4, 8)
    assert (config.max_steps, config.max_transfers, config.max_reinvokes) == (None, 3, 0)
    assert config.pause_escalate_deadline_s == 2.5
    assert config.ladder is None


def test_a_bad_threshold_in_the_environment_keeps_the_default(caplog: pytest.LogCaptureFixture) -> None:
    config = SteeringConfig.from_env({"GOLDFIVE_STEER_LOOP_CRITICAL_REPEATS": "0", "GOLDFIVE_STEER_MAX_STEPS": "x"})
    assert (config.loop_critical_repeats, config.max_steps) == (5, 200)
    assert "GOLDFIVE_STEER_LOOP_CRITICAL_REPEATS" in caplog.text
    with pytest.raises(ConfigError, match="max_reinvokes must be an integer >= 0, got -1"):
        SteeringConfig(max_reinvokes=-1)
