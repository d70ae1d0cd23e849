"""An ADK App with goldfive's plugin served over A2A (``goldfive_adk.a2a.a2a_app`` + uvicorn on 127.0.0.1).

``python a2a_agent_proc.py PORT``. The goldfive store comes from the environment (``GOLDFIVE_DB``);
``DETACH_MARKER`` (the detach tests' World sets it) names a file the tool
body appends one line to each time it runs (the tests count them).
The scripted model calls ``transfer(to="bob", amount=10)`` (confirmation required) once and then says what
the tool answered, so the tests read what the model was told.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import uvicorn
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.tools.function_tool import FunctionTool

from goldfive_adk import GoldfivePlugin
from goldfive_adk.a2a import a2a_app
from goldfive_core.store import StoreChannel, open_store
from goldfive_core.testing import Call, ScriptedModel, SeenRequest

INBOX = "http://inbox.example/approvals/{approval_id}"


def pay(seen: SeenRequest) -> Any:
    answered = [r.response for r in seen.function_responses if r.name == "transfer"]
    if answered:
        return f"tool said {json.dumps(answered[-1], sort_keys=True)}"
    return Call("transfer", {"to": "bob", "amount": 10})


def _ran(to: str, amount: int) -> None:
    with Path(os.environ["DETACH_MARKER"]).open("a", encoding="utf-8") as f:
        f.write(f"{to} {amount} pid {os.getpid()}\n")


async def transfer(to: str, amount: int) -> dict[str, Any]:
    """Send money."""
    await asyncio.to_thread(_ran, to, amount)
    return {"sent": amount, "to": to}


def _slow_requests(channel: StoreChannel, delay_s: float) -> None:
    """``A2A_SLOW_RECORD_S``: the store takes this long to write a batch holding an approval request (a slow
    disk or database), so the tests can see what the caller is told before the request is on record."""
    store = channel.sink.store
    write = store.append_events

    def slow(batch: Any, **kwargs: Any) -> Any:
        if any(e.WhichOneof("payload") == "approval_requested" for e in batch):
            time.sleep(delay_s)
        return write(batch, **kwargs)

    store.append_events = slow  # type: ignore[method-assign]


def build_app() -> App:
    channel = StoreChannel(open_store())
    if os.environ.get("A2A_SLOW_RECORD_S"):
        _slow_requests(channel, float(os.environ["A2A_SLOW_RECORD_S"]))
    plugin = GoldfivePlugin(control=channel, sinks=[channel.sink])
    agent = LlmAgent(
        name="payer",
        description="Pays people.",
        model=ScriptedModel(then=pay, record=False),
        tools=[FunctionTool(transfer, require_confirmation=True)],
    )
    return App(name="payer", root_agent=agent, plugins=[plugin])


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    port = int(sys.argv[1])
    url = f"http://127.0.0.1:{port}/"
    web = a2a_app(build_app(), url=url, inbox_url=INBOX, show_args=os.environ.get("A2A_SHOW_ARGS") == "1")
    uvicorn.run(web, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
