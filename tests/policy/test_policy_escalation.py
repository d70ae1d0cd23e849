"""Escalation on a virtual clock: nobody answers within the rule's escalate.after, the run announces it
(ApprovalEscalated) and the escalation group may answer from then on; an answer in time cancels it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import pytest_asyncio

from goldfive_core import ControlKind, ControlMessage, InMemorySink, Session, SteeringConfig
from goldfive_core.policy import parse_policy
from goldfive_core.toolcall import Proceed, ToolCall, gate_tool_call

POLICY = parse_policy(
    """
[[rule]]
name = "large transfers"
tool = "transfer_funds"
action = "ask"
approvers = ["role:finance"]
escalate = { after = "30m", to = ["role:cfo"] }
"""
)
CALL = ToolCall(call_id="c1", tool_name="transfer_funds", args={"amount": 20_000}, agent="treasurer")


class VirtualClock:
    """The event loop's clock, moved forward by the test (timers fire when their time has come)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.real = loop.time
        self.offset = 0.0

    def __call__(self) -> float:
        return self.real() + self.offset

    async def advance(self, seconds: float) -> None:
        self.offset += seconds
        for _ in range(5):
            await asyncio.sleep(0)


@pytest_asyncio.fixture
async def clock(monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    loop = asyncio.get_running_loop()
    virtual = VirtualClock(loop)
    monkeypatch.setattr(loop, "time", virtual)
    return virtual


async def asked(sink: InMemorySink) -> tuple[Session, asyncio.Task[Any]]:
    session = Session(
        sinks=[sink], config=SteeringConfig(tool_approval_timeout_ms=4 * 3_600_000), has_channel=True, policy=POLICY
    )
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=True))
    await sink.wait_for("approval_requested")
    return session, gated


async def test_nobody_answers_in_time_and_the_escalation_is_announced(clock: VirtualClock) -> None:
    sink = InMemorySink()
    session, gated = await asked(sink)
    await clock.advance(29 * 60)
    assert not sink.of("approval_escalated")
    await clock.advance(60)
    [escalated] = sink.of("approval_escalated")
    assert (escalated.approval_escalated.target_id, escalated.approval_escalated.to) == ("c1", "role:cfo")
    assert escalated.approval_escalated.rule == "large transfers"
    assert escalated.approval_escalated.after_ms == 30 * 60_000
    assert session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": "c1", "decided_by": "cy"})).ok
    assert isinstance(await gated, Proceed)


async def test_an_answer_in_time_cancels_the_escalation(clock: VirtualClock) -> None:
    sink = InMemorySink()
    session, gated = await asked(sink)
    await clock.advance(10 * 60)
    assert session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": "c1", "decided_by": "ana"})).ok
    await gated
    await clock.advance(3600)
    assert not sink.of("approval_escalated")
