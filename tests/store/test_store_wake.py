"""SQLite wake-ups: a commit pokes every waiter through the sockets in ``<db>.wake/``; a lost poke only costs
the fallback poll. Waiters here use a 30 s fallback and waits bounded below it, so "woken" means "poked"."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_support import HERE, PYTHON, Backend, await_until, make_event, wait_until

from goldfive_core import AckResult, AgentTools, ApprovalRequest, ControlAck, ControlKind, ControlMessage, Task, wrap
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import SqliteStore, StoreChannel, _wake
from goldfive_core.store.base import HOST
from goldfive_core.store.sqlite import DEFAULT_WAKE_FALLBACK_S

LONG_FALLBACK_S = 30.0
BOUND_S = 20.0
"""Longest a test waits for a waiter: well under LONG_FALLBACK_S, so only a poke can wake it in time."""


def _wake_dir(db: str | Path) -> Path:
    return Path(f"{os.path.abspath(db)}.wake")


def _sockets(db: str | Path, pid: int | None = None) -> list[str]:
    try:
        names = os.listdir(_wake_dir(db))
    except FileNotFoundError:
        return []
    return [n for n in names if pid is None or n.startswith(f"{pid}-")]


def _fds(within: str) -> set[str]:
    """This process's descriptors a store's wait could leave behind: files below ``within`` (the store's directory)
    and Unix sockets. Other tests' threads in this worker process may open TCP connections meanwhile (a keeper
    still retrying into PostgreSQL), which are not this test's."""
    with open("/proc/net/unix") as table:
        unix = {fields[6] for fields in (line.split() for line in list(table)[1:]) if len(fields) > 6}
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed while listing
            continue
        if target.startswith(within) or (target.startswith("socket:[") and target[8:-1] in unix):
            found.add(f"{fd} -> {target}")
    return found


@contextlib.contextmanager
def _waiter_proc(backend: Backend, *argv: str) -> Iterator[subprocess.Popen[str]]:
    """tests/store/wake_waiter_proc.py waiting on the store; yields once its socket is bound."""
    proc = subprocess.Popen(
        [PYTHON, str(HERE / "wake_waiter_proc.py"), backend.location, *argv],
        env=backend.env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: _sockets(backend.location, proc.pid), timeout=BOUND_S, what="the waiter's socket")
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=BOUND_S)


def _result(proc: subprocess.Popen[str]) -> list[str]:
    out, _ = proc.communicate(timeout=BOUND_S)
    return out.split()


def _in_thread(fn: object, *args: object) -> concurrent.futures.Future[object]:
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = pool.submit(fn, *args)  # type: ignore[arg-type]
    pool.shutdown(wait=False)
    return future


def test_a_waiter_in_another_process_is_woken_by_a_decision(sqlite_backend: Backend) -> None:
    decider = SqliteStore(sqlite_backend.location)
    with _waiter_proc(sqlite_backend, "inbox") as proc:
        decider.post_control(ControlMessage(ControlKind.APPROVE, {"target_id": "pay-1"}), run_id="run-1")
        word, seconds = _result(proc)
    assert word == "woken" and float(seconds) < BOUND_S  # poked, long before its 30 s fallback look
    assert _sockets(sqlite_backend.location) == []  # the waiter removed its socket


def test_a_decider_in_another_process_is_woken_by_the_agents_ack(sqlite_backend: Backend) -> None:
    agent = SqliteStore(sqlite_backend.location)
    msg = ControlMessage(ControlKind.PAUSE, {"run_id": "run-1"})
    row = agent.post_control(msg, run_id="run-1")
    with _waiter_proc(sqlite_backend, "ack", msg.id) as proc:
        agent.ack_controls([(row, ControlAck.success(msg.id, "paused"))])
        assert _result(proc)[:2] == ["acked", "SUCCESS"]


