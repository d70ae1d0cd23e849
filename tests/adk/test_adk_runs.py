"""Runs, sessions and routing: one plugin serving many ADK sessions; registration; Flow A tools in ADK."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService

import goldfive_adk
from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlChannel, ControlKind, ControlMessage, SteeringConfig, TaskStatus
from goldfive_core.pb.v1 import types_pb2
from goldfive_core.testing import AwaitableSink, ScriptedModel
from tests.adk.conftest import Bank
from tests.adk.scripted import Harness, responses


def test_public_names_are_pinned() -> None:
    assert goldfive_adk.__all__ == ["GoldfivePlugin", "ReportingTool", "reporting_tools"]
    assert GoldfivePlugin.__name__ == "_GoldfiveADKPlugin"
    assert GoldfivePlugin().name == "goldfive"


def test_a_missing_adk_extra_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['google.adk'] = None; sys.modules['google.adk.plugins'] = None\n"
        "try:\n    import goldfive_adk\nexcept ImportError as e:\n    print(type(e).__name__, e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".").stdout
    assert "MissingExtraError" in out and "pip install 'goldfive[adk]'" in out


async def test_registering_with_app_plugins_raises_no_deprecation_warning(bank: Bank, sink: AwaitableSink) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        plugin = GoldfivePlugin(sinks=[sink])
        agent = LlmAgent(name="ops", model=ScriptedModel([[("lookup", {"account": "x"})], "ok"]), tools=bank.tools())
        app = App(name="strict", root_agent=agent, plugins=[plugin])
        runner = Runner(app=app, session_service=InMemorySessionService())
        session = await runner.session_service.create_session(app_name="strict", user_id="u")
        from google.genai import types

        message = types.Content(role="user", parts=[types.Part(text="go")])
        [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=message)]
    assert runner.plugin_manager.plugins == [plugin]
    assert bank.lookups == ["x"] and sink.kinds()[-1] == "run_completed"


async def test_each_invocation_is_one_run_rooted_at_its_invocation_id(bank: Bank, plugin: GoldfivePlugin) -> None:
    sink = plugin.sinks[0]
    assert isinstance(sink, AwaitableSink)
    h = Harness(tools=bank.tools(), turns=[[("lookup", {"account": "x"})], "ok"], plugin=plugin)
    sid = await h.new_session()
    first = await h.run(sid, "one")
    second = await h.run(sid, "two")
    starts = [e for e in sink.events if e.WhichOneof("payload") == "run_started"]
    assert [e.run_started.root_task_id for e in starts] == [first[0].invocation_id, second[0].invocation_id]
    assert [e.run_started.input for e in starts] == ["one", "two"]
    assert {e.session_id for e in sink.events} == {sid}
    assert len({e.run_id for e in sink.events}) == 2
    for run_id in {e.run_id for e in sink.events}:
        of_run = [e for e in sink.events if e.run_id == run_id]
        assert [e.sequence for e in of_run] == list(range(len(of_run)))
        assert of_run[0].WhichOneof("payload") == "run_started"
        assert of_run[-1].WhichOneof("payload") == "run_completed"
    assert plugin.sessions == []


async def test_two_sessions_at_once_route_approvals_and_named_controls(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    h = Harness(tools=bank.tools(), turns=[[("transfer_funds", {"amount": 1, "to": "x"})], "ok"], plugin=plugin)
    sid_a, sid_b = await h.new_session(), await h.new_session()

    async def drive() -> None:
        reqs = await sink.wait_for("approval_requested", count=2)
        by_session = {e.session_id: e.approval_requested.target_id for e in reqs}
        assert set(by_session) == {sid_a, sid_b}
        assert len(plugin.sessions) == 2
        status = await channel.send(ControlMessage(ControlKind.STATUS_QUERY, {}))
        assert status.ok and status.data is not None and len(status.data["runs"]) == 2
        steer = ControlMessage(ControlKind.STEER, {"session_id": sid_b, "text": "only for b"})
        assert (await channel.send(steer)).ok
        assert (await channel.send(ControlMessage(ControlKind.REJECT, {"target_id": by_session[sid_a]}))).ok
        assert (await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": by_session[sid_b]}))).ok

    driver = asyncio.create_task(drive())
    events_a, events_b = await asyncio.gather(h.run(sid_a), h.run(sid_b))
    await driver
    assert bank.transfers == [{"amount": 1, "to": "x"}]
    assert [(r.response or {}).get("reason") for r in responses(events_a)] == ["user_rejected"]
    assert [(r.response or {}).get("ok") for r in responses(events_b)] == [True]
    texts = [r.text for r in h.model.requests]
    assert sum("only for b" in t for t in texts) == 1
    assert plugin.sessions == [] and not channel.bound


async def test_an_unnamed_pause_applies_to_every_active_run(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    h = Harness(tools=bank.tools(), turns=[[("transfer_funds", {"amount": 1, "to": "x"})], "ok"], plugin=plugin)
    sid_a, sid_b = await h.new_session(), await h.new_session()

    async def drive() -> None:
        reqs = await sink.wait_for("approval_requested", count=2)
        ack = await channel.send(ControlMessage(ControlKind.PAUSE, {}))
        assert ack.ok and all(s.paused for s in plugin.sessions) and len(plugin.sessions) == 2
        for e in reqs:
            assert (
                await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": e.approval_requested.target_id}))
            ).ok
        assert (await channel.send(ControlMessage(ControlKind.RESUME, {"run_id": reqs[0].run_id}))).ok
        await sink.wait_for("run_completed")
        assert len(plugin.sessions) == 1 and plugin.sessions[0].paused
        assert (await channel.send(ControlMessage(ControlKind.RESUME, {}))).ok

    driver = asyncio.create_task(drive())
    await asyncio.gather(h.run(sid_a), h.run(sid_b))
    await driver
    assert len(bank.transfers) == 2 and len(sink.of("run_completed")) == 2


async def test_report_awaiting_approval_from_an_adk_model_is_flow_a(
    plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    turns = [
        [("report_awaiting_approval", {"prompt": "May I send the report?"})],
        [("report_task_completed", {"result": "sent"})],
        "done",
    ]
    h = Harness(tools=[], turns=turns, plugin=plugin, add_reporting_tools=True)
    sid = await h.new_session()

    async def approve() -> None:
        (req,) = await sink.wait_for("approval_requested")
        assert (
            await channel.send(
                ControlMessage(ControlKind.APPROVE, {"target_id": req.approval_requested.target_id, "detail": "yes"})
            )
        ).ok

    decider = asyncio.create_task(approve())
    events = await h.run(sid)
    await decider
    root = sink.of("run_started")[0].run_started.root_task_id
    assert root == events[0].invocation_id
    req = sink.of("approval_requested")[0].approval_requested
    assert (req.kind, req.target_id, req.task_id, req.prompt) == ("task", root, root, "May I send the report?")
    blocked = sink.of("task_blocked")[0].task_blocked
    assert (blocked.task_id, blocked.blocker) == (root, "awaiting_approval")
    first = h.model.requests[1].function_responses[0]
    assert first.response == {"decision": "approve", "detail": "yes"}
    assert sink.of("task_completed")[0].task_completed.result == "sent"
    assert sink.kinds()[-1] == "run_completed"


async def test_reporting_tools_without_a_channel_say_unavailable_and_bad_args_get_an_error(sink: AwaitableSink) -> None:
    plugin = GoldfivePlugin(sinks=[sink])
    turns = [[("report_awaiting_approval", {"prompt": "ok?"}), ("report_task_progress", {"fraction": 2})], "done"]
    h = Harness(tools=[], turns=turns, plugin=plugin, add_reporting_tools=True)
    sid = await h.new_session()
    await h.run(sid)
    got = {fr.name: fr.response for fr in h.model.requests[1].function_responses}
    assert got["report_awaiting_approval"] is not None
    assert got["report_awaiting_approval"]["decision"] == "unavailable"
    assert got["report_task_progress"] is not None and "error" in got["report_task_progress"]
    assert sink.of("approval_requested") == []


async def test_reporting_tools_declare_the_core_schemas() -> None:
    from goldfive_adk._compat import declaration_of
    from goldfive_core import TOOL_SPECS

    tools = GoldfivePlugin().reporting_tools()
    assert [t.name for t in tools] == list(TOOL_SPECS)
    for tool in tools:
        declaration = declaration_of(tool)  # what ADK hands the model
        assert declaration is not None
        assert declaration.parameters_json_schema == TOOL_SPECS[tool.name].parameters


async def test_a_failing_invocation_ends_its_run_as_failed(sink: AwaitableSink) -> None:
    def explode(x: int) -> dict[str, Any]:
        """Always fails."""
        raise ValueError("boom")

    from google.adk.tools.function_tool import FunctionTool

    plugin = GoldfivePlugin(sinks=[sink], config=SteeringConfig())
    h = Harness(tools=[FunctionTool(explode)], turns=[[("explode", {"x": 1})], "ok"], plugin=plugin)
    sid = await h.new_session()
    try:
        await h.run(sid)
    except Exception as exc:  # ADK re-raises the tool's error after notifying the plugins
        assert "boom" in repr(exc) or "boom" in repr(exc.__cause__)
    aborted = sink.of("run_aborted")[0].run_aborted
    assert aborted.status == types_pb2.RUN_STATUS_FAILED and "boom" in aborted.reason
    assert plugin.sessions == []


async def test_runner_close_ends_whatever_is_left(bank: Bank, plugin: GoldfivePlugin, sink: AwaitableSink) -> None:
    h = Harness(tools=bank.tools(), turns=[[("transfer_funds", {"amount": 1, "to": "x"})], "ok"], plugin=plugin)
    sid = await h.new_session()
    consumer = asyncio.create_task(h.run(sid))
    await sink.wait_for("approval_requested")
    session = plugin.sessions[0]
    await plugin.close()
    await consumer
    assert plugin.sessions == [] and session.state == "finished"
    reasons = [(r.response or {}).get("reason") for r in responses(await h.session_events(sid))]
    assert reasons == ["run_cancelled"]
    assert bank.transfers == []
    root = session.tasks.get(sink.of("run_started")[0].run_started.root_task_id)
    assert root is not None and root.status is TaskStatus.CANCELLED
    assert sink.of("run_aborted")[0].run_aborted.reason == "the runner was closed"


async def test_concurrent_invocations_of_one_adk_session_share_one_run(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    h = Harness(tools=bank.tools(), turns=[[("transfer_funds", {"amount": 1, "to": "x"})], "ok"], plugin=plugin)
    sid = await h.new_session()

    async def approve_both() -> None:
        reqs = await sink.wait_for("approval_requested", count=2)
        assert len(plugin.sessions) == 1 and len({e.run_id for e in reqs}) == 1
        for e in reqs:
            target = e.approval_requested.target_id
            assert (await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": target}))).ok

    decider = asyncio.create_task(approve_both())
    await asyncio.gather(h.run(sid, "a"), h.run(sid, "b"))
    await decider
    assert len(bank.transfers) == 2
    assert sink.kinds().count("run_started") == 1 and sink.kinds()[-1] == "run_completed"
    assert plugin.sessions == [] and not channel.bound
