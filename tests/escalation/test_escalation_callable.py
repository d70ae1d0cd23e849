"""Flow C through real runs of a callable agent (``wrap``): nudge, re-invoke, pause, steer, resume, cancel, abort."""

from __future__ import annotations

import asyncio

import pytest
from escalation_support import LoopingAgent, Run, human_needed, loop_config

from goldfive_core import (
    ApprovalRequest,
    ControlChannel,
    ControlKind,
    ControlMessage,
    DefaultSteerer,
    Drift,
    DriftKind,
    DriftSeverity,
    InterventionLevel,
    RunStatus,
    Task,
    wrap,
)
from goldfive_core.adapters.callable import AgentTools
from goldfive_core.pb.v1 import types_pb2
from goldfive_core.testing import AwaitableSink

LOOP_THEN_PAUSE = [
    ("LOOPING_TOOL_CALL", "WARNING", 2),  # 2nd identical call: a nudge
    ("LOOPING_TOOL_CALL", "CRITICAL", 3),  # 3rd: the agent is cancelled and re-invoked
    ("LOOPING_TOOL_CALL", "CRITICAL", 4),  # 4th (after the re-invocation): a person is asked
    ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 4),
]


async def _paused(run: Run) -> None:
    """Wait for the escalation's HUMAN_INTERVENTION_REQUIRED event; the run is then paused."""
    await run.log.first(human_needed)
    assert run.runner.session is not None and run.runner.session.paused


async def test_a_looping_agent_is_paused_and_follows_a_persons_steer() -> None:
    agent = LoopingAgent()
    run = Run(agent, config=loop_config())
    await _paused(run)
    assert run.channel is not None

    steer = await run.channel.send(ControlMessage(ControlKind.STEER, {"text": "use yesterday's forecast"}))
    result = await run.result()

    assert steer.ok and "resumed" in steer.detail
    assert result.status is RunStatus.COMPLETED
    assert result.output == "followed: use yesterday's forecast"
    assert run.log.drifts() == LOOP_THEN_PAUSE
    human = run.log.of("drift_detected")[-1].drift_detected
    looping = run.log.of("drift_detected")[2].drift_detected
    assert human.detail == f"escalated from LOOPING_TOOL_CALL: {looping.detail}"
    assert agent.searches == 2  # calls 3 and 4 never ran the tool body
    assert agent.invocations == 2
    assert ("steer", "use yesterday's forecast") in agent.notes_seen


async def test_the_pause_is_dispatched_on_the_channel_with_the_escalation_payload() -> None:
    run = Run(LoopingAgent(), config=loop_config(pause_escalate_deadline_s=30))
    await _paused(run)
    session = run.runner.session
    assert session is not None and session.pending_drift is not None
    looping = run.log.of("drift_detected")[2].drift_detected
    assert session.pending_drift == {
        "reason": session.pending_drift["reason"],
        "drift_id": looping.drift_id,
        "drift_kind": "LOOPING_TOOL_CALL",
        "ladder_level": 4,
        "deadline_s": 30,
        "run_id": session.run_id,
    }
    assert "LOOPING_TOOL_CALL (CRITICAL)" in session.pending_drift["reason"]
    assert run.channel is not None and run.channel.statistics().dispatched == 1  # the steerer's own message
    await run.channel.send(ControlMessage(ControlKind.CANCEL, {}))
    await run.result()


async def test_status_query_reports_a_paused_run_without_emitting_events() -> None:
    run = Run(LoopingAgent(), config=loop_config(pause_escalate_deadline_s=30))
    await _paused(run)
    assert run.channel is not None and run.runner.session is not None
    session = run.runner.session
    waiting = asyncio.create_task(
        session.request_approval(ApprovalRequest(target_id="deploy", kind="task", prompt="deploy?", timeout_ms=60_000))
    )
    await run.log.first(lambda e: e.WhichOneof("payload") == "approval_requested")
    before = len(run.log.events)

    ack = await run.channel.send(ControlMessage(ControlKind.STATUS_QUERY, {}))

    assert len(run.log.events) == before
    assert ack.ok and ack.data is not None
    assert ack.data["state"] == "paused"
    assert ack.data["pending_drift"]["drift_kind"] == "LOOPING_TOOL_CALL"
    assert 0 < ack.data["escalation_deadline_in_s"] <= 30
    assert [(a["target_id"], a["prompt"]) for a in ack.data["pending_approvals"]] == [("deploy", "deploy?")]
    await run.channel.send(ControlMessage(ControlKind.RESUME, {}))
    running = await run.channel.send(ControlMessage(ControlKind.STATUS_QUERY, {}))
    assert running.data is not None and running.data["state"] == "running"
    assert running.data["pending_drift"] is None
    await run.channel.send(ControlMessage(ControlKind.CANCEL, {}))
    await run.result()
    assert (await waiting).decision == "cancelled"