def test_the_command_line_pokes_waiters(sqlite_backend: Backend) -> None:
    store = SqliteStore(sqlite_backend.location)
    started = make_event("run-1", 0, events_pb2.RunStarted(adapter="callable"))
    asked = make_event("run-1", 1, events_pb2.ApprovalRequested(target_id="pay-1", kind="task", prompt="ok?"))
    store.append_events([started, asked], pid=os.getpid(), host=HOST)
    with _waiter_proc(sqlite_backend, "inbox") as proc:
        cli = subprocess.run(
            [PYTHON, "-m", "goldfive_core.cli", "approve", "pay-1", "--timeout", "1"],
            env=sqlite_backend.env(),
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert b"Traceback" not in cli.stderr
        assert _result(proc)[0] == "woken"


def test_threads_of_one_process_wake_each_other(sqlite_backend: Backend) -> None:
    store = SqliteStore(sqlite_backend.location, wake_fallback_s=LONG_FALLBACK_S)
    msg = ControlMessage(ControlKind.PAUSE, {"run_id": "run-1"})
    row = store.post_control(msg, run_id="run-1")
    acked = _in_thread(store.wait_ack, msg.id, BOUND_S + 5)
    wait_until(lambda: _sockets(sqlite_backend.location, os.getpid()), timeout=BOUND_S, what="the waiting thread")
    store.ack_controls([(row, ControlAck.success(msg.id, "paused"))])  # same store object, another thread
    ack = acked.result(timeout=BOUND_S)
    assert isinstance(ack, ControlAck) and ack.result is AckResult.SUCCESS


def test_a_writer_that_does_not_poke_is_seen_by_the_fallback_poll(sqlite_backend: Backend) -> None:
    waiter = SqliteStore(sqlite_backend.location, wake_fallback_s=0.2)
    quiet = SqliteStore(sqlite_backend.location, wake=False)  # an old goldfive, or GOLDFIVE_SQLITE_WAKE=0
    msg = ControlMessage(ControlKind.PAUSE, {"run_id": "run-1"})
    row = quiet.post_control(msg, run_id="run-1")
    acked = _in_thread(waiter.wait_ack, msg.id, BOUND_S)
    wait_until(lambda: _sockets(sqlite_backend.location, os.getpid()), timeout=BOUND_S, what="the waiting thread")
    quiet.ack_controls([(row, ControlAck.success(msg.id, "paused"))])
    ack = acked.result(timeout=BOUND_S)
    assert isinstance(ack, ControlAck) and ack.ok


def test_a_removed_wake_directory_still_delivers_by_the_fallback_poll(sqlite_backend: Backend) -> None:
    waiter = SqliteStore(sqlite_backend.location, wake_fallback_s=0.2)
    writer = SqliteStore(sqlite_backend.location)
    msg = ControlMessage(ControlKind.PAUSE, {"run_id": "run-1"})
    row = writer.post_control(msg, run_id="run-1")
    acked = _in_thread(waiter.wait_ack, msg.id, BOUND_S)
    wait_until(lambda: _sockets(sqlite_backend.location, os.getpid()), timeout=BOUND_S, what="the waiting thread")
    shutil.rmtree(_wake_dir(sqlite_backend.location))  # the poke finds nobody
    writer.ack_controls([(row, ControlAck.success(msg.id, "paused"))])
    ack = acked.result(timeout=BOUND_S)
    assert isinstance(ack, ControlAck) and ack.ok
    assert writer.wait_ack(msg.id, 0.0) is not None
    waiter.wait_inbox(0)
    waiter.wait_inbox(0.01)  # the next wait makes the directory again
    assert stat.S_IMODE(os.stat(_wake_dir(sqlite_backend.location)).st_mode) == 0o700


def test_a_failing_poke_is_logged_once_and_the_fallback_poll_delivers(
    sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    waiter = SqliteStore(sqlite_backend.location, wake_fallback_s=0.2)
    writer = SqliteStore(sqlite_backend.location)
    msg = ControlMessage(ControlKind.PAUSE, {"run_id": "run-1"})
    row = writer.post_control(msg, run_id="run-1")
    acked = _in_thread(waiter.wait_ack, msg.id, BOUND_S)
    wait_until(lambda: _sockets(sqlite_backend.location, os.getpid()), timeout=BOUND_S, what="the waiting thread")

    class Unwritable(socket.socket):
        def sendto(self, *args: object) -> int:  # type: ignore[override]
            raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(_wake.socket, "socket", Unwritable)
    with caplog.at_level(logging.WARNING, logger="goldfive_core.store"):
        writer.ack_controls([(row, ControlAck.success(msg.id, "paused"))])
        writer.post_control(ControlMessage(ControlKind.PAUSE, {"run_id": "run-2"}), run_id="run-2")
        ack = acked.result(timeout=BOUND_S)
    assert isinstance(ack, ControlAck) and ack.ok
    pokes = [r for r in caplog.records if "cannot poke" in r.getMessage()]
    assert len(pokes) == 1 and "waiting agents poll instead" in pokes[0].getMessage()


def test_a_killed_waiters_socket_is_removed_by_the_next_writer(sqlite_backend: Backend) -> None:
    writer = SqliteStore(sqlite_backend.location)
    wake = _wake_dir(sqlite_backend.location)
    with _waiter_proc(sqlite_backend, "inbox") as proc:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=BOUND_S)
        left = _sockets(sqlite_backend.location, proc.pid)
        assert len(left) == 1  # a crash leaves its socket behind
    (wake / "notes.txt").write_text("not ours")  # other names are never touched
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as mine:  # refused, but its process (us) is alive
        mine.bind(str(wake / f"{os.getpid()}-0badf00d"))
    writer.post_control(ControlMessage(ControlKind.PAUSE, {"run_id": "run-1"}), run_id="run-1")
    assert sorted(os.listdir(wake)) == sorted([f"{os.getpid()}-0badf00d", "notes.txt"])


def test_waits_leave_no_socket_and_no_descriptor_behind(sqlite_backend: Backend) -> None:
    store = SqliteStore(sqlite_backend.location, wake_fallback_s=LONG_FALLBACK_S)
    writer = SqliteStore(sqlite_backend.location)
    store.wait_inbox(0)
    store.get_ack("warm-up")  # this thread's connection exists before counting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()  # what earlier tests left to the collector is not this test's business
    before = _fds(os.path.dirname(sqlite_backend.location))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)  # a socket left to the garbage collector says so
        store.wait_inbox(0.05)  # times out
        assert store.wait_ack("nope", 0.05) is None
        msg = ControlMessage(ControlKind.PAUSE, {"run_id": "run-1"})
        row = writer.post_control(msg, run_id="run-1")
        writer.ack_controls([(row, ControlAck.success(msg.id, "paused"))])
        assert store.wait_ack(msg.id, 1.0) is not None
        with pytest.raises(RuntimeError):  # a failing look inside the wait
            store._wait_for(_raise_later(), 1.0, 0.01)
        gc.collect()
    assert [str(w.message) for w in caught if "socket" in str(w.message)] == []
    assert _fds(os.path.dirname(sqlite_backend.location)) == before
    assert _sockets(sqlite_backend.location) == []


