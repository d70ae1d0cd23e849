"""Steering: DefaultSteerer (the ladder, acted on) and ``install_default_steering``.

:class:`SteeringConfig` (the knobs, with environment overrides) lives in :mod:`goldfive_core.config`
and is re-exported here.

``install_default_steering(session, channel)`` gives a session the steerer and
the built-in detectors; ``wrap()``'s runner and the ADK plugin call it per run.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .config import ENV_PREFIX, SteeringConfig
from .control import ControlAck, ControlKind, ControlMessage, ControlTransport
from .detectors import default_detectors
from .drift import Drift, DriftKind, DriftSeverity, InterventionLevel
from .ladder import LadderTable, ladder_level, merge_ladder
from .run_state import is_over

if TYPE_CHECKING:
    from .session import Session

__all__ = ["ENV_PREFIX", "DefaultSteerer", "SteeringConfig", "corrective_note", "install_default_steering"]

logger = logging.getLogger(__name__)


class DefaultSteerer:
    """The intervention ladder (docs/flows/escalation.md) for one session (implements ``Session.steerer``).

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
        if is_over(self.session.state):
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
    session.set_steerer(steerer)
    session.add_detectors(default_detectors(steerer.config))
    return steerer
