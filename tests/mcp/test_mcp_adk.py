"""An ADK agent whose McpToolset points at ``goldfive mcp``: ADK's own MCP client, the gateway, the demo bank.

The model is scripted (offline); everything else is real: ADK's Runner and McpToolset start the gateway over
stdio, the gateway starts the demo bank, and a person decides from another process with the ``goldfive``
command. What is checked is what the model reads in the tool's response and what reached the bank.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
from google.genai import types
from mcp import StdioServerParameters
from mcp_support import DEMO, ROOT, Gateway
from test_mcp_elicit_serve import Site, site

from goldfive_core.testing import Call, ScriptedModel, SeenRequest

Person = Callable[[Gateway], Awaitable[None]]

__all__ = ["site"]  # the fixture: a goldfive serve with ana (approver) and bot (agent), the gateway trusting its key


async def run_teller(tmp: Path, turns: list[Any], person: Person, *flags: str) -> Gateway:
    """An ADK agent on ``turns`` (a ScriptedModel's) with the gateway (``flags``) as its McpToolset."""
    gw = Gateway(tmp, client=None)
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(gw.db), *flags]
    argv += ["--upstream", f"bank={sys.executable} {DEMO} --calls {gw.calls}"]
    server = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    await run_agent(server, turns, person(gw), "pay ACME")
    return gw


async def run_agent(server: StdioServerParameters, turns: list[Any], person: Awaitable[None], said: str) -> None:
    """A real ADK Runner/App whose agent plays ``turns`` with ``server`` (the gateway) as its McpToolset, told
    ``said`` by its user; ``person`` decides meanwhile, in this process, through another one."""
    toolset = McpToolset(connection_params=StdioConnectionParams(server_params=server, timeout=60))
    agent = LlmAgent(name="teller", model=ScriptedModel(turns), tools=[toolset])
    runner = InMemoryRunner(app=App(name="bank", root_agent=agent))
    try:
        session = await runner.session_service.create_session(app_name="bank", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text=said)])
        async with asyncio.timeout(50), asyncio.TaskGroup() as tg:
            deciding = tg.create_task(person)
            async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
                pass
            await deciding
    finally:
        await toolset.close()


def heard(into: list[Any]) -> Callable[[SeenRequest], str]:
    """A model turn that keeps the tool response the model was given, then says it is done."""

    def turn(seen: SeenRequest) -> str:
        into.append(seen.last_response)
        return "done"

    return turn


async def test_an_adk_agent_through_the_gateway_hears_the_rejection(tmp_path: Path) -> None:
    told: list[Any] = []

    async def person(gw: Gateway) -> None:
        request = await gw.wait_pending()
        why = "ACME was paid on Monday"
        decided = await gw.goldfive("reject", request["target_id"], "--by", "ana", "--reason", why)
        assert decided.returncode == 0, decided.stderr

    turns = [
        [Call("read_balance", {"account": "ACME"})],
        [Call("transfer_funds", {"amount": 120, "to": "ACME"})],
        heard(told),
    ]
    gw = await run_teller(tmp_path, turns, person, "--allow", "read_balance")
    assert "ACME was paid on Monday" in json.dumps(told)
    assert [call["tool"] for call in gw.upstream_calls()] == ["read_balance"]


async def test_an_adk_agents_call_waits_is_approved_with_an_edit_once_and_a_denied_one_never_runs(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rule]]\nname = "big transfers"\ntool = "transfer_funds"\nwhen = "args.amount > 1000"\n'
        'action = "deny"\nreason = "transfers over 1000 need the finance desk"\n'
    )
    approved: list[Any] = []
    denied: list[Any] = []

    async def person(gw: Gateway) -> None:
        request = await gw.wait_pending()
        assert request["args"] == {"amount": 120, "to": "ACME"}
        assert gw.upstream_calls() == []  # the call waits for the person
        edit = json.dumps({"amount": 100, "to": "ACME"})
        decided = await gw.goldfive("approve", request["target_id"], "--by", "ana", "--edit", edit)
        assert decided.returncode == 0, decided.stderr

    def after_the_approval(seen: SeenRequest) -> list[Call]:
        approved.append(seen.last_response)
        return [Call("transfer_funds", {"amount": 5000, "to": "ACME"})]

    turns = [[Call("transfer_funds", {"amount": 120, "to": "ACME"})], after_the_approval, heard(denied)]
    gw = await run_teller(tmp_path, turns, person, "--policy", str(policy))
    assert "sent 100.00 EUR to ACME" in json.dumps(approved)
    assert "transfers over 1000 need the finance desk" in json.dumps(denied)
    assert gw.upstream_calls() == [{"tool": "transfer_funds", "args": {"amount": 100, "to": "ACME", "currency": "EUR"}}]


async def test_an_adk_agents_elicitation_is_answered_from_the_inbox_and_the_model_reads_the_result(site: Site) -> None:
    """The upstream's question (``elicitation/create``) is a ``kind="input"`` request in ``goldfive serve``; ana
    submits its form through the inbox's route; the upstream gets exactly her answer, and the model its result."""
    told: list[Any] = []
    answer = {"name": "Ana", "guests": 3, "seating": "terrace"}

    async def person() -> None:
        card = await site.answer_form(answer)
        assert card["prompt"] == "Booking at Chez Ana: who is it for, and how many?"
        assert card["metadata"]["mcp_tool"] == "book_table" and card["metadata"]["mcp_upstream"] == "bookings"

    turns = [[Call("book_table", {"restaurant": "Chez Ana"})], heard(told)]
    await run_agent(site.gateway_params(*site.as_agent()), turns, person(), "book a table at Chez Ana")
    assert site.upstream_calls() == [
        {"tool": "book_table", "action": "accept", "data": {**answer, "vegetarian": False}}
    ]  # exactly ana's answer (the form's defaults filled in by the upstream), once
    assert "booked Chez Ana for Ana (3)" in json.dumps(told)
