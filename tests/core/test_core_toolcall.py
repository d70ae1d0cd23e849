"""The tool-call gate (goldfive_core.toolcall): one order for every adapter, typed outcomes."""

from __future__ import annotations

import asyncio
from typing import Any

from goldfive_core import ControlKind, ControlMessage, InMemorySink, Session, SteeringConfig, args_digest
from goldfive_core.toolcall import (
    PolicyVerdict,
    Proceed,
    Replay,
    Skip,
    ToolCall,
    gate_tool_call,
)

CALL = ToolCall(call_id="c1", tool_name="pay", args={"to": "bob", "amount": 10}, agent="clerk")


def new_session(sink: InMemorySink, *, channel: bool = True) -> Session:
    return Session(sinks=[sink], config=SteeringConfig(tool_approval_timeout_ms=60_000), has_channel=channel)


def send(session: Session, kind: ControlKind, **payload: Any) -> Any:
    return session.dispatch(ControlMessage(kind, payload))


async def until(predicate: Any) -> None:
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


async def test_a_pause_sent_while_a_call_waits_holds_the_approved_call_until_resume() -> None:
    sink = InMemorySink()
    session = new_session(sink)
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=True))
    await until(lambda: session.approvals.is_open("c1"))
    assert send(session, ControlKind.PAUSE, reason="lunch").ok
    assert send(session, ControlKind.APPROVE, target_id="c1", decided_by="ann").ok
    for _ in range(50):
        await asyncio.sleep(0)
    assert not gated.done()  # approved, but the run is paused: the body must not start
    assert send(session, ControlKind.RESUME).ok
    outcome = await gated
    assert isinstance(outcome, Proceed) and outcome.decision is not None and outcome.decision.decided_by == "ann"


async def test_a_cancel_while_an_approved_call_is_held_skips_it_and_stops_the_run() -> None:
    session = new_session(InMemorySink())
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=True))
    await until(lambda: session.approvals.is_open("c1"))
    send(session, ControlKind.PAUSE)
    send(session, ControlKind.APPROVE, target_id="c1")
    send(session, ControlKind.CANCEL, reason="stop")
    outcome = await gated
    assert isinstance(outcome, Skip) and outcome.reason == "run_cancelled" and outcome.stop_run


async def test_the_approve_reason_is_a_note_for_the_model() -> None:
    session = new_session(InMemorySink())
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=True))
    await until(lambda: session.approvals.is_open("c1"))
    send(session, ControlKind.APPROVE, target_id="c1", decided_by="ann", detail="only this once")
    outcome = await gated
    assert isinstance(outcome, Proceed)
    assert outcome.note == "A person (ann) approved this call: only this once"


async def test_no_channel_means_no_one_can_approve() -> None:
    outcome = await gate_tool_call(new_session(InMemorySink(), channel=False), CALL, needs_person=True)
    assert isinstance(outcome, Skip) and outcome.reason == "approval_unavailable"


async def test_a_steer_waiting_at_the_call_redirects_it_and_nudges_wait_for_the_next_turn() -> None:
    session = new_session(InMemorySink())
    session.add_guidance("use the sandbox account", "steer")
    session.add_guidance("you are slow", "nudge")
    outcome = await gate_tool_call(session, CALL, needs_person=False)
    assert isinstance(outcome, Skip) and outcome.reason == "goldfive_intervention"
    assert "use the sandbox account" in outcome.detail and "you are slow" not in outcome.detail
    assert [n.text for n in session.take_guidance()] == ["you are slow"]


async def test_a_policy_allows_asks_or_denies_before_anyone_is_asked() -> None:
    class Rules:
        def check(self, call: ToolCall, *, gated: bool) -> PolicyVerdict | None:
            amount = call.args.get("amount", 0)
            if amount > 100:
                return PolicyVerdict(action="deny", reason="too much")
            return PolicyVerdict(action="allow") if amount < 50 else None

    session = new_session(InMemorySink())
    allowed = await gate_tool_call(session, CALL, needs_person=True, policy=Rules())
    assert isinstance(allowed, Proceed) and allowed.decision is None
    big = ToolCall(call_id="c2", tool_name="pay", args={"amount": 500})
    denied = await gate_tool_call(session, big, needs_person=False, policy=Rules())
    assert isinstance(denied, Skip) and (denied.reason, denied.detail) == ("policy_denied", "too much")


class MemoryLedger:
    """A ledger in memory keyed by (call id, digest), to pin what the gate does with one."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], tuple[str, Any]] = {}

    async def lookup(self, session: Session, call: ToolCall, digest: str) -> Replay:
        row = self.rows.get((call.call_id, digest))
        if row is None:
            return Replay(kind="none")
        state, result = row
        return Replay(kind="done", result=result, detail="ran") if state == "done" else Replay(kind="in_doubt")

    async def begin(self, session: Session, call: ToolCall, digest: str) -> Replay | None:
        if (call.call_id, digest) in self.rows:
            return Replay(kind="in_doubt")
        self.rows[(call.call_id, digest)] = ("executing", None)
        return None

    async def finish(
        self, call_id: str, digest: str, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        self.rows[(call_id, digest)] = ("done", result)


async def test_the_ledger_makes_an_approved_call_run_at_most_once() -> None:
    ledger = MemoryLedger()
    session = new_session(InMemorySink())
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=True, ledger=ledger))
    await until(lambda: session.approvals.is_open("c1"))
    send(session, ControlKind.APPROVE, target_id="c1")
    outcome = await gated
    assert isinstance(outcome, Proceed)
    digest = args_digest("pay", CALL.args)
    assert ledger.rows[("c1", digest)] == ("executing", None)  # recorded before the body runs
    # The process dies here: a replay of the call is in doubt and is never run again.
    again = await gate_tool_call(new_session(InMemorySink()), CALL, needs_person=True, ledger=ledger)
    assert isinstance(again, Skip) and again.reason == "in_doubt"
    await outcome.finish(result={"paid": 10})
    done = await gate_tool_call(new_session(InMemorySink()), CALL, needs_person=True, ledger=ledger)
    assert isinstance(done, Skip) and (done.reason, done.result) == ("already_done", {"paid": 10})


async def test_an_announced_call_that_needs_nobody_after_all_drops_its_announcement() -> None:
    # The host announced the call (an early decision may come), then nobody had to decide: a decision sent
    # now is for nothing this run asks, and the announcement does not linger as an open record.
    session = new_session(InMemorySink())
    session.expect_approval("c1")
    session.expect_approval("other")
    outcome = await gate_tool_call(session, CALL, needs_person=False)
    assert isinstance(outcome, Proceed) and outcome.decision is None
    assert not session.approvals.is_open("c1") and session.approvals.is_open("other")
    ack = send(session, ControlKind.APPROVE, target_id="c1")
    assert not ack.ok and "unknown target_id" in ack.detail
