"""The Claude adapter gets the gate's at-most-once records, the approval prompt names what will run, the
approver's note reaches the model."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from claude_agent_sdk import create_sdk_mcp_server, tool

from goldfive_core import ControlKind
from goldfive_core.adapters.claude import FakeToolUse
from goldfive_core.store import SqliteStore
from goldfive_core.store.execution import StoreLedger
from tests.claude.claude_support import REFUND, REFUND_SCHEMA, Harness, Shop, converse, make_harness

ARGS = {"order_id": "42", "amount": 30}


def _hanging_shop(started: asyncio.Event) -> Shop:
    refunds: list[dict[str, Any]] = []

    @tool("refund", "Refund an order", REFUND_SCHEMA)
    async def refund(args: dict[str, Any]) -> dict[str, Any]:
        refunds.append(args)
        started.set()
        await asyncio.Event().wait()  # the process "dies" here: the test cancels the conversation
        return {"content": []}

    return Shop(refunds, [], create_sdk_mcp_server("shop", tools=[refund]))


async def test_a_tool_use_that_died_between_executing_and_done_is_in_doubt_and_never_run_again(
    tmp_path: Path,
) -> None:
    ledger = StoreLedger(SqliteStore(str(tmp_path / "gf.db")))
    started = asyncio.Event()
    first = make_harness(ledger=ledger)
    first = Harness(first.gf, first.channel, first.sink, _hanging_shop(started), first.cli)

    dying: list[asyncio.Task[FakeToolUse]] = []

    async def script() -> None:
        dying.append(asyncio.create_task(first.cli.use_tool("toolu_A", REFUND, ARGS)))
        await first.sink.wait_for("approval_requested")
        assert (await first.control(ControlKind.APPROVE, target_id="toolu_A")).ok
        await started.wait()
        raise RuntimeError("the agent's process died")

    with contextlib.suppress(Exception):
        async with first.run() as run:
            await converse(run, first.cli, "refund order 42", script)
    await asyncio.gather(*dying, return_exceptions=True)  # the dead process's tool call, gone with it
    assert first.shop.refunds == [ARGS]

    second = make_harness(ledger=ledger)  # a restarted agent replays the same tool use
    uses: list[FakeToolUse] = []

    async def replay() -> None:
        uses.append(await second.cli.use_tool("toolu_A", REFUND, ARGS))
        await second.cli.result()

    async with second.run() as run:
        await converse(run, second.cli, "refund order 42", replay)
    assert not uses[0].ran and second.shop.refunds == []
    assert uses[0].permission is not None and uses[0].permission["message"].startswith("in_doubt: ")
    assert second.sink.of("approval_requested") == []  # nobody is asked to approve it again
    drift = second.sink.of("drift_detected")[0].drift_detected
    assert drift.detail.startswith("in doubt: mcp__shop__refund for 'toolu_A'")


async def test_a_finished_tool_use_is_done_and_the_same_id_with_other_input_is_a_new_call(tmp_path: Path) -> None:
    ledger = StoreLedger(SqliteStore(str(tmp_path / "gf.db")))
    h = make_harness(ledger=ledger)
    other = {"order_id": "42", "amount": 5}

    async def script() -> None:
        task = asyncio.create_task(h.cli.use_tool("toolu_A", REFUND, ARGS))
        await h.sink.wait_for("approval_requested")
        assert (await h.control(ControlKind.APPROVE, target_id="toolu_A", detail="ok, once")).ok
        assert (await task).ran
        again = await h.cli.use_tool("toolu_A", REFUND, ARGS)  # the same call again: its recorded result
        assert not again.ran and again.permission is not None
        assert again.permission["message"].startswith("already_done: ")
        task = asyncio.create_task(h.cli.use_tool("toolu_A", REFUND, other))  # same id, other input: ask again
        await h.sink.wait_for("approval_requested", count=2)
        assert (await h.control(ControlKind.APPROVE, target_id="toolu_A")).ok
        assert (await task).ran
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund order 42", script)
    assert h.shop.refunds == [ARGS, other]
    # The approver's note reached the model, after the tool's result.
    assert any("A person approved this call: ok, once" in text for text in h.cli.model_context)


async def test_the_approval_prompt_names_the_bash_command_and_the_tool_input() -> None:
    h = make_harness(gate_tools=["Bash", REFUND])

    async def script() -> None:
        bash = asyncio.create_task(h.cli.use_tool("toolu_B", "Bash", {"command": "rm -rf /tmp/x", "timeout": 5}))
        (asked,) = await h.sink.wait_for("approval_requested")
        assert asked.approval_requested.prompt == "Allow Bash: rm -rf /tmp/x?"
        assert (await h.control(ControlKind.REJECT, target_id="toolu_B", detail="no")).ok
        await bash
        refund = asyncio.create_task(h.cli.use_tool("toolu_R", REFUND, ARGS))
        asked = (await h.sink.wait_for("approval_requested", count=2))[-1]
        assert asked.approval_requested.prompt == 'Allow mcp__shop__refund({"amount":30,"order_id":"42"})?'
        assert (await h.control(ControlKind.REJECT, target_id="toolu_R", detail="no")).ok
        await refund
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "clean up", script)
