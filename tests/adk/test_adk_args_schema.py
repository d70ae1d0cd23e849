"""The ADK plugin carries a gated tool's declared parameters on its approval request (metadata args_schema)."""

from __future__ import annotations

import json
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlChannel
from goldfive_core.argschema import check_args, schema_from_metadata
from goldfive_core.testing import AwaitableSink, Call, ScriptedModel, ScriptedReviewer


def transfer_funds(amount: int, to: str, memo: str = "") -> dict[str, Any]:
    """Send money."""
    return {"sent": amount, "to": to}


def tag(name: str, **extra: Any) -> dict[str, Any]:
    """Tag something (takes any further keyword)."""
    return {"tagged": name}


async def test_the_request_carries_the_declared_parameters_and_they_judge_edits() -> None:
    channel, sink = ControlChannel(), AwaitableSink()
    reviewer = ScriptedReviewer(channel, [])  # approves everything
    model = ScriptedModel(
        [
            [Call("transfer_funds", {"amount": 5, "to": "bob"}), Call("tag", {"name": "x"})],
            lambda seen: "done",
        ]
    )
    tools = [FunctionTool(transfer_funds, require_confirmation=True), FunctionTool(tag, require_confirmation=True)]
    agent = LlmAgent(name="teller", model=model, tools=tools)
    runner = InMemoryRunner(
        app=App(name="bank", root_agent=agent, plugins=[GoldfivePlugin(control=channel, sinks=[sink, reviewer])])
    )
    session = await runner.session_service.create_session(app_name="bank", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="pay")])
    async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        pass

    by_tool = {e.approval_requested.metadata["tool_name"]: e.approval_requested for e in sink.of("approval_requested")}
    schema = schema_from_metadata(by_tool["transfer_funds"].metadata)
    assert schema is not None
    assert schema["required"] == ["amount", "to"] and schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"amount", "to", "memo"}
    assert check_args(schema, {"amount": 7, "to": "eve"}) is None
    assert check_args(schema, {"amount": "7", "to": "eve"}).field == "amount"  # type: ignore[union-attr]
    assert check_args(schema, {"amount": 7, "to": "eve", "cc": 1}).field == "cc"  # type: ignore[union-attr]
    # A function taking **kwargs accepts other keys, as the plugin's own check does.
    open_schema = json.loads(by_tool["tag"].metadata["args_schema"])
    assert "additionalProperties" not in open_schema
    assert check_args(open_schema, {"name": "x", "colour": "red"}) is None