def _raise_later() -> object:
    calls = []

    def ready() -> None:
        calls.append(1)
        if len(calls) > 1:  # after the socket is bound
            raise RuntimeError("boom")

    return ready


async def test_a_closed_channel_leaves_no_socket(sqlite_backend: Backend) -> None:
    channel = StoreChannel(SqliteStore(sqlite_backend.location))

    async def agent(task: Task, tools: AgentTools) -> None:
        await tools.session.request_approval(ApprovalRequest(target_id="t1", kind="task", timeout_ms=60_000))

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("wait"))
    await await_until(lambda: _sockets(sqlite_backend.location, os.getpid()), what="the channel waiting")
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    await channel.aclose()
    # The channel's I/O thread ends its current (bounded) wait, removes its socket and closes the store.
    await await_until(lambda: not _sockets(sqlite_backend.location, os.getpid()), what="the socket removed")


def test_the_wake_directory_is_private(sqlite_backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    store = SqliteStore(sqlite_backend.location, wake_fallback_s=LONG_FALLBACK_S)
    wake = _wake_dir(sqlite_backend.location)
    store.wait_inbox(0)
    store.wait_inbox(0.01)
    assert stat.S_IMODE(os.lstat(wake).st_mode) == 0o700
    shutil.rmtree(wake)
    os.mkdir(wake, 0o777)
    os.chmod(wake, 0o777)  # made by someone else's umask, or planted: not used
    other = SqliteStore(sqlite_backend.location, wake_fallback_s=LONG_FALLBACK_S)
    other.wait_inbox(0)
    with caplog.at_level(logging.WARNING, logger="goldfive_core.store"):
        other.wait_inbox(0.01)
        other.wait_inbox(0.01)
    assert os.listdir(wake) == []  # no socket in it: this waiter polled
    refusals = [r for r in caplog.records if "not a private directory" in r.getMessage()]
    assert len(refusals) == 1
    msg = ControlMessage(ControlKind.PAUSE, {"run_id": "run-1"})
    row = store.post_control(msg, run_id="run-1")
    store.ack_controls([(row, ControlAck.success(msg.id, "paused"))])
    assert other.wait_ack(msg.id, BOUND_S) is not None  # polling still works


def test_a_long_database_path_is_reached_through_proc(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    db = deep / "goldfive.db"
    store = SqliteStore(db, wake_fallback_s=LONG_FALLBACK_S)
    msg = ControlMessage(ControlKind.PAUSE, {"run_id": "run-1"})
    row = store.post_control(msg, run_id="run-1")
    acked = _in_thread(store.wait_ack, msg.id, BOUND_S + 5)
    wait_until(lambda: _sockets(db, os.getpid()), timeout=BOUND_S, what="the waiting thread")
    store.ack_controls([(row, ControlAck.success(msg.id, "paused"))])
    ack = acked.result(timeout=BOUND_S)
    assert isinstance(ack, ControlAck) and ack.ok
    assert _sockets(db) == []


def test_switches(sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("GOLDFIVE_SQLITE_WAKE", "0")
    off = SqliteStore(sqlite_backend.location)
    off.wait_inbox(0)
    off.wait_inbox(0.01)
    assert not _wake_dir(sqlite_backend.location).exists()  # polling only: nothing beside the database
    monkeypatch.setenv("GOLDFIVE_SQLITE_WAKE", "1")
    monkeypatch.setenv("GOLDFIVE_SQLITE_WAKE_FALLBACK_S", "2.5")
    assert SqliteStore(sqlite_backend.location).wake_fallback_s == 2.5
    monkeypatch.setenv("GOLDFIVE_SQLITE_WAKE_FALLBACK_S", "nan")
    with caplog.at_level(logging.WARNING):
        assert SqliteStore(sqlite_backend.location).wake_fallback_s == DEFAULT_WAKE_FALLBACK_S == 5.0
    assert any("GOLDFIVE_SQLITE_WAKE_FALLBACK_S" in r.getMessage() for r in caplog.records)
    # Bad durations in the environment never stop an agent: the default, and a warning naming the variable.
    for name, attr, default in (
        ("GOLDFIVE_SQLITE_IDLE_POLL_S", "idle_poll_interval_s", 0.04),
        ("GOLDFIVE_STORE_RETRY_S", "retry_budget_s", 10.0),
    ):
        for bad in ("abc", "nan", "inf", "-1", "1e9"):
            monkeypatch.setenv(name, bad)
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                assert getattr(SqliteStore(sqlite_backend.location), attr) == default
            assert any(name in r.getMessage() for r in caplog.records), (name, bad)
        monkeypatch.setenv(name, "0.5")
        assert getattr(SqliteStore(sqlite_backend.location), attr) == 0.5
        monkeypatch.delenv(name)
    for bad in (0.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="wake_fallback_s"):
            SqliteStore(sqlite_backend.location, wake_fallback_s=bad)
    reader = SqliteStore(sqlite_backend.location, read_only=True)
    reader.wait_inbox(0)
    reader.wait_inbox(0.01)
    assert not _wake_dir(sqlite_backend.location).exists()  # a read-only store leaves nothing behind


def test_many_waiters_are_bounded(sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_wake, "MAX_WAITERS", 3)
    wake = _wake.WakeDir(sqlite_backend.location)
    with contextlib.ExitStack() as stack:
        waiters = [stack.enter_context(wake.waiter()) for _ in range(5)]
        assert all(w is not None for w in waiters)
        assert wake.poke() == 3
    assert os.listdir(wake.path) == []


def test_a_broken_wake_socket_is_logged_once_and_the_wait_becomes_a_poll(
    sqlite_backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    wake = _wake.WakeDir(sqlite_backend.location)
    with wake.waiter() as waiter, caplog.at_level(logging.WARNING, logger="goldfive_core.store"):
        assert waiter is not None
        waiter._sock.close()
        assert waiter.wait(0.01) is False
        assert waiter.wait(0.0) is False
    said = [r.getMessage() for r in caplog.records if r.name == "goldfive_core.store._wake"]
    assert [m.count("cannot wait on a socket") for m in said] == [1]
    assert os.listdir(wake.path) == []


# -- the agent's channel: it sleeps in its event loop on one socket bound while it serves ------------------------------


class _Counted(SqliteStore):
    """A SQLite store that counts the channel's looks and thread waits (the behaviour under test is how often the
    idle channel touches the database, so counting calls to our own store is the observation)."""

    looks = 0
    thread_waits = 0
    sweeps = 0

    def pending_controls(self, *, limit: int = 100) -> list:  # type: ignore[override]
        type(self).looks += 1
        return super().pending_controls(limit=limit)

    def wait_inbox(self, timeout_s: float) -> None:
        type(self).thread_waits += 1
        super().wait_inbox(timeout_s)

    def approvals(self, **kwargs: Any) -> list:  # type: ignore[override]
        type(self).sweeps += 1  # the channel reads approvals only to sweep
        return super().approvals(**kwargs)


def _waiting_agent() -> object:
    async def agent(task: Task, tools: AgentTools) -> str:
        decision = await tools.session.request_approval(ApprovalRequest(target_id="t1", kind="task", timeout_ms=60_000))
        return "approved" if decision.approved else "rejected"

    return agent


def test_a_heartbeat_wakes_nobody_and_any_other_commit_does(sqlite_backend: Backend) -> None:
    store = SqliteStore(sqlite_backend.location, wake_fallback_s=LONG_FALLBACK_S)
    writer = SqliteStore(sqlite_backend.location)
    waiter = store.inbox_waiter()
    assert waiter is not None and waiter.fallback_s == LONG_FALLBACK_S
    try:
        writer.heartbeat(["run-1"])  # every 2 s from every live agent: an idle agent must not wake for it
        assert waiter.drain() is False
        assert writer.reap_crashed() == []  # every 10 s: nothing stale, so nothing is committed and nobody woken
        assert waiter.drain() is False
        writer.post_control(ControlMessage(ControlKind.PAUSE, {"run_id": "run-1"}), run_id="run-1")
        assert waiter.drain() is True  # the poke was queued before the commit returned
        assert waiter.drain() is False
        assert not waiter.gone()
    finally:
        waiter.close()
    assert waiter.gone() and _sockets(sqlite_backend.location) == []


async def test_an_idle_channel_sleeps_in_its_loop_and_a_decision_wakes_it(
    sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_Counted, "looks", 0)
    monkeypatch.setattr(_Counted, "thread_waits", 0)
    channel = StoreChannel(_Counted(sqlite_backend.location, wake_fallback_s=LONG_FALLBACK_S))
    run = asyncio.create_task(wrap(_waiting_agent(), control=channel, sinks=[channel.sink]).run("wait"))
    await await_until(lambda: _sockets(sqlite_backend.location, os.getpid()), what="the channel's socket")
    decider = StoreChannel(SqliteStore(sqlite_backend.location))
    msg = ControlMessage(ControlKind.APPROVE, {"target_id": "t1"})
    # Far sooner than the 30 s fallback look: only the decider's poke can have woken the channel.
    ack = await asyncio.wait_for(asyncio.to_thread(decider.deliver, msg, timeout_s=BOUND_S), BOUND_S)
    assert ack.ok, ack
    result = await asyncio.wait_for(run, BOUND_S)
    assert result.output == "approved"
    await channel.aclose()
    assert _Counted.looks >= 1
    assert _Counted.thread_waits == 0  # no worker thread sat in wait_inbox: the loop watched the socket
    await await_until(lambda: not _sockets(sqlite_backend.location), what="the socket removed")


async def test_a_channel_whose_socket_was_removed_binds_a_new_one(sqlite_backend: Backend) -> None:
    channel = StoreChannel(SqliteStore(sqlite_backend.location, wake_fallback_s=0.2))
    run = asyncio.create_task(wrap(_waiting_agent(), control=channel, sinks=[channel.sink]).run("wait"))
    first = await await_until(lambda: _sockets(sqlite_backend.location, os.getpid()), what="the channel's socket")
    shutil.rmtree(_wake_dir(sqlite_backend.location))  # pokes cannot reach it any more
    second = await await_until(lambda: _sockets(sqlite_backend.location, os.getpid()), what="a new socket")
    assert second != first
    decider = StoreChannel(SqliteStore(sqlite_backend.location))
    msg = ControlMessage(ControlKind.APPROVE, {"target_id": "t1"})
    ack = await asyncio.wait_for(asyncio.to_thread(decider.deliver, msg, timeout_s=BOUND_S), BOUND_S)
    assert ack.ok, ack
    assert (await asyncio.wait_for(run, BOUND_S)).output == "approved"
    await channel.aclose()


class _NoReaders(asyncio.SelectorEventLoop):
    """An event loop that cannot watch file descriptors (as a Windows proactor loop)."""

    def add_reader(self, *args: object, **kwargs: object) -> None:
        raise NotImplementedError("no add_reader on this loop")


def test_a_loop_that_cannot_watch_the_socket_waits_in_the_io_thread(
    sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_Counted, "looks", 0)
    monkeypatch.setattr(_Counted, "thread_waits", 0)

    async def main() -> str:
        channel = StoreChannel(_Counted(sqlite_backend.location, wake_fallback_s=LONG_FALLBACK_S))
        run = asyncio.create_task(wrap(_waiting_agent(), control=channel, sinks=[channel.sink]).run("wait"))
        await await_until(lambda: _Counted.thread_waits > 1, what="the channel waiting in its thread")
        decider = StoreChannel(SqliteStore(sqlite_backend.location))
        msg = ControlMessage(ControlKind.APPROVE, {"target_id": "t1"})
        ack = await asyncio.to_thread(decider.deliver, msg, timeout_s=BOUND_S)
        assert ack.ok, ack
        output = (await asyncio.wait_for(run, BOUND_S)).output
        await channel.aclose()
        return str(output)

    with asyncio.Runner(loop_factory=_NoReaders) as runner:
        assert runner.run(main()) == "approved"
    wait_until(lambda: not _sockets(sqlite_backend.location), timeout=BOUND_S, what="the sockets removed")


@pytest.mark.parametrize("pokes", [True, False], ids=["poked-sweep", "quiet-sweep"])
async def test_a_decision_recorded_in_the_store_is_swept_up_after_a_poke_or_quietly_later(
    sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch, pokes: bool
) -> None:
    # An idle channel sweeps for decisions recorded in the store (`goldfive approve` on a run that looked gone)
    # after a poke, or, with no poke (a writer with wake-ups off), every _QUIET_SWEEP_S. With a poke the quiet
    # sweep is set far beyond the test's bound, so only the poke can have brought the decision in.
    from goldfive_core.store import StoreSink
    from goldfive_core.store import inbox as channel_module

    monkeypatch.setattr(channel_module, "_QUIET_SWEEP_S", LONG_FALLBACK_S if pokes else 0.3)
    monkeypatch.setattr(_Counted, "sweeps", 0)
    fallback = LONG_FALLBACK_S if pokes else 0.2
    channel = StoreChannel(_Counted(sqlite_backend.location, wake_fallback_s=fallback), sweep_interval_s=0.0)
    decider = SqliteStore(sqlite_backend.location, wake=pokes)
    sink = StoreSink(SqliteStore(sqlite_backend.location, wake=False))  # the run's own events poke nobody
    run = asyncio.create_task(wrap(_waiting_agent(), control=channel, sinks=[sink]).run("wait"))
    row = await await_until(lambda: next(iter(decider.approvals()), None), what="the request in the store")
    if pokes:  # an unrelated commit: the channel wakes and sweeps once, using up the news it started with
        decider.post_control(ControlMessage(ControlKind.PAUSE, {"run_id": "run-other"}), run_id="run-other")
    await await_until(lambda: _Counted.sweeps >= 1, what="a sweep with the request open")  # the next needs a reason
    assert decider.decide_in_store(row.id, approved=True, detail="ok", decided_by="ann")
    assert (await asyncio.wait_for(run, BOUND_S)).output == "approved"
    await channel.aclose()
    sink.close()
