"""A tool that asks for a confirmation itself (request_confirmation), and ADK's own confirmation made visible.

Through a real App/Runner with a scripted model; the tool is ADK's human_tool_confirmation sample's shape.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from google.adk.apps import App
from google.adk.events import Event
from google.adk.plugins import BasePlugin
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlChannel, ControlKind, ControlMessage, SteeringConfig
from goldfive_core.pb.v1 import types_pb2
from goldfive_core.testing import AwaitableSink, LetTimeOut, Reject, ReviewRule, ScriptedReviewer
from tests.adk.conftest import Bank
from tests.adk.scripted import Harness, call_names, responses

ASK = "adk_request_confirmation"
HINT = "Approve the time off? Send the days you approve."


class TimeOff:
    """ADK's human_tool_confirmation sample: the body asks for a confirmation with a payload, then reads it."""

    def __init__(self) -> None:
        self.runs: list[tuple[bool, Any] | None] = []

    def tool(self) -> FunctionTool:
        def request_time_off(days: int, tool_context: ToolContext) -> dict[str, Any]:
            """Request days off."""
            confirmation = tool_context.tool_confirmation
            self.runs.append(None if confirmation is None else (confirmation.confirmed, confirmation.payload))
            if confirmation is None:
                tool_context.request_confirmation(hint=HINT, payload={"approved_days": 0})
                return {"status": "Manager approval is required."}
            if not confirmation.confirmed:
                return {"status": "rejected", "approved_days": 0}
            return {"status": "ok", "approved_days": min(confirmation.payload["approved_days"], days)}

        return FunctionTool(request_time_off)


def _harness(time_off: TimeOff, plugin: GoldfivePlugin) -> Harness:
    return Harness(tools=[time_off.tool()], turns=[[("request_time_off", {"days": 3})], "noted"], plugin=plugin)


