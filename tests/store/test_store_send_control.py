"""send_control: the one way in for run controls from outside (the command line and goldfive serve call it)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from store_support import Backend, await_until

from goldfive_core import AgentTools, ControlKind, Task, wrap
from goldfive_core.approvals import Principal
from goldfive_core.store import StoreChannel, decide, send_control
from goldfive_core.store.sender import AmbiguousRunError, RunNotLiveError, UnknownRunError

ANN = Principal(name="ann", channel="cli")


async def _approval_agent(task: Task, tools: AgentTools) -> Any:
    await tools.report_task_started("t1")
    return await tools.report_awaiting_approval("deploy?", task_id="t1", timeout_ms=20_000)


async def test_a_run_control_reaches_the_live_run_and_is_refused_unposted_when_there_is_none(backend: Backend) -> None:
    channel = StoreChannel(backend.open())
    run = asyncio.create_task(wrap(_approval_agent, control=channel, sinks=[channel.sink]).run("go"))
    store = backend.open()
    await await_until(lambda: any(r.target_id == "t1" for r in store.approvals()), what="t1 pending")
    run_id = store.approvals_for("t1")[0].run_id
    who = {"decided_by": "ann", "channel": "cli"}

    paused = await asyncio.to_thread(send_control, store, ControlKind.PAUSE, {**who, "reason": "lunch"}, run=run_id)
    assert paused.ok and "paused" in paused.detail
    resumed = await asyncio.to_thread(send_control, store, ControlKind.RESUME, who)  # the only live run
    assert resumed.ok

    with pytest.raises(UnknownRunError, match="no run 'run-nope' in this store"):
        send_control(store, ControlKind.PAUSE, who, run="run-nope")
    with pytest.raises(ValueError, match="run controls"):
        send_control(store, ControlKind.APPROVE, {**who, "target_id": "t1"}, run=run_id)

    result = await asyncio.to_thread(decide, store, "t1", approve=True, principal=ANN)
    assert result.ok
    assert (await run).output["decision"] == "approve"
    await channel.aclose()
    with pytest.raises(RunNotLiveError, match=rf"run {run_id} is not running .*nothing was sent"):
        send_control(store, ControlKind.CANCEL, who, run=run_id)
    with pytest.raises(RunNotLiveError, match="no live run"):
        send_control(store, ControlKind.STEER, {**who, "text": "left"})
    assert store.pending_controls() == []  # nothing refused was ever posted


async def test_an_unnamed_run_control_with_several_live_runs_is_refused(backend: Backend) -> None:
    channel = StoreChannel(backend.open())
    runner = wrap(_approval_agent, control=channel, sinks=[channel.sink])
    runs = [asyncio.create_task(runner.run("go")) for _ in range(2)]
    store = backend.open()
    await await_until(lambda: len(store.approvals_for("t1")) == 2, what="two runs asking")
    with pytest.raises(AmbiguousRunError, match=r"several runs are live .*name one"):
        send_control(store, ControlKind.PAUSE, {"decided_by": "ann"})
    assert store.pending_controls() == []
    for row in store.approvals_for("t1"):
        assert (await asyncio.to_thread(decide, store, "t1", approve=False, principal=ANN, run_id=row.run_id)).ok
    await asyncio.gather(*runs)
    await channel.aclose()
