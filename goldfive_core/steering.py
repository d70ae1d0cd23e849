"""Steering: SteeringConfig (the knobs, with environment overrides) and DefaultSteerer (the ladder, acted on).

``install_default_steering(session, channel)`` gives a session the steerer and
the built-in detectors; ``wrap()``'s runner and the ADK plugin call it per run.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
import math
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .control import ControlAck, ControlKind, ControlMessage, ControlTransport
from .detectors import default_detectors
from .drift import Drift, DriftKind, DriftSeverity, InterventionLevel
from .errors import ConfigError
from .ladder import DEFAULT_LADDER, LadderTable, ladder_level, merge_ladder

if TYPE_CHECKING:
    from .session import Session

__all__ = ["ENV_PREFIX", "DefaultSteerer", "SteeringConfig", "corrective_note", "install_default_steering"]

logger = logging.getLogger(__name__)

ENV_PREFIX = "GOLDFIVE_STEER_"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SteeringConfig:
    """How long goldfive waits, how much it remembers, and when its detectors and ladder step in.

    Build one directly for explicit values, or with :meth:`from_env` (what
    ``wrap`` and the plugins do when no config is given) to let
    ``GOLDFIVE_STEER_<FIELD>`` environment variables override the defaults.
    """

    approval_default_timeout_ms: int = 600_000
    """Wait for a decision when ``report_awaiting_approval`` gives no positive ``timeout_ms``."""

    tool_approval_timeout_ms: int | None = None
    """Wait for a tool confirmation (Flow B); ``None`` = ``approval_default_timeout_ms``."""

    pause_escalate_deadline_s: float | None = None
    """How long a PAUSE_ESCALATE waits for a person before aborting the run; ``None`` = wait."""

    decided_history: int = 4096
    """Decided approvals remembered per run so a second decision gets "already decided"."""

    loop_warning_repeats: int = 3
    """The same tool with the same arguments this many times in a row: LOOPING_TOOL_CALL at WARNING."""

    loop_critical_repeats: int = 5
    """... and from this many times in a row on: LOOPING_TOOL_CALL at CRITICAL (every further repeat)."""

    max_steps: int | None = 200
    """Step budget (model calls; callable agents: checkpoints): TOO_MANY_STEPS at each multiple; ``None`` = off."""

    max_transfers: int | None = 10
    """Agent transfers a run may make; every one beyond is RUNAWAY_DELEGATION at CRITICAL; ``None`` = off."""

    max_reinvokes: int = 2
    """How often a run's agent may be cancelled and re-invoked (level 3) before the ladder escalates instead."""

    ladder: Mapping[DriftKind | None, tuple[int, int, int, int]] | None = dataclasses.field(
        default=None, metadata={"env": False}
    )
    """Ladder rows replacing DESIGN §2's (``None`` key = the default row); not read from the environment."""

    def __post_init__(self) -> None:
        _positive_int("approval_default_timeout_ms", self.approval_default_timeout_ms)
        if self.tool_approval_timeout_ms is not None:
            _positive_int("tool_approval_timeout_ms", self.tool_approval_timeout_ms)
        if self.pause_escalate_deadline_s is not None:
            value = self.pause_escalate_deadline_s
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ConfigError(
                    f"pause_escalate_deadline_s must be a positive number of seconds or None, got {value!r}"
                )
        _positive_int("decided_history", self.decided_history)
        _positive_int("loop_warning_repeats", self.loop_warning_repeats)
        _positive_int("loop_critical_repeats", self.loop_critical_repeats)
        if self.max_steps is not None:
            _positive_int("max_steps", self.max_steps)
        if self.max_transfers is not None:
            _positive_int("max_transfers", self.max_transfers)
        if isinstance(self.max_reinvokes, bool) or not isinstance(self.max_reinvokes, int) or self.max_reinvokes < 0:
            raise ConfigError(f"max_reinvokes must be an integer >= 0, got {self.max_reinvokes!r}")
        if self.ladder is not None:
            object.__setattr__(self, "ladder", merge_ladder(self.ladder))

    @property
    def ladder_table(self) -> LadderTable:
        """The ladder in force: DESIGN §2 with ``ladder``'s rows replacing the defaults."""
        return DEFAULT_LADDER if self.ladder is None else merge_ladder(self.ladder)

    @property
    def effective_tool_approval_timeout_ms(self) -> int:
        """The Flow B wait in milliseconds."""
        return self.tool_approval_timeout_ms or self.approval_default_timeout_ms

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> SteeringConfig:
        """Defaults, overridden by ``GOLDFIVE_STEER_*`` variables, overridden by ``overrides``.

        A variable that does not parse, or parses to a value out of range, is
        logged at WARNING and ignored (the default stays).
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(ENV_PREFIX + field.name.upper())
            if raw is None or field.name in overrides or not field.metadata.get("env", True):
                continue
            try:
                parsed = _parse(field.name, raw)
                alone: dict[str, Any] = {field.name: parsed}
                cls(**alone)  # validate this one value on its own
            except (ValueError, ConfigError) as exc:
                logger.warning("ignoring %s%s=%r: %s; keeping the default", ENV_PREFIX, field.name.upper(), raw, exc)
                continue
            values[field.name] = parsed
        values.update(overrides)
        return cls(**values)


_OPTIONAL_INTS = frozenset({"tool_approval_timeout_ms", "max_steps", "max_transfers"})


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def _parse(name: str, raw: str) -> int | float | None:
    text = raw.strip()
    if name.endswith("_s"):
        if text.lower() in ("", "none"):
            return None
        return float(text)
    if text.lower() in ("", "none") and name in _OPTIONAL_INTS:
        return None
    return int(text)


class DefaultSteerer:
    """The intervention ladder of DESIGN §2 for one session (implements ``Session.steerer``).

    Each drift is counted by (kind, severity, task); the ladder table gives
    its level and the steerer acts on it:

    - 0 OBSERVE: emit DriftDetected (every level emits it, with ``ladder_level``).
    - 1 ABSORB: also record the drift in :attr:`absorbed` and call ``on_absorb`` (a planner's hook).
    - 2 NUDGE: queue a corrective note for the agent's next turn (``Session.add_guidance``).
    - 3 CANCEL_REINVOKE: queue the note and ask the adapter to cancel the in-flight step and run it
      again (``Session.reinvoke_handler``; ADK skips the in-flight tool call instead). When the
      adapter refuses (its re-invocation budget is spent) the drift escalates to level 4.
    - 4 PAUSE_ESCALATE: dispatch ``GOLDFIVE_PAUSE_ESCALATE`` on the control channel and emit
      ``HUMAN_INTERVENTION_REQUIRED``; the run waits at its next step boundary for RESUME, STEER
      or CANCEL (up to ``pause_escalate_deadline_s``). With no channel nothing could resume the
      run, so it is not paused; the drifts are still emitted. While a run already waits for a
      person, further level-4 drifts are emitted without a second escalation.
    - 5 TERMINATE: abort the run (``RunAborted`` naming the drift). A second escalation for the
      same task is a repeat HUMAN_INTERVENTION_REQUIRED, which the default table maps here.
    """

    def __init__(
        self,
        session: Session,
        channel: ControlTransport | None = None,
        config: SteeringConfig | None = None,
        *,
        ladder: Mapping[DriftKind | None, tuple[int, int, int, int]] | None = None,
        on_absorb: Callable[[Drift], object] | None = None,
    ) -> None:
        self.session = session
        self.channel = channel
        self.config = config if config is not None else session.config
        self.ladder: LadderTable = merge_ladder(ladder) if ladder is not None else self.config.ladder_table
        self.on_absorb = on_absorb
        self.absorbed: list[Drift] = []
        """Drifts handled at ABSORB, oldest first."""
        self.decisions: list[tuple[Drift, InterventionLevel]] = []
        """Every drift handled and the level applied to it, oldest first."""
        self._seen: collections.Counter[tuple[DriftKind, DriftSeverity, str]] = collections.Counter()

    def _ladder_level_for(self, kind: DriftKind, severity: DriftSeverity, occurrence_count: int) -> InterventionLevel:
        """The table's level; ``occurrence_count`` counts drifts of this kind, severity and task, this one included."""
        return ladder_level(self.ladder, kind, severity, occurrence_count)

    def occurrences(self, kind: DriftKind, severity: DriftSeverity, task_id: str | None = None) -> int:
        """How many drifts of ``kind`` at ``severity`` for ``task_id`` were handled so far."""
        return self._seen[(kind, severity, task_id or "")]

    async def handle_drift(self, drift: Drift) -> InterventionLevel:
        """Act on ``drift`` as the ladder says and return the level applied."""
        level = self._ladder_level_for(drift.kind, drift.severity, self._count(drift))
        if self.session.state not in ("running", "paused"):
            logger.debug("run %s is %s; drift %s is only recorded", self.session.run_id, self.session.state, drift)
            applied = InterventionLevel.OBSERVE
            self.session.emit_drift(drift, applied)
        elif level >= InterventionLevel.TERMINATE:
            self.session.emit_drift(drift, level)
            applied = self._terminate(drift, f"{_describe(drift)} reached the ladder's TERMINATE level")
        elif level is InterventionLevel.PAUSE_ESCALATE:
            applied = self._escalate(drift)
        elif level is InterventionLevel.CANCEL_REINVOKE:
            applied = self._cancel_reinvoke(drift)
        else:
            self.session.emit_drift(drift, level)
            if level is InterventionLevel.NUDGE:
                self.session.add_guidance(corrective_note(drift), "nudge")
            elif level is InterventionLevel.ABSORB:
                self._absorb(drift)
            applied = level
        self.decisions.append((drift, applied))
        return applied

    # -- the rungs ---------------------------------------------------------------
    def _count(self, drift: Drift) -> int:
        key = (drift.kind, drift.severity, drift.task_id or "")
        self._seen[key] += 1
        return self._seen[key]

    def _absorb(self, drift: Drift) -> None:
        self.absorbed.append(drift)
        if self.on_absorb is not None:
            try:
                self.on_absorb(drift)
            except Exception:  # a planner's hook must not break the agent's step
                logger.exception("on_absorb hook failed for drift %s", drift.drift_id)

    def _cancel_reinvoke(self, drift: Drift) -> InterventionLevel:
        handler = self.session.reinvoke_handler
        if handler is not None and not handler(f"{_describe(drift)} (drift {drift.drift_id})"):
            logger.info("run %s: no re-invocation left for drift %s; escalating", self.session.run_id, drift.drift_id)
            return self._escalate(drift)
        self.session.emit_drift(drift, InterventionLevel.CANCEL_REINVOKE)
        self.session.add_guidance(corrective_note(drift), "nudge")
        return InterventionLevel.CANCEL_REINVOKE

    def _escalate(self, drift: Drift) -> InterventionLevel:
        session = self.session
        if session.pending_drift is not None:  # a person is already being asked: do not ask twice
            session.emit_drift(drift, InterventionLevel.PAUSE_ESCALATE)
            return InterventionLevel.PAUSE_ESCALATE
        if drift.kind is DriftKind.HUMAN_INTERVENTION_REQUIRED:
            human, human_level = drift, InterventionLevel.PAUSE_ESCALATE  # the drift already went through the table
        else:
            session.emit_drift(drift, InterventionLevel.PAUSE_ESCALATE)
            human = Drift(
                DriftKind.HUMAN_INTERVENTION_REQUIRED,
                DriftSeverity.CRITICAL,
                f"escalated from {drift.kind.name}: {drift.detail}",
                task_id=drift.task_id,
            )
            human_level = self._ladder_level_for(human.kind, human.severity, self._count(human))
        if human_level >= InterventionLevel.TERMINATE:
            session.emit_drift(human, InterventionLevel.TERMINATE)
            self.decisions.append((human, InterventionLevel.TERMINATE))
            return self._terminate(
                human, f"a person was needed again ({human.detail}) after an earlier escalation of this task"
            )
        payload: dict[str, Any] = {
            "reason": _describe(drift),
            "drift_id": drift.drift_id,
            "drift_kind": drift.kind.name,
            "ladder_level": int(InterventionLevel.PAUSE_ESCALATE),
            "run_id": session.run_id,  # routes the pause to this run only when a router serves several
        }
        if self.config.pause_escalate_deadline_s is not None:
            payload["deadline_s"] = self.config.pause_escalate_deadline_s
        if self.channel is None:
            logger.info(
                "run %s: drift %s needs a person but no control channel is bound; not pausing",
                session.run_id,
                drift.drift_id,
            )
        else:
            ack = self.channel.send_nowait(ControlMessage(ControlKind.GOLDFIVE_PAUSE_ESCALATE, payload))
            ack.add_done_callback(_log_refused)
        session.emit_drift(human, InterventionLevel.PAUSE_ESCALATE)
        if human is not drift:
            self.decisions.append((human, InterventionLevel.PAUSE_ESCALATE))
        return InterventionLevel.PAUSE_ESCALATE

    def _terminate(self, drift: Drift, why: str) -> InterventionLevel:
        self.session.terminate(f"aborted by goldfive: {why} (drift {drift.drift_id})", drift_id=drift.drift_id)
        return InterventionLevel.TERMINATE


def _describe(drift: Drift) -> str:
    where = f" in task {drift.task_id!r}" if drift.task_id else ""
    return f"{drift.kind.name} ({drift.severity.name}){where}: {drift.detail}"


def corrective_note(drift: Drift) -> str:
    """The note the agent gets at NUDGE / CANCEL_REINVOKE: what goldfive saw and what to do instead."""
    if drift.kind is DriftKind.LOOPING_TOOL_CALL:
        advice = "Do not call that tool with the same arguments again; use what you already have or try another way."
    elif drift.kind is DriftKind.TOO_MANY_STEPS:
        advice = "Wrap up: finish with what you have or report what blocks you."
    else:
        advice = "Step back, check the goal, and change course."
    return f"[goldfive] {_describe(drift)}. {advice}"


def _log_refused(ack: asyncio.Future[ControlAck]) -> None:
    if ack.cancelled() or ack.exception() is not None:
        return
    result = ack.result()
    if not result.ok:
        logger.warning("GOLDFIVE_PAUSE_ESCALATE was not applied: %s", result.detail)


def install_default_steering(
    session: Session, channel: ControlTransport | None = None, config: SteeringConfig | None = None
) -> DefaultSteerer:
    """Give ``session`` a :class:`DefaultSteerer` and the built-in detectors; returns the steerer.

    ``wrap()``'s runner and the ADK plugin call this for every session they
    create; ``channel`` is the control channel a person answers on (``None``: no person).
    Calling it again on the same session returns the steerer already installed.
    """
    if isinstance(session.steerer, DefaultSteerer):
        return session.steerer
    steerer = DefaultSteerer(session, channel, config)
    session.steerer = steerer
    session.detectors.extend(default_detectors(steerer.config))
    return steerer
