"""Context on every card: what the person asked, who started the run, the last steps before the request, the rule
that asked and why, and a link to the run — in GET /api/approvals, GET /api/approvals/{id} and ``goldfive show``,
derived from the run's own record; a host that records nothing says so."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

from server_support import Server, eventually, goldfive
from store_support import REPO, make_event

from goldfive_core import AgentTools, InMemorySink, Task, wrap
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.steps import STEP_TEXT_LIMIT
from goldfive_core.store import StoreChannel
from goldfive_core.store.context import NO_CONTEXT, NO_STEPS

sys.path.insert(0, str(REPO / "tests" / "browser"))
import context_agent  # the agent the browser test runs too


async def _card(srv: Server, tool: str) -> dict[str, Any]:
    async def look() -> dict[str, Any] | None:
        items = (await srv.get("/api/approvals")).json()["approvals"]
        return next((i for i in items if i["tool_name"] == tool), None)

    found: dict[str, Any] = await eventually(look, f"the {tool} request in the inbox", limit_s=60)
    return found


def _start_agent(srv: Server, tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "browser" / "context_agent.py")],
        env=srv.backend.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )


async def test_an_adk_card_says_what_maria_asked_and_the_two_calls_before_the_transfer(
    sqlite_server: Server, tmp_path: Path
) -> None:
    srv = sqlite_server
    agent = _start_agent(srv, tmp_path)
    try:
        card = await _card(srv, "transfer_funds")
        context = card["context"]
        assert context["input"] == context_agent.ASKED  # as asked; the page renders it inert
        assert (context["agent"], context["adapter"], context["on_behalf_of"]) == (
            "treasurer",
            "adk",
            context_agent.USER,
        )
        assert context["started_by"]  # the agent process's user (GOLDFIVE_USER or the login)
        steps = [(s["kind"], s["name"]) for s in context["steps"]]
        assert steps == [
            ("model_text", "treasurer"),
            ("tool_call", "lookup_invoice"),
            ("tool_result", "lookup_invoice"),
            ("tool_call", "check_balance"),
            ("tool_result", "check_balance"),
        ]  # the transfer's own call is the card itself, not a step before it
        said, looked_up, memo = (s["text"] for s in context["steps"][:3])
        assert said == context_agent.SAID and looked_up == '{"invoice":"INV-7"}'
        assert len(memo) == STEP_TEXT_LIMIT and memo.endswith("…") and "<script>" in memo  # clipped, kept as text
        assert context["why"] == "the tool asks for confirmation before it runs" and context["note"] == ""
        assert context["run_link"] == f"#/runs/{card['run_id']}"
        detail = (await srv.get(f"/api/approvals/{card['target_id']}")).json()
        assert detail["context"] == context
        shown = await asyncio.to_thread(goldfive, srv.backend, "show", card["target_id"])
        assert shown.returncode == 0, shown.stderr
        assert f"for {context_agent.USER}" in shown.stdout and "called     lookup_invoice: " in shown.stdout
        assert "\u202e" not in shown.stdout and "asked      Pay the ACME invoice" in shown.stdout
        resp = await srv.post(f"/api/approvals/{card['target_id']}/approve", {"request_id": card["request_id"]})
        assert resp.status_code == 200, resp.text
        out, err = await asyncio.to_thread(agent.communicate, timeout=60)
        assert "result: {'sent': 250, 'to': 'ACME Corp'}" in out, out + err
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate()


async def test_a_callable_agent_card_shows_its_input_and_says_it_records_no_steps(server: Server) -> None:
    channel = StoreChannel(server.backend.open(), sweep_interval_s=0.2)

    async def agent(task: Task, tools: AgentTools) -> Any:
        return await tools.report_awaiting_approval("Send the quarterly report?", timeout_ms=120_000)

    run = asyncio.create_task(
        wrap(agent, control=channel, sinks=[channel.sink, InMemorySink()]).run("Send Q3 to the board")
    )
    try:

        async def asked() -> dict[str, Any] | None:
            items = (await server.get("/api/approvals")).json()["approvals"]
            return items[0] if items else None

        card = await eventually(asked, "the task's request")
        context = card["context"]
        assert (context["input"], context["adapter"], context["steps"]) == ("Send Q3 to the board", "callable", [])
        assert context["note"] == NO_STEPS and not context["records_steps"]
        assert context["why"] == "the agent asked for approval of its task (report_awaiting_approval)"
        resp = await server.post(f"/api/approvals/{card['target_id']}/reject", {"reason": "not yet"})
        assert resp.status_code == 200, resp.text
        await run
    finally:
        await channel.aclose()


async def test_a_request_whose_host_recorded_nothing_says_no_context_from_this_host(server: Server) -> None:
    ask = events_pb2.ApprovalRequested(
        target_id="bare-1",
        kind="tool",
        prompt="Allow wipe?",
        metadata={"tool_name": "wipe", "args_json": "{}", "policy_rule": "wipes", "policy_action": "ask"},
        request_id="req-bare",
    )
    started = events_pb2.RunStarted(adapter="elsewhere")
    server.store.append_events([make_event("run-b", 0, started), make_event("run-b", 1, ask)], pid=1, host="h")
    detail = (await server.get("/api/approvals/bare-1")).json()
    context = detail["context"]
    assert (context["input"], context["steps"], context["note"]) == ("", [], NO_CONTEXT)
    assert (context["rule"], context["why"]) == ("wipes", "the rule 'wipes' asks a person")
