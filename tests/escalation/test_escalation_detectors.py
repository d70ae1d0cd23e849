"""The built-in detectors and the steerer's rungs, on a bare Session (no runner)."""

from __future__ import annotations

from goldfive_core import (
    ControlChannel,
    ControlRouter,
    DelegationDetector,
    Drift,
    DriftKind,
    DriftSeverity,
    InMemorySink,
    InterventionLevel,
    LoopingToolCallDetector,
    Session,
    SteeringConfig,
    StepBudgetDetector,
    install_default_steering,
)

W, C = DriftSeverity.WARNING, DriftSeverity.CRITICAL


def _session() -> Session:
    session = Session(config=SteeringConfig())
    session.start_task("t")
    return session


def test_looping_counts_identical_calls_in_a_row_and_any_other_call_ends_the_streak() -> None:
    session, detector = _session(), LoopingToolCallDetector(warning_repeats=2, critical_repeats=4)
    severities = []
    for args in [{"a": 1}, {"a": 1}, {"a": 1}, {"a": 1}, {"a": 1}, {"a": 2}, {"a": 2}]:
        drift = detector.on_tool_call(session, "f", args)
        severities.append(drift.severity if drift else None)
    assert severities == [None, W, None, C, C, None, W]
    assert detector.on_tool_call(session, "f", {"a": 2}) is None
    drift = detector.on_tool_call(session, "f", {"a": 2})
    assert drift is not None and drift.task_id == "t" and drift.kind is DriftKind.LOOPING_TOOL_CALL
    assert drift.detail == 'f({"a":2}) called 4 times in a row with the same arguments'


def test_looping_compares_arguments_as_json_would_and_survives_arguments_that_are_not_json() -> None:
    session, detector = _session(), LoopingToolCallDetector(warning_repeats=2, critical_repeats=3)
    # Equal in Python, different as JSON: no streak. Another tool with the same arguments: no streak.
    assert [detector.on_tool_call(session, "f", a) for a in ({"n": 1}, {"n": 1.0}, {"n": True})] == [None] * 3
    assert detector.on_tool_call(session, "g", {"n": True}) is None
    # Not JSON at all (a set): compared by repr, still counted.
    detector.on_tool_call(session, "h", {"s": {1}})
    drift = detector.on_tool_call(session, "h", {"s": {1}})
    assert drift is not None and drift.severity is W and drift.detail.startswith("h({'s': {1}}) called 2 times")


def test_looping_compares_key_order_independently_and_copes_with_non_json_args() -> None:
    session, detector = _session(), LoopingToolCallDetector(warning_repeats=2, critical_repeats=3)
    assert detector.on_tool_call(session, "f", {"a": 1, "b": 2}) is None
    assert detector.on_tool_call(session, "f", {"b": 2, "a": 1}) is not None  # same call, other key order
    odd = object()
    assert detector.on_tool_call(session, "g", {"x": odd}) is None
    drift = detector.on_tool_call(session, "g", {"x": odd})
    assert drift is not None and drift.severity is W
    assert detector.on_tool_call(session, "f", {"a": 1, "b": 2}) is None  # a different call: streak of one


def test_a_warning_threshold_at_or_above_critical_never_warns() -> None:
    session, detector = _session(), LoopingToolCallDetector(warning_repeats=3, critical_repeats=2)
    drifts = [detector.on_tool_call(session, "f", {}) for _ in range(3)]
    assert [d.severity if d else None for d in drifts] == [None, C, C]


def test_the_step_budget_reports_the_first_step_beyond_each_multiple() -> None:
    session, detector = _session(), StepBudgetDetector(max_steps=2)
    fired = [i + 1 for i in range(7) if detector.on_model_call(session) is not None]
    assert fired == [3, 5, 7]


def test_delegation_reports_every_transfer_beyond_the_cap() -> None:
    session, detector = _session(), DelegationDetector(max_transfers=1)
    assert detector.on_transfer(session, "b") is None
    drift = detector.on_transfer(session, "a")
    assert drift is not None and (drift.kind, drift.severity) == (DriftKind.RUNAWAY_DELEGATION, C)


