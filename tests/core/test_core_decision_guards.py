"""ApprovalBook, the public state machine, refuses what the session's parsing would also refuse.

The session turns control messages into Decisions and refuses some shapes itself; the book must
hold the same line for any caller that hands it Decisions directly (adapters, the gate, tests).
"""

from __future__ import annotations

import asyncio
from typing import Any

from loop_support import wait_all_tasks_blocked

from goldfive_core import (
    ApprovalBook,
    ApprovalRequest,
    ApprovalStatus,
    ControlKind,
    ControlMessage,
    Decision,
    InMemorySink,
    Session,
    SteeringConfig,
)
from goldfive_core.approvals import DecisionVerdict


def _accept_any(edited: Any) -> str | None:
    return None


def test_a_rejection_carrying_edited_arguments_is_refused_and_the_request_stays_pending() -> None:
    book = ApprovalBook()
    record, _ = book.open(ApprovalRequest(target_id="t", kind="tool", timeout_ms=1000, validate_edit=_accept_any))
    result = book.decide("t", Decision(approved=False, edited_args={"amount": 1}))
    assert result.verdict is DecisionVerdict.EDIT_REFUSED and "only go with APPROVE" in result.detail
    assert record.status is ApprovalStatus.PENDING and record.decision is None


async def test_an_early_approval_for_other_arguments_is_not_applied_when_the_request_opens() -> None:
    sink = InMemorySink()
    session = Session(sinks=[sink], config=SteeringConfig(), has_channel=True)
    session.expect_approval("adk-1")
    early = session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": "adk-1", "args_digest": "sha256:old"}))
    assert early.ok and "kept" in early.detail
    request = ApprovalRequest(target_id="adk-1", kind="tool", timeout_ms=60_000, args_digest="sha256:new")
    waiting = asyncio.create_task(session.request_approval(request))
    await wait_all_tasks_blocked()
    assert not waiting.done() and not sink.of("approval_granted")  # still waiting for a person
    now = session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": "adk-1", "args_digest": "sha256:new"}))
    assert now.ok
    assert (await waiting).decision == "approve"
