"""The gate's detach variant: ``gate_tool_call(detach_after_s=...)`` parks a call instead of timing it out."""

from __future__ import annotations

import asyncio

from goldfive_core import ControlKind, ControlMessage, InMemorySink, Session, SteeringConfig
from goldfive_core.events import payload_name
from goldfive_core.toolcall import Proceed, Skip, ToolCall, gate_tool_call, timed_out

CALL = ToolCall(call_id="c1", tool_name="pay", args={"to": "bob", "amount": 10})


def new_session(sink: InMemorySink, timeout_ms: int = 60_000) -> Session:
    return Session(sinks=[sink], config=SteeringConfig(tool_approval_timeout_ms=timeout_ms), has_channel=True)


def kinds(sink: InMemorySink) -> list[str]:
    return [payload_name(e) for e in sink.events]


async def test_detaching_skips_the_call_as_awaiting_and_leaves_the_request_open() -> None:
    sink = InMemorySink()
    session = new_session(sink)
    outcome = await gate_tool_call(session, CALL, needs_person=True, detach_after_s=0)
    assert isinstance(outcome, Skip) and outcome.reason == "awaiting_approval"
    assert "resumes when decided" in outcome.detail
    session.finish()  # the run ends: nothing is withdrawn, the store keeps the request pending
    assert "approval_requested" in kinds(sink)
    assert not {"approval_timed_out", "approval_cancelled", "drift_detected"} & set(kinds(sink))


async def test_a_decision_within_detach_after_is_applied_as_usual() -> None:
    session = new_session(InMemorySink())
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=True, detach_after_s=30.0))
    for _ in range(100):
        if session.approvals.is_open("c1"):
            break
        await asyncio.sleep(0)
    assert session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": "c1"})).ok
    outcome = await gated
    assert isinstance(outcome, Proceed) and outcome.decision is not None


async def test_detach_after_longer_than_the_timeout_times_out_as_before() -> None:
    sink = InMemorySink()
    session = new_session(sink, timeout_ms=1)
    outcome = await gate_tool_call(session, CALL, needs_person=True, detach_after_s=5.0)
    assert isinstance(outcome, Skip) and outcome.reason == "approval_timeout"
    assert {"approval_timed_out", "drift_detected"} <= set(kinds(sink))


async def test_timed_out_is_the_gate_answer_for_a_parked_call_that_expired() -> None:
    sink = InMemorySink()
    session = new_session(sink)
    outcome = timed_out(session, CALL, 600_000)
    assert outcome.reason == "approval_timeout" and "no decision within 600000 ms" in outcome.detail
    (drift,) = [e for e in sink.events if payload_name(e) == "drift_detected"]
    assert drift.drift_detected.kind == 37  # HUMAN_INTERVENTION_REQUIRED
