"""At-most-once execution of an approved tool call, across restarts.

:func:`run_approved` is what an adapter (or a plain callable agent) calls for a
tool that needs a person's yes, keyed by a call id that stays the same when a
restarted run replays the call (ADK: ``function_call_id``):

1. the ledger says the body already finished → the recorded result, no re-run;
2. the ledger says the body started but never finished (the process died in
   between) → **in doubt**: reported to the person (a HUMAN_INTERVENTION_REQUIRED
   drift) and not re-run;
3. a decision was recorded while the agent was down (``goldfive approve`` on an
   orphaned request) → applied without asking again, if it is for the same
   arguments (same digest);
4. otherwise the person is asked (ApprovalRequested, a bounded wait).

An approval is used once: ``mark_executing`` is recorded before the body runs
and ``mark_done`` with its result after.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from .._util import args_digest, canonical_json, shorten
from ..approvals import ApprovalRequest
from ..drift import Drift, DriftKind, DriftSeverity
from ..pb.v1 import events_pb2
from ..session import Session
from ..signing import TrustKey
from .base import HOST, ExecutionRow, ExecutionState, Store, StoredDecision
from .trust import verify_decision

__all__ = ["GuardedResult", "Replay", "begin_execution", "check_replay", "finish_execution", "run_approved"]

logger = logging.getLogger(__name__)

GuardedStatus = Literal["ran", "already_done", "in_doubt", "reject", "timeout", "cancelled"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class GuardedResult:
    """What happened to one guarded call; ``result`` is the body's return value when it ran (or had run)."""

    status: GuardedStatus
    result: Any = None
    detail: str = ""
    decided_by: str = ""
    args: Mapping[str, Any] | None = None

    @property
    def executed(self) -> bool:
        """True when the body ran in this call."""
        return self.status == "ran"


def _accept_object(edited: Mapping[str, Any]) -> str | None:
    return None if isinstance(edited, Mapping) else "edited arguments must be a JSON object"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Replay:
    """What the store knows about a call id before anyone is asked (see :func:`check_replay`)."""

    kind: Literal["none", "done", "in_doubt", "decided"]
    detail: str = ""
    result: Any = None
    decision: StoredDecision | None = None


async def check_replay(
    session: Session, store: Store, *, call_id: str, tool_name: str, digest: str, trust: TrustKey | None = None
) -> Replay:
    """Look up ``call_id`` in the ledger and the decisions; announce what applies to the run.

    ``done``: the body finished before (its result is in ``result``); ``in_doubt``: it started and
    never finished (a CRITICAL HUMAN_INTERVENTION_REQUIRED drift is emitted; do not run it);
    ``decided``: a decision was recorded while the agent was down (ApprovalGranted/Rejected is
    emitted for this run; a decision for other arguments is ignored); ``none``: ask a person.
    """
    settled = await _settled(session, store, call_id, tool_name)
    if settled is not None:
        kind: Literal["done", "in_doubt"] = "done" if settled.status == "already_done" else "in_doubt"
        return Replay(kind=kind, detail=settled.detail, result=settled.result)
    stored = await asyncio.to_thread(store.find_decision, call_id)
    if stored is None:
        return Replay(kind="none")
    if stored.args_digest and digest and stored.args_digest != digest:
        logger.warning("decision stored for %s was for other arguments (%s); asking again", call_id, stored.args_digest)
        return Replay(kind="none")
    if trust is not None:
        claimed: dict[str, Any] = {
            "target_id": stored.target_id,
            "decided_by": stored.decided_by,
            "detail": stored.detail,
            "args_digest": stored.args_digest,
            "edited_args": stored.edited_args,
            "signature": stored.signature,
            "channel": stored.decided_channel,
        }
        if verify_decision(trust, claimed, approved=stored.approved, run_id=stored.run_id, session=session):
            return Replay(kind="none")  # not signed by the trusted key: ask a person (refusal audited)
    note = f"decision recorded in the store (run {stored.run_id}, via {stored.decided_via}) applied to the replay"
    if stored.approved:
        edited = stored.edited_args
        session.events.emit(
            events_pb2.ApprovalGranted(
                target_id=call_id,
                detail=note,
                decided_by=stored.decided_by,
                edited_args_json=canonical_json(edited) if edited is not None else "",
            )
        )
    else:
        session.events.emit(events_pb2.ApprovalRejected(target_id=call_id, detail=note, decided_by=stored.decided_by))
    return Replay(kind="decided", detail=stored.detail, decision=stored)


