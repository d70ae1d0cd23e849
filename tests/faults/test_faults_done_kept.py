"""An approved body's end is never lost while its process lives: "done" outlasts a store outage of any length.

The body ran; the store (a full SQLite disk, a PostgreSQL behind a cut :class:`OutageProxy`, or the
``goldfive serve`` of an HTTP agent) stays out of reach past every retry budget while the run ends and the
agent closes its channel. The "done" is kept and retried, the run's closing event waits for it, and closing
the channel waits (``GOLDFIVE_STORE_DRAIN_S``) until the store answers: then the call is done, never in
doubt, ``goldfive resolve --did-not-run`` is refused, and a replay returns the recorded result without
running the body again.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
from pathlib import Path
from typing import Any

import pytest
from outage_proxy import OutageProxy
from store_support import HERE, PYTHON, Backend, await_until, wait_until
from test_faults_outages import _approve, _guarded_agent, disk_full

from goldfive_core import wrap
from goldfive_core.store import ExecutionState, SqliteStore, Store, StoreChannel
from goldfive_core.store.keeper import WriteKeeper, keeper_for


def _resolve_did_not_run(backend: Backend, target: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", "resolve", target, "--did-not-run", "--by", "ann"],
        env=backend.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _kinds(store: Store, run_id: str) -> list[str]:
    """The run's ledger and closing events, in the order the audit chain holds them."""
    wanted = ("execution_recorded", "run_completed", "run_aborted")
    rows = [r for r in store.audit_rows(limit=100_000) if r.run_id == run_id and r.kind in wanted]
    return [r.event().execution_recorded.state if r.kind == "execution_recorded" else r.kind for r in rows]


