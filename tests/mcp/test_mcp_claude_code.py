"""The Claude Code CLI bundled in claude-agent-sdk, with ``goldfive mcp`` as one of its MCP servers.

Everything is real but the model: the SDK starts the bundled CLI, the CLI starts ``goldfive mcp`` over stdio (the
``mcp_servers`` entry a user writes in ``.mcp.json``), the gateway starts the demo bank. The model is a local
stand-in of the Messages API on 127.0.0.1 (tests/claude/mock_messages_api.py), scripted to ask for the gateway's
tool and to record the next request, whose ``tool_result`` is what the model would read. A person decides from
another process with the ``goldfive`` command on the gateway's SQLite store. Offline: the CLI talks only to the
stand-in (a dummy key, its own HOME, no nonessential traffic).

Skipped only when the bundled CLI is absent. Run alone: ``pytest -m claude_cli``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

claude_agent_sdk = pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk (and its bundled CLI) is absent")

from claude_agent_sdk import ClaudeAgentOptions, Message, ResultMessage, query  # noqa: E402
from claude_agent_sdk.types import McpStdioServerConfig  # noqa: E402
from mcp_support import DEMO, Gateway  # noqa: E402
from test_mcp_elicit_serve import Site, site  # noqa: E402

from tests.claude.mock_messages_api import Block, MockMessagesAPI, offline_env, text, tool_use  # noqa: E402

CLI = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"

pytestmark = [
    pytest.mark.skipif(not CLI.is_file(), reason=f"the Claude Code CLI bundled in claude-agent-sdk is absent: {CLI}"),
    pytest.mark.claude_cli,
]

__all__ = ["site"]  # the fixture: a goldfive serve with ana (approver) and bot (agent), the gateway trusting its key

TRANSFER = "mcp__bank__transfer_funds"
"""The name Claude Code gives the gateway's ``transfer_funds`` (``mcp__<server>__<tool>``)."""


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of a Messages request: what the CLI hands the model from its tools."""
    return [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]


def said(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if part.get("type") == "text")


class Model:
    """The scripted model: asks for each call in turn, then says it is done; every request is kept.

    ``before(n)``, when given, runs before the model answers the request that carries ``n`` tool results (in the
    stand-in's thread: what a person does while the model thinks)."""

    def __init__(
        self, *calls: dict[str, Any], before: Callable[[int], None] | None = None, tool: str = TRANSFER
    ) -> None:
        self.calls = calls
        self.before = before
        self.tool = tool

    def __call__(self, body: dict[str, Any]) -> list[Block]:
        done = len(tool_results(body))
        if self.before is not None:
            self.before(done)
        if done < len(self.calls):
            return [tool_use(f"toolu_01Gateway{done}", self.tool, self.calls[done])]
        return [text("done")]


async def converse(
    tmp: Path, model: Model, person: Callable[[Gateway], Awaitable[None]], *flags: str
) -> tuple[MockMessagesAPI, list[Message]]:
    """One Claude Code run with the gateway (``flags``) as its ``bank`` MCP server; ``person`` decides meanwhile."""
    gw = Gateway(tmp, client=None)
    gateway = [sys.executable, "-m", "goldfive_core.cli", "mcp", "--db", str(gw.db), *flags]
    gateway += ["--upstream", f"bank={sys.executable} {DEMO} --calls {gw.calls}"]
    server: McpStdioServerConfig = {"type": "stdio", "command": gateway[0], "args": gateway[1:]}
    return await claude_code(tmp, model, "bank", server, person(gw), "pay ACME")


async def claude_code(
    tmp: Path, model: Model, name: str, server: McpStdioServerConfig, person: Awaitable[None], prompt: str
) -> tuple[MockMessagesAPI, list[Message]]:
    """One Claude Code run told ``prompt``, with ``server`` (the gateway) as its MCP server ``name``; ``person``
    decides meanwhile."""
    home = tmp / "home"
    home.mkdir()
    seen: list[Message] = []
    with MockMessagesAPI(model) as api:
        options = ClaudeAgentOptions(
            mcp_servers={name: server},
            allowed_tools=[f"mcp__{name}"],  # the client lets the gateway's tools through: goldfive's policy decides
            tools=[],
            setting_sources=[],
            max_turns=6,
            env=offline_env(api.url, str(home)),  # the stand-in is the CLI's only API; no other traffic
            cwd=str(home),
            model="claude-mock",
        )
        async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
            deciding = tg.create_task(person)
            async for message in query(prompt=prompt, options=options):
                seen.append(message)
            await deciding
    return api, seen


async def test_a_waiting_call_is_approved_from_another_process_with_an_edit_and_runs_once(tmp_path: Path) -> None:
    async def person(gw: Gateway) -> None:
        request = await gw.wait_pending()
        assert request["tool_name"] == "transfer_funds" and request["args"] == {"amount": 120, "to": "ACME"}
        assert request["metadata"]["mcp_client"].startswith("claude-code")  # who asked: the CLI's clientInfo
        assert gw.upstream_calls() == []  # the call waits for the person
        edit = json.dumps({"amount": 100, "to": "ACME"})
        decided = await gw.goldfive("approve", request["target_id"], "--by", "ana", "--edit", edit)
        assert decided.returncode == 0, decided.stderr

    api, seen = await converse(tmp_path, Model({"amount": 120, "to": "ACME"}), person, "--gate", "transfer_funds")
    gw = Gateway(tmp_path, client=None)
    assert gw.upstream_calls() == [{"tool": "transfer_funds", "args": {"amount": 100, "to": "ACME", "currency": "EUR"}}]
    (result,) = tool_results(api.requests[-1])
    assert not result.get("is_error") and "sent 100.00 EUR to ACME" in said(result)
    assert isinstance(seen[-1], ResultMessage) and seen[-1].result == "done"


async def test_a_rejection_reaches_the_model_and_a_denied_call_never_reaches_the_upstream(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rule]]\nname = "big transfers"\ntool = "transfer_funds"\nwhen = "args.amount > 1000"\n'
        'action = "deny"\nreason = "transfers over 1000 need the finance desk"\n'
    )

    async def person(gw: Gateway) -> None:
        request = await gw.wait_pending()
        assert request["args"] == {"amount": 120, "to": "ACME"}
        decided = await gw.goldfive("reject", request["target_id"], "--by", "ana", "--reason", "ACME was paid Monday")
        assert decided.returncode == 0, decided.stderr

    model = Model({"amount": 120, "to": "ACME"}, {"amount": 5000, "to": "ACME"})
    api, _ = await converse(tmp_path, model, person, "--policy", str(policy))
    rejected, denied = tool_results(api.requests[-1])
    assert rejected["is_error"] and "A person (ana) rejected this transfer_funds call" in said(rejected)
    assert "ACME was paid Monday" in said(rejected)
    assert denied["is_error"] and "transfers over 1000 need the finance desk" in said(denied)
    assert Gateway(tmp_path, client=None).upstream_calls() == []


