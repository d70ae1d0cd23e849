"""A run's pause and stop state: the part of a :class:`~goldfive_core.session.Session` the step gate honours.

PAUSE, CANCEL, a ladder TERMINATE and an escalation's deadline all land here;
:meth:`RunLifecycle.gate` is the step boundary that waits on them. The notes a
person or the ladder leaves for the agent's next turn queue here too, because
RESUME-by-STEER and the step gate hand them over together.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import enum
import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

from ._util import now_ms, shorten
from .convert import timestamp_from_ms
from .errors import RunCancelledError, RunTerminatedError
from .events import EventEmitter
from .payloads import MAX_TEXT, escalation_deadline_s
from .pb.v1 import events_pb2

__all__ = ["OVER_STATES", "STOPPED_STATES", "Guidance", "RunLifecycle", "RunState", "is_over", "is_stopped"]

logger = logging.getLogger(__name__)


class RunState(enum.StrEnum):
    """``running`` ⇄ ``paused`` (PAUSE / RESUME, an escalation); then ``cancelled`` (a person's CANCEL),
    ``terminated`` (goldfive: ladder TERMINATE, a deadline) or ``finished`` (the run ended by itself), which are
    final. The values are the words a status snapshot and an ack say (a StrEnum: ``RunState.PAUSED == "paused"``)."""

    RUNNING = "running"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    TERMINATED = "terminated"
    FINISHED = "finished"


STOPPED_STATES: frozenset[RunState] = frozenset({RunState.CANCELLED, RunState.TERMINATED})
"""Stopped from outside the agent: cancelled by a person, or terminated by goldfive (ladder, deadline)."""

OVER_STATES: frozenset[RunState] = frozenset({RunState.CANCELLED, RunState.TERMINATED, RunState.FINISHED})
"""States a run never leaves: it is neither running nor paused, and nothing more is asked of it or sent to it."""


def is_over(state: RunState) -> bool:
    """True once the run is cancelled, terminated or finished (no longer running or paused)."""
    return state in OVER_STATES


def is_stopped(state: RunState) -> bool:
    """True when the run was stopped from outside the agent (cancelled or terminated), not finished by itself."""
    return state in STOPPED_STATES


@dataclasses.dataclass(frozen=True, kw_only=True)
class Guidance:
    """A note for the agent's next turn: a person's steer, an injected message or a ladder nudge."""

    text: str
    source: Literal["steer", "inject", "nudge", "escalation"]
    control_id: str = ""


class RunLifecycle:
    """running → paused ⇄ running → cancelled / terminated / finished, and the gate that waits on it.

    ``withdraw(reason)`` is called when the run ends, to close what it still has open (its approvals).
    """

    def __init__(self, events: EventEmitter, *, withdraw: Callable[[str], None]) -> None:
        self.events = events
        self.pending_drift: dict[str, Any] | None = None
        """The escalation a paused run waits on (payload of GOLDFIVE_PAUSE_ESCALATE), if any."""
        self._withdraw = withdraw
        self._state = RunState.RUNNING
        self._pause_reason = ""
        self._stop_reason = ""
        self._stop_drift_id = ""
        self._pause_deadline: float | None = None  # time.monotonic() when an escalation stops waiting
        self._wake = asyncio.Event()
        self._guidance: collections.deque[Guidance] = collections.deque()
        self._cancel_hooks: list[Callable[[str], None]] = []

    @property
    def state(self) -> RunState:
        """running, paused, cancelled, terminated or finished."""
        return self._state

    @property
    def paused(self) -> bool:
        """True while the run waits at its next step boundary."""
        return self._state is RunState.PAUSED

    @property
    def stop_reason(self) -> str:
        """Why the run was cancelled or terminated ("" otherwise)."""
        return self._stop_reason

    @property
    def stop_drift_id(self) -> str:
        """The drift that made goldfive abort the run ("" when none did); RunAborted carries it."""
        return self._stop_drift_id

    def on_cancel(self, hook: Callable[[str], None]) -> None:
        """Call ``hook(reason)`` when the run is cancelled or terminated (adapters stop their host)."""
        self._cancel_hooks.append(hook)

    def pause(
        self, reason: str, *, escalation: Mapping[str, Any] | None = None, by: str = "", channel: str = ""
    ) -> None:
        """Stop the run at its next step boundary until RESUME, STEER or CANCEL.

        An ``escalation`` (a GOLDFIVE_PAUSE_ESCALATE payload) becomes
        :attr:`pending_drift`; its ``deadline_s`` bounds the wait, after which
        the run is aborted. Raises ValueError for a bad ``deadline_s``. A run that
        starts waiting emits RunPaused (``by`` / ``channel``: who paused it), and
        so does an escalation of a run a person had paused.
        """
        deadline_s = escalation_deadline_s(escalation) if escalation is not None else None
        if is_over(self._state):
            return
        announce = self._state is RunState.RUNNING or (escalation is not None and self.pending_drift is None)
        self._state = RunState.PAUSED
        self._pause_reason = reason
        if escalation is not None:
            self.pending_drift = dict(escalation)
            self._pause_deadline = None if deadline_s is None else time.monotonic() + deadline_s
        if announce:
            self._emit_paused(reason, escalation, deadline_s, by=by, channel=channel)

    def resume(self, *, how: Literal["resume", "steer"] = "resume", by: str = "", channel: str = "") -> bool:
        """Let a paused run continue (emits RunResumed); returns whether it was paused."""
        if self._state is not RunState.PAUSED:
            return False
        self._state = RunState.RUNNING
        self._pause_reason = ""
        self.pending_drift = None
        self._pause_deadline = None
        self.events.emit(events_pb2.RunResumed(how=how, resumed_by=by, channel=channel))
        self._notify()
        return True

    def cancel(self, reason: str) -> None:
        """Cancel the run: close open approvals, wake the gate, tell the adapter."""
        self._stop(RunState.CANCELLED, reason)

    def terminate(self, reason: str, *, drift_id: str = "") -> None:
        """Abort the run on goldfive's own decision (ladder TERMINATE, deadline); ``drift_id`` names the cause."""
        if not is_over(self._state):
            self._stop_drift_id = drift_id
        self._stop(RunState.TERMINATED, reason)

    def finish(self) -> None:
        """Mark the run over; withdraw anything still open."""
        if not is_over(self._state):
            self._state = RunState.FINISHED
        self._withdraw("the run ended")
        self._notify()

    async def gate(self) -> None:
        """The step boundary: return at once when running; wait while paused.

        Raises RunCancelledError / RunTerminatedError once the run was stopped.
        """
        while True:
            if self._state is RunState.CANCELLED:
                raise RunCancelledError(self._stop_reason or "cancelled")
            if self._state is RunState.TERMINATED:
                raise RunTerminatedError(self._stop_reason or "terminated")
            if self._state is not RunState.PAUSED:
                return
            wake = self._wake
            if self._pause_deadline is None:
                await wake.wait()
                continue
            remaining = self._pause_deadline - time.monotonic()
            if remaining <= 0:
                self._escalation_expired()
                continue
            try:
                async with asyncio.timeout(remaining):
                    await wake.wait()
            except TimeoutError:
                pass  # the loop re-checks the state and the deadline

    def add_guidance(
        self, text: str, source: Literal["steer", "inject", "nudge", "escalation"], control_id: str = ""
    ) -> None:
        """Queue a note for the agent's next turn."""
        self._guidance.append(Guidance(text=text, source=source, control_id=control_id))

    def take_guidance(self, *, sources: Collection[str] | None = None) -> list[Guidance]:
        """Every queued note, oldest first; the queue is emptied.

        With ``sources``, only the notes from those sources are taken; the others stay queued, in order.
        """
        notes = list(self._guidance)
        self._guidance.clear()
        if sources is None or not notes:
            return notes
        taken = [n for n in notes if n.source in sources]
        self._guidance.extend(n for n in notes if n.source not in sources)
        return taken

    def run_status(self) -> dict[str, Any]:
        """The state part of a status snapshot: state, pause reason, pending drift and time left."""
        return {
            "state": self._state,
            "pause_reason": self._pause_reason,
            "pending_drift": self.pending_drift,
            "escalation_deadline_in_s": (
                None if self._pause_deadline is None else max(0.0, round(self._pause_deadline - time.monotonic(), 3))
            ),
        }

    def _emit_paused(
        self, reason: str, escalation: Mapping[str, Any] | None, deadline_s: float | None, *, by: str, channel: str
    ) -> None:
        event = events_pb2.RunPaused(reason=shorten(reason, MAX_TEXT), paused_by=by, channel=channel)
        if escalation is not None:
            level = escalation.get("ladder_level")
            event.escalated = True
            event.drift_id = shorten(str(escalation.get("drift_id") or ""), 200)
            event.drift_kind = shorten(str(escalation.get("drift_kind") or ""), 200)
            if isinstance(level, int) and not isinstance(level, bool) and 0 <= level <= 5:
                event.ladder_level = level
            if deadline_s is not None:
                event.deadline_at.CopyFrom(timestamp_from_ms(now_ms() + int(deadline_s * 1000)))
        self.events.emit(event)

    def _stop(self, state: RunState, reason: str) -> None:
        if is_over(self._state):
            return
        self._state = state
        self._stop_reason = reason
        self._pause_deadline = None
        self._withdraw(f"the run was {state}: {shorten(reason)}")
        self._notify()
        for hook in list(self._cancel_hooks):
            try:
                hook(reason)
            except Exception:
                logger.exception("cancel hook %r failed", hook)

    def _notify(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()

    def _escalation_expired(self) -> None:
        drift = self.pending_drift or {}
        deadline = drift.get("deadline_s")
        self.terminate(
            f"aborted by goldfive: nobody answered the escalation of {drift.get('drift_kind') or 'a drift'} "
            f"(drift {drift.get('drift_id') or '?'}) within its deadline of {deadline:g} s: {drift.get('reason', '')}",
            drift_id=str(drift.get("drift_id") or ""),
        )
