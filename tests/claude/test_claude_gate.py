"""The step gate: PAUSE / GOLDFIVE_PAUSE_ESCALATE hold tool uses, STEER reaches the model, CANCEL stops."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from goldfive_core import ControlKind, Detector, Drift, DriftKind, DriftSeverity, InterventionLevel, RunCancelledError
from goldfive_core.session import Session
from tests.claude.claude_support import LOOKUP, REFUND, Harness, converse

ARGS = {"order_id": "42", "amount": 30}


async def _held(
    h: Harness, tool_use_id: str, name: str = LOOKUP, args: dict[str, Any] | None = None
) -> asyncio.Task[Any]:
    """Start a tool use and return once its permission request is waiting at the gate."""
    task = asyncio.create_task(h.cli.use_tool(tool_use_id, name, args or {"order_id": "1"}))
    await h.cli.wait_sent(f"perm-{tool_use_id}")
    # A round trip through the SDK: it handles requests in arrival order, so the permission
    # callback has reached the gate before this answer comes back.
    await h.cli.mcp_handshake("goldfive")
    assert f"perm-{tool_use_id}" in h.cli.pending_requests()
    return task


@pytest.mark.parametrize("kind", [ControlKind.PAUSE, ControlKind.GOLDFIVE_PAUSE_ESCALATE])
async def test_pause_holds_the_next_tool_use_until_resume(h: Harness, kind: ControlKind) -> None:
    async def script() -> None:
        assert (await h.control(kind, reason="hold on")).ok
        task = await _held(h, "toolu_P")
        assert h.shop.lookups == []
        assert (await h.control(ControlKind.RESUME)).ok
        use = await task
        assert use.allowed and use.ran
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "look up", script)
    assert h.shop.lookups == [{"order_id": "1"}]
    assert run.result is not None and run.result.status == "COMPLETED"


async def test_a_steer_releases_a_held_call_and_its_text_reaches_the_model(h: Harness) -> None:
    async def script() -> None:
        assert (await h.control(ControlKind.PAUSE)).ok
        task = await _held(h, "toolu_S", REFUND)
        ack = await h.control(ControlKind.STEER, text="refund only half, then stop")
        assert ack.ok and "resumed" in ack.detail
        use = await task
        assert use.permission is not None and use.permission["behavior"] == "deny"
        assert "refund only half, then stop" in use.permission["message"]
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)
    assert h.shop.refunds == []
    assert any("refund only half, then stop" in text for text in h.cli.model_context)
    assert h.sink.of("approval_requested") == []  # the call was replaced, never asked about


async def test_a_steer_at_the_end_of_a_turn_reaches_the_model_through_the_stop_hook(h: Harness) -> None:
    async def script() -> None:
        assert (await h.control(ControlKind.STEER, text="also email the customer")).ok
        notes = await h.cli.stop()
        assert len(notes) == 1 and "also email the customer" in notes[0]
        assert await h.cli.stop() == []  # delivered once
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)


async def test_an_injected_message_rides_on_the_next_tool_result_and_the_tool_still_runs(h: Harness) -> None:
    async def script() -> None:
        assert (await h.control(ControlKind.INJECT_MESSAGE, text="the customer is a VIP")).ok
        use = await h.cli.use_tool("toolu_I", LOOKUP, {"order_id": "9"})
        assert use.ran
        assert h.cli.model_context[-1].endswith("- the customer is a VIP")  # PostToolUse additionalContext
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "look up", script)
    assert h.shop.lookups == [{"order_id": "9"}]


async def test_cancel_interrupts_the_client_denies_the_pending_call_and_aborts_the_run(h: Harness) -> None:
    async def script() -> None:
        task = asyncio.create_task(h.cli.use_tool("toolu_K", REFUND, ARGS))
        await h.sink.wait_for("approval_requested")
        ack = await h.control(ControlKind.CANCEL, reason="wrong customer")
        assert ack.ok, ack.detail
        await h.cli.interrupted.wait()
        use = await task
        assert not use.ran
        assert use.permission is None or (use.permission["behavior"], use.permission["interrupt"]) == ("deny", True)
        await h.cli.result(subtype="error_during_execution", is_error=True)

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)
        with pytest.raises(RunCancelledError):
            await run.query("and another one")
    assert h.shop.refunds == [] and h.cli.interrupts == 1
    assert h.sink.of("approval_cancelled")[0].approval_cancelled.target_id == "toolu_K"
    aborted = h.sink.of("run_aborted")[0].run_aborted
    assert aborted.reason == "wrong customer"
    assert run.result is not None and run.result.status == "CANCELLED"


async def test_cancel_while_paused_denies_the_held_call_with_interrupt(h: Harness) -> None:
    async def script() -> None:
        assert (await h.control(ControlKind.PAUSE)).ok
        task = await _held(h, "toolu_H")
        assert (await h.control(ControlKind.CANCEL)).ok
        use = await task
        assert not use.ran
        assert use.permission is None or (use.permission["behavior"], use.permission["interrupt"]) == ("deny", True)
        await h.cli.result(subtype="error_during_execution", is_error=True)

    async with h.run() as run:
        await converse(run, h.cli, "look up", script)
    assert h.shop.lookups == []
    assert run.result is not None and run.result.status == "CANCELLED"


class _Recorder(Detector):
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def on_tool_call(self, session: Session, tool_name: str, args: Mapping[str, Any]) -> Drift | None:
        self.calls.append((tool_name, dict(args)))
        if tool_name == REFUND:
            return Drift(DriftKind.LOOPING_TOOL_CALL, DriftSeverity.CRITICAL, "third refund in a row")
        return None


class _Reinvoke:
    """A steerer that answers every drift with CANCEL_REINVOKE and a corrective note."""

    def __init__(self, session: Session) -> None:
        self.session = session

    async def handle_drift(self, drift: Drift) -> InterventionLevel:
        self.session.emit_drift(drift, InterventionLevel.CANCEL_REINVOKE)
        self.session.add_guidance(f"stop repeating yourself ({drift.detail}); look the order up first", "nudge")
        return InterventionLevel.CANCEL_REINVOKE


async def test_detectors_see_every_call_and_a_reinvoke_replaces_the_call_with_the_note(h: Harness) -> None:
    recorder = _Recorder()
    h.gf.session_setup = lambda session, channel: _Reinvoke(session)

    async def script() -> None:
        h.gf.router.sessions[0].detectors.append(recorder)
        looked = await h.cli.use_tool("toolu_1", LOOKUP, {"order_id": "1"})
        refused = await h.cli.use_tool("toolu_2", REFUND, ARGS)
        assert looked.ran and not refused.ran
        assert refused.permission is not None and "look the order up first" in refused.permission["message"]
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)
    assert recorder.calls == [(LOOKUP, {"order_id": "1"}), (REFUND, ARGS)]
    assert h.sink.of("drift_detected")[0].drift_detected.ladder_level == InterventionLevel.CANCEL_REINVOKE
    assert h.sink.of("approval_requested") == []


async def test_the_default_ladder_nudges_then_replaces_then_escalates_a_looping_call(h: Harness) -> None:
    same = {"order_id": "7"}

    async def script() -> None:
        for n in range(1, 5):
            use = await h.cli.use_tool(f"toolu_{n}", LOOKUP, same)
            assert use.ran, n
            if n == 3:  # WARNING -> NUDGE: the note rides on this call's result
                assert "[goldfive] LOOPING_TOOL_CALL" in h.cli.model_context[-1]
        fifth = await h.cli.use_tool("toolu_5", LOOKUP, same)  # CRITICAL -> CANCEL_REINVOKE: replaced by the note
        assert not fifth.ran and fifth.permission is not None
        assert "[goldfive] LOOPING_TOOL_CALL" in fifth.permission["message"]
        sixth = await _held(h, "toolu_6", args=same)  # CRITICAL again -> PAUSE_ESCALATE: held for a person
        session = h.gf.router.sessions[0]
        assert session.paused and session.pending_drift is not None
        assert (await h.control(ControlKind.RESUME)).ok
        held = await sixth  # the gate is the same for every adapter: an escalated call is not run, even after RESUME
        assert not held.ran and held.permission is not None and "PAUSE_ESCALATE" in held.permission["message"]
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "look up 7", script)
    levels = [e.drift_detected.ladder_level for e in h.sink.of("drift_detected")]
    assert levels[:3] == [InterventionLevel.NUDGE, InterventionLevel.CANCEL_REINVOKE, InterventionLevel.PAUSE_ESCALATE]
    assert len(h.shop.lookups) == 4
    assert run.result is not None and run.result.status == "COMPLETED"


async def test_cancelling_the_caller_withdraws_the_approval_and_aborts_the_run(h: Harness) -> None:
    async def body_with_run() -> None:
        async with h.run() as run:
            task = asyncio.create_task(h.cli.use_tool("toolu_Z", REFUND, ARGS))
            await run.query("refund")
            await h.cli.next_prompt()
            await h.sink.wait_for("approval_requested")
            task.cancel()
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await body_with_run()
    assert h.sink.of("approval_cancelled")[0].approval_cancelled.target_id == "toolu_Z"
    assert h.sink.kinds()[-1] == "run_aborted"
    assert h.shop.refunds == []
