"""The step gate in ADK: PAUSE blocks at the next model/tool call; STEER reaches the model; CANCEL ends it."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import (
    ControlChannel,
    ControlKind,
    ControlMessage,
    Detector,
    Drift,
    DriftKind,
    DriftSeverity,
    InterventionLevel,
    Session,
)
from goldfive_core.pb.v1 import types_pb2
from goldfive_core.testing import AwaitableSink, ScriptedModel
from tests.adk.conftest import Bank
from tests.adk.scripted import Harness, responses
from tests.core.loop_support import wait_all_tasks_blocked

LOOKUP = ("lookup", {"account": "x"})


def _pause_tool(channel: ControlChannel, kind: ControlKind, sent: list[Any]) -> FunctionTool:
    def step(note: str) -> dict[str, Any]:
        """A step whose body asks goldfive to stop (as a person watching would)."""
        sent.append(channel.send_nowait(ControlMessage(kind, {"reason": "hold on", "text": "hold on"})))
        return {"done": note}

    return FunctionTool(step)


@pytest.mark.parametrize("kind", [ControlKind.PAUSE, ControlKind.GOLDFIVE_PAUSE_ESCALATE])
async def test_pause_blocks_the_next_model_call_until_resume(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, kind: ControlKind
) -> None:
    sent: list[Any] = []
    h = Harness(tools=[_pause_tool(channel, kind, sent)], turns=[[("step", {"note": "a"})], "finished"], plugin=plugin)
    sid = await h.new_session()
    message = types.Content(role="user", parts=[types.Part(text="go")])
    events = h.runner.run_async(user_id="u", session_id=sid, new_message=message)
    seen = []
    while not any(e.get_function_responses() for e in seen):
        seen.append(await anext(events))
    assert sent[0].result().ok
    nxt = asyncio.ensure_future(anext(events))
    await wait_all_tasks_blocked()  # the run went as far as it could
    assert not nxt.done(), "the run went on while paused"
    assert len(h.model.requests) == 1 and plugin.sessions[0].paused
    assert (await channel.send(ControlMessage(ControlKind.RESUME, {}))).ok
    final = await nxt
    assert final.content is not None and final.content.parts[0].text == "finished"
    assert len(h.model.requests) == 2
    [e async for e in events]


async def test_pause_blocks_a_tool_call_until_resume(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel
) -> None:
    h = Harness(tools=bank.tools(), turns=[[LOOKUP], "ok"], plugin=plugin)
    sid = await h.new_session()
    message = types.Content(role="user", parts=[types.Part(text="go")])
    events = h.runner.run_async(user_id="u", session_id=sid, new_message=message)
    first = await anext(events)  # the function call: the model step is done, the tool has not run
    assert first.get_function_calls()
    assert (await channel.send(ControlMessage(ControlKind.PAUSE, {}))).ok
    nxt = asyncio.ensure_future(anext(events))
    await wait_all_tasks_blocked()  # the run went as far as it could
    assert not nxt.done() and bank.lookups == []
    assert (await channel.send(ControlMessage(ControlKind.RESUME, {}))).ok
    await nxt
    [e async for e in events]
    assert bank.lookups == ["x"]


async def test_steer_text_reaches_the_model_in_its_next_request(
    plugin: GoldfivePlugin, channel: ControlChannel
) -> None:
    sent: list[Any] = []
    h = Harness(
        tools=[_pause_tool(channel, ControlKind.PAUSE, sent)],
        turns=[[("step", {"note": "a"})], "finished"],
        plugin=plugin,
    )
    sid = await h.new_session()
    message = types.Content(role="user", parts=[types.Part(text="go")])
    acks = []
    async for event in h.runner.run_async(user_id="u", session_id=sid, new_message=message):
        if event.get_function_responses():  # the step ran and paused the run
            assert plugin.sessions[0].paused
            acks.append(await channel.send(ControlMessage(ControlKind.STEER, {"text": "use the savings account"})))
    assert acks[0].ok and "resumed" in acks[0].detail
    assert "use the savings account" not in h.model.requests[0].text
    assert "use the savings account" in h.model.requests[1].text
    assert len(h.model.requests) == 2


async def test_cancel_ends_the_invocation_with_no_further_tool_runs(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    sent: list[Any] = []
    h = Harness(
        tools=[*bank.tools(), _pause_tool(channel, ControlKind.CANCEL, sent)],
        turns=[[("step", {"note": "a"})], [LOOKUP], "never"],
        plugin=plugin,
    )
    sid = await h.new_session()
    events = await h.run(sid)

    assert sent[0].result().ok
    assert bank.lookups == []
    assert len(h.model.requests) == 1  # the model was not called again
    last = events[-1].content
    assert last is not None and "stopped" in (last.parts[0].text or "")
    aborted = sink.of("run_aborted")[0].run_aborted
    assert aborted.status == types_pb2.RUN_STATUS_CANCELLED and aborted.reason == "hold on"
    assert sink.kinds()[-1] == "run_aborted" and plugin.sessions == []


async def test_cancel_while_a_tool_waits_for_approval_skips_it_and_ends_the_run(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    h = Harness(
        tools=bank.tools(),
        turns=[[("transfer_funds", {"amount": 1, "to": "a"}), LOOKUP], [LOOKUP], "never"],
        plugin=plugin,
    )
    sid = await h.new_session()

    async def cancel() -> None:
        await sink.wait_for("approval_requested")
        assert (await channel.send(ControlMessage(ControlKind.CANCEL, {"reason": "stop it"}))).ok

    canceller = asyncio.create_task(cancel())
    events = await h.run(sid)
    await canceller
    assert bank.transfers == []
    skipped = [r.response for r in responses(events) if r.name == "transfer_funds"]
    assert skipped and skipped[0] is not None and skipped[0]["reason"] == "run_cancelled"
    assert len(h.model.requests) == 1
    assert sink.of("approval_cancelled") and sink.of("run_aborted")


class _Steerer:
    """Our own Steerer protocol: answers every drift with a fixed level and a note for the agent."""

    def __init__(self, session: Session, level: InterventionLevel) -> None:
        self.session = session
        self.level = level
        self.drifts: list[Drift] = []

    async def handle_drift(self, drift: Drift) -> InterventionLevel:
        self.drifts.append(drift)
        self.session.emit_drift(drift, self.level)
        self.session.add_guidance(f"stop repeating: {drift.detail}", "nudge")
        return self.level


class _Watch(Detector):
    def __init__(self) -> None:
        self.tools: list[tuple[str, dict[str, Any]]] = []
        self.transfers: list[str] = []
        self.model_calls = 0

    def on_tool_call(self, session: Session, tool_name: str, args: Mapping[str, Any]) -> Drift | None:
        self.tools.append((tool_name, dict(args)))
        if tool_name == "lookup":
            return Drift(DriftKind.LOOPING_TOOL_CALL, DriftSeverity.CRITICAL, "lookup again")
        return None

    def on_model_call(self, session: Session) -> Drift | None:
        self.model_calls += 1
        return None

    def on_transfer(self, session: Session, to_agent: str) -> Drift | None:
        self.transfers.append(to_agent)
        return None


async def test_a_detector_intervention_skips_the_tool_and_the_model_gets_the_note(
    bank: Bank, channel: ControlChannel, sink: AwaitableSink
) -> None:
    watch = _Watch()
    steerers: list[_Steerer] = []

    def setup(session: Session, _: ControlChannel | None) -> None:
        session.detectors.append(watch)
        steerers.append(_Steerer(session, InterventionLevel.CANCEL_REINVOKE))
        session.steerer = steerers[-1]

    plugin = GoldfivePlugin(control=channel, sinks=[sink], session_setup=setup)
    h = Harness(tools=bank.tools(), turns=[[LOOKUP], "ok"], plugin=plugin)
    sid = await h.new_session()
    events = await h.run(sid)
    assert bank.lookups == []
    (resp,) = [r.response for r in responses(events)]
    assert resp == {
        "skipped": True,
        "reason": "goldfive_intervention",
        "tool_name": "lookup",
        "detail": "stop repeating: lookup again",
    }
    assert watch.tools == [("lookup", {"account": "x"})] and watch.model_calls == 2


async def test_a_transfer_is_reported_to_the_detectors(channel: ControlChannel, sink: AwaitableSink) -> None:
    watch = _Watch()

    def setup(session: Session, _: ControlChannel | None) -> None:
        session.detectors.append(watch)

    plugin = GoldfivePlugin(control=channel, sinks=[sink], session_setup=setup)
    helper = LlmAgent(name="helper", model=ScriptedModel(["helper here"]), description="Helps.")
    h = Harness(tools=[], turns=[[("transfer_to_agent", {"agent_name": "helper"})]], plugin=plugin, sub_agents=[helper])
    sid = await h.new_session()
    events = await h.run(sid)
    assert watch.transfers == ["helper"]
    assert any(e.author == "helper" for e in events)


async def test_a_terminate_from_the_ladder_aborts_the_run_naming_the_drift(
    bank: Bank, channel: ControlChannel, sink: AwaitableSink
) -> None:
    class Terminator(_Steerer):
        async def handle_drift(self, drift: Drift) -> InterventionLevel:
            self.drifts.append(drift)
            self.session.terminate(f"goldfive stopped the run: {drift.detail}", drift_id=drift.drift_id)
            return InterventionLevel.TERMINATE

    steerers: list[_Steerer] = []

    def setup(session: Session, _: ControlChannel | None) -> None:
        session.detectors.append(_Watch())
        steerers.append(Terminator(session, InterventionLevel.TERMINATE))
        session.steerer = steerers[-1]

    plugin = GoldfivePlugin(control=channel, sinks=[sink], session_setup=setup)
    h = Harness(tools=bank.tools(), turns=[[LOOKUP], [LOOKUP], "never"], plugin=plugin)
    sid = await h.new_session()
    events = await h.run(sid)
    assert bank.lookups == []
    assert [(r.response or {}).get("reason") for r in responses(events)] == ["run_cancelled"]
    aborted = sink.of("run_aborted")[0].run_aborted
    assert aborted.status == types_pb2.RUN_STATUS_ABORTED
    assert aborted.drift_id == steerers[0].drifts[0].drift_id and "lookup again" in aborted.reason
    assert len(h.model.requests) == 1
