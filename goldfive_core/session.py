"""Session: the state of one run — tasks, approvals, pause state, guidance and events.

Control messages are applied synchronously by :meth:`Session.dispatch` the
moment they arrive; PAUSE, CANCEL and escalations set state that
:meth:`Session.gate` honours at the agent's next step boundary.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import getpass
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ._util import canonical_json, new_id, now_ms, shorten
from .approvals import (
    ApprovalBook,
    ApprovalOutcome,
    ApprovalRecord,
    ApprovalRequest,
    Decision,
    DecisionResult,
    DecisionVerdict,
)
from .config import SteeringConfig
from .control import ControlAck, ControlMessage
from .convert import timestamp_from_ms
from .dispatch import dispatch_message
from .drift import Drift, DriftKind, DriftSeverity, InterventionLevel
from .errors import RunCancelledError, RunTerminatedError
from .events import EventEmitter, EventSink
from .payloads import MAX_TEXT, decision_from_payload, escalation_deadline_s
from .pb.v1 import events_pb2
from .protocols import Detector, Steerer
from .tasks import TaskBoard, TaskStatus

if TYPE_CHECKING:
    from .policy import GrantBook, GrantRecords, Policy

__all__ = [
    "MAX_TEXT",
    "Detector",
    "Guidance",
    "RunState",
    "Session",
    "Steerer",
    "approval_timeout_drift",
    "decision_from_payload",
]

logger = logging.getLogger(__name__)

RunState = Literal["running", "paused", "cancelled", "terminated", "finished"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Guidance:
    """A note for the agent's next turn: a person's steer, an injected message or a ladder nudge."""

    text: str
    source: Literal["steer", "inject", "nudge", "escalation"]
    control_id: str = ""


class Session:
    """One run: owns its tasks, approval records, pause state and event sequence."""

    def __init__(
        self,
        *,
        run_id: str | None = None,
        session_id: str = "",
        sinks: Iterable[EventSink] = (),
        config: SteeringConfig | None = None,
        has_channel: bool = False,
        policy: Policy | None = None,
        labels: Mapping[str, str] | None = None,
        started_by: str | None = None,
    ) -> None:
        self.run_id = run_id or new_id("run")
        self.policy: Policy | None = policy if policy is not None else _env_policy()
        """Rules on tool calls (``GOLDFIVE_POLICY`` by default); the tool-call gate applies them."""
        self.labels: Mapping[str, str] = dict(labels or {})
        """The run's labels, which policy rules may match (``labels = { env = "prod" }``)."""
        self.started_by = started_by if started_by is not None else _starter()
        self._grants: GrantBook | None = None
        """Who started the run (``GOLDFIVE_USER`` or the login); a rule may bar them from approving."""
        self.session_id = session_id
        self.config = config if config is not None else SteeringConfig.from_env()
        self.events = EventEmitter(self.run_id, sinks, session_id=session_id)
        self.tasks = TaskBoard()
        self.approvals = ApprovalBook(history=self.config.decided_history)
        self.has_channel = has_channel
        """Whether a person can answer (a control channel is bound); Flow A says "unavailable" otherwise."""
        self.steerer: Steerer | None = None
        self.detectors: list[Detector] = []
        self.reinvoke_handler: Callable[[str], bool] | None = None
        """Set by an adapter that can cancel and re-run the in-flight step (ladder level 3).

        Called with the reason; returns False when it will not (e.g. its
        re-invocation budget is spent), and the steerer escalates instead.
        """
        self.pending_drift: dict[str, Any] | None = None
        """The escalation a paused run waits on (payload of GOLDFIVE_PAUSE_ESCALATE), if any."""
        self._state: RunState = "running"
        self._pause_reason = ""
        self._stop_reason = ""
        self._stop_drift_id = ""
        self._pause_deadline: float | None = None  # time.monotonic() when an escalation stops waiting
        self._wake = asyncio.Event()
        self._guidance: collections.deque[Guidance] = collections.deque()
        self._cancel_hooks: list[Callable[[str], None]] = []

    # -- run state -------------------------------------------------------------
    @property
    def state(self) -> RunState:
        """running, paused, cancelled, terminated or finished."""
        return self._state

    @property
    def paused(self) -> bool:
        """True while the run waits at its next step boundary."""
        return self._state == "paused"

    @property
    def stop_reason(self) -> str:
        """Why the run was cancelled or terminated ("" otherwise)."""
        return self._stop_reason

    @property
    def stop_drift_id(self) -> str:
        """The drift that made goldfive abort the run ("" when none did); RunAborted carries it."""
        return self._stop_drift_id

    @property
    def grants(self) -> GrantBook:
        """Standing approvals of this run ("and allow matching calls for this run / session / 1 h")."""
        if self._grants is None:
            from .policy import GrantBook

            self._grants = GrantBook()
        return self._grants

    @property
    def grant_records(self) -> GrantRecords | None:
        """Where grants are kept beyond this process (a store's sink): read before a grant lets a call through."""
        from .policy import GrantRecords

        return next((sink for sink in self.events.sinks if isinstance(sink, GrantRecords)), None)

    # -- what plugs in (adapters and set-up call these; nothing else assigns a session's attributes) ----------
    def set_steerer(self, steerer: Steerer | None) -> None:
        """Route this run's drift through ``steerer`` (None: drift is only emitted)."""
        self.steerer = steerer

    def add_detectors(self, detectors: Iterable[Detector]) -> None:
        """Let ``detectors`` watch this run's steps too."""
        self.detectors.extend(detectors)

    def set_reinvoke_handler(self, handler: Callable[[str], bool] | None) -> None:
        """Set (or clear) what cancels and re-runs the in-flight step at ladder level 3 (:attr:`reinvoke_handler`)."""
        self.reinvoke_handler = handler

    def adopt_session_id(self, session_id: str) -> bool:
        """Take the host's session id once it is known (the first wins); returns whether it was taken."""
        if not session_id or self.session_id:
            return False
        self.session_id = session_id
        self.events.session_id = session_id
        return True

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
        if self._state not in ("running", "paused"):
            return
        announce = self._state == "running" or (escalation is not None and self.pending_drift is None)
        self._state = "paused"
        self._pause_reason = reason
        if escalation is not None:
            self.pending_drift = dict(escalation)
            self._pause_deadline = None if deadline_s is None else time.monotonic() + deadline_s
        if announce:
            self._emit_paused(reason, escalation, deadline_s, by=by, channel=channel)

    def resume(self, *, how: Literal["resume", "steer"] = "resume", by: str = "", channel: str = "") -> bool:
        """Let a paused run continue (emits RunResumed); returns whether it was paused."""
        if self._state != "paused":
            return False
        self._state = "running"
        self._pause_reason = ""
        self.pending_drift = None
        self._pause_deadline = None
        self.events.emit(events_pb2.RunResumed(how=how, resumed_by=by, channel=channel))
        self._notify()
        return True

    def cancel(self, reason: str) -> None:
        """Cancel the run: close open approvals, wake the gate, tell the adapter."""
        self._stop("cancelled", reason)

    def terminate(self, reason: str, *, drift_id: str = "") -> None:
        """Abort the run on goldfive's own decision (ladder TERMINATE, deadline); ``drift_id`` names the cause."""
        if self._state in ("running", "paused"):
            self._stop_drift_id = drift_id
        self._stop("terminated", reason)

    def finish(self) -> None:
        """Mark the run over; withdraw anything still open."""
        if self._state in ("running", "paused"):
            self._state = "finished"
        self._close_open_approvals("the run ended")
        self._notify()

    async def gate(self) -> None:
        """The step boundary: return at once when running; wait while paused.

        Raises RunCancelledError / RunTerminatedError once the run was stopped.
        """
        while True:
            if self._state == "cancelled":
                raise RunCancelledError(self._stop_reason or "cancelled")
            if self._state == "terminated":
                raise RunTerminatedError(self._stop_reason or "terminated")
            if self._state != "paused":
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

    def take_guidance(self) -> list[Guidance]:
        """Every queued note, oldest first; the queue is emptied."""
        notes = list(self._guidance)
        self._guidance.clear()
        return notes

    # -- approvals -------------------------------------------------------------
    async def request_approval(self, request: ApprovalRequest, *, wait_s: float | None = None) -> ApprovalOutcome:
        """Open ``request``, emit ApprovalRequested, wait (bounded) and return the outcome.

        The wait lasts the request's ``timeout_ms``, or ``wait_s`` seconds when that is shorter: then running
        out of time answers ``detached`` and emits nothing (no ApprovalTimedOut, no withdrawal), because the
        request lives on in a store and the host resumes the call when it is decided.

        Decisions emit ApprovalGranted/ApprovalRejected as they are dispatched.
        A timeout emits ApprovalTimedOut; a cancelled wait emits
        ApprovalCancelled and re-raises. A run that is already over opens
        nothing and answers ``cancelled`` at once (nobody would be asked).
        """
        if self._state in ("cancelled", "terminated", "finished"):
            return ApprovalOutcome(
                target_id=request.target_id, decision="cancelled", detail=f"the run is {self._state}"
            )
        record, superseded = self.approvals.open(request)
        if superseded is not None:
            self.events.emit(
                events_pb2.ApprovalCancelled(target_id=superseded.target_id, reason="superseded by a new request")
            )
        self._emit_requested(request)
        if record.decision is not None:  # an early decision, applied at open
            self._emit_decision(record)
            return ApprovalOutcome.of(record.target_id, record.decision)
        detaching = wait_s is not None and wait_s < request.timeout_ms / 1000
        try:
            outcome = await self.approvals.wait(
                record, max(wait_s or 0.0, 0.0) if detaching else request.timeout_ms / 1000
            )
        except asyncio.CancelledError:
            # A run cancel closes the record (and announces it) before cancelling the agent; announce only
            # a withdrawal nobody announced yet, and nothing when a decision landed first.
            if record.decision is None and not record.closed_reason:
                self.events.emit(
                    events_pb2.ApprovalCancelled(target_id=request.target_id, reason="the wait was cancelled")
                )
            raise
        if outcome.decision == "timeout" and detaching:
            return ApprovalOutcome(
                target_id=request.target_id, decision="detached", detail=f"no decision within {wait_s} s"
            )
        if outcome.decision == "timeout":
            self.events.emit(
                events_pb2.ApprovalTimedOut(
                    target_id=request.target_id,
                    timeout_ms=request.timeout_ms,
                    still_open=request.keep_open_on_timeout,
                    detail=f"no decision within {request.timeout_ms} ms",
                )
            )
        return outcome

    def apply_decision(self, target_id: str, decision: Decision) -> DecisionResult:
        """Apply a person's decision to ``target_id``; an applied one is announced (ApprovalGranted/Rejected)."""
        result = self.approvals.decide(target_id, decision)
        tally = result.record.quorum if result.record is not None else None
        if tally is not None and result.verdict in (
            DecisionVerdict.COUNTED,
            DecisionVerdict.APPLIED,
            DecisionVerdict.APPLIED_LATE,
        ):
            # Each vote of a quorum goes on the record, so the inbox and `goldfive show` can say "1 of 2: ana".
            self.events.emit(
                events_pb2.ApprovalVoted(
                    target_id=target_id,
                    decided_by=decision.decided_by,
                    decision="approve" if decision.approved else "reject",
                    progress=tally.progress(),
                    channel=decision.channel,
                    request_id=_request_id(result.record),
                )
            )
        if result.verdict in (DecisionVerdict.APPLIED, DecisionVerdict.APPLIED_LATE):
            assert result.record is not None
            self._emit_decision(result.record)
        return result

    def expect_approval(self, target_id: str) -> None:
        """Announce a target the host has shown to the person, so an early decision is kept."""
        self.approvals.expect(target_id)

    # -- drift -------------------------------------------------------------------
    def emit_drift(self, drift: Drift, level: InterventionLevel = InterventionLevel.OBSERVE) -> events_pb2.Event:
        """Emit DriftDetected for ``drift`` (no ladder)."""
        return self.events.emit(
            events_pb2.DriftDetected(
                drift_id=drift.drift_id,
                kind=drift.kind.name,
                severity=drift.severity.name,
                detail=drift.detail,
                task_id=drift.task_id or "",
                ladder_level=int(level),
            )
        )

    async def handle_drift(self, drift: Drift) -> InterventionLevel:
        """Route a drift through the steerer's ladder, or just emit it when there is none."""
        if self.steerer is not None:
            return await self.steerer.handle_drift(drift)
        self.emit_drift(drift)
        return InterventionLevel.OBSERVE

    async def observe_tool_call(self, tool_name: str, args: Mapping[str, Any]) -> InterventionLevel:
        """Step boundary before a tool runs: ask the detectors; return the highest level applied.

        At CANCEL_REINVOKE or above the adapter skips the call and hands the
        model the queued guidance instead; at PAUSE_ESCALATE its next
        :meth:`gate` blocks.
        """
        # Every detector is asked before any drift is handled; a detector that does not watch tool calls
        # (the base class's no-op) is not called at all: this runs on every tool call of every adapter.
        drifts: list[Drift] | None = None
        for detector in self.detectors:
            if type(detector).on_tool_call is not _BASE_ON_TOOL_CALL:
                drift = detector.on_tool_call(self, tool_name, args)
                if drift is not None:
                    drifts = [drift] if drifts is None else [*drifts, drift]
        return InterventionLevel.OBSERVE if drifts is None else await self._handle_all(drifts)

    async def observe_model_call(self) -> InterventionLevel:
        """Step boundary before a model call: ask the detectors (e.g. a step budget)."""
        drifts: list[Drift] | None = None
        for detector in self.detectors:
            if type(detector).on_model_call is not _BASE_ON_MODEL_CALL:
                drift = detector.on_model_call(self)
                if drift is not None:
                    drifts = [drift] if drifts is None else [*drifts, drift]
        return InterventionLevel.OBSERVE if drifts is None else await self._handle_all(drifts)

    async def observe_transfer(self, to_agent: str) -> InterventionLevel:
        """Control moves to ``to_agent``: ask the detectors (e.g. runaway delegation)."""
        drifts = [d.on_transfer(self, to_agent) for d in self.detectors]
        return await self._handle_all([d for d in drifts if d is not None])

    async def _handle_all(self, drifts: list[Drift]) -> InterventionLevel:
        level = InterventionLevel.OBSERVE
        for drift in drifts:
            level = max(level, await self.handle_drift(drift))
        return level

    # -- the step boundaries around a model call and a tool call ------------------------------------------
    async def model_step(self) -> list[Guidance]:
        """Before a model call: the detectors (a step budget), the step gate, then every queued note.

        Raises RunCancelledError / RunTerminatedError once the run was stopped (see :meth:`gate`).
        """
        # observe_model_call() inlined: this runs before every model call of every adapter.
        drifts: list[Drift] | None = None
        for detector in self.detectors:
            if type(detector).on_model_call is not _BASE_ON_MODEL_CALL:
                drift = detector.on_model_call(self)
                if drift is not None:
                    drifts = [drift] if drifts is None else [*drifts, drift]
        if drifts is not None:
            await self._handle_all(drifts)
        if self._state != "running":
            await self.gate()
        return self.take_guidance() if self._guidance else []

    async def tool_step(self, tool_name: str, args: Mapping[str, Any]) -> tuple[InterventionLevel, list[Guidance]]:
        """Before a tool call (the tool-call gate's steps 1-2): step gate, detectors, step gate again.

        Returns the highest level the detectors' drifts reached and the notes that replace the call: a
        person's steers and escalation notes — or every note from CANCEL_REINVOKE on. Other notes (nudges,
        injected messages) stay queued for the host's next turn. Raises RunCancelledError /
        RunTerminatedError once the run was stopped, also when the ladder just stopped it.
        """
        if self._state != "running":
            await self.gate()
        # observe_tool_call() inlined: this runs on every tool call of every adapter.
        drifts: list[Drift] | None = None
        for detector in self.detectors:
            if type(detector).on_tool_call is not _BASE_ON_TOOL_CALL:
                drift = detector.on_tool_call(self, tool_name, args)
                if drift is not None:
                    drifts = [drift] if drifts is None else [*drifts, drift]
        level = InterventionLevel.OBSERVE if drifts is None else await self._handle_all(drifts)
        if level >= InterventionLevel.CANCEL_REINVOKE:
            await asyncio.sleep(0)  # let a cancellation the ladder just requested (re-invoke, abort) land
        if self._state != "running":  # the ladder may just have paused or stopped the run
            await self.gate()
        if not self._guidance:
            return level, []
        notes = self.take_guidance()
        if level >= InterventionLevel.CANCEL_REINVOKE:
            return level, notes
        redirect = [n for n in notes if n.source in ("steer", "escalation")]
        self._guidance.extend(n for n in notes if n not in redirect)  # wait for the host's next turn
        return level, redirect

    # -- tasks -------------------------------------------------------------------
    def start_task(self, task_id: str, *, title: str = "", parent_id: str | None = None, input: object = None) -> None:
        """Register ``task_id`` (if new), mark it RUNNING and emit TaskStarted."""
        task = self.tasks.add(task_id, title=title, parent_id=parent_id, input=input)
        if task.status is TaskStatus.RUNNING:
            return
        self.tasks.transition(task_id, TaskStatus.RUNNING)
        self.events.emit(events_pb2.TaskStarted(task_id=task_id, title=task.title, parent_id=task.parent_id or ""))

    def block_task(self, task_id: str, blocker: str, needed: str) -> None:
        """Mark a task BLOCKED and emit TaskBlocked."""
        task = self.tasks.transition(task_id, TaskStatus.BLOCKED)
        task.blocker, task.needed = blocker, needed
        self.events.emit(events_pb2.TaskBlocked(task_id=task_id, blocker=blocker, needed=needed))

    # -- control dispatch ------------------------------------------------------------
    def dispatch(self, msg: ControlMessage) -> ControlAck:
        """Apply one control message now and say what happened. Never raises (see :mod:`goldfive_core.dispatch`)."""
        return dispatch_message(self, msg)

    def status(self) -> dict[str, Any]:
        """A JSON-able snapshot: state, pending drift, open approvals and tasks (emits nothing)."""
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "state": self._state,
            "pause_reason": self._pause_reason,
            "pending_drift": self.pending_drift,
            "escalation_deadline_in_s": (
                None if self._pause_deadline is None else max(0.0, round(self._pause_deadline - time.monotonic(), 3))
            ),
            "pending_approvals": [
                {
                    "target_id": r.target_id,
                    "status": r.status.value,
                    "kind": r.request.kind if r.request else "",
                    "prompt": r.request.prompt if r.request else "",
                    "task_id": r.request.task_id if r.request else "",
                    "args_digest": r.request.args_digest if r.request else "",
                    "request_id": r.request.request_id if r.request else "",
                    "quorum": r.quorum.progress() if r.quorum is not None else "",
                }
                for r in self.approvals.open_records()
            ],
            "tasks": [{"task_id": t.id, "status": t.status.value} for t in self.tasks.all()],
        }

    # -- internals -------------------------------------------------------------------
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

    def _emit_requested(self, request: ApprovalRequest) -> None:
        event = events_pb2.ApprovalRequested(
            target_id=request.target_id,
            kind=request.kind,
            prompt=request.prompt,
            task_id=request.task_id,
            metadata=dict(request.metadata),
            args_digest=request.args_digest,
            timeout_ms=request.timeout_ms,
            request_id=request.request_id,
            request_digest=request.digest,
        )
        record = self.approvals.get(request.target_id)
        if record is not None and record.requested_at_ms:
            event.expires_at.CopyFrom(timestamp_from_ms(record.requested_at_ms + request.timeout_ms))
        self.events.emit(event)

    def _emit_decision(self, record: ApprovalRecord) -> None:
        decision = record.decision
        assert decision is not None
        if decision.approved:
            self.events.emit(
                events_pb2.ApprovalGranted(
                    target_id=record.target_id,
                    detail=decision.detail,
                    decided_by=decision.decided_by,
                    edited_args_json=canonical_json(decision.edited_args) if decision.edited_args is not None else "",
                    channel=decision.channel,
                    request_id=_request_id(record),
                )
            )
        else:
            self.events.emit(
                events_pb2.ApprovalRejected(
                    target_id=record.target_id,
                    detail=decision.detail,
                    decided_by=decision.decided_by,
                    channel=decision.channel,
                    request_id=_request_id(record),
                )
            )

    def _close_open_approvals(self, reason: str) -> None:
        for record in self.approvals.close_all(reason):
            self.events.emit(events_pb2.ApprovalCancelled(target_id=record.target_id, reason=reason))

    def _stop(self, state: Literal["cancelled", "terminated"], reason: str) -> None:
        if self._state in ("cancelled", "terminated", "finished"):
            return
        self._state = state
        self._stop_reason = reason
        self._pause_deadline = None
        self._close_open_approvals(f"the run was {state}: {shorten(reason)}")
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


_BASE_ON_TOOL_CALL = Detector.on_tool_call
_BASE_ON_MODEL_CALL = Detector.on_model_call


def _request_id(record: ApprovalRecord | None) -> str:
    return record.request.request_id if record is not None and record.request is not None else ""


def _env_policy() -> Policy | None:
    """``GOLDFIVE_POLICY``'s rules (read now: a bad file stops the run from starting), or None when unset."""
    if not os.environ.get("GOLDFIVE_POLICY", "").strip():
        return None  # no policy: the policy package (its parser) is not imported at all
    from .policy import default_policy

    return default_policy()


# Drift helpers the reporting tools and adapters share.
def _starter() -> str:
    try:
        return os.environ.get("GOLDFIVE_USER") or getpass.getuser()
    except (OSError, KeyError):  # no login name in this environment (containers)
        return ""


def approval_timeout_drift(task_id: str, target_id: str, timeout_ms: int) -> Drift:
    """The HUMAN_INTERVENTION_REQUIRED WARNING emitted when an approval wait times out."""
    return Drift(
        DriftKind.HUMAN_INTERVENTION_REQUIRED,
        DriftSeverity.WARNING,
        f"no decision on approval {target_id!r} within {timeout_ms} ms",
        task_id=task_id or None,
    )