def test_install_default_steering_gives_each_session_fresh_detectors_and_honours_none() -> None:
    one, two = Session(config=SteeringConfig()), Session(config=SteeringConfig(max_steps=None, max_transfers=None))
    steerer = install_default_steering(one)
    install_default_steering(two)
    assert one.steerer is steerer
    assert [type(d) for d in one.detectors] == [LoopingToolCallDetector, StepBudgetDetector, DelegationDetector]
    assert [type(d) for d in two.detectors] == [LoopingToolCallDetector]
    assert one.detectors[0] is not two.detectors[0]
    assert install_default_steering(one) is steerer and len(one.detectors) == 3  # idempotent


async def test_observe_tool_call_returns_the_level_and_nudges_land_as_guidance() -> None:
    sink = InMemorySink()
    session = Session(config=SteeringConfig(loop_warning_repeats=2), sinks=[sink])
    session.start_task("t")
    install_default_steering(session)
    levels = [await session.observe_tool_call("f", {"q": 1}) for _ in range(2)]
    assert levels == [InterventionLevel.OBSERVE, InterventionLevel.NUDGE]
    (note,) = session.take_guidance()
    assert note.source == "nudge" and note.text.startswith("[goldfive] LOOPING_TOOL_CALL (WARNING) in task 't'")


async def test_level_3_without_an_adapter_handler_queues_the_corrective_and_reports_the_level() -> None:
    session = _session()
    steerer = install_default_steering(session)
    level = await steerer.handle_drift(Drift(DriftKind.TOOL_ERROR, C, "the tool crashed", task_id="t"))
    assert level is InterventionLevel.CANCEL_REINVOKE  # ADK: the plugin skips the in-flight call
    assert session.state == "running"
    assert [n.source for n in session.take_guidance()] == ["nudge"]


async def test_a_second_level_4_drift_while_a_person_is_asked_does_not_escalate_again() -> None:
    sink = InMemorySink()
    channel = ControlChannel()
    session = Session(config=SteeringConfig(), sinks=[sink], has_channel=True)
    ControlRouter(channel).attach(session)
    steerer = install_default_steering(session, channel)
    first = await steerer.handle_drift(Drift(DriftKind.TOO_MANY_STEPS, C, "step 201", task_id="t"))
    second = await steerer.handle_drift(Drift(DriftKind.INTENT_DIVERGENCE, C, "off course", task_id="t"))
    assert (first, second) == (InterventionLevel.PAUSE_ESCALATE, InterventionLevel.PAUSE_ESCALATE)
    assert session.paused and session.pending_drift is not None
    assert session.pending_drift["drift_kind"] == "TOO_MANY_STEPS"
    kinds = [(e.drift_detected.kind, e.drift_detected.ladder_level) for e in sink.of("drift_detected")]
    assert kinds == [
        (DriftKind.TOO_MANY_STEPS, 4),
        (DriftKind.HUMAN_INTERVENTION_REQUIRED, 4),
        (DriftKind.INTENT_DIVERGENCE, 4),
    ]
    assert channel.statistics().dispatched == 1


async def test_a_drift_after_the_run_ended_is_only_recorded() -> None:
    session = _session()
    steerer = install_default_steering(session)
    session.finish()
    level = await steerer.handle_drift(Drift(DriftKind.HUMAN_INTERVENTION_REQUIRED, C, "late"))
    assert level is InterventionLevel.OBSERVE
    assert session.state == "finished"


async def test_a_direct_human_intervention_drift_pauses_and_its_repeat_terminates() -> None:
    sink = InMemorySink()
    channel = ControlChannel()
    session = Session(config=SteeringConfig(), sinks=[sink], has_channel=True)
    ControlRouter(channel).attach(session)
    steerer = install_default_steering(session, channel)
    hir = Drift(DriftKind.HUMAN_INTERVENTION_REQUIRED, C, "the user asked for a human")
    assert await steerer.handle_drift(hir) is InterventionLevel.PAUSE_ESCALATE
    assert session.pending_drift is not None and session.pending_drift["drift_id"] == hir.drift_id
    assert len(sink.of("drift_detected")) == 1  # the drift is its own HUMAN_INTERVENTION_REQUIRED event
    session.resume()
    again = Drift(DriftKind.HUMAN_INTERVENTION_REQUIRED, C, "still stuck")
    assert await steerer.handle_drift(again) is InterventionLevel.TERMINATE
    assert session.state == "terminated" and session.stop_drift_id == again.drift_id
    assert "still stuck" in session.stop_reason
