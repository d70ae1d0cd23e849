"""Session: the state of one run — tasks, approvals, pause state, guidance and events.

Control messages are applied synchronously by :meth:`Session.dispatch` the
moment they arrive; PAUSE, CANCEL and escalations set state that
:meth:`Session.gate` honours at the agent's next step boundary.
"""

from __future__ import annotations

import asyncio
import getpass
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ._util import canonical_json, new_id
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
from .events import EventEmitter, EventSink
from .payloads import MAX_TEXT, decision_from_payload
from .pb.v1 import events_pb2
from .protocols import Detector, Steerer
from .run_state import Guidance, RunLifecycle, RunState, is_over
from .steps import StepLog
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


class Session(RunLifecycle):
    """One run: owns its tasks, approval records, pause state and event sequence.

    The pause and stop state, the step gate and the guidance queue are the run's :class:`RunLifecycle`.
    """

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
        app_name: str = "",
    ) -> None:
        self.run_id = run_id or new_id("run")
        self.app_name = app_name
        """The stable name the host gives its app (an ADK ``App``'s name; "" when it has none): a store agent with
        no ``GOLDFIVE_AGENT_ID`` keeps its approved calls in its app's ledger (:mod:`goldfive_core.store.execution`)."""
        self.policy: Policy | None = policy if policy is not None else _env_policy()
        """Rules on tool calls (``GOLDFIVE_POLICY`` by default); the tool-call gate applies them."""
        self.labels: Mapping[str, str] = dict(labels or {})
        """The run's labels, which policy rules may match (``labels = { env = "prod" }``)."""
        self.started_by = started_by if started_by is not None else _starter()
        """Who started the run (``GOLDFIVE_USER`` or the login); a rule may bar them from approving."""
        self.steps = StepLog()
        """The host's steps noted since the run last asked a person: on the record just before its next ask."""
        self._grants: GrantBook | None = None
        self.session_id = session_id
        self.config = config if config is not None else SteeringConfig.from_env()
        super().__init__(EventEmitter(self.run_id, sinks, session_id=session_id), withdraw=self._close_open_approvals)
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
        if is_over(self.state):
            return ApprovalOutcome(target_id=request.target_id, decision="cancelled", detail=f"the run is {self.state}")
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
                    detail=outcome.detail or f"no decision within {request.timeout_ms} ms",
                )
            )
        return outcome

    def expire_approval(self, target_id: str, detail: str) -> bool:
        """End a pending request's wait now, as its timeout would (``ApprovalTimedOut`` says ``detail``)."""
        return self.approvals.expire(target_id, detail)

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
            stamp = self._emit_decision(result.record).emitted_at
            # The ack carries the event's time, so the store records the decision once, with the time audit
            # verify expects, and the event that follows has nothing left to write (whole milliseconds: emit's).
            return DecisionResult(
                verdict=result.verdict,
                detail=result.detail,
                record=result.record,
                repeated=result.repeated,
                announced_at_ms=stamp.seconds * 1000 + stamp.nanos // 1_000_000,
            )
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
        return await self._watch(Detector.on_tool_call, tool_name, args)

    async def observe_model_call(self) -> InterventionLevel:
        """Step boundary before a model call: ask the detectors (e.g. a step budget)."""
        return await self._watch(Detector.on_model_call)

    async def observe_transfer(self, to_agent: str) -> InterventionLevel:
        """Control moves to ``to_agent``: ask the detectors (e.g. runaway delegation)."""
        return await self._watch(Detector.on_transfer, to_agent)

    async def _watch(self, hook: Callable[..., Drift | None], *args: Any) -> InterventionLevel:
        """Ask every detector's ``hook`` first, then route each drift; return the highest level applied.

        A detector that does not override ``hook`` (the base class's no-op) is not called at all: this runs
        on every model and tool call of every adapter.
        """
        name = hook.__name__
        drifts: list[Drift] | None = None
        for detector in self.detectors:
            watch = getattr(type(detector), name)
            if watch is not hook:
                drift = watch(detector, self, *args)
                if drift is not None:
                    drifts = [drift] if drifts is None else [*drifts, drift]
        level = InterventionLevel.OBSERVE
        for drift in drifts or ():
            level = max(level, await self.handle_drift(drift))
        return level

    # -- the step boundaries around a model call and a tool call ------------------------------------------
    async def model_step(self) -> list[Guidance]:
        """Before a model call: the detectors (a step budget), the step gate, then every queued note.

        Raises RunCancelledError / RunTerminatedError once the run was stopped (see :meth:`gate`).
        """
        await self._watch(Detector.on_model_call)  # observe_model_call's work, one Python call fewer
        # Own attributes, not the properties: this runs before every model call (each Python call costs).
        if self._state is not RunState.RUNNING:
            await self.gate()
        return self.take_guidance() if self._guidance else []

    async def tool_step(self, tool_name: str, args: Mapping[str, Any]) -> tuple[InterventionLevel, list[Guidance]]:
        """Before a tool call (the tool-call gate's steps 1-2): step gate, detectors, step gate again.

        Returns the highest level the detectors' drifts reached and the notes that replace the call: a
        person's steers and escalation notes — or every note from CANCEL_REINVOKE on. Other notes (nudges,
        injected messages) stay queued for the host's next turn. Raises RunCancelledError /
        RunTerminatedError once the run was stopped, also when the ladder just stopped it.
        """
        if self._state is not RunState.RUNNING:
            await self.gate()
        level = await self._watch(Detector.on_tool_call, tool_name, args)  # observe_tool_call's work
        if level >= InterventionLevel.CANCEL_REINVOKE:
            await asyncio.sleep(0)  # let a cancellation the ladder just requested (re-invoke, abort) land
        if self._state is not RunState.RUNNING:  # the ladder may just have paused or stopped the run
            await self.gate()
        if not self._guidance:
            return level, []
        if level >= InterventionLevel.CANCEL_REINVOKE:
            return level, self.take_guidance()
        return level, self.take_guidance(sources=("steer", "escalation"))

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
            **self.run_status(),
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
        self.steps.flush(self.events.emit)  # what led to it, on the record before it (the card's context)
        self.events.emit(event)

    def _emit_decision(self, record: ApprovalRecord) -> events_pb2.Event:
        # The payload is given as its fields' values: built in place in the event (one message built, not two).
        request = record.request
        request_id = request.request_id if request is not None else ""
        decision = record.decision
        assert decision is not None
        if decision.approved:
            return self.events.emit(
                {
                    "target_id": record.target_id,
                    "detail": decision.detail,
                    "decided_by": decision.decided_by,
                    "edited_args_json": canonical_json(decision.edited_args)
                    if decision.edited_args is not None
                    else "",
                    "channel": decision.channel,
                    "request_id": request_id,
                },
                "approval_granted",
            )
        return self.events.emit(
            {
                "target_id": record.target_id,
                "detail": decision.detail,
                "decided_by": decision.decided_by,
                "channel": decision.channel,
                "request_id": request_id,
                "answer": decision.answer,
            },
            "approval_rejected",
        )

    def _close_open_approvals(self, reason: str) -> None:
        for record in self.approvals.close_all(reason):
            self.events.emit(events_pb2.ApprovalCancelled(target_id=record.target_id, reason=reason))


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