async def test_resume_lets_the_run_continue_without_the_looping_call() -> None:
    agent = LoopingAgent(stop_when_skipped=True)
    run = Run(agent, config=loop_config())
    await _paused(run)
    assert run.channel is not None
    ack = await run.channel.send(ControlMessage(ControlKind.RESUME, {}))
    result = await run.result()
    assert ack.ok and ack.detail == "resumed"
    assert result.status is RunStatus.COMPLETED
    assert result.output == "stopped after a skipped call"
    assert agent.searches == 2 and agent.skipped == 1
    assert run.log.kinds()[-1] == "run_completed"


async def test_cancel_while_paused_aborts_cleanly() -> None:
    agent = LoopingAgent()
    run = Run(agent, config=loop_config())
    await _paused(run)
    assert run.channel is not None
    ack = await run.channel.send(ControlMessage(ControlKind.CANCEL, {"reason": "not worth it"}))
    result = await run.result()
    assert ack.ok
    assert result.status is RunStatus.CANCELLED and result.reason == "not worth it"
    aborted = run.log.of("run_aborted")
    assert len(aborted) == 1
    assert aborted[0].run_aborted.status == types_pb2.RUN_STATUS_CANCELLED
    assert aborted[0].run_aborted.reason == "not worth it"
    assert agent.searches == 2 and agent.skipped == 0  # the paused call never returned to the agent


async def test_nobody_answering_before_the_deadline_aborts_the_run_naming_the_drift() -> None:
    agent = LoopingAgent()
    run = Run(agent, config=loop_config(pause_escalate_deadline_s=0.02))
    result = await run.result()  # nobody answers
    looping = run.log.of("drift_detected")[2].drift_detected
    assert result.status is RunStatus.ABORTED
    assert "LOOPING_TOOL_CALL" in result.reason and looping.drift_id in result.reason
    assert "deadline of 0.02 s" in result.reason
    aborted = run.log.of("run_aborted")[0].run_aborted
    assert aborted.status == types_pb2.RUN_STATUS_ABORTED
    assert aborted.drift_id == looping.drift_id
    assert aborted.reason == result.reason
    assert agent.searches == 2 and agent.skipped == 0


async def test_a_repeat_escalation_terminates_the_run() -> None:
    agent = LoopingAgent()  # ignores the skip and calls again after RESUME
    run = Run(agent, config=loop_config())
    await _paused(run)
    assert run.channel is not None
    await run.channel.send(ControlMessage(ControlKind.RESUME, {}))
    result = await run.result()

    assert result.status is RunStatus.ABORTED
    assert run.log.drifts() == [
        *LOOP_THEN_PAUSE,
        ("LOOPING_TOOL_CALL", "CRITICAL", 4),
        ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 5),
    ]
    final = run.log.of("drift_detected")[-1].drift_detected
    aborted = run.log.of("run_aborted")[0].run_aborted
    assert aborted.drift_id == final.drift_id
    assert aborted.status == types_pb2.RUN_STATUS_ABORTED
    assert "a person was needed again" in aborted.reason and "LOOPING_TOOL_CALL" in aborted.reason
    assert agent.searches == 2 and agent.skipped == 1
    assert run.channel.statistics().dispatched == 2  # the escalation and RESUME: no second pause


async def test_without_a_channel_the_pause_is_not_dispatched_but_the_drifts_are_emitted() -> None:
    agent = LoopingAgent()
    run = Run(agent, config=loop_config(), channel=False)
    result = await run.result()
    # Level 4 emitted the escalation without pausing (nobody could resume); the repeat ended the run.
    assert run.log.drifts() == [
        *LOOP_THEN_PAUSE,
        ("LOOPING_TOOL_CALL", "CRITICAL", 4),
        ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 5),
    ]
    assert agent.skipped == 1  # the level-4 call came back at once: the run was never paused
    assert result.status is RunStatus.ABORTED


