"""wrap() and Runner: how a run ends (completed, failed, cancelled) and what it tells observers."""

from __future__ import annotations

import asyncio

import pytest
from loop_support import wait_all_tasks_blocked

from goldfive_core import ControlKind, ControlMessage, RunStatus, TaskStatus, wrap
from goldfive_core.pb.v1 import types_pb2


async def test_a_completed_run_reports_its_output_and_closes_its_tasks(harness) -> None:
    async def agent(task, tools):
        await tools.report_task_started("left-open")
        return {"answer": 42, "task": task.id, "input": task.input}

    h = harness(agent, channel=False)
    h.start({"q": "life"}, task_id="root", title="ask")
    result = await h.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output == {"answer": 42, "task": "root", "input": {"q": "life"}}
    assert result.tasks == {"root": TaskStatus.COMPLETED, "left-open": TaskStatus.CANCELLED}
    kinds = h.sink.kinds()
    assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
    started = h.sink.events[0].run_started
    assert (started.adapter, started.root_task_id) == ("callable", "root")
    assert h.sink.events[-1].run_completed.status == types_pb2.RUN_STATUS_COMPLETED


async def test_cancel_while_the_agent_waits_for_approval(harness) -> None:
    async def agent(task, tools):
        return await tools.report_awaiting_approval(prompt="wire 1M EUR", timeout_ms=60_000)

    h = harness(agent)
    h.start(task_id="wire")
    await h.sink.first("approval_requested")
    ack = await h.channel.send(ControlMessage(ControlKind.CANCEL, {"reason": "changed my mind"}))
    assert ack.ok
    result = await h.result()
    assert result.status is RunStatus.CANCELLED
    assert result.reason == "changed my mind"
    (cancelled,) = h.sink.of("approval_cancelled")
    assert cancelled.approval_cancelled.target_id == "wire"
    assert "changed my mind" in cancelled.approval_cancelled.reason
    (aborted,) = h.sink.of("run_aborted")
    assert aborted.run_aborted.status == types_pb2.RUN_STATUS_CANCELLED
    assert aborted.run_aborted.reason == "changed my mind"
    assert result.tasks["wire"] is TaskStatus.CANCELLED
    assert h.runner.session is not None and h.runner.session.approvals.statistics().live == 0
    again = await h.channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": "wire"}), timeout=0.001)
    assert not again.ok  # nobody is listening any more


async def test_an_agent_exception_fails_the_run_with_the_error(harness) -> None:
    async def agent(task, tools):
        await tools.report_task_progress("about to break")
        raise KeyError("missing price")

    h = harness(agent, channel=False)
    h.start()
    result = await h.result()
    assert result.status is RunStatus.FAILED
    assert isinstance(result.error, KeyError)
    assert "missing price" in result.reason
    assert h.sink.of("run_aborted")[0].run_aborted.status == types_pb2.RUN_STATUS_FAILED


async def test_a_failed_root_task_fails_the_run(harness) -> None:
    async def agent(task, tools):
        await tools.report_task_failed("no seats left", recoverable=False)
        return "gave up"

    h = harness(agent, channel=False)
    h.start()
    result = await h.result()
    assert (result.status, result.output, result.reason) == (RunStatus.FAILED, "gave up", "the root task failed")


async def test_a_caller_cancelling_run_gets_cancelled_error_and_observers_are_told(harness) -> None:
    async def agent(task, tools):
        return await tools.report_awaiting_approval(prompt="wait forever?", timeout_ms=60_000)

    h = harness(agent)
    run = h.start(task_id="t")
    await h.sink.first("approval_requested")
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert len(h.sink.of("approval_cancelled")) == 1
    assert h.sink.of("run_aborted")[0].run_aborted.status == types_pb2.RUN_STATUS_CANCELLED
    session = h.runner.session
    assert session is not None and session.state == "cancelled"
    assert session.approvals.statistics().live == 0
    assert not h.channel.bound


async def test_pause_holds_the_agent_at_its_next_report_until_resume(harness) -> None:
    reached = asyncio.Event()
    release = asyncio.Event()

    async def agent(task, tools):
        reached.set()
        await release.wait()
        await tools.report_task_progress("after the pause")
        return "done"

    h = harness(agent)
    h.start()
    await reached.wait()
    assert (await h.channel.send(ControlMessage(ControlKind.PAUSE))).ok
    release.set()
    await wait_all_tasks_blocked()  # the agent went as far as it could
    assert not h.sink.of("task_progress")  # held at the gate
    assert not h.task.done()
    assert (await h.channel.send(ControlMessage(ControlKind.RESUME))).ok
    assert (await h.result()).output == "done"
    assert h.sink.of("task_progress")


