"""Flow A (docs/flows/task-approval.md): report_awaiting_approval end to end through wrap() and a callable agent."""

from __future__ import annotations

import asyncio

from loop_support import HeldTimers

from goldfive_core import ControlKind, ControlMessage, SteeringConfig, TaskStatus
from goldfive_core.pb.v1 import types_pb2


def approve(target: str, **extra: str) -> ControlMessage:
    return ControlMessage(ControlKind.APPROVE, {"target_id": target, **extra})


def reject(target: str, **extra: str) -> ControlMessage:
    return ControlMessage(ControlKind.REJECT, {"target_id": target, **extra})


async def test_without_a_channel_the_answer_is_unavailable_at_once(harness) -> None:
    seen: dict[str, object] = {}

    async def agent(task, tools):
        before = len(tools.session.events.sinks[0].events)
        loop = asyncio.get_running_loop()
        with HeldTimers().hold(loop) as timers:
            # Driven by hand: the call must finish in its first step, never suspending (no waiter to
            # wait on, no timer to wait for; the default wait is 10 minutes).
            call = tools.report_awaiting_approval(prompt="spend 500 EUR")
            try:
                call.send(None)
            except StopIteration as done:
                out = done.value
            else:
                call.close()
                raise AssertionError("report_awaiting_approval suspended without a control channel")
        seen["timers"] = timers.timers
        seen["new_events"] = tools.session.events.sinks[0].kinds()[before:]
        seen["status"] = tools.session.tasks.get(task.id).status
        seen["stats"] = tools.session.approvals.statistics()
        return out

    h = harness(agent, channel=False)
    h.start()
    result = await h.result()
    assert result.output["decision"] == "unavailable"
    assert "no control channel" in result.output["detail"]
    assert seen["new_events"] == []  # no event
    assert seen["status"] is TaskStatus.RUNNING  # no BLOCKED
    assert seen["stats"].live == 0 and seen["stats"].waiters == 0  # no waiter
    assert seen["timers"] == []  # no timer


async def test_blocked_comes_before_approval_requested_and_approve_returns_the_decision(harness) -> None:
    observed: dict[str, object] = {}

    async def agent(task, tools):
        out = await tools.report_awaiting_approval(prompt="buy the 420 EUR ticket", timeout_ms=60_000)
        observed["events_at_return"] = len(tools.session.events.sinks[0].events)
        observed["status_at_return"] = tools.session.tasks.get(task.id).status
        await tools.report_task_completed(result="bought")
        return out

    h = harness(agent)
    h.start(task_id="buy-ticket")
    requested = await h.sink.first("approval_requested")
    session = h.runner.session
    assert session is not None
    assert session.tasks.get("buy-ticket").status is TaskStatus.BLOCKED
    kinds = h.sink.kinds()
    blocked_at = kinds.index("task_blocked")
    assert kinds.index("approval_requested") == blocked_at + 1
    blocked = h.sink.events[blocked_at].task_blocked
    assert (blocked.task_id, blocked.blocker, blocked.needed) == (
        "buy-ticket",
        "awaiting_approval",
        "buy the 420 EUR ticket",
    )
    req = requested.approval_requested
    assert (req.target_id, req.kind, req.prompt, req.task_id, req.timeout_ms) == (
        "buy-ticket",
        "task",
        "buy the 420 EUR ticket",
        "buy-ticket",
        60_000,
    )
    assert session.approvals.statistics().waiters == 1

    ack = await h.channel.send(approve("buy-ticket", detail="go ahead", decided_by="ana"))
    assert ack.ok and ack.detail == "approved 'buy-ticket'"
    result = await h.result()
    assert result.output == {"decision": "approve", "detail": "go ahead", "decided_by": "ana"}
    (granted,) = h.sink.of("approval_granted")
    assert (granted.approval_granted.target_id, granted.approval_granted.detail) == ("buy-ticket", "go ahead")
    assert granted.approval_granted.decided_by == "ana"
    assert granted.sequence < observed["events_at_return"]  # the event is out before the handler returns
    # goldfive never forces the next transition: the agent reported completion itself.
    assert observed["status_at_return"] is TaskStatus.BLOCKED
    assert result.tasks["buy-ticket"] is TaskStatus.COMPLETED
    assert session.approvals.statistics().live == 0


async def test_reject_returns_reject_with_the_reason(harness) -> None:
    async def agent(task, tools):
        return await tools.report_awaiting_approval(prompt="delete the database")

    h = harness(agent)
    h.start(task_id="drop")
    await h.sink.first("approval_requested")
    ack = await h.channel.send(reject("drop", reason="never", decided_by="bo"))
    assert ack.ok and ack.detail == "rejected 'drop'"
    result = await h.result()
    assert result.output == {"decision": "reject", "detail": "never", "decided_by": "bo"}
    (rejected,) = h.sink.of("approval_rejected")
    assert (rejected.approval_rejected.detail, rejected.approval_rejected.decided_by) == ("never", "bo")
    assert not h.sink.of("approval_granted")