async def test_a_nudge_reaches_the_agent_through_its_tools() -> None:
    seen: list[list[str]] = []

    async def agent(task: Task, tools: AgentTools) -> str:
        for _ in range(2):
            assert await tools.before_tool("fetch", {"url": "https://example.org"})
        seen.append(await tools.checkpoint())
        assert await tools.before_tool("fetch", {"url": "https://example.org/other"})
        return "changed course"

    run = Run(agent, config=loop_config())
    result = await run.result()
    assert result.output == "changed course"
    assert run.log.drifts() == [("LOOPING_TOOL_CALL", "WARNING", 2)]
    assert len(seen[0]) == 1
    assert seen[0][0].startswith("[goldfive] LOOPING_TOOL_CALL (WARNING)")
    assert 'fetch({"url":"https://example.org"}) called 2 times' in seen[0][0]


async def test_level_3_cancels_the_agent_and_re_invokes_it_with_the_corrective() -> None:
    calls: list[list[str]] = []
    cleaned_up: list[int] = []

    async def agent(task: Task, tools: AgentTools) -> str:
        notes = tools.guidance()
        calls.append(notes)
        if notes:  # the corrective from the ladder: do something else
            return "re-planned"
        try:
            while True:
                await tools.before_tool("list_files", {"dir": "/"})
        finally:
            cleaned_up.append(len(calls))

    run = Run(agent, config=loop_config(loop_warning_repeats=10))
    result = await run.result()
    assert result.status is RunStatus.COMPLETED and result.output == "re-planned"
    assert run.log.drifts() == [("LOOPING_TOOL_CALL", "CRITICAL", 3)]
    assert len(calls) == 2 and calls[0] == []
    assert calls[1][0].startswith("[goldfive] LOOPING_TOOL_CALL (CRITICAL)")
    assert cleaned_up == [1]  # the first invocation was cancelled, its finally ran


async def test_level_3_escalates_once_the_re_invocation_budget_is_spent() -> None:
    run = Run(LoopingAgent(), config=loop_config(max_reinvokes=0))
    await _paused(run)
    assert run.log.drifts() == [
        ("LOOPING_TOOL_CALL", "WARNING", 2),
        ("LOOPING_TOOL_CALL", "CRITICAL", 4),
        ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 4),
    ]
    assert run.channel is not None
    await run.channel.send(ControlMessage(ControlKind.CANCEL, {}))
    assert (await run.result()).status is RunStatus.CANCELLED


async def test_a_user_detector_feeds_runner_steerer_and_a_person_steers() -> None:
    async def agent(task: Task, tools: AgentTools) -> str:
        await tools.report_task_started("draft", title="draft the reply")
        await runner.steerer.handle_drift(  # type: ignore[union-attr]
            Drift(DriftKind.INTENT_DIVERGENCE, DriftSeverity.CRITICAL, "writing a poem, asked for a memo")
        )
        return " / ".join(await tools.checkpoint())

    run = Run(agent, config=loop_config())
    runner = run.runner
    await _paused(run)
    assert isinstance(runner.steerer, DefaultSteerer)
    assert run.channel is not None
    await run.channel.send(ControlMessage(ControlKind.GOLDFIVE_STEER, {"text": "write the memo"}))
    result = await run.result()
    assert result.output == "write the memo"
    assert run.log.drifts() == [("INTENT_DIVERGENCE", "CRITICAL", 4), ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 4)]


async def test_the_agents_reports_are_drift_sources() -> None:
    async def agent(task: Task, tools: AgentTools) -> str:
        if tools.guidance():  # re-invoked with the ladder's corrective
            return "second try"
        await tools.report_task_started("a")
        await tools.report_plan_divergence("skipping the survey")
        await tools.report_task_blocked("the API is down", needed="a token")
        await tools.report_task_failed("disk full", recoverable=False)  # fatal: level 3 cancels and re-invokes
        await asyncio.sleep(0)  # stands in for the agent's next model call, where the cancellation lands
        raise AssertionError("not reached: the agent was cancelled")

    run = Run(agent, config=loop_config())
    result = await run.result()
    assert result.output == "second try"
    assert run.log.drifts() == [
        ("PLAN_DIVERGENCE", "WARNING", 0),
        ("BLOCKED", "WARNING", 1),
        ("TASK_FAILED_FATAL", "CRITICAL", 3),
    ]
    steerer = run.runner.steerer
    assert isinstance(steerer, DefaultSteerer)
    assert [d.kind for d in steerer.absorbed] == [DriftKind.BLOCKED]


