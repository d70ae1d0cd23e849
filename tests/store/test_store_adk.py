"""GoldfivePlugin(control=StoreChannel(...)): a real ADK run whose tool confirmation is answered through the store."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from store_support import Backend, await_until

pytest.importorskip("google.adk")

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlKind, ControlMessage
from goldfive_core.store import StoreChannel
from goldfive_core.testing import Call, ScriptedModel


async def test_adk_tool_confirmation_answered_through_the_store(backend: Backend) -> None:
    ran: list[int] = []

    def transfer(amount: int) -> dict[str, Any]:
        """Move money."""
        ran.append(amount)
        return {"moved": amount}

    channel = StoreChannel(backend.open())
    plugin = GoldfivePlugin(control=channel, sinks=[channel.sink])
    agent = LlmAgent(
        name="ops",
        model=ScriptedModel([Call("transfer", {"amount": 10}), lambda seen: f"tool said {seen.last_response}"]),
        tools=[FunctionTool(transfer, require_confirmation=True)],
    )
    app = App(name="store_adk", root_agent=agent, plugins=[plugin])
    runner = Runner(app=app, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name=app.name, user_id="u")

    async def invoke() -> list[Any]:
        message = types.Content(role="user", parts=[types.Part(text="pay bob")])
        return [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=message)]

    run = asyncio.create_task(invoke())
    store = backend.open()
    rows = await await_until(lambda: store.approvals(), what="the tool confirmation in the store")
    assert rows[0].tool_name == "transfer" and rows[0].args_json == '{"amount":10}' and ran == []

    decider = StoreChannel(backend.open())
    ack = await decider.send(
        ControlMessage(
            ControlKind.APPROVE,
            {"target_id": rows[0].target_id, "decided_by": "ann", "edited_args": {"amount": 7}},
        )
    )
    assert ack.ok, ack
    events = await run
    assert ran == [7]
    texts = [p.text for e in events for p in (e.content.parts if e.content else []) if p.text]
    assert texts[-1] == "tool said {'moved': 7}"
    await asyncio.to_thread(channel.sink.flush)
    decided = store.approvals_for(rows[0].target_id)[0]
    assert (decided.status, decided.decided_by, decided.edited_args_json) == ("granted", "ann", '{"amount":7}')
    ledger = store.execution(rows[0].target_id)  # at most once: executing before the body, done after
    assert ledger is not None and ledger.state.value == "done" and ledger.result_json == '{"moved":7}'
    assert store.find_decision(rows[0].target_id) is None  # the approval was used
    await channel.aclose()
