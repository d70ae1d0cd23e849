"""StoreChannel in one process: wrap() accepts it, decisions via the store resume the agent, faults are survived."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest
from store_support import Backend, await_until

from goldfive_core import AgentTools, ControlKind, ControlMessage, InMemorySink, Task, wrap
from goldfive_core.control import AckResult, check_message
from goldfive_core.store import SqliteStore, StoreChannel, StoreUnavailableError


def _approval_agent(target: str, timeout_ms: int = 10_000) -> Any:
    async def agent(task: Task, tools: AgentTools) -> Any:
        await tools.report_task_started(target)
        return await tools.report_awaiting_approval("deploy?", task_id=target, timeout_ms=timeout_ms)

    return agent


async def _pending(backend: Backend, target: str) -> None:
    store = backend.open()
    await await_until(lambda: any(r.target_id == target for r in store.approvals()), what=f"{target} pending")


async def test_wrap_accepts_a_store_channel_and_a_decision_from_another_store_object(backend: Backend) -> None:
    channel = StoreChannel(backend.open())
    events = InMemorySink()
    runner = wrap(_approval_agent("t1"), control=channel, sinks=[channel.sink, events])
    run = asyncio.create_task(runner.run("go"))
    await _pending(backend, "t1")
    assert channel.bound

    decider = StoreChannel(backend.open())  # its own connections, like another process
    ack = await decider.send(ControlMessage(ControlKind.APPROVE, {"target_id": "t1", "decided_by": "ann"}))
    assert ack.result is AckResult.SUCCESS and ack.detail == "approved 't1'"
    result = await run
    assert result.output == {"decision": "approve", "detail": "", "decided_by": "ann"}
    assert [e.approval_granted.decided_by for e in events.of("approval_granted")] == ["ann"]
    assert not channel.bound
    await channel.aclose()
    store = backend.open()
    row = store.approvals_for("t1")[0]
    assert (row.status, row.decided_by, row.run_id) == ("granted", "ann", result.run_id)
    kinds = [r.kind for r in store.audit_rows(run_id=result.run_id)]
    assert kinds[0] == "run_started" and "approval_requested" in kinds and kinds[-1] == "run_completed"
    assert store.verify_audit().ok


async def test_message_sent_before_any_run_is_dispatched_at_bind(backend: Backend) -> None:
    channel = StoreChannel(backend.open())
    pause_ack = asyncio.ensure_future(
        StoreChannel(backend.open()).send(ControlMessage(ControlKind.PAUSE, {"reason": "wait for me"}), timeout=10)
    )
    await await_until(lambda: backend.open().pending_controls(), what="the PAUSE in the inbox")

    seen: list[str] = []

    async def agent(task: Task, tools: AgentTools) -> str:
        seen.append(tools.session.state)
        return "done"

    runner = wrap(agent, control=channel, sinks=[channel.sink])
    run = asyncio.create_task(runner.run())
    ack = await pause_ack
    assert ack.ok and "paused" in ack.detail
    resume = await StoreChannel(backend.open()).send(ControlMessage(ControlKind.RESUME, {}))
    assert resume.ok
    assert (await run).output == "done"
    assert seen == ["running"]  # the agent only started after the RESUME
    await channel.aclose()


async def test_send_with_nobody_listening_times_out_and_is_never_dispatched_later(backend: Backend) -> None:
    decider = StoreChannel(backend.open())
    ack = await decider.send(ControlMessage(ControlKind.CANCEL, {}), timeout=0.2)
    assert ack.result is AckResult.FAILURE and "was withdrawn" in ack.detail

    channel = StoreChannel(backend.open())
    runner = wrap(_approval_agent("t2", timeout_ms=50), control=channel, sinks=[channel.sink])
    result = await runner.run()
    assert result.status.value == "COMPLETED"  # the withdrawn CANCEL never reached this run
    assert result.output["decision"] == "timeout"
    await channel.aclose()


async def test_two_channels_in_one_store_each_take_only_their_runs(backend: Backend) -> None:
    a, b = StoreChannel(backend.open()), StoreChannel(backend.open())
    run_a = asyncio.create_task(wrap(_approval_agent("ta"), control=a, sinks=[a.sink]).run())
    run_b = asyncio.create_task(wrap(_approval_agent("tb"), control=b, sinks=[b.sink]).run())
    await _pending(backend, "ta")
    await _pending(backend, "tb")
    decider = StoreChannel(backend.open())
    ack_b = await decider.send(ControlMessage(ControlKind.REJECT, {"target_id": "tb", "detail": "no"}))
    ack_a = await decider.send(ControlMessage(ControlKind.APPROVE, {"target_id": "ta"}))
    assert ack_a.ok and ack_b.ok, (ack_a, ack_b)
    assert (await run_a).output["decision"] == "approve"
    assert (await run_b).output["decision"] == "reject"
    assert a.statistics().dispatched == 1 and b.statistics().dispatched == 1
    await a.aclose()
    await b.aclose()


async def test_bad_messages_get_failure_acks_through_the_store(backend: Backend) -> None:
    channel = StoreChannel(backend.open())
    run = asyncio.create_task(wrap(_approval_agent("t3"), control=channel, sinks=[channel.sink]).run())
    await _pending(backend, "t3")
    decider = StoreChannel(backend.open())
    unknown = await decider.send(ControlMessage("FROBNICATE", {"run_id": ""}))
    assert unknown.result is AckResult.FAILURE and "unknown control kind 'FROBNICATE'" in unknown.detail
    not_json = await decider.send(ControlMessage(ControlKind.STEER, {"text": object()}))
    assert not_json.result is AckResult.FAILURE and "payload is not JSON" in not_json.detail
    not_a_mapping = await decider.send(ControlMessage(ControlKind.STEER, ["not", "a", "mapping"]))  # type: ignore[arg-type]
    assert not_a_mapping.result is AckResult.FAILURE and "payload must be a mapping" in not_a_mapping.detail
    # A tuple of pairs is refused exactly as in memory (it used to be turned into a dict and dispatched).
    pairs = ControlMessage(ControlKind.STEER, (("text", "x"),))  # type: ignore[arg-type]
    assert (await decider.send(pairs)).detail.endswith("payload must be a mapping, got tuple")
    in_memory = check_message(pairs)
    assert in_memory is not None and in_memory.detail == "payload must be a mapping, got tuple"
    # A lone surrogate or an integer beyond 64 bits is a FAILURE ack, not an exception out of send.
    surrogate = await decider.send(ControlMessage(ControlKind.APPROVE, {"target_id": "t\udc80"}))
    assert surrogate.result is AckResult.FAILURE and "not delivered" in surrogate.detail
    huge = await decider.send(ControlMessage(ControlKind.PAUSE, {}, issued_at_ms=2**70))
    assert huge.result is AckResult.FAILURE and "issued_at_ms" in huge.detail
    not_a_message = await decider.send("APPROVE t3")  # type: ignore[arg-type]
    assert not_a_message.result is AckResult.FAILURE and "expected a ControlMessage" in not_a_message.detail
    assert (await decider.send(ControlMessage(ControlKind.APPROVE, {"target_id": "t3"}))).ok
    await run
    await channel.aclose()


class FlakyStore:
    """A real store whose named methods fail (as an unreachable store does) the first N times."""

    def __init__(self, store: Any, failures: dict[str, int], *, after: bool = False) -> None:
        self._store = store
        self._failures = dict(failures)
        self._after = after  # do the work, then lose the answer (a connection dropped after commit)
        self.failed: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in self._failures:
            return attr

        def flaky(*args: Any, **kwargs: Any) -> Any:
            if self._failures[name] > 0:
                self._failures[name] -= 1
                self.failed.append(name)
                if self._after:
                    attr(*args, **kwargs)
                raise StoreUnavailableError(f"store {self._store.url} is unavailable while {name}: injected")
            return attr(*args, **kwargs)

        return flaky


async def test_agent_side_store_outage_loses_no_decision(backend: Backend) -> None:
    flaky = FlakyStore(backend.open(), {"pending_controls": 2, "claim_controls": 1, "ack_controls": 3})
    channel = StoreChannel(flaky)  # type: ignore[arg-type]
    events = InMemorySink()
    run = asyncio.create_task(wrap(_approval_agent("t4"), control=channel, sinks=[channel.sink, events]).run())
    await _pending(backend, "t4")
    ack = await StoreChannel(backend.open()).send(ControlMessage(ControlKind.APPROVE, {"target_id": "t4"}))
    assert ack.ok and ack.detail == "approved 't4'"
    assert (await run).output["decision"] == "approve"
    assert len(events.of("approval_granted")) == 1  # dispatched exactly once despite the retries
    assert sorted(set(flaky.failed)) == ["ack_controls", "claim_controls", "pending_controls"]
    await channel.aclose()


async def test_a_claim_whose_answer_was_lost_is_still_dispatched_once(backend: Backend) -> None:
    flaky = FlakyStore(backend.open(), {"claim_controls": 1}, after=True)
    channel = StoreChannel(flaky)  # type: ignore[arg-type]
    events = InMemorySink()
    run = asyncio.create_task(wrap(_approval_agent("t6"), control=channel, sinks=[channel.sink, events]).run())
    await _pending(backend, "t6")
    ack = await StoreChannel(backend.open()).send(ControlMessage(ControlKind.APPROVE, {"target_id": "t6"}))
    assert ack.ok and flaky.failed == ["claim_controls"]
    assert (await run).output["decision"] == "approve"
    assert len(events.of("approval_granted")) == 1
    await channel.aclose()


def test_locked_sqlite_store_is_a_clear_error(sqlite_backend: Backend) -> None:
    store = SqliteStore(sqlite_backend.location, busy_timeout_s=0.05)
    locker = sqlite3.connect(sqlite_backend.location, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreUnavailableError, match=r"is unavailable while posting control message .*locked"):
            store.post_control(ControlMessage(ControlKind.PAUSE, {}))
    finally:
        locker.execute("ROLLBACK")
    store.post_control(ControlMessage(ControlKind.PAUSE, {}))  # back once the lock is gone
    assert len(store.pending_controls()) == 1


async def test_postgres_connections_killed_mid_wait_are_reopened(postgres_backend: Backend) -> None:
    backend = postgres_backend
    import psycopg
    from store_support import PG_DSN

    channel = StoreChannel(backend.open())
    run = asyncio.create_task(wrap(_approval_agent("t5"), control=channel, sinks=[channel.sink]).run())
    await _pending(backend, "t5")
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            (f"goldfive:{backend.schema}",),
        ).fetchone()
    assert killed is not None and killed[0] >= 2  # the agent's listener and its query connection at least
    ack = await StoreChannel(backend.open()).send(ControlMessage(ControlKind.APPROVE, {"target_id": "t5"}))
    assert ack.ok, ack
    assert (await run).output["decision"] == "approve"
    await channel.aclose()


async def test_escalation_pauses_at_once_and_a_resume_through_the_store_releases_it(backend: Backend) -> None:
    from goldfive_core import Drift, DriftKind, DriftSeverity, InterventionLevel

    channel = StoreChannel(backend.open())
    seen: dict[str, Any] = {}

    async def agent(task: Task, tools: AgentTools) -> str:
        level = await tools.session.handle_drift(
            Drift(DriftKind.INTENT_DIVERGENCE, DriftSeverity.CRITICAL, "wandered off")
        )
        seen["level"], seen["paused"] = level, tools.session.paused  # the escalation applied synchronously
        notes = await tools.checkpoint()  # blocks until a person answers
        return " ".join(notes)

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run())
    store = backend.open()
    await await_until(
        lambda: any(r.kind == "drift_detected" for r in store.audit_rows()), what="the escalation in the audit log"
    )
    assert seen == {"level": InterventionLevel.PAUSE_ESCALATE, "paused": True}
    ack = await StoreChannel(backend.open()).send(ControlMessage(ControlKind.STEER, {"text": "go back to the plan"}))
    assert ack.ok and "run resumed" in ack.detail
    assert (await run).output == "go back to the plan"
    await channel.aclose()


async def test_a_decision_recorded_in_the_store_reaches_a_run_that_was_only_cut_off(backend: Backend) -> None:
    # The command line records a decision in the store when a run's heartbeat looks stale; a run that
    # was alive all along (say, cut off from the store for a while) must still get it.
    channel = StoreChannel(backend.open(), sweep_interval_s=0.05)
    run = asyncio.create_task(wrap(_approval_agent("t7"), control=channel, sinks=[channel.sink]).run())
    await _pending(backend, "t7")
    store = backend.open()
    row = store.approvals()[0]
    assert store.decide_in_store(row.id, approved=False, detail="not now", decided_by="ann")
    result = await run
    assert result.output == {"decision": "reject", "detail": "not now", "decided_by": "ann"}
    await channel.aclose()


def test_sink_never_blocks_and_catches_up_after_the_store_was_locked(sqlite_backend: Backend) -> None:
    from store_support import make_event

    from goldfive_core.pb.v1 import events_pb2
    from goldfive_core.store import StoreSink

    store = SqliteStore(sqlite_backend.location, busy_timeout_s=0.02)
    sink = StoreSink(store)
    locker = sqlite3.connect(sqlite_backend.location, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        for i in range(100):  # would raise or stall if emit touched the database
            sink.emit(make_event("run-l", i, events_pb2.TaskProgress(task_id="t", message=str(i))))
        assert sink.flush(timeout=0.3) is False  # the writer is stuck behind the lock, the emitter is not
    finally:
        locker.execute("ROLLBACK")
    assert sink.flush(timeout=10)
    stats = sink.statistics()
    assert stats.written == 100 and stats.dropped == 0 and stats.failed_writes >= 1
    assert [r.sequence for r in store.audit_rows(run_id="run-l")] == list(range(100))
    assert store.verify_audit().ok
    sink.close()


def _raw_inbox_row(store: Any, control_id: str, payload_json: str, kind: str = "STEER", run_id: str = "") -> None:
    """Insert an inbox row the way a broken writer (or a person with a SQL prompt) would."""
    store.db.execute(  # the public API refuses such rows; this is the fault being tested
        store.db.conn(),
        "INSERT INTO gf_inbox (control_id, kind, payload_json, run_id, issued_at_ms, status, claimed_by, "
        "claimed_at_ms, ack_result, ack_detail, ack_data_json, acked_at_ms) "
        "VALUES (?, ?, ?, ?, 0, 'pending', '', 0, '', '', '', 0)",
        (control_id, kind, payload_json, run_id),
    )


async def test_malformed_inbox_rows_are_quarantined_and_never_stop_control(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = backend.open()
    _raw_inbox_row(store, "bad-json", "not json")
    _raw_inbox_row(store, "bad-list", "[1, 2]")
    # The run starts with the bad rows already waiting (it used to crash at bind) ...
    channel = StoreChannel(backend.open())
    run = asyncio.create_task(wrap(_approval_agent("q1"), control=channel, sinks=[channel.sink]).run())
    await _pending(backend, "q1")
    _raw_inbox_row(store, "bad-late", "{", kind="APPROVE")  # ... and one arrives while it waits
    # ... and a decision still reaches it.
    ack = await StoreChannel(backend.open()).send(ControlMessage(ControlKind.APPROVE, {"target_id": "q1"}), timeout=10)
    assert ack.ok, ack.detail
    assert (await run).output["decision"] == "approve"
    await await_until(lambda: store.get_ack("bad-late"), what="the late bad row answered")
    await channel.aclose()
    for control_id, why in (
        ("bad-json", "its payload is not JSON"),
        ("bad-list", "its payload is not a JSON object (got list)"),
        ("bad-late", "its payload is not JSON"),
    ):
        bad = store.get_ack(control_id)
        assert bad is not None and bad.result is AckResult.FAILURE
        assert bad.detail.startswith("quarantined: inbox row #") and f"control '{control_id}'" in bad.detail
        assert why in bad.detail
        logged = [r for r in caplog.records if f"control '{control_id}'" in r.getMessage()]
        assert len(logged) == 1  # logged once, by whoever claimed it
    assert store.pending_controls() == []
