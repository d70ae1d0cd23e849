"""Approval records (docs/architecture.md): exactly once, early decisions, refusals, and nothing left behind."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

import pytest

from goldfive_core import (
    AckResult,
    ApprovalBook,
    ApprovalRequest,
    ApprovalStatus,
    ControlKind,
    ControlMessage,
    ControlRouter,
    Decision,
    Session,
    SteeringConfig,
    args_digest,
)
from goldfive_core.approvals import DecisionVerdict


def req(target: str = "t", **kw: Any) -> ApprovalRequest:
    fields: dict[str, Any] = {"target_id": target, "kind": "task", "prompt": "ok?", "timeout_ms": 60_000}
    fields.update(kw)
    return ApprovalRequest(**fields)


def msg(kind: ControlKind, **payload: Any) -> ControlMessage:
    return ControlMessage(kind, payload)


def new_session(sink: Any, **kw: Any) -> Session:
    return Session(sinks=[sink], config=SteeringConfig(**kw), has_channel=True)


async def test_a_decision_resolves_a_record_exactly_once(sink) -> None:
    session = new_session(sink)
    waiting = asyncio.create_task(session.request_approval(req("t")))
    await sink.first("approval_requested")
    first = session.dispatch(msg(ControlKind.APPROVE, target_id="t", decided_by="ana"))
    second = session.dispatch(msg(ControlKind.REJECT, target_id="t", decided_by="bo"))
    third = session.dispatch(msg(ControlKind.APPROVE, target_id="t"))
    assert first.ok
    for late in (second, third):
        assert late.result is AckResult.FAILURE
        assert late.detail == "already decided: 't' was approved by ana; this decision was not applied"
    outcome = await waiting
    assert (outcome.decision, outcome.decided_by) == ("approve", "ana")
    assert len(sink.of("approval_granted")) == 1 and not sink.of("approval_rejected")


async def test_an_early_decision_for_an_expected_target_is_kept_and_applied(sink) -> None:
    session = new_session(sink)
    session.expect_approval("adk-7")
    early = session.dispatch(msg(ControlKind.REJECT, target_id="adk-7", detail="too pricey", decided_by="cy"))
    assert early.ok and "kept" in early.detail
    assert sink.events == []  # nothing is announced before the request exists
    again = session.dispatch(msg(ControlKind.APPROVE, target_id="adk-7"))
    assert not again.ok and "already decided" in again.detail
    outcome = await session.request_approval(req("adk-7", kind="tool"))
    assert (outcome.decision, outcome.detail, outcome.decided_by) == ("reject", "too pricey", "cy")
    assert sink.kinds() == ["approval_requested", "approval_rejected"]
    assert sink.of("approval_rejected")[0].approval_rejected.decided_by == "cy"
    assert session.approvals.statistics().live == 0


async def test_an_expected_target_that_is_never_requested_can_be_forgotten(sink) -> None:
    session = new_session(sink)
    session.expect_approval("x")
    assert session.dispatch(msg(ControlKind.APPROVE, target_id="x")).ok
    session.approvals.forget_expected("x")
    assert session.approvals.statistics().live == 0
    late = session.dispatch(msg(ControlKind.APPROVE, target_id="x"))
    assert not late.ok and "unknown target_id 'x'" in late.detail


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ({"target_id": "ghost"}, "unknown target_id 'ghost': no pending approval (pending: 'real')"),
        ({}, "missing target_id"),
        ({"target_id": ""}, "missing target_id"),
        ({"target_id": 42}, "payload['target_id'] must be a string, got int"),
        ({"target_id": "real", "detail": ["x"]}, "payload['detail'] must be a string, got list"),
        ({"target_id": "real", "decided_by": 3}, "payload['decided_by'] must be a string, got int"),
    ],
)
@pytest.mark.parametrize("kind", [ControlKind.APPROVE, ControlKind.REJECT])
@pytest.mark.parametrize("via_router", [False, True])
async def test_unknown_or_missing_targets_get_a_failure_that_names_them(
    sink, payload: dict[str, Any], words: str, kind: ControlKind, via_router: bool
) -> None:
    session = new_session(sink)
    waiting = asyncio.create_task(session.request_approval(req("real")))
    await sink.first("approval_requested")
    message = ControlMessage(kind, payload, id="c-9")
    if via_router:
        router = ControlRouter(None)
        router.attach(session)
        ack = router.dispatch(message)
    else:
        ack = session.dispatch(message)
    assert (ack.result, ack.control_id) == (AckResult.FAILURE, "c-9")
    assert words in ack.detail
    assert session.approvals.open_targets() == ["real"]
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


def test_book_re_request_opens_a_fresh_record() -> None:
    book = ApprovalBook()
    record, superseded = book.open(req("t"))
    assert superseded is None
    assert book.decide("t", Decision(approved=True)).verdict is DecisionVerdict.APPLIED
    again, _ = book.open(req("t"))
    assert again is not record
    assert again.status is ApprovalStatus.PENDING and again.decision is None
    assert book.decide("t", Decision(approved=False)).verdict is DecisionVerdict.APPLIED
    assert book.get("t") is again and again.status is ApprovalStatus.REJECTED


def test_book_refuses_a_second_pending_request_for_a_target() -> None:
    from goldfive_core import ApprovalError

    book = ApprovalBook()
    book.open(req("t"))
    with pytest.raises(ApprovalError, match="already has a pending approval request"):
        book.open(req("t"))


async def test_a_cancelled_wait_leaves_nothing_registered(sink) -> None:
    session = new_session(sink)
    waiting = asyncio.create_task(session.request_approval(req("t")))
    await sink.first("approval_requested")
    assert session.approvals.statistics().waiters == 1
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    stats = session.approvals.statistics()
    assert (stats.live, stats.waiters, stats.pending) == (0, 0, 0)
    (cancelled,) = sink.of("approval_cancelled")
    assert cancelled.approval_cancelled.target_id == "t"
    late = session.dispatch(msg(ControlKind.APPROVE, target_id="t"))
    assert not late.ok and "unknown target_id 't'" in late.detail
    assert not sink.of("approval_granted")


DIGEST = args_digest("transfer", {"to": "bob", "amount": 20})


async def test_a_decision_with_another_digest_is_refused_and_the_request_stays_pending(sink) -> None:
    session = new_session(sink)
    waiting = asyncio.create_task(session.request_approval(req("call-1", kind="tool", args_digest=DIGEST)))
    await sink.first("approval_requested")
    assert sink.of("approval_requested")[0].approval_requested.args_digest == DIGEST
    other = args_digest("transfer", {"to": "bob", "amount": 2000})
    refused = session.dispatch(msg(ControlKind.APPROVE, target_id="call-1", args_digest=other))
    assert refused.result is AckResult.FAILURE
    assert "does not match" in refused.detail and "stays pending" in refused.detail
    assert not sink.of("approval_granted")
    assert session.approvals.open_targets() == ["call-1"]
    assert session.dispatch(msg(ControlKind.APPROVE, target_id="call-1", args_digest=DIGEST)).ok
    assert (await waiting).decision == "approve"


def _only_small_amounts(args: Mapping[str, Any]) -> str | None:
    amount = args.get("amount")
    return None if isinstance(amount, int) and amount <= 100 else f"amount must be <= 100, got {amount!r}"


async def test_edited_args_are_checked_and_carried_to_the_outcome_and_event(sink) -> None:
    session = new_session(sink)
    request = req("call-2", kind="tool", validate_edit=_only_small_amounts)
    waiting = asyncio.create_task(session.request_approval(request))
    await sink.first("approval_requested")
    too_big = session.dispatch(msg(ControlKind.APPROVE, target_id="call-2", edited_args={"amount": 500}))
    assert not too_big.ok and "amount must be <= 100" in too_big.detail
    with_reject = session.dispatch(msg(ControlKind.REJECT, target_id="call-2", edited_args={"amount": 5}))
    assert not with_reject.ok and "edited_args only go with APPROVE" in with_reject.detail
    not_json = session.dispatch(msg(ControlKind.APPROVE, target_id="call-2", edited_args={"amount": {1, 2}}))
    assert not not_json.ok and "not JSON" in not_json.detail
    ok = session.dispatch(msg(ControlKind.APPROVE, target_id="call-2", edited_args={"amount": 50}, decided_by="di"))
    assert ok.ok
    outcome = await waiting
    assert outcome.edited_args == {"amount": 50}
    granted = sink.of("approval_granted")[0].approval_granted
    assert (granted.edited_args_json, granted.decided_by) == ('{"amount":50}', "di")


async def test_task_approvals_take_no_edited_args(sink) -> None:
    session = new_session(sink)
    waiting = asyncio.create_task(session.request_approval(req("t")))
    await sink.first("approval_requested")
    refused = session.dispatch(msg(ControlKind.APPROVE, target_id="t", edited_args={"x": 1}))
    assert not refused.ok and "takes no edited_args" in refused.detail
    assert session.dispatch(msg(ControlKind.APPROVE, target_id="t")).ok
    assert (await waiting).edited_args is None


async def test_run_end_withdraws_open_and_timed_out_records_but_not_announcements(sink) -> None:
    session = new_session(sink)
    session.expect_approval("announced")
    waiting = asyncio.create_task(session.request_approval(req("pending")))
    timed_out = await session.request_approval(req("late", timeout_ms=1, keep_open_on_timeout=True))
    assert timed_out.decision == "timeout"
    await sink.nth("approval_requested", 2)
    session.finish()
    assert (await waiting).decision == "cancelled"
    cancelled = sorted(e.approval_cancelled.target_id for e in sink.of("approval_cancelled"))
    assert cancelled == ["late", "pending"]
    assert session.approvals.statistics().live == 0


async def test_a_closed_flow_b_timeout_is_gone(sink) -> None:
    session = new_session(sink)
    outcome = await session.request_approval(req("call", kind="tool", timeout_ms=1))
    assert outcome.decision == "timeout"
    assert sink.of("approval_timed_out")[0].approval_timed_out.still_open is False
    assert session.approvals.statistics().live == 0
    assert "unknown target_id" in session.dispatch(msg(ControlKind.APPROVE, target_id="call")).detail


async def test_decided_history_is_bounded(sink) -> None:
    session = new_session(sink, decided_history=2)
    for target in ("a", "b", "c"):
        session.approvals.open(req(target))
        assert session.dispatch(msg(ControlKind.APPROVE, target_id=target)).ok
    assert "already decided" in session.dispatch(msg(ControlKind.APPROVE, target_id="c")).detail
    assert "unknown target_id 'a'" in session.dispatch(msg(ControlKind.APPROVE, target_id="a")).detail
    assert session.approvals.statistics().decided_remembered == 2


async def test_status_lists_open_approvals(sink) -> None:
    session = new_session(sink)
    waiting = asyncio.create_task(session.request_approval(req("t", prompt="pay 5", task_id="t")))
    await sink.first("approval_requested")
    ack = session.dispatch(msg(ControlKind.STATUS_QUERY))
    assert ack.ok and ack.data is not None
    assert ack.data["pending_approvals"] == [
        {
            "target_id": "t",
            "status": "pending",
            "kind": "task",
            "prompt": "pay 5",
            "task_id": "t",
            "args_digest": "",
            "request_id": session.approvals.get("t").request.request_id,
            "quorum": "",
        }
    ]
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"timeout_ms": 0}, "timeout_ms must be an integer"),
        ({"timeout_ms": 10**13}, "timeout_ms must be an integer"),
        ({"timeout_ms": 1.5}, "timeout_ms must be an integer"),
        ({"target_id": ""}, "target_id must be a non-empty string"),
        ({"kind": "email"}, "kind must be 'task', 'tool' or 'input'"),
        ({"metadata": {"n": 1}}, "metadata must map strings to strings"),
    ],
)
def test_bad_requests_are_refused_before_anything_is_registered(changes: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        req(**changes)


@pytest.mark.parametrize("end", ["cancel", "terminate", "finish"])
async def test_a_run_that_is_over_asks_nobody(sink, end: str) -> None:
    session = new_session(sink)
    if end == "finish":
        session.finish()
    else:
        getattr(session, end)("stop")
    outcome = await session.request_approval(req("t"))
    assert outcome.decision == "cancelled"
    assert not sink.of("approval_requested")
    assert session.approvals.statistics().live == 0


def test_a_re_request_supersedes_a_timed_out_record() -> None:
    book = ApprovalBook()
    first, _ = book.open(req("t", keep_open_on_timeout=True))
    first.status = ApprovalStatus.TIMED_OUT  # as ApprovalBook.wait leaves it after a Flow A timeout
    second, superseded = book.open(req("t"))
    assert superseded is first
    assert (first.status, first.closed_reason) == (ApprovalStatus.CANCELLED, "superseded by a new request")
    assert second.status is ApprovalStatus.PENDING and book.open_targets() == ["t"]


def test_the_status_machine_allows_only_its_transitions() -> None:
    from goldfive_core.approvals import OPEN_STATUSES, sources, transition
    from goldfive_core.errors import InvalidTransitionError

    S = ApprovalStatus
    assert transition(S.PENDING, S.GRANTED) is S.GRANTED
    assert transition(S.TIMED_OUT, S.REJECTED) is S.REJECTED
    assert transition(S.EXPECTED, S.PENDING) is S.PENDING
    for final in (S.GRANTED, S.REJECTED, S.EXPIRED, S.CANCELLED):
        for new in S:
            with pytest.raises(InvalidTransitionError, match=f"from '{final.value}' to '{new.value}'"):
                transition(final, new)
    with pytest.raises(InvalidTransitionError, match="allowed: cancelled, pending"):
        transition(S.EXPECTED, S.GRANTED)
    assert set(sources(S.GRANTED)) == set(sources(S.REJECTED)) == OPEN_STATUSES == {S.PENDING, S.TIMED_OUT}
    assert sources(S.EXPIRED) == (S.PENDING,)


def test_a_book_never_moves_a_decided_record_again() -> None:
    from goldfive_core.errors import InvalidTransitionError

    book = ApprovalBook()
    record, _ = book.open(req("t"))
    assert book.decide("t", Decision(approved=True)).verdict is DecisionVerdict.APPLIED
    with pytest.raises(InvalidTransitionError):
        book._resolve(record, Decision(approved=False))  # the one transition function guards the book too
    assert record.status is ApprovalStatus.GRANTED and record.decision is not None and record.decision.approved


async def test_a_closed_flow_b_timeout_is_expired(sink) -> None:
    book = ApprovalBook()
    record, _ = book.open(req("call", kind="tool", timeout_ms=1))
    outcome = await book.wait(record, 0.001)
    assert outcome.decision == "timeout"
    assert record.status is ApprovalStatus.EXPIRED and not book.is_open("call")


def test_a_decision_payload_is_read_the_same_on_its_fast_path_and_its_checked_one() -> None:
    from goldfive_core.payloads import decision_from_payload

    _, decision = decision_from_payload(ControlKind.REJECT, {"target_id": "t", "detail": "", "reason": "too much"})
    assert decision.detail == "too much" and not decision.approved  # an empty detail gives way to the reason
    _, decision = decision_from_payload(ControlKind.APPROVE, {"target_id": "t", "detail": "ok", "reason": 5})
    assert decision.detail == "ok"  # the reason is not read when there is a detail
    for bad, words in (
        ({"target_id": "t", "detail": [], "reason": "x"}, "payload['detail'] must be a string, got list"),
        ({"target_id": "t", "channel": "w" * 70_000}, "payload['channel'] is 70000 characters"),
        ({"target_id": "  "}, "missing target_id: payload['target_id'] is empty"),
        ({"target_id": "t", "detail": None, "reason": 3}, "payload['reason'] must be a string, got int"),
    ):
        with pytest.raises(ValueError, match=re.escape(words)):
            decision_from_payload(ControlKind.APPROVE, bad)


async def test_an_expiry_notice_for_an_earlier_ask_never_ends_the_request_asked_since(sink) -> None:
    session = new_session(sink)
    waiting = asyncio.create_task(session.request_approval(req("t", request_id="req-now")))
    await sink.first("approval_requested")
    late = session.dispatch(msg(ControlKind.REJECT, target_id="t", expired=True, request_id="req-before"))
    assert not late.ok and "not 'req-now'; nothing expired" in late.detail
    assert session.approvals.get("t") is not None and not waiting.done()
    bad = session.dispatch(msg(ControlKind.REJECT, target_id="t", expired=True, request_id=7))
    assert not bad.ok and "request_id" in bad.detail
    ended = session.dispatch(msg(ControlKind.REJECT, target_id="t", expired=True, request_id="req-now"))
    assert ended.ok and ended.data == {"decision": "expired"}
    assert (await waiting).decision == "timeout"
