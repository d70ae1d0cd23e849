"""The control dispatch table: what each :class:`ControlKind` does to a run.

:meth:`Session.dispatch` calls :func:`dispatch_message`, which looks the kind up
in one table and applies it through the session's own methods (pause, resume,
cancel, guidance, decisions); nothing here touches the session's state
directly. A handler returns the ack; a malformed payload becomes a FAILURE ack
naming the key (:mod:`goldfive_core.payloads`), never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._util import canonical_json, safe_repr, shorten
from .approvals import ApprovalRequest, Decision, DecisionResult, DecisionVerdict
from .control import AckResult, AckVerdict, ControlAck, ControlKind, ControlMessage, check_message
from .payloads import BadPayload, decision_from_payload, text_field
from .pb.v1 import events_pb2
from .run_state import RunState, is_over

if TYPE_CHECKING:
    from .session import Session

__all__ = ["dispatch_checked", "dispatch_message"]

Handler = Callable[["Session", ControlMessage], ControlAck]


def dispatch_message(session: Session, msg: ControlMessage) -> ControlAck:
    """Apply one control message to ``session`` now and say what happened. Never raises."""
    problem = check_message(msg)
    if problem is not None:
        return problem
    return dispatch_checked(session, msg)


def dispatch_checked(session: Session, msg: ControlMessage) -> ControlAck:
    """:func:`dispatch_message` for a message :func:`~goldfive_core.control.check_message` already passed
    (the router checks each message once). Never raises."""
    kind = msg.kind
    handler = _TABLE.get(kind) if isinstance(kind, ControlKind) else None
    if handler is None:
        return ControlAck.failure(msg.id, f"control kind {kind!r} cannot be dispatched to a run")
    try:
        return handler(session, msg)
    except BadPayload as exc:
        return ControlAck.failure(msg.id, f"{kind}: {exc}")


def _pause(session: Session, msg: ControlMessage) -> ControlAck:
    reason = text_field(msg.payload, "reason") or "paused by a person"
    was = session.state
    by, channel = _who(msg.payload)
    session.pause(reason, by=by, channel=channel)
    return _state_ack(session, msg, was, "paused: the run stops at its next step boundary")


def _who(payload: Mapping[str, Any]) -> tuple[str, str]:
    """Who sent a run-level message and how (goldfive serve and the CLI put these in the payload)."""
    by, channel = payload.get("decided_by"), payload.get("channel")
    return (shorten(by, 200) if isinstance(by, str) else "", shorten(channel, 20) if isinstance(channel, str) else "")


def _resume(session: Session, msg: ControlMessage) -> ControlAck:
    by, channel = _who(msg.payload)
    if session.resume(by=by, channel=channel):
        return ControlAck.success(msg.id, "resumed")
    return ControlAck.success(msg.id, f"run {session.run_id} was not paused ({session.state}); nothing to resume")


def _cancel(session: Session, msg: ControlMessage) -> ControlAck:
    if is_over(session.state):
        return ControlAck.success(msg.id, f"run {session.run_id} is already {session.state}")
    session.cancel(text_field(msg.payload, "reason") or "cancelled by a person")
    return ControlAck.success(msg.id, "cancelled: the run stops at its next step boundary")


def _status(session: Session, msg: ControlMessage) -> ControlAck:
    return ControlAck.success(msg.id, f"run {session.run_id} is {session.state}", data=session.status())


def _escalate(session: Session, msg: ControlMessage) -> ControlAck:
    kind, payload = msg.kind, msg.payload
    was = session.state
    try:
        # Kept as pending_drift and answered in STATUS_QUERY: it must be able to go on the wire.
        canonical_json(payload)
    except (TypeError, ValueError) as exc:
        return ControlAck.failure(msg.id, f"{kind}: the payload is not a JSON object: {safe_repr(exc)}")
    try:
        session.pause(text_field(payload, "reason") or "escalated to a person", escalation=payload)
    except ValueError as exc:
        return ControlAck.failure(msg.id, f"{kind}: {exc}")
    return _state_ack(session, msg, was, "paused for a person: RESUME, STEER or CANCEL to go on")


def _unsupported(session: Session, msg: ControlMessage) -> ControlAck:
    return ControlAck.unsupported(msg.id, f"{msg.kind} is not supported by this run")


def _text(session: Session, msg: ControlMessage) -> ControlAck:
    # Upstream goldfive UIs send a STEER as {"note": ..., "author": ...}; ours send {"text": ...}.
    key = "note" if msg.payload.get("text") is None and msg.payload.get("note") is not None else "text"
    text = text_field(msg.payload, key, required=True)
    author = text_field(msg.payload, "author")
    if author:
        text = f"{text} (from {author})"
    if is_over(session.state):
        return ControlAck.failure(msg.id, f"run {session.run_id} is {session.state}; nobody will read this")
    if msg.kind is ControlKind.INJECT_MESSAGE:
        session.add_guidance(text, "inject", msg.id)
        return ControlAck.success(msg.id, "message queued for the agent's next turn")
    session.add_guidance(text, "steer", msg.id)
    by, channel = _who(msg.payload)
    resumed = session.resume(how="steer", by=by, channel=channel)
    return ControlAck.success(msg.id, "steer queued for the agent's next turn" + ("; run resumed" if resumed else ""))


def _decision(session: Session, msg: ControlMessage) -> ControlAck:
    assert isinstance(msg.kind, ControlKind)
    if msg.kind is ControlKind.REJECT and msg.payload.get("expired") is True:
        return _expired(session, msg)
    try:
        target_id, decision = decision_from_payload(msg.kind, msg.payload)
    except ValueError as exc:
        return ControlAck.failure(msg.id, str(exc))
    scope = msg.payload.get("grant")
    if scope is not None:
        problem = _grant_problem(session, target_id, decision, scope, msg.payload.get("grant_rule"))
        if problem:
            return ControlAck.failure(msg.id, f"refused: {problem}; nothing was decided")
    result = session.apply_decision(target_id, decision)
    record = result.record
    tally = record.quorum if record is not None else None
    if result.verdict in (DecisionVerdict.APPLIED, DecisionVerdict.APPLIED_LATE):
        assert record is not None
        request, detail = record.request, result.detail
        if scope is not None and request is not None:
            detail += "; " + _grant(session, request, decision, str(scope))
        final = record.decision
        if tally is not None and final is not None:
            # The last vote of a quorum: the decision is everyone's ("ana, bo"), not only this voter's.
            data: dict[str, Any] = {
                "decision": AckVerdict.QUORUM.value,
                "decided_by": final.decided_by,
                "detail": final.detail,
                "quorum_progress": tally.progress(),
                "request_id": _request_of(result),
                "decided_at_ms": result.announced_at_ms,
            }
            if final.edited_args is not None:  # the arguments all of them approved (an earlier edit)
                data["edited_args"] = dict(final.edited_args)
            return ControlAck.success(msg.id, detail, data=data)
        # The request the decision resolved: whoever records acks (the store) writes it to that request only.
        # Its time is the decision event's: the store records the decision once, as audit verify expects it. The
        # ack is made in that same dispatch, so that time is its own too (the clock read once).
        at = result.announced_at_ms
        data = {"request_id": request.request_id if request is not None else "", "decided_at_ms": at}
        return ControlAck(msg.id, AckResult.SUCCESS, detail, acked_at_ms=at, data=data)
    if result.verdict is DecisionVerdict.COUNTED and tally is not None:
        # A vote, not the decision: the ack says so, so whoever records acks (the store) keeps it pending.
        counted: dict[str, Any] = {
            "decision": AckVerdict.COUNTED.value,
            "quorum_progress": tally.progress(),
            "request_id": _request_of(result),
        }
        if result.repeated:  # the same person again: their earlier vote stands, this one changed nothing
            counted["repeated"] = True
        quorum_args = result.record.quorum_args if result.record is not None else None
        if quorum_args is not None:
            # An edit restarted the count: the edited arguments are on the table, and the next approver must
            # read and vote on them (their digest); whoever records acks (the store) shows them.
            counted["args_digest"] = tally.args_digest
            counted["args"] = dict(quorum_args)
        return ControlAck.success(msg.id, result.detail, data=counted)
    if result.verdict in (DecisionVerdict.KEPT_EARLY, DecisionVerdict.COUNTED):
        return ControlAck.success(msg.id, result.detail)
    return ControlAck.failure(msg.id, result.detail)


def _request_of(result: DecisionResult) -> str:
    record = result.record
    return record.request.request_id if record is not None and record.request is not None else ""


def _expired(session: Session, msg: ControlMessage) -> ControlAck:
    """The deciding server's rule says the request expired: its wait ends as a timeout would (never runs the call)."""
    try:
        target_id = text_field(msg.payload, "target_id", required=True)
        detail = text_field(msg.payload, "detail") or "the request expired"
        named = text_field(msg.payload, "request_id")
    except BadPayload as exc:
        return ControlAck.failure(msg.id, f"REJECT (expired): {exc}")
    record = session.approvals.get(target_id)
    asked = record.request.request_id if record is not None and record.request is not None else ""
    if named and named != asked:  # a late notice for an earlier ask never ends the one asked since
        why = f"refused: the expiry is for request {safe_repr(named)} of {target_id!r}, not {asked!r}; nothing expired"
        return ControlAck.failure(msg.id, why)
    if session.expire_approval(target_id, detail):
        # Not a decision: whoever records acks (the store) leaves the record to the run's approval_timed_out.
        return ControlAck.success(
            msg.id, f"expired {target_id!r}: {detail}", data={"decision": AckVerdict.EXPIRED.value}
        )
    why = f"{target_id!r} is not a pending request of run {session.run_id}; nothing expired"
    return ControlAck.failure(msg.id, why)