async def test_an_absorbed_drift_reaches_the_planner_hook() -> None:
    absorbed: list[Drift] = []

    async def agent(task: Task, tools: AgentTools) -> None:
        await tools.report_task_blocked("waiting on review")

    runner = wrap(agent, sinks=[AwaitableSink()], config=loop_config())
    default_factory = runner.session_setup
    assert default_factory is not None

    def factory(session, channel):  # type: ignore[no-untyped-def]
        steerer = default_factory(session, channel)
        steerer.on_absorb = absorbed.append
        return steerer

    runner.session_setup = factory
    await runner.run()
    assert [(d.kind, d.detail) for d in absorbed] == [(DriftKind.BLOCKED, "waiting on review")]


async def test_a_step_budget_escalates_at_the_first_step_beyond_it() -> None:
    async def agent(task: Task, tools: AgentTools) -> int:
        steps = 0
        while not any("done" in n for n in await tools.checkpoint()):
            steps += 1
        return steps

    run = Run(agent, config=loop_config(max_steps=3))
    await _paused(run)
    assert run.log.drifts() == [("TOO_MANY_STEPS", "CRITICAL", 4), ("HUMAN_INTERVENTION_REQUIRED", "CRITICAL", 4)]
    assert "step 4 is beyond the step budget of 3" in run.log.of("drift_detected")[0].drift_detected.detail
    assert run.channel is not None
    await run.channel.send(ControlMessage(ControlKind.STEER, {"text": "you are done"}))
    assert (await run.result()).output == 3


async def test_two_runs_on_one_channel_only_the_drifting_one_pauses() -> None:
    release = asyncio.Event()

    async def agent(task: Task, tools: AgentTools) -> str:
        if task.input == "loop":
            while await tools.before_tool("poll", {}) or True:
                pass
        await release.wait()
        await tools.checkpoint()
        return "calm"

    log = AwaitableSink()
    channel = ControlChannel()
    runner = wrap(agent, control=channel, sinks=[log], config=loop_config(max_reinvokes=0))
    calm = asyncio.create_task(runner.run("calm"))
    looping = asyncio.create_task(runner.run("loop"))
    await log.first(human_needed)
    release.set()
    assert (await asyncio.wait_for(calm, 5)).output == "calm"
    await channel.send(ControlMessage(ControlKind.CANCEL, {}))
    assert (await asyncio.wait_for(looping, 5)).status is RunStatus.CANCELLED


@pytest.mark.parametrize("deadline", [0, -1, "soon", True])
async def test_a_malformed_escalation_deadline_is_refused(deadline: object) -> None:
    go = asyncio.Event()

    async def agent(task: Task, tools: AgentTools) -> None:
        await go.wait()
        await tools.checkpoint()

    run = Run(agent, config=loop_config())
    assert run.channel is not None
    ack = await run.channel.send(
        ControlMessage(ControlKind.GOLDFIVE_PAUSE_ESCALATE, {"reason": "x", "deadline_s": deadline})
    )
    assert not ack.ok and "deadline_s" in ack.detail
    assert run.runner.session is not None and run.runner.session.state == "running"
    go.set()
    assert (await run.result()).status is RunStatus.COMPLETED


def test_levels_are_ordered() -> None:
    assert list(InterventionLevel) == sorted(InterventionLevel)


async def test_an_approval_timeout_stays_emit_only_under_the_default_ladder() -> None:
    async def agent(task: Task, tools: AgentTools) -> str:
        first = await tools.report_awaiting_approval("deploy?", timeout_ms=1)
        second = await tools.report_awaiting_approval("deploy now?", timeout_ms=1)
        return f"{first['decision']}/{second['decision']}"

    run = Run(agent, config=loop_config())
    result = await run.result()
    assert result.output == "timeout/timeout"
    # Two HUMAN_INTERVENTION_REQUIRED warnings at level 0: no pause, no escalation, no abort.
    assert run.log.drifts() == [("HUMAN_INTERVENTION_REQUIRED", "WARNING", 0)] * 2
    steerer = run.runner.steerer
    assert isinstance(steerer, DefaultSteerer) and steerer.decisions == []
    assert run.channel is not None and run.channel.statistics().dispatched == 0
