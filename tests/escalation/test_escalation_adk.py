"""Flow C through a real ADK App/Runner with a scripted model: nudge, skip, pause, steer, resume, cancel, abort."""

from __future__ import annotations

import asyncio
from typing import Any

from escalation_support import human_needed, loop_config
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import (
    ControlChannel,
    ControlKind,
    ControlMessage,
    DriftKind,
    SteeringConfig,
    install_default_steering,
)
from goldfive_core.pb.v1 import types_pb2
from goldfive_core.testing import AwaitableSink, Call, ScriptedModel, SeenRequest

STEER = "STEER: read the cache instead"


def stubborn(listens_to_skips: bool = False) -> ScriptedModel:
    """Calls ``search(q=weather)`` again and again until a person's steer shows up; then follows it.

    With ``listens_to_skips`` it stops at the first call goldfive skipped. Stateless: it decides from the
    request alone (recorded in ``requests``).
    """

    def turn(seen: SeenRequest) -> Call | str:
        last = seen.since_user[-1] if seen.since_user else ""
        if any('"hits": 1' in s for s in seen.since_user):
            return "followed the steer: the cache had it"
        if any(STEER in s for s in seen.since_user):
            return Call("read_cache", {"key": "weather"})
        if listens_to_skips and '"skipped": true' in last:
            return "stopping: goldfive skipped my call"
        return Call("search", {"q": "weather"})

    return ScriptedModel(model="stubborn", then=turn)


class Tools:
    """Tool bodies that record the calls that really ran."""

    def __init__(self) -> None:
        self.searches = 0
        self.cache_reads = 0

    def functions(self) -> list[FunctionTool]:
        def search(q: str) -> dict[str, Any]:
            """Search the web."""
            self.searches += 1
            return {"results": []}

        def read_cache(key: str) -> dict[str, Any]:
            """Read the local cache."""
            self.cache_reads += 1
            return {"cache": key, "hits": 1}

        return [FunctionTool(search), FunctionTool(read_cache)]


class AdkRun:
    """A real App + Runner + InMemorySessionService with the plugin and the default ladder on each session."""

    def __init__(self, *, config: SteeringConfig, listens_to_skips: bool = False, channel: bool = True) -> None:
        self.log = AwaitableSink()
        self.channel = ControlChannel() if channel else None
        self.plugin = GoldfivePlugin(
            control=self.channel, sinks=[self.log], config=config, session_setup=install_default_steering
        )
        self.model = stubborn(listens_to_skips)
        self.tools = Tools()
        agent = LlmAgent(name="weather", model=self.model, tools=self.tools.functions())
        self.app = App(name="escalation_test", root_agent=agent, plugins=[self.plugin])
        self.runner = Runner(app=self.app, session_service=InMemorySessionService())
        self.task: asyncio.Task[list[Event]] = asyncio.create_task(self._run())

    async def _run(self) -> list[Event]:
        session = await self.runner.session_service.create_session(app_name=self.app.name, user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="what is the weather?")])
        return [e async for e in self.runner.run_async(user_id="u", session_id=session.id, new_message=message)]

    async def events(self) -> list[Event]:
        async with asyncio.timeout(10):
            return await self.task

    async def send(self, kind: ControlKind, **payload: Any) -> Any:
        assert self.channel is not None
        return await self.channel.send(ControlMessage(kind, payload))


def _responses(events: list[Event]) -> list[dict[str, Any]]:
    return [dict(fr.response or {}) for e in events for fr in e.get_function_responses()]


LOOP_THEN_PAUSE = [
    ("LOOPING_TOOL_CALL", "WARNING", 2),
    ("LOOPING_TOOL_CALL", "CRITICAL", 3),
    ("LOOPING_TOOL_CALL", "CRITICAL", 4),
    ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 4),
]


async def test_adk_looping_agent_is_nudged_skipped_paused_and_follows_a_steer() -> None:
    run = AdkRun(config=loop_config())
    await run.log.first(human_needed)
    session = run.plugin.sessions[0]
    assert session.paused and session.pending_drift is not None
    status = await run.send(ControlKind.STATUS_QUERY)
    assert status.data["state"] == "paused" and status.data["pending_drift"]["drift_kind"] == "LOOPING_TOOL_CALL"

    ack = await run.send(ControlKind.STEER, text=STEER)
    events = await run.events()

    assert ack.ok
    assert run.log.drifts() == LOOP_THEN_PAUSE
    assert run.tools.searches == 2  # the 3rd call was skipped (level 3), the 4th held and then skipped
    assert run.tools.cache_reads == 1
    assert events[-1].content is not None and events[-1].content.parts is not None
    assert events[-1].content.parts[0].text == "followed the steer: the cache had it"
    # Level 2: the nudge reached the next model request (after the 2nd search).
    nudged = [r for r in run.model.requests if any("LOOPING_TOOL_CALL (WARNING)" in s for s in r.since_user)]
    assert nudged and nudged[0] is run.model.requests[2]
    # Level 3: the in-flight call was skipped with the corrective as its response.
    skipped = [r for r in _responses(events) if r.get("skipped")]
    assert skipped[0]["reason"] == "goldfive_intervention"
    assert "LOOPING_TOOL_CALL (CRITICAL)" in skipped[0]["detail"]
    # Level 4: the held call came back with the person's steer.
    assert STEER in skipped[1]["detail"]
    assert run.log.kinds()[-1] == "run_completed"