async def test_a_tool_asking_itself_goes_through_goldfive_and_gets_the_persons_payload(
    plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    time_off = TimeOff()
    h = _harness(time_off, plugin)
    sid = await h.new_session()
    run = asyncio.create_task(h.run(sid))
    requested = (await sink.first("approval_requested")).approval_requested
    assert requested.prompt == HINT and requested.kind == "tool"
    assert requested.metadata["tool_name"] == "request_time_off"
    assert json.loads(requested.metadata["payload_json"]) == {"approved_days": 0}
    assert json.loads(requested.metadata["args_json"]) == {"days": 3}
    assert time_off.runs == [None]  # the body asked and is waiting for its confirmed run
    ack = await channel.send(
        ControlMessage(
            ControlKind.APPROVE,
            {"target_id": requested.target_id, "edited_args": {"approved_days": 2}, "decided_by": "boss"},
        )
    )
    events = await run

    assert ack.ok, ack
    assert time_off.runs == [None, (True, {"approved_days": 2})]
    assert [fr.response for fr in responses(events)] == [{"status": "ok", "approved_days": 2}]
    assert ASK not in call_names(events) and ASK not in call_names(await h.session_events(sid))
    assert not any(e.actions.requested_tool_confirmations for e in await h.session_events(sid))
    assert h.model.requests[-1].last_response == {"status": "ok", "approved_days": 2}  # what the model was told
    assert sink.kinds()[-1] == "run_completed"
    (granted,) = sink.payloads("approval_granted")
    assert (granted.target_id, granted.decided_by) == (requested.target_id, "boss")


async def test_a_rejection_reaches_the_tools_confirmed_run_and_an_approval_keeps_the_requested_payload(
    channel: ControlChannel, sink: AwaitableSink
) -> None:
    for answer, expected in ((Reject("no"), (False, {"approved_days": 0})), (None, (True, {"approved_days": 0}))):
        time_off = TimeOff()
        reviewer = ScriptedReviewer(channel, [] if answer is None else [ReviewRule(then=answer)])
        plugin = GoldfivePlugin(control=channel, sinks=[sink, reviewer], config=SteeringConfig())
        h = _harness(time_off, plugin)
        events = await h.run(await h.new_session())
        assert time_off.runs == [None, expected]
        assert ASK not in call_names(events)


async def test_nobody_answering_in_time_skips_the_confirmed_run(channel: ControlChannel, sink: AwaitableSink) -> None:
    time_off = TimeOff()
    reviewer = ScriptedReviewer(channel, default=LetTimeOut())
    plugin = GoldfivePlugin(control=channel, sinks=[sink, reviewer], config=SteeringConfig(tool_approval_timeout_ms=30))
    h = _harness(time_off, plugin)
    events = await h.run(await h.new_session())
    assert time_off.runs == [None]  # never ran confirmed
    (response,) = [fr.response for fr in responses(events)]
    assert response is not None and response["skipped"] and response["reason"] == "approval_timeout"
    assert ASK not in call_names(events)
    assert sink.kinds().count("approval_timed_out") == 1


def _answer(events: list[Event], *, confirmed: bool, payload: Any = None) -> types.Content:
    (ask,) = [fc for e in events for fc in e.get_function_calls() if fc.name == ASK]
    response: dict[str, Any] = {"confirmed": confirmed}
    if payload is not None:
        response["payload"] = payload
    part = types.Part(function_response=types.FunctionResponse(name=ASK, id=ask.id, response=response))
    return types.Content(role="user", parts=[part])


async def _resume(h: Harness, sid: str, message: types.Content) -> list[Event]:
    return [e async for e in h.runner.run_async(user_id="u", session_id=sid, new_message=message)]


async def test_without_a_channel_adks_own_confirmation_is_reported_and_the_run_is_not_completed(
    bank: Bank, sink: AwaitableSink
) -> None:
    plugin = GoldfivePlugin(sinks=[sink], config=SteeringConfig())
    h = Harness(tools=bank.tools(), turns=[[("transfer_funds", {"amount": 5, "to": "bob"})], "sent"], plugin=plugin)
    sid = await h.new_session()
    first = await h.run(sid)

    assert bank.transfers == [] and ASK in call_names(first)  # ADK's flow is unchanged: it asks the client
    (requested,) = sink.payloads("approval_requested")
    call_id = next(fc.id for e in first for fc in e.get_function_calls() if fc.name == "transfer_funds")
    assert requested.target_id == call_id and requested.metadata["tool_name"] == "transfer_funds"
    assert requested.metadata["asked_by"] == "adk" and "transfer_funds" in requested.prompt
    assert "run_completed" not in sink.kinds()
    (ended,) = sink.payloads("run_aborted")
    assert ended.status == types_pb2.RUN_STATUS_DETACHED and call_id in ended.reason

    second = await _resume(h, sid, _answer(first, confirmed=True))
    assert bank.transfers == [{"amount": 5, "to": "bob"}]
    (granted,) = sink.payloads("approval_granted")
    assert granted.target_id == call_id and "ADK's own confirmation" in granted.detail
    assert sink.kinds()[-1] == "run_completed"
    assert responses(second)[0].response == {"ok": True, "amount": 5, "to": "bob"}


async def test_without_a_channel_a_tool_asking_itself_is_reported_with_its_hint_and_the_answer(
    sink: AwaitableSink,
) -> None:
    time_off = TimeOff()
    plugin = GoldfivePlugin(sinks=[sink], config=SteeringConfig())
    h = _harness(time_off, plugin)
    sid = await h.new_session()
    first = await h.run(sid)
    (requested,) = sink.payloads("approval_requested")
    assert requested.prompt == HINT and json.loads(requested.metadata["payload_json"]) == {"approved_days": 0}
    assert sink.payloads("run_aborted")[0].status == types_pb2.RUN_STATUS_DETACHED

    await _resume(h, sid, _answer(first, confirmed=False, payload={"approved_days": 0}))
    assert time_off.runs == [None, (False, {"approved_days": 0})]
    (rejected,) = sink.payloads("approval_rejected")
    assert rejected.target_id == requested.target_id and "approved_days" in rejected.detail


class _AsksFirst(BasePlugin):
    """Another plugin, registered before goldfive, that asks ADK for a confirmation and answers for the tool."""

    def __init__(self) -> None:
        super().__init__(name="asks_first")

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        tool_context.request_confirmation(hint="the other plugin asks")
        return {"held": "by the other plugin"}


async def test_only_what_the_tools_body_asked_is_answered_by_goldfive(
    channel: ControlChannel, sink: AwaitableSink
) -> None:
    time_off = TimeOff()
    goldfive = GoldfivePlugin(control=channel, sinks=[sink], config=SteeringConfig())
    h = _harness(time_off, goldfive)
    h.app = App(name="asks_first", root_agent=h.agent, plugins=[_AsksFirst(), goldfive])
    h.runner = Runner(app=h.app, session_service=InMemorySessionService())
    events = await h.run(await h.new_session())
    assert time_off.runs == []  # the body never ran: goldfive did not run it "confirmed" either
    assert sink.of("approval_requested") == []
    assert ASK in call_names(events)  # the other plugin's request is ADK's to ask
