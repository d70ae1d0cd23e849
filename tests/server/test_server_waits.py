"""Decisions waiting for an agent's ack hold no worker thread: a burst of them never holds up reads, and more of
them wait at once than any pool has threads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from server_support import make_server
from store_support import Backend, await_until, make_event

from goldfive_core.control import AckResult, ControlAck
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.server.app import WAIT_THREADS
from goldfive_core.store import agents as owners
from goldfive_core.store.base import HOST, Store

N = 40  # more than the store-call pool below, and more than any pool of the server has threads


def _waiting_runs(store: Store) -> None:
    """N live runs (this process, fresh heartbeats), each waiting for a decision its agent will not ack."""
    for i in range(N):
        store.append_events(
            [
                make_event(f"run-w{i}", 0, events_pb2.RunStarted(adapter="callable")),
                make_event(f"run-w{i}", 1, events_pb2.ApprovalRequested(target_id=f"w-{i}", kind="task", prompt="p")),
            ],
            pid=os.getpid(),
            host=HOST,
        )


async def test_decisions_waiting_for_slow_agents_do_not_hold_up_the_inbox(backend: Backend, tmp_path: Path) -> None:
    assert N > WAIT_THREADS  # the ack pool of old: a decision that held one of its threads would queue the rest
    # A store-call pool of 4 (goldfive serve's is SERVER_THREADS): decisions that waited in it would take every
    # thread and queue the reads behind their timeouts.
    asyncio.get_running_loop().set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=4))
    store = backend.open()
    # N live runs (this process, fresh heartbeats) whose agents never answer: each decision waits for an ack.
    _waiting_runs(store)
    async with make_server(backend, tmp_path, timeout_s=20.0) as srv:
        decisions = [asyncio.create_task(srv.post(f"/api/approvals/w-{i}/approve", {})) for i in range(N)]
        # Every decision reached the inbox: all N wait for their agents at once (a shared pool ran a few at a time).
        for _ in range(800):
            if len(store.pending_controls(limit=200)) == N or any(d.done() for d in decisions):
                break
            await asyncio.sleep(0.025)
        assert len(store.pending_controls(limit=200)) == N
        listed = await srv.get("/api/approvals?status=pending")
        assert listed.status_code == 200 and listed.json()["total"] == N
        assert (await srv.get("/api/me")).status_code == 200
        assert not any(d.done() for d in decisions)  # the reads were answered while all of them still waited
        # The agents answer at last: every decision completes.
        store.ack_controls(
            [(row.id, ControlAck(row.control_id, AckResult.SUCCESS, "ok")) for row in store.pending_controls(limit=200)]
        )
        answered = await asyncio.wait_for(asyncio.gather(*decisions), 60)
        assert [a.status_code for a in answered] == [200] * N, [a.text for a in answered]
    store.close()


async def test_the_liveness_checks_of_decisions_waiting_together_are_one_read(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = backend.open()
    _waiting_runs(store)
    rounds: list[int] = []  # how many runs each read of liveness asked about
    real = owners.gone_runs

    def counted(s: Any, run_ids: Sequence[str]) -> Any:
        rounds.append(len(run_ids))
        return real(s, run_ids)

    monkeypatch.setattr(owners, "gone_runs", counted)
    async with make_server(backend, tmp_path, timeout_s=20.0) as srv:
        one_by_one: list[str] = []
        liveness_of = srv.store.liveness_of

        def single(run: Any) -> Any:
            one_by_one.append(run.run_id if run is not None else "")
            return liveness_of(run)

        decisions = [asyncio.create_task(srv.post(f"/api/approvals/w-{i}/approve", {})) for i in range(N)]
        await await_until(lambda: len(store.pending_controls(limit=200)) == N, what="every decision waiting")
        srv.store.liveness_of = single  # type: ignore[method-assign]
        rounds.clear()
        await await_until(lambda: sum(rounds) >= 3 * N, what="the waiting decisions checking their runs")
        # Each check asked about many runs at once, and none was made on its own.
        assert max(rounds) > 1 and len(rounds) < sum(rounds), rounds
        assert one_by_one == []
        # A run that ends while its decision waits is still seen: that decision is withdrawn, answered at once.
        store.append_events([make_event("run-w0", 2, events_pb2.RunCompleted())], pid=os.getpid(), host=HOST)
        first = await asyncio.wait_for(decisions[0], 20)
        assert first.status_code == 200 and first.json()["verdict"] != "applied", first.text
        store.ack_controls(
            [(row.id, ControlAck(row.control_id, AckResult.SUCCESS, "ok")) for row in store.pending_controls(limit=200)]
        )
        answered = await asyncio.wait_for(asyncio.gather(*decisions[1:]), 60)
        assert [a.status_code for a in answered] == [200] * (N - 1)
    store.close()
