"""Offline ADK harness: a real App + Runner around goldfive_core.testing's ScriptedModel and AwaitableSink."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core.testing import AwaitableSink, ScriptedModel

Turn = list[tuple[str, dict[str, Any]]] | str
"""One model turn: function calls (made in parallel) or final text."""


class Harness:
    """A real App + Runner + InMemorySessionService around one scripted agent and the plugin."""

    def __init__(
        self,
        *,
        tools: Sequence[Any],
        turns: Sequence[Turn],
        plugin: GoldfivePlugin | None = None,
        add_reporting_tools: bool = False,
        sub_agents: Sequence[LlmAgent] = (),
    ) -> None:
        self.sink = AwaitableSink()
        self.plugin = plugin if plugin is not None else GoldfivePlugin(sinks=[self.sink])
        self.model = ScriptedModel(turns)
        all_tools = list(tools)
        if add_reporting_tools:
            all_tools.extend(self.plugin.reporting_tools())
        self.agent = LlmAgent(name="ops", model=self.model, tools=all_tools, sub_agents=list(sub_agents))
        self.app = App(name="goldfive_test", root_agent=self.agent, plugins=[self.plugin])
        self.runner = Runner(app=self.app, session_service=InMemorySessionService())

    async def new_session(self) -> str:
        """Create an ADK session and return its id."""
        session = await self.runner.session_service.create_session(app_name=self.app.name, user_id="u")
        return session.id

    async def run(self, session_id: str, text: str = "go", **kwargs: Any) -> list[Event]:
        """One invocation; every event the client sees."""
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [
            event
            async for event in self.runner.run_async(user_id="u", session_id=session_id, new_message=message, **kwargs)
        ]

    async def session_events(self, session_id: str) -> list[Event]:
        """Every event ADK persisted for the session."""
        session = await self.runner.session_service.get_session(
            app_name=self.app.name, user_id="u", session_id=session_id
        )
        assert session is not None
        return list(session.events)


def call_names(events: Sequence[Event]) -> list[str]:
    """Names of every function call in ``events``."""
    return [fc.name or "" for e in events for fc in e.get_function_calls()]


def responses(events: Sequence[Event]) -> list[types.FunctionResponse]:
    """Every function response in ``events``."""
    return [fr for e in events for fr in e.get_function_responses()]
