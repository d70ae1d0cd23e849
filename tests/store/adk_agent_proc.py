"""A resumable ADK agent process for the restart tests (run as a subprocess).

The ADK session lives in a JSON file (a file-backed InMemorySessionService, so a
killed process leaves it behind); goldfive's store is the one named by the
environment. ``start`` sends "pay bob"; the scripted model calls ``transfer``
(``require_confirmation=True``) and the plugin waits for a person. ``resume
INVOCATION_ID`` resumes that invocation in a new process: ADK replays the
unanswered call with the same function_call_id. The tool body appends a line to
``--marker``; ``--die-in-body`` kills the process inside the body.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService, Session
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core.store import StoreChannel, open_store
from goldfive_core.testing import Call, ScriptedModel, SeenRequest


class FileSessions(InMemorySessionService):
    """InMemorySessionService that writes every session to a JSON file after each change."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        if path.exists():
            for app, users in json.loads(path.read_text()).items():
                for user, sessions in users.items():
                    for sid, data in sessions.items():
                        self.sessions.setdefault(app, {}).setdefault(user, {})[sid] = Session.model_validate(data)

    def _save(self) -> None:
        data = {
            app: {user: {sid: s.model_dump(mode="json") for sid, s in ss.items()} for user, ss in users.items()}
            for app, users in self.sessions.items()
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(self.path)

    async def create_session(self, **kwargs: Any) -> Session:
        session = await super().create_session(**kwargs)
        self._save()
        return session

    async def append_event(self, session: Session, event: Event) -> Event:
        event = await super().append_event(session, event)
        self._save()
        return event


def _pay_model() -> ScriptedModel:
    """Calls ``transfer(to="bob", amount=10)`` once, then reports the tool's answer."""

    def report(seen: SeenRequest) -> str:
        return f"tool said {json.dumps(seen.last_response, sort_keys=True)}"

    return ScriptedModel([Call("transfer", {"to": "bob", "amount": 10}), report])


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["start", "resume"])
    parser.add_argument("invocation", nargs="?", default="")
    parser.add_argument("--sessions", required=True)
    parser.add_argument("--marker", required=True)
    parser.add_argument("--die-in-body", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)

    def transfer(to: str, amount: int) -> dict[str, Any]:
        """Send money."""
        with Path(args.marker).open("a", encoding="utf-8") as f:
            f.write(f"{to} {amount}\n")
        if args.die_in_body:
            os._exit(9)  # after the side effect, before ADK (and goldfive) record the result
        return {"sent": amount, "to": to}

    channel = StoreChannel(open_store())
    plugin = GoldfivePlugin(control=channel, sinks=[channel.sink])
    agent = LlmAgent(name="payer", model=_pay_model(), tools=[FunctionTool(transfer, require_confirmation=True)])
    app = App(
        name="restart_test",
        root_agent=agent,
        plugins=[plugin],
        resumability_config=ResumabilityConfig(is_resumable=True),
    )
    sessions = FileSessions(Path(args.sessions))
    runner = Runner(app=app, session_service=sessions)
    if args.mode == "start":
        session = await sessions.create_session(app_name=app.name, user_id="u", session_id="s1")
        stream = runner.run_async(
            user_id="u", session_id=session.id, new_message=types.Content(role="user", parts=[types.Part(text="pay")])
        )
    else:
        stream = runner.run_async(user_id="u", session_id="s1", invocation_id=args.invocation)
    async for event in stream:
        for call in event.get_function_calls():
            _say(f"call {event.invocation_id} {call.id} {call.name}")
        if event.content and event.content.parts:
            for part in event.content.parts:
                if part.text:
                    _say(f"text {part.text}")
    await channel.aclose()
    _say("done")


if __name__ == "__main__":
    asyncio.run(main())