async def _replay(channel: StoreChannel, ran: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = (
        await wrap(_guarded_agent(channel.store, ran), control=channel, sinks=[channel.sink]).run()
    ).output
    await channel.aclose()
    return out


async def test_a_full_disk_past_every_budget_keeps_done_until_the_disk_has_room(sqlite_backend: Backend) -> None:
    channel = StoreChannel(sqlite_backend.open())
    store = channel.store
    assert isinstance(store, SqliteStore)
    store.retry_budget_s = 0.2
    ran: list[dict[str, Any]] = []
    keeper = keeper_for(store)
    with disk_full(store, on="UPDATE gf_executions SET state = 'done'") as hits:
        run = asyncio.create_task(wrap(_guarded_agent(store, ran), control=channel, sinks=[channel.sink]).run())
        await _approve(sqlite_backend, "pay-1")
        result = await run  # the model got its result at once; the run ended
        assert result.output["status"] == "ran" and ran == [{"amount": 10}]
        closing = asyncio.create_task(channel.aclose())  # waits for what the store has not taken
        # The writer has taken every event of the run (at most the close's stop marker is left in its queue).
        await await_until(lambda: keeper.pending(result.run_id) and channel.sink.statistics().queued <= 1)
        assert len(hits) >= 2  # "done" met the full disk, past the retry budget
        decider = sqlite_backend.open()
        row = decider.execution("pay-1")
        assert row is not None and row.state is ExecutionState.EXECUTING
        assert not closing.done()
    await closing  # room again: the kept "done" lands, then the run's closing event
    row = sqlite_backend.open().execution("pay-1")
    assert row is not None and row.state is ExecutionState.DONE and row.result_json == '{"sent":10}'
    assert _kinds(sqlite_backend.open(), result.run_id) == ["executing", "done", "run_completed"]
    refused = await asyncio.to_thread(_resolve_did_not_run, sqlite_backend, "pay-1")
    assert refused.returncode == 1 and "not in doubt (execution: done)" in refused.stderr, refused
    again = await _replay(StoreChannel(sqlite_backend.open()), ran)
    assert again["status"] == "already_done" and ran == [{"amount": 10}]  # never run twice


async def test_postgres_down_past_every_budget_keeps_done_until_it_is_back(postgres_backend: Backend) -> None:
    proxy, dsn = OutageProxy.for_dsn(postgres_backend.location)
    try:
        via_proxy = Backend("postgres", dsn, postgres_backend.schema)
        channel = StoreChannel(via_proxy.open())
        channel.store.retry_budget_s = 0.2
        ran: list[dict[str, Any]] = []

        async def cut() -> None:
            assert proxy.down() >= 1

        run = asyncio.create_task(
            wrap(_guarded_agent(channel.store, ran, before_body=cut), control=channel, sinks=[channel.sink]).run()
        )
        await _approve(postgres_backend, "pay-1")
        result = await run
        assert result.output["status"] == "ran" and ran == [{"amount": 10}]
        closing = asyncio.create_task(channel.aclose())
        await await_until(lambda: keeper_for(channel.store).pending(result.run_id), what="'done' kept")
        row = postgres_backend.open().execution("pay-1")
        assert row is not None and row.state is ExecutionState.EXECUTING and not closing.done()
        proxy.up()
        await closing
        row = postgres_backend.open().execution("pay-1")
        assert row is not None and row.state is ExecutionState.DONE
        assert _kinds(postgres_backend.open(), result.run_id) == ["executing", "done", "run_completed"]
        refused = await asyncio.to_thread(_resolve_did_not_run, postgres_backend, "pay-1")
        assert refused.returncode == 1 and "not in doubt (execution: done)" in refused.stderr, refused
        again = await _replay(StoreChannel(postgres_backend.open()), ran)
        assert again["status"] == "already_done" and ran == [{"amount": 10}]
    finally:
        proxy.close()


def test_closing_gives_up_after_the_drain_limit_and_says_what_was_lost(
    caplog: pytest.LogCaptureFixture, sqlite_backend: Backend
) -> None:
    from goldfive_core.store import StoreUnavailableError

    keeper = WriteKeeper(sqlite_backend.open())
    gone = [True]

    def never() -> None:
        if gone[0]:
            raise StoreUnavailableError("the store is gone")

    keeper.keep("'done' of 'pay-9'", "run-x", never)
    with caplog.at_level(logging.ERROR, logger="goldfive_core.store.keeper"):
        lost = keeper.drain(0.2)
    assert lost == ["'done' of 'pay-9'"]
    assert any("NOT written" in r.message and "'done' of 'pay-9'" in r.message for r in caplog.records)
    gone[0] = False  # let the keeper's thread finish (it keeps the write for as long as the process lives)
    assert keeper.wait_run("run-x", 30.0)


def test_closing_waits_for_a_kept_done_that_lands_while_it_waits(sqlite_backend: Backend) -> None:
    """The store comes back while the process closes: drain waits for the kept write, which then lands."""
    from goldfive_core.store import StoreUnavailableError

    keeper = WriteKeeper(sqlite_backend.open())
    tries: list[int] = []

    def comes_back() -> None:
        tries.append(1)
        if len(tries) < 3:  # out of reach twice (0.1 s, then 0.2 s of backoff), then it answers
            raise StoreUnavailableError("the store is gone for now")

    keeper.keep("'done' of 'pay-8'", "run-y", comes_back)
    assert keeper.drain(30.0) == []
    assert len(tries) == 3 and keeper.written == 1 and keeper.pending() == []


def test_an_agent_process_does_not_exit_before_its_kept_done_is_written(
    postgres_backend: Backend, tmp_path: Path
) -> None:
    """The reported case: the body ran, PostgreSQL went away, and the process ended without writing "done"."""
    proxy, dsn = OutageProxy.for_dsn(postgres_backend.location)
    marker, hold = tmp_path / "marker", tmp_path / "hold"
    env = {**postgres_backend.env(), "GOLDFIVE_DSN": dsn, "GOLDFIVE_STORE_RETRY_S": "0.3"}
    script = [PYTHON, str(HERE / "agent_proc.py"), "tool", "--call-id", "pay-p", "--marker", str(marker)]
    proc = subprocess.Popen([*script, "--hold-in-body", str(hold)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        decider = postgres_backend.open()
        wait_until(lambda: decider.approvals(), what="the request", timeout=30)
        assert _decide(postgres_backend, "pay-p").returncode == 0
        wait_until(marker.exists, what="the body running", timeout=30)
        assert proxy.down() >= 1  # the database is gone while the body runs, and stays gone
        hold.touch()
        assert proc.stderr is not None
        for line in proc.stderr:  # until the process ends (the bug) or says it waits for its "done"
            if "closing waits up to" in line and "'done' of 'pay-p'" in line:
                break
        proxy.up()
        assert proc.wait(timeout=60) == 0
        row = decider.execution("pay-p")
        assert row is not None and row.state is ExecutionState.DONE, row  # written before the process ended
        assert marker.read_text().count("\n") == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proxy.close()


def _decide(backend: Backend, target: str) -> subprocess.CompletedProcess[str]:
    argv = [PYTHON, "-m", "goldfive_core.cli", "approve", target, "--by", "ann"]
    return subprocess.run(argv, env=backend.env(), capture_output=True, text=True, timeout=60)


def test_a_store_with_a_keeper_is_freed_with_its_connections_once_nothing_is_kept(sqlite_backend: Backend) -> None:
    """The keeper registry must not keep stores alive: each would hold its database connections for good (a test
    suite, or a server opening stores, ran PostgreSQL out of connections)."""
    import gc
    import weakref

    store = sqlite_backend.open()
    keeper_for(store).drain(0.0)
    gone = weakref.ref(store)
    del store
    gc.collect()
    assert gone() is None