_TABLE: Mapping[ControlKind, Handler] = {
    ControlKind.APPROVE: _decision,
    ControlKind.REJECT: _decision,
    ControlKind.PAUSE: _pause,
    ControlKind.RESUME: _resume,
    ControlKind.STEER: _text,
    ControlKind.GOLDFIVE_STEER: _text,
    ControlKind.INJECT_MESSAGE: _text,
    ControlKind.CANCEL: _cancel,
    ControlKind.STATUS_QUERY: _status,
    ControlKind.GOLDFIVE_PAUSE_ESCALATE: _escalate,
    ControlKind.REWIND_TO: _unsupported,
    ControlKind.INTERCEPT_TRANSFER: _unsupported,
}
"""Every kind a run answers; any other kind gets a FAILURE ack."""


def _state_ack(session: Session, msg: ControlMessage, was: RunState, detail: str) -> ControlAck:
    if was is RunState.PAUSED and session.state is RunState.PAUSED:
        return ControlAck.success(msg.id, "already paused")
    if session.state is not RunState.PAUSED:
        return ControlAck.failure(msg.id, f"run {session.run_id} is {session.state}; it cannot be paused")
    return ControlAck.success(msg.id, detail)


def _grant_problem(session: Session, target_id: str, decision: Decision, scope: Any, payload_rule: Any) -> str:
    """Why an approval may not also grant ``scope`` ("" if it may); ``payload_rule``: the rule the deciding side
    allowed it under (``grant_rule``, signed with it; None when the decision does not say)."""
    from .policy import Ask, GrantScope

    if not decision.approved:
        return "only an approval can allow matching calls"
    if decision.edited_args is not None:
        return "an edited approval never creates a grant: approve the edited call alone"
    if not isinstance(scope, str):
        return f"grant must be 'run', 'session' or a duration, got {safe_repr(scope)}"
    record = session.approvals.get(target_id)
    request = record.request if record is not None else None
    if request is None or not session.approvals.is_open(target_id):
        return f"{target_id!r} is not an open request"
    ask = Ask.from_metadata(request.metadata)
    rule = request.metadata.get("policy_rule", "")
    if ask is None or not rule:
        return f"no policy rule asked {target_id!r}, so none offers a grant"
    if payload_rule is not None and payload_rule != rule:  # the deciding side allowed it under another rule
        return (
            f"the grant was allowed under rule {safe_repr(payload_rule, 80)}, not {rule!r} (the rule this request "
            "names, which the grant would be kept under)"
        )
    needed = max(ask.quorum, decision.quorum)  # the request's rule, or the deciding server's, asks for several
    if needed > 1:
        return f"rule {rule!r} needs {needed} approvers; one approver cannot allow later calls"
    try:
        wanted = GrantScope.parse(scope)
    except ValueError as exc:
        return str(exc)
    if wanted not in ask.grants:
        offered = ", ".join(g.label() for g in ask.grants) or "none"
        return f"rule {rule!r} does not offer a grant {wanted.label()} (offered: {offered})"
    return ""


def _grant(session: Session, request: ApprovalRequest, decision: Decision, scope: str) -> str:
    """Create the grant an approval asked for; the words for its ack."""
    from .policy import Ask, GrantError

    meta = request.metadata
    ask = Ask.from_metadata(meta)
    assert ask is not None
    try:
        grant = session.grants.create(
            ask=ask,
            rule=meta.get("policy_rule", ""),
            tool=meta.get("tool_name", ""),
            scope=scope,
            granted_by=decision.decided_by or "someone",
            run_id=session.run_id,
            session_id=session.session_id,
        )
    except GrantError as exc:
        return f"no grant was made: {exc}"
    # On the record: the store keeps it as a grant that is listed, revoked and outlives this process.
    session.events.emit(
        events_pb2.GrantCreated(
            grant_id=grant.grant_id,
            rule=grant.rule,
            tool=grant.tool,
            granted_by=grant.granted_by,
            scope=grant.scope,
            session_id=grant.session_id,
            args_constraint=grant.args_constraint,
            created_at_ms=grant.created_at_ms,
            expires_at_ms=grant.expires_at_ms or 0,
            target_id=request.target_id,
            description=grant.describe(),
            channel=decision.channel,
        )
    )
    return f"{grant.describe()} ({grant.grant_id})"