async def test_adk_resume_continues_the_run() -> None:
    # A ladder whose first CRITICAL loop already asks a person; the model gives up once a call is skipped.
    config = loop_config(ladder={DriftKind.LOOPING_TOOL_CALL: (0, 2, 4, 4)})
    run = AdkRun(config=config, listens_to_skips=True)
    await run.log.first(human_needed)
    ack = await run.send(ControlKind.RESUME)
    events = await run.events()
    assert ack.ok and ack.detail == "resumed"
    assert run.log.drifts() == [
        ("LOOPING_TOOL_CALL", "WARNING", 2),
        ("LOOPING_TOOL_CALL", "CRITICAL", 4),
        ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 4),
    ]
    assert run.tools.searches == 2
    assert events[-1].content is not None and events[-1].content.parts is not None
    assert events[-1].content.parts[0].text == "stopping: goldfive skipped my call"
    assert run.log.kinds()[-1] == "run_completed"


async def test_adk_cancel_while_paused_aborts_cleanly() -> None:
    run = AdkRun(config=loop_config())
    await run.log.first(human_needed)
    ack = await run.send(ControlKind.CANCEL, reason="enough")
    await run.events()
    assert ack.ok
    (aborted,) = run.log.of("run_aborted")
    assert aborted.run_aborted.status == types_pb2.RUN_STATUS_CANCELLED
    assert aborted.run_aborted.reason == "enough"
    assert run.tools.searches == 2


async def test_adk_deadline_expiry_aborts_naming_the_drift() -> None:
    run = AdkRun(config=loop_config(pause_escalate_deadline_s=0.02))
    await run.events()  # nobody answers
    looping = run.log.of("drift_detected")[2].drift_detected
    (aborted,) = run.log.of("run_aborted")
    assert aborted.run_aborted.status == types_pb2.RUN_STATUS_ABORTED
    assert looping.drift_id in aborted.run_aborted.reason
    assert "LOOPING_TOOL_CALL" in aborted.run_aborted.reason and "deadline of 0.02 s" in aborted.run_aborted.reason
    assert run.tools.searches == 2


async def test_adk_a_repeat_escalation_terminates_the_run() -> None:
    run = AdkRun(config=loop_config())
    await run.log.first(human_needed)
    await run.send(ControlKind.RESUME)  # the stubborn model loops again
    await run.events()
    assert run.log.drifts() == [
        *LOOP_THEN_PAUSE,
        ("LOOPING_TOOL_CALL", "CRITICAL", 4),
        ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 5),
    ]
    (aborted,) = run.log.of("run_aborted")
    final = run.log.of("drift_detected")[-1].drift_detected
    assert aborted.run_aborted.status == types_pb2.RUN_STATUS_ABORTED
    assert final.drift_id in aborted.run_aborted.reason
    assert "a person was needed again" in aborted.run_aborted.reason
    assert run.tools.searches == 2


async def test_adk_without_a_channel_the_escalation_is_emitted_and_the_repeat_aborts() -> None:
    run = AdkRun(config=loop_config(), channel=False)
    await run.events()
    assert run.log.drifts() == [
        *LOOP_THEN_PAUSE,
        ("LOOPING_TOOL_CALL", "CRITICAL", 4),
        ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 5),
    ]
    assert run.log.of("run_aborted")[0].run_aborted.status == types_pb2.RUN_STATUS_ABORTED
    assert run.tools.searches == 2


def ping_pong(to: str) -> ScriptedModel:
    """Hands control to ``to`` on every turn (two of these make a delegation loop)."""
    return ScriptedModel(model="ping-pong", then=Call("transfer_to_agent", {"agent_name": to}))


async def test_adk_runaway_delegation_escalates_to_a_person() -> None:
    log = AwaitableSink()
    channel = ControlChannel()
    config = loop_config(max_transfers=2)
    plugin = GoldfivePlugin(control=channel, sinks=[log], config=config, session_setup=install_default_steering)
    helper = LlmAgent(name="helper", model=ping_pong("boss"))
    boss = LlmAgent(name="boss", model=ping_pong("helper"), sub_agents=[helper])
    app = App(name="delegation_test", root_agent=boss, plugins=[plugin])
    runner = Runner(app=app, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name=app.name, user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="sort it out between you")])

    async def consume() -> list[Event]:
        return [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=message)]

    consuming = asyncio.create_task(consume())
    await log.first(human_needed)
    ack = await channel.send(ControlMessage(ControlKind.CANCEL, {"reason": "stop passing it around"}))
    async with asyncio.timeout(10):
        await consuming
    assert ack.ok
    assert log.drifts() == [
        ("RUNAWAY_DELEGATION", "CRITICAL", 3),
        ("RUNAWAY_DELEGATION", "CRITICAL", 4),
        ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 4),
    ]
    first = log.of("drift_detected")[0].drift_detected
    assert first.detail == "transfer 3 (to 'helper') is beyond the cap of 2 transfers"
    (aborted,) = log.of("run_aborted")
    assert aborted.run_aborted.status == types_pb2.RUN_STATUS_CANCELLED