async def test_timeout_keeps_the_task_blocked_warns_and_a_later_approve_still_resolves(harness) -> None:
    go_on = asyncio.Event()
    observed: dict[str, object] = {}

    async def agent(task, tools):
        out = await tools.report_awaiting_approval(prompt="pay", timeout_ms=3)
        observed["status"] = tools.session.tasks.get(task.id).status
        observed["timed_out_out"] = out
        await go_on.wait()
        return out

    h = harness(agent)
    h.start(task_id="pay")
    await h.sink.first("drift_detected")
    out = observed["timed_out_out"]
    assert out["decision"] == "timeout"
    assert "3 ms" in out["detail"]
    assert observed["status"] is TaskStatus.BLOCKED
    (timed_out,) = h.sink.of("approval_timed_out")
    assert (timed_out.approval_timed_out.target_id, timed_out.approval_timed_out.still_open) == ("pay", True)
    (drift,) = h.sink.of("drift_detected")
    assert drift.drift_detected.kind == types_pb2.HUMAN_INTERVENTION_REQUIRED == 37
    assert drift.drift_detected.severity == types_pb2.WARNING
    assert drift.drift_detected.task_id == "pay"
    assert drift.drift_detected.ladder_level == 0  # emit-only
    kinds = h.sink.kinds()
    assert kinds.index("approval_timed_out") < kinds.index("drift_detected")

    session = h.runner.session
    assert session is not None and session.approvals.open_targets() == ["pay"]
    late = await h.channel.send(approve("pay", decided_by="ana"))
    assert late.ok and "after its wait timed out" in late.detail
    (granted,) = h.sink.of("approval_granted")
    assert granted.approval_granted.decided_by == "ana"
    assert session.approvals.open_targets() == []
    again = await h.channel.send(approve("pay"))
    assert not again.ok and "already decided" in again.detail
    assert len(h.sink.of("approval_granted")) == 1
    go_on.set()
    assert (await h.result()).output["decision"] == "timeout"


async def test_no_positive_timeout_means_the_configured_default(harness) -> None:
    async def agent(task, tools):
        first = await tools.report_awaiting_approval(prompt="a")
        second = await tools.report_awaiting_approval(prompt="b", timeout_ms=-5)
        third = await tools.call("report_awaiting_approval", {"prompt": "c", "timeout_ms": 0})
        return [first["decision"], second["decision"], third["decision"]]

    h = harness(agent, config=SteeringConfig(approval_default_timeout_ms=2))
    h.start()
    assert (await h.result()).output == ["timeout"] * 3
    assert [e.approval_requested.timeout_ms for e in h.sink.of("approval_requested")] == [2, 2, 2]
    # Each re-request supersedes the timed-out record of the same task: announced, never reused.
    assert len(h.sink.of("approval_cancelled")) >= 2
    assert "superseded" in h.sink.of("approval_cancelled")[0].approval_cancelled.reason


async def test_the_target_defaults_to_the_current_task_and_task_id_picks_another(harness) -> None:
    async def agent(task, tools):
        await tools.report_task_started("sub", title="book hotel")
        first = await tools.report_awaiting_approval(prompt="hotel 90 EUR", timeout_ms=60_000)
        second = await tools.report_awaiting_approval(prompt="root thing", task_id=task.id, timeout_ms=60_000)
        return first, second

    h = harness(agent)
    h.start(task_id="trip")
    first = await h.sink.first("approval_requested")
    assert (first.approval_requested.target_id, first.approval_requested.task_id) == ("sub", "sub")
    assert (await h.channel.send(approve("sub"))).ok
    second = await h.sink.nth("approval_requested", 2)
    assert second.approval_requested.target_id == "trip"
    assert (await h.channel.send(reject("trip"))).ok
    out = (await h.result()).output
    assert (out[0]["decision"], out[1]["decision"]) == ("approve", "reject")


async def test_a_re_request_never_reuses_an_old_decision(harness) -> None:
    async def agent(task, tools):
        first = await tools.report_awaiting_approval(prompt="once", timeout_ms=60_000)
        second = await tools.report_awaiting_approval(prompt="twice", timeout_ms=60_000)
        return first["decision"], second["decision"]

    h = harness(agent)
    h.start(task_id="t")
    await h.sink.first("approval_requested")
    assert (await h.channel.send(approve("t"))).ok
    await h.sink.nth("approval_requested", 2)
    session = h.runner.session
    assert session is not None
    assert session.approvals.statistics().waiters == 1  # waiting again, not answered from memory
    assert len(h.sink.of("approval_granted")) == 1
    assert (await h.channel.send(reject("t"))).ok
    assert (await h.result()).output == ("approve", "reject")


async def test_a_second_concurrent_request_for_the_same_task_is_an_error(harness) -> None:
    dup_done = asyncio.Event()

    async def agent(task, tools):
        sink = tools.session.events.sinks[0]
        first = asyncio.create_task(tools.report_awaiting_approval(prompt="one", timeout_ms=60_000))
        await sink.first("approval_requested")
        blocked_events = len(sink.of("task_blocked"))
        dup = await tools.report_awaiting_approval(prompt="two", timeout_ms=60_000)
        assert len(sink.of("task_blocked")) == blocked_events  # the duplicate changed nothing
        dup_done.set()
        return dup, await first

    h = harness(agent)
    h.start(task_id="t")
    await dup_done.wait()
    assert len(h.sink.of("approval_requested")) == 1
    assert (await h.channel.send(approve("t"))).ok
    dup, first = (await h.result()).output
    assert "already waiting for a decision" in dup["error"]
    assert first["decision"] == "approve"
