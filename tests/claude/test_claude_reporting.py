"""The reporting tools as goldfive's in-process MCP server: Flow A and the rest, through MCP tools/call."""

from __future__ import annotations

import asyncio
import json

from goldfive_core import ControlKind
from tests.claude.claude_support import REFUND, Harness, converse, make_harness

ASK = "mcp__goldfive__report_awaiting_approval"


async def test_report_awaiting_approval_is_flow_a_through_mcp(h: Harness) -> None:
    async def script() -> None:
        started = await h.cli.use_tool(
            "toolu_0", "mcp__goldfive__report_task_started", {"task_id": "refund-42", "title": "Refund order 42"}
        )
        assert json.loads(started.output)["ok"] is True
        task = asyncio.create_task(h.cli.use_tool("toolu_1", ASK, {"prompt": "Refund 30 EUR on order 42?"}))
        (requested,) = await h.sink.wait_for("approval_requested")
        req = requested.approval_requested
        assert (req.target_id, req.kind, req.task_id, req.prompt) == (
            "refund-42",
            "task",
            "refund-42",
            "Refund 30 EUR on order 42?",
        )
        assert h.sink.of("task_blocked")[-1].task_blocked.blocker == "awaiting_approval"
        assert (await h.control(ControlKind.APPROVE, target_id="refund-42", detail="fine by me")).ok
        use = await task
        assert use.allowed and not use.is_error
        assert json.loads(use.output) == {"decision": "approve", "detail": "fine by me"}
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)
    assert h.sink.of("approval_granted")[0].approval_granted.target_id == "refund-42"


async def test_bad_reporting_arguments_come_back_as_a_tool_error(h: Harness) -> None:
    async def script() -> None:
        use = await h.cli.use_tool("toolu_B", "mcp__goldfive__report_task_progress", {"fraction": 2})
        assert use.is_error and "message" in use.output
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "progress", script)
    assert h.sink.of("task_progress") == []


async def test_without_a_control_channel_nothing_gated_runs_and_flow_a_says_unavailable() -> None:
    h = make_harness(channel=False)

    async def script() -> None:
        refused = await h.cli.use_tool("toolu_N", REFUND, {"order_id": "1", "amount": 1})
        assert not refused.ran and refused.output.startswith("approval_unavailable")
        asked = await h.cli.use_tool("toolu_F", ASK, {"prompt": "may I?"})
        assert json.loads(asked.output)["decision"] == "unavailable"
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)
    assert h.shop.refunds == [] and h.sink.of("approval_requested") == []
