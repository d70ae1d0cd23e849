"""MCP Tasks through the gateway: a task-augmented ``tools/call`` gets a task at once, polled to its result.

Real ``mcp`` SDK clients (stdio and streamable HTTP) in front of the demo bank; a person decides from another
process (``goldfive approve`` / ``reject`` on the same store). What is checked is what the client reads (the task's
status, its result) and what reached the upstream.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp_http_support import call_as_task, cancel_task, get_task, http_gateway, poll_until_done, task_result
from mcp_support import ROOT, gateway, text

TRANSFER = {"amount": 120, "to": "ACME"}


async def test_a_task_is_answered_at_once_and_polled_to_the_approved_result_over_stdio(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gw:
        caps = gw.client.session.server_capabilities
        assert caps is not None and caps.tasks is not None and caps.tasks.requests is not None
        tools = (await gw.client.list_tools()).tools
        assert {t.execution.task_support for t in tools if t.execution is not None} == {"optional"}
        created = await call_as_task(gw.client, "transfer_funds", TRANSFER)
        assert created.task.status == "working"  # answered before anyone decided
        request = await gw.wait_pending()
        polled = await get_task(gw.client, created.task.task_id)
        assert polled.status == "working"
        assert f"goldfive approve {request['target_id']}" in (polled.status_message or "")
        assert gw.upstream_calls() == []
        decided = await gw.goldfive("approve", request["target_id"], "--by", "ana")
        assert decided.returncode == 0, decided.stderr
        done = await poll_until_done(gw.client, created.task.task_id)
        assert done.status == "completed"
        result = await task_result(gw.client, created.task.task_id)
    assert not result.is_error and "sent 120.00 EUR to ACME" in text(result)
    assert result.meta is not None and result.meta["io.modelcontextprotocol/related-task"]["taskId"] == done.task_id
    sent = {"tool": "transfer_funds", "args": {"amount": 120, "to": "ACME", "currency": "EUR"}}
    assert gw.upstream_calls() == [sent]


async def test_a_rejected_task_fails_with_the_reason_over_http(tmp_path: Path) -> None:
    async with http_gateway(tmp_path) as gw, gw.connect() as client:
        created = await call_as_task(client, "transfer_funds", TRANSFER)
        request = await gw.wait_pending()
        decided = await gw.goldfive("reject", request["target_id"], "--by", "ana", "--reason", "not this month")
        assert decided.returncode == 0, decided.stderr
        done = await poll_until_done(client, created.task.task_id)
        result = await task_result(client, created.task.task_id)
    assert done.status == "failed" and "not this month" in (done.status_message or "")
    assert result.is_error and "not this month" in text(result)
    assert gw.upstream_calls() == []


async def test_tasks_cancel_withdraws_the_request_and_the_call_never_runs(tmp_path: Path) -> None:
    async with http_gateway(tmp_path) as gw, gw.connect() as client, gw.connect() as other:
        created = await call_as_task(client, "transfer_funds", TRANSFER)
        task_id = created.task.task_id
        request = await gw.wait_pending()
        with pytest.raises(MCPError, match="no task"):  # another session's task is not there for it
            await cancel_task(other, task_id)
        cancelled = await cancel_task(client, task_id)
        assert cancelled.status == "cancelled"
        await gw.wait_no_pending()
        late = await gw.goldfive("approve", request["target_id"])
        assert late.returncode != 0  # nothing left to approve
        assert (await get_task(client, task_id)).status == "cancelled"
        with pytest.raises(MCPError, match="cancelled"):
            await task_result(client, task_id)
        with pytest.raises(MCPError, match="already cancelled"):
            await cancel_task(client, task_id)
    cancelled_events = [e["approval_cancelled"] for e in await gw.events() if "approval_cancelled" in e]
    assert cancelled_events[0]["target_id"] == request["target_id"]
    assert gw.upstream_calls() == []


async def test_a_task_with_no_decision_in_time_fails(tmp_path: Path) -> None:
    async with http_gateway(tmp_path, "--approval-timeout", "0.3") as gw, gw.connect() as client:
        created = await call_as_task(client, "transfer_funds", TRANSFER)
        done = await poll_until_done(client, created.task.task_id)
        result = await task_result(client, created.task.task_id)
    assert done.status == "failed" and "approval_timeout" in (done.status_message or "")
    assert result.is_error and "Do not assume it was approved" in text(result)
    assert gw.upstream_calls() == []


async def test_a_session_that_ends_withdraws_its_waiting_task(tmp_path: Path) -> None:
    async with http_gateway(tmp_path) as gw:
        async with gw.connect() as client:
            await call_as_task(client, "transfer_funds", TRANSFER)
            request = await gw.wait_pending()
        await gw.wait_no_pending()  # the client left: its run ended and the request is withdrawn
        late = await gw.goldfive("approve", request["target_id"])
    assert late.returncode != 0
    assert gw.upstream_calls() == []


SLOW = """
import sys, time
from pathlib import Path
from mcp.server.mcpserver import MCPServer

server = MCPServer("slow")
here = Path(sys.argv[1])


@server.tool()
def settle() -> str:
    (here / "started").write_text("yes")
    for _ in range(3000):  # held until the test says go (a handshake), at most a minute if it never does
        if (here / "go").exists():
            return "settled"
        time.sleep(0.02)
    return "gave up"


server.run("stdio")
"""


async def test_a_task_whose_call_was_let_through_cannot_be_cancelled(tmp_path: Path) -> None:
    slow = tmp_path / "slow.py"
    slow.write_text(SLOW)
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(tmp_path / "g.db"), "--allow", "settle"]
    params = StdioServerParameters(
        command=sys.executable, args=[*argv, "--upstream", f"s={sys.executable} {slow} {tmp_path}"], cwd=str(ROOT)
    )
    async with Client(params, mode="legacy") as client:
        created = await call_as_task(client, "settle", {})
        for _ in range(600):  # until the upstream runs it
            if (tmp_path / "started").exists():
                break
            await asyncio.sleep(0.05)
        with pytest.raises(MCPError, match="running upstream"):  # it ran: the client is not told it did not
            await cancel_task(client, created.task.task_id)
        (tmp_path / "go").write_text("go")
        done = await poll_until_done(client, created.task.task_id)
        result = await task_result(client, created.task.task_id)
    assert done.status == "completed" and text(result) == "settled"