async def test_steer_reaches_the_agent_as_guidance(harness) -> None:
    reached = asyncio.Event()
    release = asyncio.Event()

    async def agent(task, tools):
        reached.set()
        await release.wait()
        return await tools.checkpoint()

    h = harness(agent)
    h.start()
    await reached.wait()
    ack = await h.channel.send(ControlMessage(ControlKind.STEER, {"text": "use the cheaper flight"}))
    assert ack.ok
    release.set()
    assert (await h.result()).output == ["use the cheaper flight"]


async def test_an_agent_that_swallows_its_cancellation_is_still_cancelled(harness) -> None:
    waiting = asyncio.Event()

    async def agent(task, tools):
        try:
            waiting.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "pretending nothing happened"
        return "unreachable"

    h = harness(agent)
    h.start()
    await waiting.wait()
    assert (await h.channel.send(ControlMessage(ControlKind.CANCEL))).ok
    result = await h.result()
    assert result.status is RunStatus.CANCELLED


async def test_two_runs_share_a_runner_and_decisions_reach_the_right_one(harness) -> None:
    async def agent(task, tools):
        return await tools.report_awaiting_approval(prompt=f"ok for {task.id}?", timeout_ms=60_000)

    h = harness(agent)
    first = asyncio.create_task(h.runner.run(task_id="one"))
    second = asyncio.create_task(h.runner.run(task_id="two"))
    await h.sink.nth("approval_requested", 2)
    status = await h.channel.send(ControlMessage(ControlKind.STATUS_QUERY))
    assert status.ok and status.data is not None and len(status.data["runs"]) == 2
    assert (await h.channel.send(ControlMessage(ControlKind.REJECT, {"target_id": "two"}))).ok
    assert (await h.channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": "one"}))).ok
    one, two = await asyncio.gather(first, second)
    assert (one.output["decision"], two.output["decision"]) == ("approve", "reject")
    assert one.run_id != two.run_id


async def test_a_run_addressed_by_id_and_an_unknown_one(harness) -> None:
    async def agent(task, tools):
        await tools.checkpoint()
        return "ok"

    h = harness(agent)
    h.start()
    await h.sink.first("task_started")
    session = h.runner.session
    assert session is not None
    wrong = await h.channel.send(ControlMessage(ControlKind.PAUSE, {"run_id": "run-nope"}))
    assert not wrong.ok and "no active run 'run-nope'" in wrong.detail
    assert (await h.channel.send(ControlMessage(ControlKind.STATUS_QUERY, {"run_id": session.run_id}))).ok
    assert (await h.result()).output == "ok"


def test_wrap_refuses_what_is_not_an_agent() -> None:
    with pytest.raises(TypeError, match="wrap\\(\\) takes an Adapter or an async callable"):
        wrap(42)  # type: ignore[arg-type]


async def test_a_sync_agent_fails_the_run_with_a_clear_error(harness) -> None:
    def agent(task, tools):
        return "not awaitable"

    h = harness(agent, channel=False)
    h.start()
    result = await h.result()
    assert result.status is RunStatus.FAILED
    assert "must be async" in str(result.error)


async def test_the_run_end_event_is_last_even_with_an_open_timed_out_approval(harness) -> None:
    async def agent(task, tools):
        out = await tools.report_awaiting_approval(prompt="pay?", timeout_ms=1)
        await tools.report_task_completed(result="not paid")
        return out["decision"]

    h = harness(agent)
    h.start(task_id="pay")
    result = await h.result()
    assert result.output == "timeout"
    kinds = h.sink.kinds()
    assert kinds[-2:] == ["approval_cancelled", "run_completed"]
    assert h.sink.of("approval_cancelled")[0].approval_cancelled.reason == "the run ended"


async def test_session_setup_is_the_one_name_and_steerer_factory_still_works_with_a_warning() -> None:
    from goldfive_core import Session
    from goldfive_core.lifecycle import SessionSetup

    seen: list[str] = []

    def setup(session: Session, channel: object) -> None:
        seen.append(session.run_id)

    async def agent(task, tools) -> str:  # type: ignore[no-untyped-def]
        return "ok"

    runner = wrap(agent, session_setup=setup)
    result = await runner.run()
    assert seen == [result.run_id] and runner.steerer is None  # the setup ran and installed no steerer

    with pytest.warns(DeprecationWarning, match=r"Runner\.steerer_factory is deprecated; use session_setup"):
        assert runner.steerer_factory is setup
    with pytest.warns(DeprecationWarning, match="steerer_factory is deprecated"):
        runner.steerer_factory = None
    assert runner.session_setup is None
    await runner.run()
    assert len(seen) == 1  # the old name set the same thing

    old_name = r"SteererFactory is deprecated; use goldfive_core\.lifecycle\.SessionSetup"
    with pytest.warns(DeprecationWarning, match=old_name):
        from goldfive_core.runner import SteererFactory
    assert SteererFactory is SessionSetup
