"""The tool-call gate: what happens around one tool call, written once for every adapter.

An adapter translates its host's call into a :class:`ToolCall`, calls
:func:`gate_tool_call`, and translates the typed outcome back: :class:`Proceed`
(run the body with ``args``) or :class:`Skip` (do not; hand the model
``detail``). The order is fixed and the same for every host:

1. **step gate** — a paused run waits here; a stopped run skips the call (``run_cancelled``, ``stop_run``).
2. **detectors** — the run's detectors see the call; the ladder may pause the run (the step gate holds the
   call again), re-invoke or abort it (``goldfive_intervention``). A person's waiting STEER (or an
   escalation's note) also redirects the call: the model gets the words instead of running the old plan.
3. **not gated** — a call nobody must decide proceeds.
4. **policy** — an optional :class:`ToolPolicy` says allow, ask or deny before anyone is asked.
5. **replay lookup** — with an :class:`ExecutionLedger`, a call id (and args digest) the ledger has seen is
   answered from it: already done (its result), in doubt (never re-run) or decided while the agent was down.
   A ledger that cannot be reached (after its own retries) fails closed: the call is skipped
   (``store_unavailable``) and the model is told it did not run.
   Before that, a call too big to show a person (call id, task id, prompt, arguments over the
   ``GOLDFIVE_LIMIT_*`` limits, or nested too deep) is refused (``approval_error``, naming the limit).
6. **ask a person** — :func:`wait_for_person`, one bounded wait with an explicit deadline; with no
   control channel nobody can answer and the call is skipped (``approval_unavailable``). With
   ``detach_after_s`` shorter than the request's timeout, running out of time skips the call as
   ``awaiting_approval``: the request stays pending (in the store) and the host resumes the call later,
   when the ledger finds the decision (step 5).
   Before that, a rule that names a reviewer (``review = "module:callable"``) has it judge the call
   (:mod:`goldfive_core.review`): its allow lets the call on to step 8, its deny skips it (``reviewer_denied``),
   and its ask — or any failure of it, which is never an allow — sends the call on to the person with the
   verdict on the card. In shadow mode it is only recorded.
7. **apply the answer** — edited arguments are checked by the call's edit validator; a rejection, a timeout
   (with its HUMAN_INTERVENTION_REQUIRED drift) or a withdrawal skips the call.
8. **step gate again** — a PAUSE that arrived while the call waited holds the approved call until RESUME.
9. **ledger** — "executing" is recorded before the body runs (out of reach: skipped, ``store_unavailable``,
   the body did not run); the adapter reports the end through its :class:`~goldfive_core.inflight.InFlight`
   record ("done", with the result or error, and the approver's note back for the model), which never
   raises — a ledger that lags records it later.

Edited arguments are checked with :func:`goldfive_core.argschema.edit_validator` against the schema the request
carries (``ToolCall.args_schema``), by every adapter: the inbox and the agent refuse the same edits.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from ._util import args_digest, canonical_json, fact, shorten
from .approvals import REVIEWER_PREFIX, ApprovalOutcome, ApprovalRequest, Decision, EditValidator, policy_ask
from .argschema import EDITABLE_KEY, SCHEMA_KEY, schema_json
from .drift import Drift, DriftKind, DriftSeverity, InterventionLevel
from .errors import ApprovalError, RunCancelledError, RunTerminatedError
from .limits import LimitError, agent_limits, check_json_depth, env_name
from .pb.v1 import events_pb2
from .run_state import RunState, is_stopped

if TYPE_CHECKING:
    from .policy import Rule
    from .session import Guidance, Session

__all__ = [
    "ExecutionLedger",
    "PolicyVerdict",
    "Proceed",
    "ReleasingLedger",
    "Replay",
    "Skip",
    "SkipReason",
    "ToolCall",
    "ToolPolicy",
    "gate_tool_call",
    "timed_out",
    "wait_for_person",
]

logger = logging.getLogger(__name__)

R = TypeVar("R")

SkipReason = Literal[
    "user_rejected",
    "approval_timeout",
    "approval_unavailable",
    "approval_error",
    "run_cancelled",
    "goldfive_intervention",
    "policy_denied",
    "in_doubt",
    "already_done",
    "store_unavailable",
    "awaiting_approval",
    "reviewer_denied",
]

_STOPPED = (RunCancelledError, RunTerminatedError)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """One tool call as the gate sees it, whatever host it came from."""

    call_id: str
    """The host's id for the call (ADK function call id, Claude tool_use_id); a replay reuses it."""
    tool_name: str
    args: Mapping[str, Any]
    agent: str = ""
    task_id: str = ""
    """The task the call belongs to ("" = the session's current task)."""
    prompt: str = ""
    """What the person is asked ("" = "Allow tool(args)?")."""
    metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Extra metadata for the ApprovalRequested event (tool_name, args_json and agent_name are added)."""
    args_schema: Mapping[str, Any] | None = None
    """The tool's parameters as JSON Schema, when the host knows them: carried on the request (bounded) so
    a decider outside the agent can refuse an edit that does not fit (:mod:`goldfive_core.argschema`)."""


@fact(kw_only=True)
class Proceed:
    """Run the body with ``args`` (the person's edited arguments when they edited them)."""

    kind: Literal["proceed"] = "proceed"
    call_id: str
    args: Mapping[str, Any]
    decision: ApprovalOutcome | None = None
    """The person's approval (None when nobody had to decide)."""
    edited: bool = False
    ledger: ExecutionLedger | None = dataclasses.field(default=None, repr=False, compare=False)
    """Set when "executing" was recorded: report the end with :meth:`finish` (or :meth:`release`, :meth:`in_doubt`)."""
    digest: str = ""
    session: Session | None = dataclasses.field(default=None, repr=False, compare=False)
    """The run whose claim ``ledger`` holds (set with it)."""
    call: ToolCall | None = dataclasses.field(default=None, repr=False, compare=False)
    """The call as the gate saw it (set with ``ledger``)."""

    @property
    def note(self) -> str:
        """What the model should be told about the approval ("" when there is nothing to say)."""
        decision = self.decision
        if decision is None or not decision.detail:
            return ""
        if decision.decided_by.startswith(REVIEWER_PREFIX):  # never presented as a person's approval
            return f"The reviewer {decision.decided_by} allowed this call: {decision.detail}"
        by = f" ({decision.decided_by})" if decision.decided_by else ""
        return f"A person{by} approved this call: {decision.detail}"

    async def finish(self, *, result: Any = None, error: BaseException | None = None) -> None:
        """Record in the ledger that the body finished (with its result, or the error it raised)."""
        if self.ledger is None:
            return
        try:
            await self.ledger.finish(self.call_id, self.digest, result=result, error=error)
        except Exception:  # the body ran and its result goes to the model: a ledger failure must not kill the run
            logger.exception("recording the end of %r in the execution ledger failed", self.call_id)

    async def release(self) -> None:
        """The body never began after all (its host knows nothing of it ran): give the ledger's "executing" claim
        back ("released, not run"), so nothing is left in doubt. A claim that cannot be given back stays in doubt.
        Never raises."""
        if self.ledger is not None and self.session is not None and self.call is not None:
            await _release(self.ledger, self.session, self.call, self.digest)

    def in_doubt(self, why: str) -> None:
        """The host lost the body mid-way: it may or may not have run. The ledger keeps it "executing" (in doubt:
        never run again) and the run is told a person must settle it (a CRITICAL HUMAN_INTERVENTION_REQUIRED drift)."""
        if self.ledger is None or self.session is None:
            return
        name = self.call.tool_name if self.call is not None else "the call"
        detail = (
            f"in doubt: {name} for {self.call_id!r} started and its end was lost ({shorten(why, 300)}); it may or may "
            f"not have run, so it is not run again — a person must check, then: goldfive resolve {self.call_id} "
            "--ran | --did-not-run"
        )
        self.session.emit_drift(Drift(DriftKind.HUMAN_INTERVENTION_REQUIRED, DriftSeverity.CRITICAL, detail))


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Skip:
    """Do not run the body; the model gets ``detail`` (and ``result`` for a call that already ran)."""

    kind: Literal["skip"] = "skip"
    call_id: str
    reason: SkipReason
    detail: str
    stop_run: bool = False
    """The run is over: the adapter should end its host's turn (ADK end_invocation, Claude interrupt)."""
    decided_by: str = ""
    result: Any = None
    """For ``already_done``: the result the ledger recorded when the body ran."""
    guidance: tuple[Guidance, ...] = ()
    """For ``goldfive_intervention``: the notes handed to the model instead of the call."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PolicyVerdict:
    """What a policy says about a call: allow it, ask a person, or deny it (``reason`` tells the model why)."""

    action: Literal["allow", "ask", "deny"]
    reason: str = ""
    rule: str = ""
    """The rule that decided ("" = none named); an allow or deny by a rule goes on the audit log."""
    grant_id: str = ""
    """For an allow: the standing grant that let the call through."""
    metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """For an ask: what the request carries about the rule (approvers, quorum, ...)."""
    review_rule: Rule | None = None
    """For an ask: the rule whose reviewer judges the call before a person (its ``Ask.review``)."""


class ToolPolicy(Protocol):
    """The policy step: rules on tool and arguments, run before anyone is asked. None = no opinion."""

    def check(self, call: ToolCall, *, gated: bool) -> PolicyVerdict | None:
        """``gated``: whether the adapter's own configuration asks a person for this call."""
        ...


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Replay:
    """What the ledger knows about a call before anyone is asked.

    ``done``: the body finished before (``result``); ``in_doubt``: it started and never finished;
    ``decided``: a decision was recorded while the agent was down (``decision``); ``none``: ask;
    ``unavailable``: the ledger could not be reached, so nothing may run (``detail`` says why);
    ``expired``: the deciding server's rule ended the request while the call was parked (``detail`` says why):
    replayed as a timeout, never run.
    """

    kind: Literal["none", "done", "in_doubt", "decided", "unavailable", "expired"]
    detail: str = ""
    result: Any = None
    decision: Decision | None = None


class ExecutionLedger(Protocol):
    """At-most-once records of approved calls, keyed by call id **and** args digest.

    A call id reused with other arguments is a new call: the ledger answers ``none`` for it.
    """

    async def lookup(self, session: Session, call: ToolCall, digest: str) -> Replay:
        """What is known about this call (announcing to the run what applies, e.g. an in-doubt drift).

        Out of reach after the ledger's own retries: ``Replay(kind="unavailable")`` (raising is treated the same).
        """
        ...

    async def begin(self, session: Session, call: ToolCall, digest: str) -> Replay | None:
        """Record "executing"; None = go ahead, else why not (done, in doubt meanwhile, or unavailable)."""
        ...

    async def finish(
        self, call_id: str, digest: str, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        """Record "done" with the body's result (or the error it raised)."""
        ...


@runtime_checkable
class ReleasingLedger(Protocol):
    """An :class:`ExecutionLedger` that may hold a call's claim before ``begin`` (folded into the APPROVE's ack), and
    can give back one ``begin`` made when the body did not start after all."""

    async def release(self, session: Session, call: ToolCall, digest: str) -> None:
        """The body will not start now (the run was cancelled or paused; or, after ``begin``, its host never began
        it: :meth:`Proceed.release`): give back a claim held for the call, so a re-ask may run it; a claim that
        cannot be given back stays in doubt. Never raises."""
        ...


def wait_for_person(
    session: Session, request: ApprovalRequest, *, deadline_s: float | None = None
) -> Coroutine[Any, Any, ApprovalOutcome]:
    """Ask a person and wait, at most ``deadline_s`` seconds (None = the request's own timeout): await it.

    The one place the gate waits for a person. A ``deadline_s`` shorter than the request's timeout
    detaches: running out of time answers ``detached`` and the request stays open in the store.
    It hands back the session's own wait rather than wrapping it in one more coroutine: when the decision
    lands, every coroutine the waiting call is suspended in is resumed in turn.
    """
    return session.request_approval(request, wait_s=deadline_s)


def gate_tool_call(
    session: Session,
    call: ToolCall,
    *,
    needs_person: bool,
    validate_edit: EditValidator | None = None,
    ledger: ExecutionLedger | None = None,
    policy: ToolPolicy | None = None,
    timeout_ms: int | None = None,
    detach_after_s: float | None = None,
) -> Coroutine[Any, Any, Proceed | Skip]:
    """Take one tool call through the gate (see the module docstring for the order): await it. Never raises for a
    refusal.

    ``needs_person``: the adapter's configuration gates this call. ``validate_edit`` checks a person's
    edited arguments (None = edits are refused). ``timeout_ms`` defaults to the session's
    ``effective_tool_approval_timeout_ms``. ``detach_after_s``: stop waiting in-process after that long
    (0 = at once) and skip the call as ``awaiting_approval`` (the host parks it and resumes it when a
    person decides). ``asyncio.CancelledError`` propagates (a claim the approval's ack won is given back first).
    Without a ledger it is the gate's own coroutine (nothing to give back: one coroutine fewer to resume when
    the decision lands).
    """
    gate = _gate(session, call, needs_person, validate_edit, ledger, policy, timeout_ms, detach_after_s)
    return gate if ledger is None else _giving_back(gate, ledger, session, call)


async def _giving_back(
    gate: Coroutine[Any, Any, Proceed | Skip], ledger: ExecutionLedger, session: Session, call: ToolCall
) -> Proceed | Skip:
    """Run ``gate``; when the host cancels the call (a CANCEL), the body will not start: give back its claim."""
    try:
        return await gate
    except asyncio.CancelledError:  # the host cancelled the call (a CANCEL): the body will not start
        _release_later(ledger, session, call)
        raise


async def _gate(
    session: Session,
    call: ToolCall,
    needs_person: bool,
    validate_edit: EditValidator | None,
    ledger: ExecutionLedger | None,
    policy: ToolPolicy | None,
    timeout_ms: int | None,
    detach_after_s: float | None,
) -> Proceed | Skip:
    name = call.tool_name
    # 1-2. step gate, detectors, step gate again (the ladder may just have paused or stopped the run).
    try:
        level, redirect = await session.tool_step(name, call.args)
    except _STOPPED as exc:
        return _stopped(session, call, f"the run was stopped: {exc}")
    if redirect:
        return Skip(
            call_id=call.call_id,
            reason="goldfive_intervention",
            detail="; ".join(note.text for note in redirect),
            guidance=tuple(redirect),
        )
    if level >= InterventionLevel.CANCEL_REINVOKE:
        return Skip(
            call_id=call.call_id,
            reason="goldfive_intervention",
            detail=f"goldfive stopped this {name} call ({level.name})",
        )
    # 3-4. gated? the policy may allow, ask or deny first (the caller's, else the run's rules).
    if policy is not None:
        verdict = policy.check(call, gated=needs_person)
    else:
        verdict = await _run_policy(session, call, needs_person) if session.policy is not None else None
    policy_metadata: Mapping[str, str] = {}
    if verdict is not None:
        if verdict.action == "deny":
            _record_policy(session, call, verdict)
            return Skip(call_id=call.call_id, reason="policy_denied", detail=verdict.reason or "denied by policy")
        if verdict.action == "allow" and verdict.rule:
            _record_policy(session, call, verdict)
        needs_person = verdict.action == "ask"
        policy_metadata = verdict.metadata
    if not needs_person:
        if call.call_id in session.approvals.live:  # the common case (nothing announced) makes no call
            session.approvals.forget_expected(call.call_id)
        return Proceed(call_id=call.call_id, args=call.args)
    too_big = _over_limits(call)
    if too_big:  # the model's call is refused before anyone is shown it
        session.approvals.forget_expected(call.call_id)
        return _error(call, f"{too_big}; the call was not run and cannot be approved")
    try:
        args_json = canonical_json(call.args)
        digest = args_digest(name, call.args)
    except (TypeError, ValueError) as exc:
        session.approvals.forget_expected(call.call_id)
        return _error(call, f"the call's arguments are not JSON ({exc}); it cannot be approved")
    limits = agent_limits()
    if len(args_json) > limits.max_args_chars:
        session.approvals.forget_expected(call.call_id)
        return _error(
            call,
            f"the call's arguments are {len(args_json)} characters as JSON; the limit is {limits.max_args_chars} "
            f"({env_name('max_args_chars')}); the call was not run and cannot be approved",
        )
    # 5. replay lookup.
    outcome: ApprovalOutcome | None = None
    if ledger is not None:
        replay = await _ledger_step(session, call, "could not look up whether it already ran", ledger.lookup, digest)
        if replay.kind == "expired":  # the server's rule ended the parked request: its timeout, as if waited out
            session.approvals.forget_expected(call.call_id)
            return timed_out(session, call, 0, why=replay.detail)
        if replay.kind in ("done", "in_doubt", "unavailable"):
            session.approvals.forget_expected(call.call_id)
            return _replayed(call, replay)
        if replay.decision is not None:
            session.approvals.forget_expected(call.call_id)
            outcome = ApprovalOutcome.of(call.call_id, replay.decision)
    # 5b. the rule's reviewer, before a person (its failure is never an allow).
    review_card: Mapping[str, str] = {}
    if outcome is None and verdict is not None and verdict.review_rule is not None:
        reviewed = await _review(session, call, verdict.review_rule, args_json, digest)
        if isinstance(reviewed, Skip):
            return reviewed
        outcome, review_card = reviewed
    # 6. ask a person (when someone can answer).
    timeout = timeout_ms if timeout_ms and timeout_ms > 0 else session.config.effective_tool_approval_timeout_ms
    timeout = _until_expiry(policy_metadata, timeout)
    if outcome is None and not session.has_channel:
        session.approvals.forget_expected(call.call_id)
        return Skip(
            call_id=call.call_id,
            reason="approval_unavailable",
            detail=f"{name} needs a person's approval and no one can answer (no control channel). "
            "The call was not run; choose a safe alternative or stop.",
        )
    if outcome is None:
        current = session.tasks.current
        metadata = {**call.metadata, **policy_metadata, **review_card, "tool_name": name, "args_json": args_json}
        if policy_metadata and session.started_by:
            metadata["started_by"] = session.started_by
        if call.agent:
            metadata["agent_name"] = call.agent
        if validate_edit is None:
            metadata[EDITABLE_KEY] = "no"  # the agent refuses any edit: deciders can say so at once
        elif schema := schema_json(call.args_schema):
            metadata[SCHEMA_KEY] = schema
        request = ApprovalRequest(
            target_id=call.call_id,
            kind="tool",
            prompt=call.prompt or f"Allow {name}({shorten(args_json, 300)})?",
            task_id=call.task_id or (current.id if current is not None else ""),
            metadata=metadata,
            args_digest=digest,
            timeout_ms=timeout,
            validate_edit=validate_edit,
        )
        escalation = _schedule_escalation(session, request)
        try:
            outcome = await wait_for_person(session, request, deadline_s=detach_after_s)
        except ApprovalError as exc:
            return _error(call, str(exc))
        finally:
            if escalation is not None:
                escalation.cancel()
    # 7. apply the answer.
    if outcome.decision == "approve":
        args: Mapping[str, Any] = call.args
        if outcome.edited_args is not None:
            problem = "edits are refused for this tool" if validate_edit is None else validate_edit(outcome.edited_args)
            if problem is not None:
                return _error(call, f"the recorded edited arguments do not fit: {problem}")
            args = dict(outcome.edited_args)
        # 8. a PAUSE that arrived while the call waited holds it here. A claim the APPROVE's ack won is given back
        # first ("released, not run"): a paused call may wait long, or never go on, and its body has not started.
        # A running run passes the step gate at once (its gate returns then), so it is only entered otherwise.
        state = session.state
        if state is not RunState.RUNNING:
            if state is RunState.PAUSED and ledger is not None:
                await _release(ledger, session, call, digest)
            try:
                await session.gate()
            except _STOPPED as exc:
                if ledger is not None:
                    await _release(ledger, session, call, digest)
                return _stopped(session, call, f"the run was stopped: {exc}")
        # 9. at most once.
        if ledger is not None:
            refused = await _ledger_step(session, call, "could not record that it starts", ledger.begin, digest)
            if refused is not None:
                if refused.kind == "unavailable":  # the person was told "approved": tell them it did not run
                    _announce_not_run(session, call, refused.detail, outcome.decided_by)
                return _replayed(call, refused)
        return Proceed(
            call_id=call.call_id,
            args=args,
            decision=outcome,
            edited=outcome.edited_args is not None,
            ledger=ledger,
            digest=digest,
            session=session if ledger is not None else None,
            call=call if ledger is not None else None,
        )
    if outcome.decision == "reject":
        return Skip(
            call_id=call.call_id,
            reason="user_rejected",
            detail=outcome.detail or "a person rejected this call",
            decided_by=outcome.decided_by,
        )
    if outcome.decision == "timeout":
        return timed_out(session, call, timeout)
    if outcome.decision == "detached":
        return Skip(
            call_id=call.call_id,
            reason="awaiting_approval",
            detail=f"{name} waits for a person ({outcome.detail}); the call was not made yet and resumes when decided",
        )
    return _stopped(session, call, outcome.detail or "the run was cancelled")


def timed_out(session: Session, call: ToolCall, timeout_ms: int, *, why: str = "") -> Skip:
    """Nobody decided within ``timeout_ms``: the HUMAN_INTERVENTION_REQUIRED drift, and the call is skipped.

    The gate's own answer to a timeout; a host that resumes a parked call whose request expired uses it too.
    ``why``: the deciding server's words when its rule's ``expires`` ended the request (said instead of the wait).
    """
    from .session import approval_timeout_drift

    current = session.tasks.current
    task_id = call.task_id or (current.id if current is not None else "")
    drift = approval_timeout_drift(task_id, call.call_id, timeout_ms)
    if why:
        drift = dataclasses.replace(drift, detail=f"approval {call.call_id!r} {shorten(why, 500)}")
    session.emit_drift(drift)
    said = shorten(why, 500) if why else f"no decision within {timeout_ms} ms; the {call.tool_name} call was not made"
    return Skip(
        call_id=call.call_id,
        reason="approval_timeout",
        detail=f"{said}. Do not assume it was approved.",
    )


def _over_limits(call: ToolCall) -> str:
    """What is too big or too deep in a call a person would be shown ("" = nothing); checked before any JSON."""
    limits = agent_limits()
    for what, value, field in (
        ("the call id", call.call_id, "max_id_chars"),
        ("the task id", call.task_id, "max_id_chars"),
        ("the approval prompt", call.prompt, "max_prompt_chars"),
    ):
        limit = getattr(limits, field)
        if len(value) > limit:
            return f"{what} is {len(value)} characters; the limit is {limit} ({env_name(field)})"
    try:
        check_json_depth(call.args, limits.max_json_depth, what="the call's arguments")
    except LimitError as exc:
        return f"{exc} ({env_name('max_json_depth')})"
    return ""


async def _run_policy(session: Session, call: ToolCall, gated: bool) -> PolicyVerdict | None:
    """The run's :class:`~goldfive_core.policy.Policy` as the gate's policy step; None = no opinion."""
    rules = session.policy
    if rules is None:
        return None
    from .policy import PolicyCall, find_grant

    policy_call = PolicyCall(tool=call.tool_name, args=call.args, agent=call.agent, labels=session.labels, gated=gated)
    verdict = rules.evaluate(policy_call)
    if verdict.rule is None and not verdict.error:
        return None  # no rule spoke: the adapter's own configuration decides, as without a policy
    if verdict.kind == "deny":
        return PolicyVerdict(action="deny", reason=verdict.reason, rule=verdict.rule_name)
    if verdict.kind == "allow":
        return PolicyVerdict(action="allow", rule=verdict.rule_name)
    if verdict.rule is not None and not verdict.error and verdict.ask is not None and verdict.ask.grants:
        # Grants made here, and those kept in the store (revoked there, or made by an earlier process).
        grant = await find_grant(
            session.grants,
            session.grant_records,
            policy_call,
            rule=verdict.rule_name,
            run_id=session.run_id,
            session_id=session.session_id,
        )
        if grant is not None:  # a person allowed matching calls of this rule: on the record with the grant's id
            return PolicyVerdict(action="allow", rule=verdict.rule_name, grant_id=grant.grant_id)
    # A rule that could not be evaluated asks a person as it is: its reviewer is not asked to stand in.
    reviewed = (
        verdict.rule if verdict.ask is not None and verdict.ask.review is not None and not verdict.error else None
    )
    return PolicyVerdict(action="ask", rule=verdict.rule_name, metadata=verdict.metadata(), review_rule=reviewed)


async def _review(
    session: Session, call: ToolCall, rule: Rule, args_json: str, digest: str
) -> Skip | tuple[ApprovalOutcome | None, Mapping[str, str]]:
    """The reviewer's step: a Skip (denied), its allow as the call's outcome, or (None, the card) to ask a person."""
    from .review import review_call

    step = await review_call(session, call, rule, args_json=args_json, digest=digest)
    if step.outcome == "asked":
        return None, step.card
    session.approvals.forget_expected(call.call_id)
    if step.outcome == "denied":
        return Skip(
            call_id=call.call_id,
            reason="reviewer_denied",
            detail=f"the reviewer {step.decided_by} denied this {call.tool_name} call: {step.reason or 'denied'}",
            decided_by=step.decided_by,
        )
    allowed = ApprovalOutcome(
        target_id=call.call_id, decision="approve", detail=step.reason, decided_by=step.decided_by
    )
    return allowed, {}


def _until_expiry(policy_metadata: Mapping[str, str], timeout_ms: int) -> int:
    """The wait for a person: ``timeout_ms``, or the rule's ``expires`` when sooner (no decision is taken after it)."""
    ask = policy_ask(policy_metadata) if policy_metadata else None
    if ask is None or ask.expires_ms is None:
        return timeout_ms
    return min(timeout_ms, ask.expires_ms)


def _schedule_escalation(session: Session, request: ApprovalRequest) -> asyncio.TimerHandle | None:
    """Announce the rule's escalation (``ApprovalEscalated``) if nobody answered within ``escalate.after``."""
    ask = policy_ask(request.metadata)
    if ask is None or ask.escalate is None:
        return None
    escalate = ask.escalate
    rule = request.metadata.get("policy_rule", "")

    def announce() -> None:
        if session.approvals.is_open(request.target_id):
            session.events.emit(
                events_pb2.ApprovalEscalated(
                    target_id=request.target_id, rule=rule, to=",".join(escalate.to), after_ms=escalate.after_ms
                )
            )

    return asyncio.get_running_loop().call_later(escalate.after_ms / 1000, announce)


def _record_policy(session: Session, call: ToolCall, verdict: PolicyVerdict) -> None:
    """Put a rule's allow or deny on the record (the audit log keeps every event)."""
    try:
        args_json = canonical_json(call.args)
        digest = args_digest(call.tool_name, call.args)
    except (TypeError, ValueError):
        args_json, digest = "", ""  # not JSON: the call is still recorded, by name and rule
    session.events.emit(
        events_pb2.PolicyApplied(
            call_id=call.call_id,
            tool_name=call.tool_name,
            rule=verdict.rule,
            action=verdict.action,
            reason=verdict.reason,
            args_digest=digest,
            args_json=shorten(args_json, 20_000),
            grant_id=verdict.grant_id,
            agent=call.agent,
        )
    )


def _stopped(session: Session, call: ToolCall, detail: str) -> Skip:
    session.approvals.forget_expected(call.call_id)
    stop = is_stopped(session.state)
    return Skip(call_id=call.call_id, reason="run_cancelled", detail=detail, stop_run=stop)


def _error(call: ToolCall, detail: str) -> Skip:
    return Skip(call_id=call.call_id, reason="approval_error", detail=detail)


def _replayed(call: ToolCall, replay: Replay) -> Skip:
    if replay.kind == "done":
        return Skip(call_id=call.call_id, reason="already_done", detail=replay.detail, result=replay.result)
    if replay.kind == "unavailable":  # fail closed: nothing may run while the ledger is out of reach
        return Skip(call_id=call.call_id, reason="store_unavailable", detail=replay.detail)
    return Skip(call_id=call.call_id, reason="in_doubt", detail=replay.detail)


def _announce_not_run(session: Session, call: ToolCall, detail: str, decided_by: str) -> None:
    """An approved call that did not run goes on the run's record (sinks keep it through an outage)."""
    by = f" by {decided_by}" if decided_by else ""
    text = f"approved{by}, but {call.call_id!r} {detail}; the model was told it did not run"
    session.emit_drift(Drift(DriftKind.HUMAN_INTERVENTION_REQUIRED, DriftSeverity.WARNING, text))


_RELEASING: set[asyncio.Task[None]] = set()
"""Releases started for cancelled calls (kept until done: a cancelled task cannot await them itself)."""


def _release_later(ledger: ExecutionLedger, session: Session, call: ToolCall) -> None:
    """:func:`_release` on its own task, for a gate that is being cancelled (a claim the ack won must not be left)."""
    if not isinstance(ledger, ReleasingLedger):
        return
    try:
        digest = args_digest(call.tool_name, call.args)
    except (TypeError, ValueError):
        return  # never asked (its arguments are not JSON): nothing was claimed
    task = asyncio.get_running_loop().create_task(_release(ledger, session, call, digest))
    _RELEASING.add(task)
    task.add_done_callback(_RELEASING.discard)


async def _release(ledger: ExecutionLedger, session: Session, call: ToolCall, digest: str) -> None:
    """Give back a claim the approval's ack may have won, when the body will not start now (a ledger that holds no
    claims before ``begin`` has no ``release``). Never raises: a release that fails leaves the call in doubt."""
    if isinstance(ledger, ReleasingLedger):
        try:
            await ledger.release(session, call, digest)
        except Exception:
            logger.exception("giving back the claim of %r failed; it stays in doubt", call.call_id)


async def _ledger_step(
    session: Session,
    call: ToolCall,
    doing: str,
    step: Callable[[Session, ToolCall, str], Awaitable[R]],
    digest: str,
) -> R | Replay:
    """One ledger call; a ledger that raises (its retries spent) fails closed as ``unavailable``."""
    try:
        return await step(session, call, digest)
    except Exception as exc:  # asyncio.CancelledError is a BaseException: it propagates
        detail = (
            f"did not run: {call.tool_name} was not started because its execution ledger is out of reach "
            f"({doing}): {shorten(str(exc), 300)}"
        )
        logger.error("%s", detail)
        return Replay(kind="unavailable", detail=detail)
