"""The ADK App the detach tests serve: a payer that calls ``transfer`` (confirmation required) once.

The goldfive store comes from the environment (``GOLDFIVE_DB``); ``DETACH_MARKER`` names a file the
tool body appends one line to each time it runs (the tests count them); ``DETACH_AFTER`` is the
plugin's ``detach_after`` ("none" = the in-process wait of old). With ``DETACH_HOLD`` set, the body,
once it has written its line, waits until that file exists (the test's handshake: a resume held
mid-body while other processes try to take the call).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.tools.function_tool import FunctionTool

from goldfive_adk import GoldfivePlugin
from goldfive_core.store import StoreChannel, open_store
from goldfive_core.testing import Call, ScriptedModel, SeenRequest

APP_NAME = "detach_app"
INBOX = "http://inbox.example/approvals/{approval_id}"


def pay(seen: SeenRequest) -> Any:
    """Call ``transfer(to="bob", amount=10)`` until the tool has answered for real, then report it."""
    real = [
        r.response
        for r in seen.function_responses
        if r.name == "transfer" and (r.response or {}).get("reason") != "awaiting_approval"
    ]
    if real:
        return f"tool said {json.dumps(real[-1], sort_keys=True)}"
    return Call("transfer", {"to": "bob", "amount": 10})


def _ran(to: str, amount: int) -> None:
    with Path(os.environ["DETACH_MARKER"]).open("a", encoding="utf-8") as f:
        f.write(f"{to} {amount} pid {os.getpid()}\n")
    hold = os.environ.get("DETACH_HOLD")
    deadline = time.monotonic() + 60
    while hold and not Path(hold).exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # the test's handshake (a file); in a worker thread, so the server goes on serving


async def transfer(to: str, amount: int) -> dict[str, Any]:
    """Send money."""
    await asyncio.to_thread(_ran, to, amount)
    return {"sent": amount, "to": to}


def build_app() -> App:
    """The App with goldfive's plugin on the store named by the environment."""
    channel = StoreChannel(open_store())
    raw = os.environ.get("DETACH_AFTER", "0")
    plugin = GoldfivePlugin(
        control=channel,
        sinks=[channel.sink],
        detach_after=None if raw == "none" else float(raw),
        inbox_url=INBOX,
    )
    agent = LlmAgent(
        name="payer",
        model=ScriptedModel(then=pay, record=False),
        tools=[FunctionTool(transfer, require_confirmation=True)],
    )
    return App(
        name=APP_NAME,
        root_agent=agent,
        plugins=[plugin],
        resumability_config=ResumabilityConfig(is_resumable=True),
    )
