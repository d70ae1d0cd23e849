"""Quorum inside a run: votes from the control channel, distinct approvers, an edit restarts the count,
the call goes on once, after the last approval, with the arguments all of them approved."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from goldfive_core import AckResult, ApprovalRequest, ControlKind, ControlMessage, InMemorySink, Session, SteeringConfig
from goldfive_core._util import args_digest
from goldfive_core.control import AckVerdict
from goldfive_core.policy import Ask, Policy, PolicyCall, Rule

TWO_OF_FINANCE = Policy([Rule(name="large transfers", tool="transfer_funds", action=Ask(quorum=2))])
COUNTING = Policy([Rule(name="large transfers", tool="transfer_funds", action=Ask(quorum=2, reject_ends=False))])
ARGS = {"amount": 20_000, "to": "acme"}


def request(policy: Policy = TWO_OF_FINANCE, target: str = "call-1") -> ApprovalRequest:
    verdict = policy.evaluate(PolicyCall(tool="transfer_funds", args=ARGS))
    return ApprovalRequest(
        target_id=target,
        kind="tool",
        prompt="transfer?",
        metadata={"tool_name": "transfer_funds", **verdict.metadata()},
        args_digest=args_digest("transfer_funds", ARGS),
        timeout_ms=60_000,
        validate_edit=lambda edited: None if isinstance(edited.get("amount"), int) else "amount must be a number",
    )


def vote(session: Session, kind: ControlKind, **payload: Any) -> Any:
    return session.dispatch(ControlMessage(kind, {"target_id": "call-1", **payload}))


async def start(sink: InMemorySink, policy: Policy = TWO_OF_FINANCE) -> tuple[Session, asyncio.Task[Any]]:
    session = Session(sinks=[sink], config=SteeringConfig(), has_channel=True)
    waiting = asyncio.create_task(session.request_approval(request(policy)))
    await sink.wait_for("approval_requested")
    return session, waiting


async def test_two_distinct_approvers_the_same_person_counts_once() -> None:
    sink = InMemorySink()
    session, waiting = await start(sink)
    first = vote(session, ControlKind.APPROVE, decided_by="ana")
    assert first.ok and "counted for 'call-1': ana approved; 1 more needed (1 of 2: ana)" in first.detail
    again = vote(session, ControlKind.APPROVE, decided_by="ana")
    assert again.ok and "ana already approved; the same person counts once (1 of 2: ana)" in again.detail
    assert session.status()["pending_approvals"][0]["quorum"] == "1 of 2: ana"
    assert not waiting.done() and not sink.of("approval_granted")
    last = vote(session, ControlKind.APPROVE, decided_by="bo")
    assert last.ok and "approved 'call-1' (2 of 2: ana, bo)" in last.detail
    outcome = await waiting
    assert (outcome.decision, outcome.decided_by, outcome.edited_args) == ("approve", "ana, bo", None)
    assert len(sink.of("approval_granted")) == 1
    late = vote(session, ControlKind.APPROVE, decided_by="cy")
    assert late.result is AckResult.FAILURE and "already decided" in late.detail


async def test_a_reject_ends_the_request_unless_the_rule_says_counts() -> None:
    sink = InMemorySink()
    session, waiting = await start(sink)
    vote(session, ControlKind.APPROVE, decided_by="ana")
    assert vote(session, ControlKind.REJECT, decided_by="bo", detail="not this month").ok
    outcome = await waiting
    assert (outcome.decision, outcome.decided_by, outcome.detail) == ("reject", "bo", "not this month")

    sink = InMemorySink()
    session, waiting = await start(sink, COUNTING)
    counted = vote(session, ControlKind.REJECT, decided_by="bo", detail="hmm")
    assert counted.ok and "bo rejected: hmm; the others may still approve" in counted.detail
    vote(session, ControlKind.APPROVE, decided_by="ana")
    assert vote(session, ControlKind.APPROVE, decided_by="cy").ok
    assert (await waiting).decided_by == "ana, cy"


async def test_an_edit_restarts_the_count_and_the_call_gets_the_arguments_all_approved() -> None:
    sink = InMemorySink()
    session, waiting = await start(sink)
    vote(session, ControlKind.APPROVE, decided_by="ana")
    edited: Mapping[str, Any] = {"amount": 15_000, "to": "acme"}
    restarted = vote(session, ControlKind.APPROVE, decided_by="bo", edited_args=dict(edited))
    assert restarted.ok and "bo edited the arguments: the count starts again with them (1 of 2: bo)" in restarted.detail
    # ana approved the old arguments: her vote no longer counts, and a vote that does not say what it saw is refused
    blind = vote(session, ControlKind.APPROVE, decided_by="ana")
    assert blind.result is AckResult.FAILURE and "were edited" in blind.detail
    stale = vote(session, ControlKind.APPROVE, decided_by="ana", args_digest=args_digest("transfer_funds", ARGS))
    assert stale.result is AckResult.FAILURE and "no longer the ones on the table" in stale.detail
    seen = args_digest("transfer_funds", edited)
    assert vote(session, ControlKind.APPROVE, decided_by="ana", args_digest=seen).ok
    outcome = await waiting
    assert outcome.decision == "approve" and outcome.decided_by == "bo, ana"
    assert outcome.edited_args == edited


async def test_a_vote_must_name_who_votes() -> None:
    sink = InMemorySink()
    session, waiting = await start(sink)
    anonymous = vote(session, ControlKind.APPROVE)
    assert anonymous.result is AckResult.FAILURE and "must name who approves" in anonymous.detail
    waiting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await waiting
    assert session.approvals.statistics().live == 0


async def test_each_vote_s_ack_says_by_its_verdict_what_became_of_it_with_the_same_wire_values() -> None:
    sink = InMemorySink()
    session, waiting = await start(sink)
    first = vote(session, ControlKind.APPROVE, decided_by="ana")
    assert first.verdict is AckVerdict.COUNTED and first.data is not None and first.data["decision"] == "counted"
    last = vote(session, ControlKind.APPROVE, decided_by="bo")
    assert last.verdict is AckVerdict.QUORUM and last.data is not None and last.data["decision"] == "quorum"
    assert (await waiting).decided_by == "ana, bo"

    sink = InMemorySink()
    plain = Session(sinks=[sink], config=SteeringConfig(), has_channel=True)
    one = ApprovalRequest(target_id="call-1", kind="task", prompt="go?", timeout_ms=60_000)
    waiting = asyncio.create_task(plain.request_approval(one))
    await sink.wait_for("approval_requested")
    applied = vote(plain, ControlKind.APPROVE, decided_by="ana")
    assert applied.verdict is AckVerdict.APPLIED and "decision" not in (applied.data or {})  # never written
    assert (await waiting).decision == "approve"
