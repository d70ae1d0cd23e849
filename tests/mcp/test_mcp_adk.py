"""An ADK agent whose McpToolset points at ``goldfive mcp``: ADK's own MCP client, the gateway, the demo bank.

The model is scripted (offline); everything else is real: ADK's Runner and McpToolset start the gateway over
stdio, the gateway starts the demo bank, and a person rejects the transfer from another process with the
``goldfive`` command. The model reads the person's reason in the tool's response; the bank never sees the call.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from google.adk.tools.mcp_tool import McpToolset, StdioConnectionParams
from google.genai import types
from mcp import StdioServerParameters
from mcp_support import DEMO, ROOT

from goldfive_core.testing import Call, ScriptedModel, SeenRequest


async def test_an_adk_agent_through_the_gateway_hears_the_rejection(tmp_path: Path) -> None:
    db, calls = tmp_path / "goldfive.db", tmp_path / "calls.jsonl"
    upstream = f"bank={sys.executable} {DEMO} --calls {calls}"
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(db), "--allow", "read_balance", "--upstream", upstream]
    gateway = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    heard: list[Any] = []

    def after_transfer(seen: SeenRequest) -> str:
        heard.append(seen.last_response)
        return "done"

    model = ScriptedModel(
        [
            [Call("read_balance", {"account": "ACME"})],
            [Call("transfer_funds", {"amount": 120, "to": "ACME"})],
            after_transfer,
        ]
    )
    toolset = McpToolset(connection_params=StdioConnectionParams(server_params=gateway, timeout=60))
    agent = LlmAgent(name="teller", model=model, tools=[toolset])
    runner = InMemoryRunner(app=App(name="bank", root_agent=agent))

    async def reject_when_pending() -> None:
        cli = [sys.executable, "-m", "goldfive_core.cli", "--db", str(db)]
        for _ in range(600):
            out = await asyncio.create_subprocess_exec(*cli, "pending", "--json", stdout=asyncio.subprocess.PIPE)
            listed, _ = await out.communicate()
            pending = json.loads(listed or b"{}").get("pending") or []
            if pending:
                done = await asyncio.create_subprocess_exec(
                    *cli, "reject", pending[0]["target_id"], "--by", "ana", "--reason", "ACME was paid on Monday"
                )
                assert await done.wait() == 0
                return
            await asyncio.sleep(0.05)
        raise AssertionError("no approval request appeared")

    try:
        session = await runner.session_service.create_session(app_name="bank", user_id="u")
        person = asyncio.create_task(reject_when_pending())
        message = types.Content(role="user", parts=[types.Part(text="pay ACME")])
        async with asyncio.timeout(50):
            async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
                pass
            await person
    finally:
        await toolset.close()
    assert "ACME was paid on Monday" in json.dumps(heard)
    assert [json.loads(line)["tool"] for line in calls.read_text().splitlines()] == ["read_balance"]
