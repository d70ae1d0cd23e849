"""ControlChannel: acks once dispatched, dispatch while the agent waits, backlog until a run binds."""

from __future__ import annotations

import asyncio

import pytest
from loop_support import wait_all_tasks_blocked

from goldfive_core import (
    AckResult,
    ChannelBusyError,
    ControlAck,
    ControlChannel,
    ControlKind,
    ControlMessage,
    ControlRouter,
    Session,
)


async def settle() -> None:
    """Wait until no task can run any more (only for asserting that something did NOT happen)."""
    await wait_all_tasks_blocked()


async def test_send_returns_the_ack_once_the_bound_run_dispatched_it() -> None:
    channel = ControlChannel()
    router = ControlRouter(channel)
    session = Session(has_channel=True)
    router.attach(session)
    ack = await channel.send(ControlMessage(ControlKind.PAUSE, {"reason": "lunch"}, id="c-1"))
    assert ack.control_id == "c-1"
    assert ack.result is AckResult.SUCCESS
    assert session.paused
    assert channel.statistics().dispatched == 1


async def test_an_approval_lands_while_the_agent_is_blocked_in_a_tool_call(harness) -> None:
    async def agent(task, tools):
        return await tools.report_awaiting_approval(prompt="pay 20 EUR", timeout_ms=60_000)

    h = harness(agent)
    h.start()
    requested = await h.sink.first("approval_requested")
    ack = await h.channel.send(
        ControlMessage(ControlKind.APPROVE, {"target_id": requested.approval_requested.target_id, "detail": "fine"})
    )
    assert ack.ok, ack.detail
    result = await h.result()
    assert result.output == {"decision": "approve", "detail": "fine"}


async def test_a_pause_sent_before_any_run_means_the_run_starts_paused(harness) -> None:
    started = asyncio.Event()

    async def agent(task, tools):
        started.set()
        return "done"

    h = harness(agent)
    pending = h.channel.send_nowait(ControlMessage(ControlKind.PAUSE, {"reason": "wait for me"}))
    assert not pending.done()  # nothing is listening yet
    assert h.channel.statistics().backlog == 1
    h.start()
    ack = await pending
    assert ack.ok and "paused" in ack.detail
    await settle()
    assert not started.is_set()
    assert h.runner.session is not None and h.runner.session.paused
    assert (await h.channel.send(ControlMessage(ControlKind.RESUME))).ok
    assert (await h.result()).output == "done"
    assert started.is_set()


async def test_send_nowait_returns_a_done_future_when_bound() -> None:
    channel = ControlChannel()
    router = ControlRouter(channel)
    router.attach(Session(has_channel=True))
    fut = channel.send_nowait(ControlMessage(ControlKind.STATUS_QUERY))
    assert fut.done()
    assert fut.result().ok
    assert fut.result().data is not None and fut.result().data["state"] == "running"


async def test_acks_are_never_lost_and_come_back_in_send_order() -> None:
    channel = ControlChannel()
    messages = [
        ControlMessage(ControlKind.PAUSE, id="m0"),
        ControlMessage("BOGUS", id="m1"),
        ControlMessage(ControlKind.APPROVE, {"target_id": "nope"}, id="m2"),
        ControlMessage(ControlKind.STEER, {"text": "go left"}, id="m3"),
        ControlMessage(ControlKind.REWIND_TO, {"to": "x"}, id="m4"),
        ControlMessage(ControlKind.STATUS_QUERY, id="m5"),
    ]
    order: list[str] = []
    futures = [channel.send_nowait(m) for m in messages]
    for fut in futures:
        fut.add_done_callback(lambda f: order.append(f.result().control_id))
    router = ControlRouter(channel)
    router.attach(Session(has_channel=True))
    acks = await asyncio.gather(*futures)
    assert [a.control_id for a in acks] == [m.id for m in messages]
    await settle()
    assert order == [m.id for m in messages]
    assert [a.result for a in acks] == [
        AckResult.SUCCESS,
        AckResult.FAILURE,
        AckResult.FAILURE,
        AckResult.SUCCESS,
        AckResult.UNSUPPORTED,
        AckResult.SUCCESS,
    ]
    assert "unknown control kind 'BOGUS'" in acks[1].detail
    assert "'nope'" in acks[2].detail


async def test_send_timeout_withdraws_the_message() -> None:
    channel = ControlChannel()
    ack = await channel.send(ControlMessage(ControlKind.PAUSE, id="late"), timeout=0.002)
    assert ack.result is AckResult.FAILURE
    assert ack.control_id == "late"
    assert "no run bound this channel" in ack.detail
    assert channel.statistics().backlog == 0
    session = Session(has_channel=True)
    ControlRouter(channel).attach(session)
    assert not session.paused  # withdrawn: never dispatched later
    assert channel.statistics().dispatched == 0


async def test_send_with_timeout_returns_the_ack_when_a_run_binds_in_time() -> None:
    channel = ControlChannel()
    sender = asyncio.create_task(channel.send(ControlMessage(ControlKind.PAUSE), timeout=5))
    await settle()
    session = Session(has_channel=True)
    ControlRouter(channel).attach(session)
    assert (await sender).ok
    assert session.paused


async def test_a_cancelled_sender_withdraws_its_message() -> None:
    channel = ControlChannel()
    sender = asyncio.create_task(channel.send(ControlMessage(ControlKind.PAUSE)))
    await settle()
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sender
    session = Session(has_channel=True)
    ControlRouter(channel).attach(session)
    assert not session.paused


