"""An ADK agent process that loops until goldfive escalates it to a person (run as a subprocess).

The scripted model calls ``search(q="weather")`` again and again; goldfive's loop detector climbs the
ladder and pauses the run for a person (GOLDFIVE_PAUSE_ESCALATE). With ``--patient`` it searches for
something new each time (slowly, so it runs until a person steers it) and never escalates. Whatever a
person sends arrives through the store named by ``GOLDFIVE_DB``. Every text the model reads after the user's message is
printed as ``model read: ...``, so a test can see that a steer reached the model.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import SteeringConfig, install_default_steering
from goldfive_core.store import StoreChannel, open_store
from goldfive_core.testing import Call, ScriptedModel, SeenRequest

STEER_MARK = "STEER:"
QUERY = 'weather <img src=x onerror="window.pwned=1">'
"""What the model searches for: hostile markup that a page must show as text (it lands in the drift detail)."""


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _turn(request: SeenRequest) -> str | Call:
    """Searches for QUERY until a person's steer (a text containing ``STEER:``) shows up; then stops."""
    seen = request.since_user
    steers = [s for s in seen if STEER_MARK in s]
    for text in steers:
        _say("model read: " + text.replace("\n", " "))
    if steers:
        return "following the person's direction"
    if PATIENT:
        asked = sum(1 for s in seen if s.startswith("{"))  # one function response per search so far
        return Call("search", {"q": f"weather, try {asked}"})
    return Call("search", {"q": QUERY})


async def search(q: str) -> dict[str, Any]:
    """Search the web."""
    if PATIENT:
        _say(f"searching {q}")
        await asyncio.sleep(0.2)  # a working agent, not a busy loop: the test pauses it between steps
    return {"results": []}


PATIENT = "--patient" in sys.argv


async def main() -> None:
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    channel = StoreChannel(open_store())
    config = SteeringConfig(loop_warning_repeats=2, loop_critical_repeats=3, max_reinvokes=1)
    if PATIENT:
        config = SteeringConfig(max_steps=None)
    plugin = GoldfivePlugin(
        control=channel, sinks=[channel.sink], config=config, session_setup=install_default_steering
    )
    agent = LlmAgent(name="forecaster", model=ScriptedModel(then=_turn, record=False), tools=[FunctionTool(search)])
    app = App(name="escalation_agent", root_agent=agent, plugins=[plugin])
    runner = Runner(app=app, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name=app.name, user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="what is the weather?")])
    try:
        async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            for part in event.content.parts if event.content and event.content.parts else []:
                if part.text:
                    _say(f"text {part.text}")
    finally:
        await runner.close()
        await channel.aclose()
    _say("done")


if __name__ == "__main__":
    asyncio.run(main())
