"""Reliability: junk control input always gets an ack, decisions race safely, and nothing leaks."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loop_support import HeldTimers, wait_all_tasks_blocked

from goldfive_core import (
    AckResult,
    ApprovalRequest,
    ControlAck,
    ControlChannel,
    ControlKind,
    ControlMessage,
    ControlRouter,
    InMemorySink,
    RunStatus,
    Session,
    SteeringConfig,
    wrap,
)
from goldfive_core.convert import ack_to_proto

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HUGE = "x" * 100_000
KEYS = [
    "target_id",
    "detail",
    "reason",
    "decided_by",
    "args_digest",
    "edited_args",
    "text",
    "to",
    "run_id",
    "session_id",
    "target",
    "deadline_s",
]


class _Weird:
    def __repr__(self) -> str:
        raise RuntimeError("repr is broken")


junk_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**30, max_value=10**40),
    st.floats(),
    st.text(max_size=30),
    st.sampled_from(["a", "t-1", "", "  ", HUGE]),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.builds(set),
    st.builds(_Weird),
)
payloads = st.one_of(
    st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=10), junk_values, max_size=6),
    st.dictionaries(st.integers(), junk_values, max_size=2),
    junk_values,
)
kinds = st.one_of(
    st.sampled_from(list(ControlKind)),
    st.sampled_from([k.value for k in ControlKind] + ["approve", "NOPE", "", HUGE]),
    st.integers(),
    st.none(),
    st.builds(_Weird),
)
ids = st.one_of(st.text(max_size=20), st.integers(), st.none(), st.just(HUGE), st.builds(_Weird))
wild = st.builds(ControlMessage, kind=kinds, payload=payloads, id=ids, issued_at_ms=st.integers() | st.none())
# Known kinds with the keys dispatch reads, holding junk: reaches the deep parsing paths far more often.
targeted = st.builds(
    ControlMessage,
    kind=st.sampled_from([k for k in ControlKind if k is not ControlKind.UNSPECIFIED]),
    payload=st.dictionaries(st.sampled_from(KEYS), junk_values, min_size=1, max_size=4),
)
messages = st.one_of(wild, targeted)
anything = st.one_of(messages, junk_values)


def _is_ack(ack: object, msg: object) -> None:
    assert isinstance(ack, ControlAck)
    assert isinstance(ack.result, AckResult)
    assert isinstance(ack.detail, str)
    if isinstance(msg, ControlMessage) and isinstance(msg.id, str):
        assert ack.control_id == msg.id
    ack_to_proto(ack)  # every ack can go on the wire (a store or a remote UI relays it)


@SETTINGS
@given(st.lists(anything, min_size=1, max_size=8))
def test_session_and_router_dispatch_always_answer(items: list[Any]) -> None:
    async def scenario() -> None:
        session = Session(config=SteeringConfig(), has_channel=True)
        session.start_task("t")
        router = ControlRouter(None)
        router.attach(session)
        status = ControlMessage(ControlKind.STATUS_QUERY)
        for item in items:
            _is_ack(session.dispatch(item), item)
            _is_ack(router.dispatch(item), item)
            _is_ack(session.dispatch(status), status)  # the state it left can still be reported

    asyncio.run(scenario())


@SETTINGS
@given(st.lists(anything, min_size=1, max_size=8))
def test_junk_over_the_channel_never_disturbs_a_running_agent(batch: list[Any]) -> None:
    async def scenario() -> None:
        sink = InMemorySink()
        channel = ControlChannel()
        asked = asyncio.Event()

        async def agent(task, tools):
            await tools.report_task_started("a", title="step a")
            asked.set()
            decision = await tools.report_awaiting_approval(prompt="go?", timeout_ms=60_000)
            await tools.checkpoint()
            await tools.report_task_completed(result=decision["decision"])
            return "done"

        runner = wrap(agent, control=channel, sinks=[sink], config=SteeringConfig())
        run = asyncio.create_task(runner.run("fuzz"))
        await asyncio.wait_for(asked.wait(), 5)
        await asyncio.sleep(0)
        cancelled = False
        for msg in batch:
            ack = await channel.send(msg)
            _is_ack(ack, msg)
            cancelled |= ack.ok and isinstance(msg, ControlMessage) and msg.kind is ControlKind.CANCEL
        await channel.send(ControlMessage(ControlKind.RESUME))
        await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": "a"}))
        result = await asyncio.wait_for(run, 5)
        if cancelled:
            assert result.status is RunStatus.CANCELLED
        else:
            assert (result.status, result.output) == (RunStatus.COMPLETED, "done"), result.reason
        assert [e.sequence for e in sink.events] == list(range(len(sink.events)))
        assert runner.session is not None and runner.session.approvals.statistics().live == 0

    asyncio.run(scenario())


def _request(target: str, timeout_ms: int = 60_000) -> ApprovalRequest:
    return ApprovalRequest(target_id=target, kind="task", prompt="?", timeout_ms=timeout_ms, keep_open_on_timeout=True)


@pytest.mark.parametrize("first", [ControlKind.APPROVE, ControlKind.REJECT])
async def test_two_decisions_racing_for_one_record_exactly_one_wins(first: ControlKind) -> None:
    other = ControlKind.REJECT if first is ControlKind.APPROVE else ControlKind.APPROVE
    for _ in range(50):
        sink = InMemorySink()
        channel = ControlChannel()
        session = Session(sinks=[sink], config=SteeringConfig(), has_channel=True)
        ControlRouter(channel).attach(session)
        waiting = asyncio.create_task(session.request_approval(_request("r")))
        await asyncio.sleep(0)
        racers = [
            asyncio.create_task(channel.send(ControlMessage(kind, {"target_id": "r", "decided_by": kind.value})))
            for kind in (first, other)
        ]
        acks = await asyncio.gather(*racers)
        outcome = await waiting
        winners = [a for a in acks if a.ok]
        assert len(winners) == 1
        assert "already decided" in next(a for a in acks if not a.ok).detail
        resolutions = sink.of("approval_granted") + sink.of("approval_rejected")
        assert len(resolutions) == 1
        winner_kind = first  # tasks start in creation order on one loop
        assert outcome.decided_by == winner_kind.value
        assert outcome.decision == ("approve" if winner_kind is ControlKind.APPROVE else "reject")


def _timed_session() -> tuple[InMemorySink, Session]:
    sink = InMemorySink()
    return sink, Session(sinks=[sink], config=SteeringConfig(), has_channel=True)


def _approve(session: Session) -> ControlAck:
    return session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": "r"}))


async def test_a_decision_before_the_timeout_disarms_the_timer() -> None:
    sink, session = _timed_session()
    with HeldTimers().hold(asyncio.get_running_loop()) as timers:
        waiting = asyncio.create_task(session.request_approval(_request("r", timeout_ms=1)))
        await wait_all_tasks_blocked()
        timer = timers.only()
        assert timer.delay <= 0.001  # the request's 1 ms
        assert _approve(session).ok
        assert (await waiting).decision == "approve"
        assert timers.armed() == []  # no timer left holding the waiter
    assert (len(sink.of("approval_granted")), len(sink.of("approval_timed_out"))) == (1, 0)
    assert session.approvals.statistics().live == 0


async def test_the_timeout_first_then_a_late_decision_still_resolves_the_record() -> None:
    sink, session = _timed_session()
    with HeldTimers().hold(asyncio.get_running_loop()) as timers:
        waiting = asyncio.create_task(session.request_approval(_request("r", timeout_ms=1)))
        await wait_all_tasks_blocked()
        timers.only().fire()
        assert (await waiting).decision == "timeout"
    assert sink.of("approval_timed_out")[0].approval_timed_out.still_open
    ack = _approve(session)
    assert ack.ok and "after its wait timed out" in ack.detail  # late, on a record kept open
    assert (len(sink.of("approval_granted")), len(sink.of("approval_timed_out"))) == (1, 1)
    assert session.approvals.statistics().live == 0


async def test_a_decision_between_the_timer_firing_and_the_waiter_resuming_wins() -> None:
    sink, session = _timed_session()
    with HeldTimers().hold(asyncio.get_running_loop()) as timers:
        waiting = asyncio.create_task(session.request_approval(_request("r", timeout_ms=1)))
        await wait_all_tasks_blocked()
        timers.only().fire()  # the waiter now holds "timeout", but its task has not run yet
        assert _approve(session).ok
        assert (await waiting).decision == "approve"
    assert (len(sink.of("approval_granted")), len(sink.of("approval_timed_out"))) == (1, 0)
    assert session.approvals.statistics().live == 0


async def test_a_cancelled_wait_disarms_its_timer() -> None:
    _, session = _timed_session()
    with HeldTimers().hold(asyncio.get_running_loop()) as timers:
        waiting = asyncio.create_task(session.request_approval(_request("r")))
        await wait_all_tasks_blocked()
        assert 59 < timers.only().delay <= 60  # the request's 60 s
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert timers.armed() == []
    assert session.approvals.statistics().live == 0


async def test_a_decision_racing_a_cancel(sink) -> None:
    channel = ControlChannel()

    async def agent(task, tools):
        return await tools.report_awaiting_approval(prompt="go?", timeout_ms=60_000)

    runner = wrap(agent, control=channel, sinks=[sink], config=SteeringConfig())
    run = asyncio.create_task(runner.run(task_id="r"))
    await sink.first("approval_requested")
    cancel, approve = await asyncio.gather(
        channel.send(ControlMessage(ControlKind.CANCEL)),
        channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": "r"})),
    )
    result = await run
    assert cancel.ok
    assert result.status is RunStatus.CANCELLED
    assert not approve.ok and "'r'" in approve.detail  # withdrawn by the cancel that came first
    assert len(sink.of("approval_cancelled")) == 1 and not sink.of("approval_granted")


async def test_ten_thousand_request_cancel_cycles_leave_nothing_behind() -> None:
    session = Session(config=SteeringConfig(), has_channel=True)
    for i in range(10_000):
        waiting = asyncio.create_task(session.request_approval(_request(f"t{i % 7}")))
        if i % 3:
            await asyncio.sleep(0)  # cancel while waiting; otherwise before the wait even started
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    stats = session.approvals.statistics()
    assert (stats.live, stats.pending, stats.waiters, stats.timed_out) == (0, 0, 0, 0)
    assert session.approvals.open_targets() == []


async def test_ten_thousand_decided_requests_keep_memory_bounded() -> None:
    session = Session(config=SteeringConfig(decided_history=64), has_channel=True)
    for i in range(10_000):
        waiting = asyncio.create_task(session.request_approval(_request(f"t{i}")))
        await asyncio.sleep(0)
        assert session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": f"t{i}"})).ok
        assert (await waiting).decision == "approve"
    stats = session.approvals.statistics()
    assert (stats.live, stats.waiters, stats.decided_remembered) == (0, 0, 64)


@pytest.mark.parametrize(
    "msg",
    [
        ControlMessage(ControlKind.GOLDFIVE_PAUSE_ESCALATE, {"deadline_s": 10**400}),
        ControlMessage(ControlKind.GOLDFIVE_PAUSE_ESCALATE, {"deadline_s": _Weird()}),
        ControlMessage(ControlKind.GOLDFIVE_PAUSE_ESCALATE, {"deadline_s": float("nan")}),
        ControlMessage(ControlKind.GOLDFIVE_PAUSE_ESCALATE, {"reason": "r", "extra": {1, 2}}),
        ControlMessage(ControlKind.GOLDFIVE_PAUSE_ESCALATE, {"reason": "r", 3: "non-string key"}),
        ControlMessage(_Weird(), {}),  # type: ignore[arg-type]
        ControlMessage(ControlKind.PAUSE, {"reason": HUGE}),
        ControlMessage(ControlKind.APPROVE, {"target_id": HUGE}),
        ControlMessage(ControlKind.STEER, {"text": HUGE}),
        ControlMessage(ControlKind.PAUSE, [("reason", "x")]),  # type: ignore[arg-type]
        ControlMessage(ControlKind.PAUSE, id=None),  # type: ignore[arg-type]
    ],
)
def test_known_bad_messages_get_a_failure_ack(msg: ControlMessage) -> None:
    session = Session(config=SteeringConfig(), has_channel=True)
    router = ControlRouter(None)
    router.attach(session)
    for ack in (session.dispatch(msg), router.dispatch(msg)):
        assert ack.result is AckResult.FAILURE
        assert len(ack.detail) < 1000  # says what is wrong without echoing a huge value
    assert session.state == "running"
