"""An ADK agent process whose gated call comes after two other tool calls (run as a subprocess).

maria asks it to pay an invoice; the scripted model says what it will do, looks the invoice up, checks the
balance, then calls ``transfer_funds`` (marked for confirmation), which waits for a person through the store
named by ``GOLDFIVE_DB``. What maria asked and the invoice's text hold hostile markup and hidden characters, so a
page must show them inert. Prints ``result: ...`` with the transfer's outcome, then ``done``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core.store import StoreChannel, open_store
from goldfive_core.testing import Call, ScriptedModel

ASKED = 'Pay the ACME invoice <img src=x onerror="window.pwned=1"> INV-7\u202e today'
"""What maria asks: markup and a right-to-left override a page must show as text."""
USER = "maria@example.com"
SAID = "I will look the invoice up and check the balance first."
MEMO = "<script>window.pwned=2</script>" + "x" * 2000
"""The invoice's memo: markup, and far longer than a card shows."""


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def lookup_invoice(invoice: str) -> dict[str, Any]:
    """Look an invoice up."""
    return {"invoice": invoice, "amount": 250, "payee": "ACME Corp", "memo": MEMO}


async def check_balance(account: str) -> dict[str, Any]:
    """The balance of an account."""
    return {"account": account, "balance": 10_000}


async def transfer_funds(amount: int, to: str) -> dict[str, Any]:
    """Send money."""
    return {"sent": amount, "to": to}


async def _say_results(events: AsyncIterator[Event]) -> None:
    """Print the transfer's result as the model reads it."""
    async for event in events:
        parts = (event.content.parts or []) if event.content is not None else []
        for response in (part.function_response for part in parts):
            if response is not None and response.name == "transfer_funds":
                _say(f"result: {response.response}")


async def main() -> None:
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    channel = StoreChannel(open_store())
    plugin = GoldfivePlugin(control=channel, sinks=[channel.sink])
    model = ScriptedModel(
        [
            [SAID, Call("lookup_invoice", {"invoice": "INV-7"})],
            Call("check_balance", {"account": "ops"}),
            Call("transfer_funds", {"amount": 250, "to": "ACME Corp"}),
        ],
        record=False,
    )
    tools = [FunctionTool(lookup_invoice), FunctionTool(check_balance)]
    tools.append(FunctionTool(transfer_funds, require_confirmation=True))
    agent = LlmAgent(name="treasurer", model=model, tools=tools)
    app = App(name="context_agent", root_agent=agent, plugins=[plugin])
    runner = Runner(app=app, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name=app.name, user_id=USER)
    asked = types.Content(role="user", parts=[types.Part(text=ASKED)])
    try:
        await _say_results(runner.run_async(user_id=USER, session_id=session.id, new_message=asked))
        _say("done")
    finally:
        await runner.close()  # flushes the plugin's sinks to the store; then the channel closes
        await channel.aclose()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
