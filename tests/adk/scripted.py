"""Offline ADK harness: a scripted, stateless BaseLlm, a sink tests can await, and a small app builder."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types
from pydantic import Field

from goldfive_adk import GoldfivePlugin
from goldfive_core.events import InMemorySink

Call = tuple[str, dict[str, Any]]
Turn = list[Call] | str
"""One model turn: function calls (made in parallel) or final text."""

GUIDANCE_PREFIX = "[goldfive]"


def _genuine_user_text(content: types.Content) -> bool:
    return content.role == "user" and any(
        p.text and not p.text.startswith(GUIDANCE_PREFIX) for p in content.parts or []
    )


def request_text(request: LlmRequest) -> str:
    """All the text parts of a request, joined (what the model 'read')."""
    return "\n".join(p.text for c in request.contents for p in c.parts or [] if p.text)


def function_responses(request: LlmRequest) -> list[types.FunctionResponse]:
    """Every function response in a request, oldest first."""
    return [p.function_response for c in request.contents for p in c.parts or [] if p.function_response]


class ScriptedLlm(BaseLlm):
    """Plays ``turns`` in order. Stateless: the step is the number of model turns since the last user text.

    Every request is recorded in ``requests`` (so tests can check what the model was told).
    """

    model: str = "scripted"
    turns: list[Any] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """Answer with the next scripted turn."""
        # Only the contents: the rest (tools, config) holds live objects that do not copy.
        self.requests.append(LlmRequest(contents=[c.model_copy(deep=True) for c in llm_request.contents]))
        step = 0
        for content in reversed(llm_request.contents):
            if _genuine_user_text(content):
                break
            if content.role == "model":
                step += 1
        turn: Turn = self.turns[step] if step < len(self.turns) else f"done after {step} turns"
        if isinstance(turn, str):
            parts = [types.Part(text=turn)]
        else:
            parts = [types.Part(function_call=types.FunctionCall(name=name, args=args)) for name, args in turn]
        yield LlmResponse(
            content=types.Content(role="model", parts=parts),
            usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=1, candidates_token_count=1),
        )


WaitSink = InMemorySink  # goldfive_core.InMemorySink is awaitable: ``await sink.wait_for(...)``


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
        self.sink = WaitSink()
        self.plugin = plugin if plugin is not None else GoldfivePlugin(sinks=[self.sink])
        self.model = ScriptedLlm(turns=list(turns))
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