async def begin_execution(session: Session, store: Store, *, call_id: str, tool_name: str) -> Replay | None:
    """Record "executing" before an approved body runs; None = go ahead, else why not (done / in doubt)."""
    claimed = await asyncio.to_thread(store.mark_executing, call_id, run_id=session.run_id, pid=os.getpid(), host=HOST)
    if claimed:
        return None
    # Another process claimed it between the look and now.
    return await check_replay(session, store, call_id=call_id, tool_name=tool_name, digest="")


async def finish_execution(
    store: Store, *, call_id: str, result: Any = None, error: BaseException | None = None
) -> None:
    """Record that the body finished, with its result (or the error it raised)."""
    if error is not None:
        result_json = canonical_json({"error": shorten(repr(error), 500)})
    else:
        try:
            result_json = canonical_json(result)
        except (TypeError, ValueError):
            result_json = canonical_json({"repr": shorten(repr(result), 2000)})
    await asyncio.to_thread(store.mark_done, call_id, result_json=result_json)


async def run_approved(
    session: Session,
    store: Store,
    *,
    call_id: str,
    tool_name: str,
    args: Mapping[str, Any],
    body: Callable[[Mapping[str, Any]], Awaitable[Any]],
    prompt: str = "",
    task_id: str = "",
    timeout_ms: int | None = None,
    trust: TrustKey | None = None,
) -> GuardedResult:
    """Ask (or find the recorded decision), then run ``body(args)`` at most once for ``call_id``.

    With ``trust`` (the public key of ``goldfive serve``), a decision recorded in the store is
    used only if that key signed it.
    """
    digest = args_digest(tool_name, args)
    replay = await check_replay(session, store, call_id=call_id, tool_name=tool_name, digest=digest, trust=trust)
    if replay.kind == "done":
        return GuardedResult(status="already_done", result=replay.result, detail=replay.detail)
    if replay.kind == "in_doubt":
        return GuardedResult(status="in_doubt", detail=replay.detail)
    edited: Mapping[str, Any] | None
    if replay.decision is not None:
        stored = replay.decision
        approved, detail, decided_by, edited = stored.approved, stored.detail, stored.decided_by, stored.edited_args
    else:
        outcome = await session.request_approval(
            ApprovalRequest(
                target_id=call_id,
                kind="tool",
                prompt=prompt or f"run {tool_name}?",
                task_id=task_id,
                metadata={"tool_name": tool_name, "args_json": canonical_json(dict(args))},
                args_digest=digest,
                timeout_ms=timeout_ms
                if timeout_ms and timeout_ms > 0
                else session.config.effective_tool_approval_timeout_ms,
                validate_edit=_accept_object,
            )
        )
        if outcome.decision in ("timeout", "cancelled"):
            return GuardedResult(status=outcome.decision, detail=outcome.detail)
        approved, detail, decided_by, edited = outcome.approved, outcome.detail, outcome.decided_by, outcome.edited_args
    if not approved:
        return GuardedResult(status="reject", detail=detail, decided_by=decided_by)
    call_args = dict(edited) if edited is not None else dict(args)
    refused = await begin_execution(session, store, call_id=call_id, tool_name=tool_name)
    if refused is not None:
        status: GuardedStatus = "already_done" if refused.kind == "done" else "in_doubt"
        return GuardedResult(status=status, result=refused.result, detail=refused.detail)
    try:
        result = await body(call_args)
    except BaseException as exc:
        await finish_execution(store, call_id=call_id, error=exc)
        raise
    await finish_execution(store, call_id=call_id, result=result)
    return GuardedResult(status="ran", result=result, detail=detail, decided_by=decided_by, args=call_args)


async def _settled(session: Session, store: Store, call_id: str, tool_name: str) -> GuardedResult | None:
    row: ExecutionRow | None = await asyncio.to_thread(store.execution, call_id)
    if row is None:
        return None
    if row.state is ExecutionState.DONE:
        return GuardedResult(
            status="already_done",
            result=json.loads(row.result_json) if row.result_json else None,
            detail=f"{tool_name} already ran for {call_id!r} (run {row.run_id}); its recorded result is returned",
        )
    detail = (
        f"in doubt: {tool_name} for {call_id!r} was started by run {row.run_id} (process {row.pid} on {row.host}) "
        "and never recorded a result; it may or may not have run, so it is not run again — a person must check"
    )
    session.emit_drift(Drift(DriftKind.HUMAN_INTERVENTION_REQUIRED, DriftSeverity.CRITICAL, detail))
    return GuardedResult(status="in_doubt", detail=detail)