async def test_a_full_backlog_refuses_with_a_failure_ack() -> None:
    channel = ControlChannel(max_backlog=2)
    channel.send_nowait(ControlMessage(ControlKind.PAUSE))
    channel.send_nowait(ControlMessage(ControlKind.PAUSE))
    refused = await channel.send(ControlMessage(ControlKind.PAUSE, id="third"))
    assert refused.result is AckResult.FAILURE and "max_backlog=2" in refused.detail
    with pytest.raises(ValueError):
        ControlChannel(max_backlog=0)


async def test_one_dispatcher_at_a_time_and_unbind_frees_the_channel() -> None:
    channel = ControlChannel()
    first, second = ControlRouter(channel), ControlRouter(channel)
    a, b = Session(has_channel=True), Session(has_channel=True)
    first.attach(a)
    with pytest.raises(ChannelBusyError, match="already bound"):
        second.attach(b)
    second.detach(b)
    first.detach(a)
    assert not channel.bound
    second.attach(b)
    assert (await channel.send(ControlMessage(ControlKind.PAUSE))).ok
    assert b.paused and not a.paused


async def test_a_runner_reuses_its_channel_across_runs(harness) -> None:
    async def agent(task, tools):
        return "ok"

    h = harness(agent)
    for _ in range(3):
        h.start()
        assert (await h.result()).output == "ok"
        assert not h.channel.bound


async def test_a_broken_dispatcher_still_yields_an_ack() -> None:
    channel = ControlChannel()

    def raises(msg: ControlMessage) -> ControlAck:
        raise RuntimeError("boom")

    channel.bind(raises)
    ack = await channel.send(ControlMessage(ControlKind.PAUSE, id="x"))
    assert (ack.result, ack.control_id) == (AckResult.FAILURE, "x")
    assert "internal error" in ack.detail and "boom" in ack.detail
    channel.unbind(raises)

    def returns_junk(msg: ControlMessage) -> ControlAck:
        return "yes"  # type: ignore[return-value]

    channel.bind(returns_junk)
    ack = await channel.send(ControlMessage(ControlKind.PAUSE, id="y"))
    assert ack.result is AckResult.FAILURE and "not a ControlAck" in ack.detail


async def test_a_cancelled_sender_with_a_timeout_withdraws_its_message_too() -> None:
    channel = ControlChannel()
    sender = asyncio.create_task(channel.send(ControlMessage(ControlKind.PAUSE), timeout=60))
    await settle()
    assert channel.statistics().backlog == 1
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sender
    assert channel.statistics().backlog == 0
    session = Session(has_channel=True)
    ControlRouter(channel).attach(session)
    assert not session.paused


async def test_steer_accepts_the_upstream_note_and_author_keys() -> None:
    session = Session(has_channel=True)
    session.pause("wait")
    ack = session.dispatch(ControlMessage(ControlKind.STEER, {"note": "try the staging db", "author": "ana"}))
    assert ack.ok and ack.detail == "steer queued for the agent's next turn; run resumed"
    assert [g.text for g in session.take_guidance()] == ["try the staging db (from ana)"]
    ours = session.dispatch(ControlMessage(ControlKind.STEER, {"text": "go left", "note": "ignored"}))
    assert ours.ok and [g.text for g in session.take_guidance()] == ["go left"]
    neither = session.dispatch(ControlMessage(ControlKind.STEER, {"author": "ana"}))
    assert not neither.ok and "missing text" in neither.detail
    bad_author = session.dispatch(ControlMessage(ControlKind.STEER, {"note": "x", "author": 7}))
    assert not bad_author.ok and "payload['author'] must be a string" in bad_author.detail


async def test_a_message_for_a_run_that_ended_is_answered_at_once() -> None:
    from goldfive_core import AgentTools, InMemorySink, Task, wrap

    channel = ControlChannel()
    sink = InMemorySink()

    async def agent(task: Task, tools: AgentTools) -> object:
        await tools.report_task_started("deploy-1")
        return await tools.report_awaiting_approval("deploy?", task_id="deploy-1", timeout_ms=60_000)

    runner = wrap(agent, control=channel, sinks=[sink])
    run = asyncio.create_task(runner.run("go"))
    await sink.wait_for("approval_requested")
    assert (await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": "deploy-1"}))).ok
    result = await run
    run_id = result.run_id
    assert not channel.bound
    # Nothing is bound now; before, these waited for a run that would never come.
    late = await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": "deploy-1"}))
    assert late.result is AckResult.FAILURE and late.detail == f"run {run_id} ended (finished); nothing was changed"
    paused = await channel.send(ControlMessage(ControlKind.PAUSE, {"run_id": run_id}))
    assert paused.result is AckResult.FAILURE and f"run {run_id} ended" in paused.detail
    assert channel.statistics().backlog == 0


async def test_send_waits_for_a_run_within_a_bound_by_default() -> None:
    import inspect

    from goldfive_core.control import DEFAULT_SEND_TIMEOUT_S, ControlTransport
    from goldfive_core.store import StoreChannel

    for transport in (ControlChannel, StoreChannel):
        default = inspect.signature(transport.send).parameters["timeout"].default
        assert default == DEFAULT_SEND_TIMEOUT_S and default is not None
    assert isinstance(ControlChannel(), ControlTransport)
    assert not issubclass(StoreChannel, ControlChannel)  # peers behind one Protocol, not a subclass
    ack = await ControlChannel().send(ControlMessage(ControlKind.PAUSE, {}), timeout=0.01)
    assert ack.result is AckResult.FAILURE and "no run bound this channel within 0.01s" in ack.detail