async def test_a_steer_reaches_the_model_instead_of_the_call(tmp_path: Path) -> None:
    gw = Gateway(tmp_path, client=None)

    def steer_while_the_model_thinks(done: int) -> None:
        if done == 0:  # the gateway's run is live (its tools are in this request): steer it before the call comes
            cmd = [sys.executable, "-m", "goldfive_core.cli", "--db", str(gw.db), "steer", "pay Initech, not ACME"]
            steered = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            assert steered.returncode == 0, steered.stderr

    async def nobody(gw: Gateway) -> None:
        return None

    model = Model({"amount": 120, "to": "ACME"}, {"amount": 80, "to": "Initech"}, before=steer_while_the_model_thinks)
    api, _ = await converse(tmp_path, model, nobody, "--default", "allow")
    assert TRANSFER in [tool["name"] for tool in api.requests[0]["tools"]]
    redirected, ran = tool_results(api.requests[-1])
    assert redirected["is_error"] and "The people supervising this session say:" in said(redirected)
    assert "- pay Initech, not ACME" in said(redirected)
    assert not ran.get("is_error") and "sent 80.00 EUR to Initech" in said(ran)
    assert gw.upstream_calls() == [
        {"tool": "transfer_funds", "args": {"amount": 80, "to": "Initech", "currency": "EUR"}}
    ]  # the steered call never reached the bank


async def test_an_elicitation_is_answered_from_the_inbox_and_its_result_reaches_the_model(site: Site) -> None:
    """The upstream's question while Claude Code's call runs is a ``kind="input"`` request in ``goldfive serve``;
    ana submits its form through the inbox's route; the upstream gets exactly her answer, the model its result."""
    answer = {"name": "Ana", "guests": 4, "vegetarian": True}

    async def person() -> None:
        card = await site.answer_form(answer)
        assert card["prompt"] == "Booking at Chez Ana: who is it for, and how many?"
        assert card["metadata"]["mcp_client"].startswith("claude-code")  # who asked: the CLI's clientInfo

    params = site.gateway_params(*site.as_agent())
    server: McpStdioServerConfig = {"type": "stdio", "command": params.command, "args": params.args}
    server["env"] = {"GOLDFIVE_TRUST_KEY": site.trust}
    model = Model({"restaurant": "Chez Ana"}, tool="mcp__bookings__book_table")
    api, seen = await claude_code(site.tmp, model, "bookings", server, person(), "book a table at Chez Ana")
    assert site.upstream_calls() == [
        {"tool": "book_table", "action": "accept", "data": {**answer, "seating": "inside"}}
    ]  # exactly ana's answer (the form's defaults filled in by the upstream), once
    (result,) = tool_results(api.requests[-1])
    assert not result.get("is_error") and "booked Chez Ana for Ana (4)" in said(result)
    assert isinstance(seen[-1], ResultMessage) and seen[-1].result == "done"
