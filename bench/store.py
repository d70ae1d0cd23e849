"""Benchmark: durable decisions across processes, SQLite and PostgreSQL, next to the in-memory channel.

    python bench/store.py                                   # SQLite (+ PostgreSQL when a DSN is known)
    python bench/store.py --dsn postgresql://user@127.0.0.1:5432/db -n 300 -k 2000

For each backend an *agent process* runs a goldfive run under ``StoreChannel`` and this process
decides, like the ``goldfive`` command does (``StoreChannel.deliver``: insert into the store's
inbox, wait for the ack):

* decide→resume latency, p50/p99: one approval pending at a time; from just before the decision
  is written until the agent's waiting coroutine has resumed (both timestamps from the host's
  wall clock, same machine). Targets: p50 ≤ 50 ms SQLite, ≤ 10 ms PostgreSQL.
* durable decisions per second: ``-k`` approvals pending at once, all decided back to back; from
  the first insert until the last ack is stored (every decision: inbox row, claim, dispatch, ack
  row, audit events). The in-memory ControlChannel does the same in one process, for scale.

PostgreSQL uses ``--dsn``, else ``GOLDFIVE_TEST_PG_DSN`` / ``GOLDFIVE_DSN``; it runs in a fresh
schema that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from _support import pct

from goldfive_core import (
    AgentTools,
    ApprovalRequest,
    ControlChannel,
    ControlKind,
    ControlMessage,
    Task,
    wrap,
)
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import StoreChannel, open_store

TIMEOUT_MS = 120_000


# -- the agent process ---------------------------------------------------------------------------------------
class _Announce:
    """Tells the decider (on stdout) when a request is open."""

    def emit(self, event: events_pb2.Event) -> None:
        if event.WhichOneof("payload") == "approval_requested":
            sys.stdout.write(f"req {event.approval_requested.target_id}\n")
            sys.stdout.flush()


async def agent_main(location: str, schema: str | None, n: int, concurrent: bool) -> None:
    store = open_store(location, schema=schema)
    channel = StoreChannel(store)

    async def agent(task: Task, tools: AgentTools) -> None:
        session = tools.session
        sys.stdout.write(f"run {session.run_id}\n")
        sys.stdout.flush()

        async def one(i: int) -> None:
            await session.request_approval(ApprovalRequest(target_id=f"t{i}", kind="task", timeout_ms=TIMEOUT_MS))
            if not concurrent:
                sys.stdout.write(f"res t{i} {time.time_ns()}\n")
                sys.stdout.flush()

        if concurrent:
            await asyncio.gather(*(one(i) for i in range(n)))
        else:
            for i in range(n):
                await one(i)

    runner = wrap(agent, control=channel, sinks=[channel.sink, _Announce()])
    await runner.run("bench")
    await channel.aclose()
    sys.stdout.write("done\n")
    sys.stdout.flush()


# -- the decider (this process) -------------------------------------------------------------------------------
def _spawn(location: str, schema: str | None, n: int, concurrent: bool) -> subprocess.Popen[str]:
    argv = [sys.executable, __file__, "--agent", location, "--n", str(n)]
    if schema:
        argv += ["--schema", schema]
    if concurrent:
        argv.append("--concurrent")
    return subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, bufsize=1)


def _expect(proc: subprocess.Popen[str], prefix: str) -> str:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the agent process exited while the bench waited for {prefix!r}")
        if line.startswith(prefix):
            return line.strip()


def store_latency(location: str, schema: str | None, n: int) -> dict[str, float]:
    """Cross-process decide→resume and decide→ack latency, one approval at a time (ms)."""
    decider = StoreChannel(open_store(location, schema=schema))
    proc = _spawn(location, schema, n, concurrent=False)
    try:
        run_id = _expect(proc, "run ").split()[1]
        resume, acked = [], []
        for i in range(n):
            _expect(proc, f"req t{i}")
            msg = ControlMessage(ControlKind.APPROVE, {"target_id": f"t{i}", "run_id": run_id, "decided_by": "bench"})
            start = time.time_ns()
            ack = decider.deliver(msg, run_id=run_id, timeout_s=30)
            acked.append((time.time_ns() - start) / 1e6)
            assert ack.ok, ack
            resumed_at = int(_expect(proc, f"res t{i}").split()[2])
            resume.append((resumed_at - start) / 1e6)
        _expect(proc, "done")
    finally:
        proc.wait(timeout=60)
    return {
        "p50": statistics.median(resume),
        "p99": pct(resume, 0.99),
        "ack_p50": statistics.median(acked),
        "ack_p99": pct(acked, 0.99),
    }


def store_throughput(location: str, schema: str | None, k: int) -> float:
    """Decisions per second with ``k`` approvals pending at once in another process."""
    store = open_store(location, schema=schema)
    decider = StoreChannel(store)
    proc = _spawn(location, schema, k, concurrent=True)
    try:
        run_id = _expect(proc, "run ").split()[1]
        for _ in range(k):
            _expect(proc, "req ")
        msgs = [
            ControlMessage(ControlKind.APPROVE, {"target_id": f"t{i}", "run_id": run_id, "decided_by": "bench"})
            for i in range(k)
        ]
        start = time.perf_counter()
        for msg in msgs:
            store.post_control(msg, run_id=run_id)
        for msg in msgs:
            ack = decider.store.wait_ack(msg.id, 60)
            assert ack is not None and ack.ok, ack
        elapsed = time.perf_counter() - start
        _expect(proc, "done")
    finally:
        proc.wait(timeout=60)
    return k / elapsed


async def memory_latency(n: int) -> dict[str, float]:
    """The same loop with the in-memory ControlChannel, in one process."""
    channel = ControlChannel()
    opened: asyncio.Queue[str] = asyncio.Queue()
    resumed: asyncio.Queue[int] = asyncio.Queue()

    class Opened:
        def emit(self, event: events_pb2.Event) -> None:
            if event.WhichOneof("payload") == "approval_requested":
                opened.put_nowait(event.approval_requested.target_id)

    async def agent(task: Task, tools: AgentTools) -> None:
        for i in range(n):
            await tools.session.request_approval(ApprovalRequest(target_id=f"t{i}", kind="task", timeout_ms=TIMEOUT_MS))
            resumed.put_nowait(time.perf_counter_ns())

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[Opened()]).run())
    samples, acked = [], []
    for _ in range(n):
        target = await opened.get()
        start = time.perf_counter_ns()
        ack = await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": target}))
        acked.append((time.perf_counter_ns() - start) / 1e6)
        assert ack.ok
        samples.append((await resumed.get() - start) / 1e6)
    await run
    return {
        "p50": statistics.median(samples),
        "p99": pct(samples, 0.99),
        "ack_p50": statistics.median(acked),
        "ack_p99": pct(acked, 0.99),
    }


async def memory_throughput(k: int) -> float:
    channel = ControlChannel()
    ready = asyncio.Event()

    async def agent(task: Task, tools: AgentTools) -> None:
        async def one(i: int) -> None:
            await tools.session.request_approval(ApprovalRequest(target_id=f"t{i}", kind="task", timeout_ms=TIMEOUT_MS))

        waits = [asyncio.create_task(one(i)) for i in range(k)]
        await asyncio.sleep(0)
        ready.set()
        await asyncio.gather(*waits)

    run = asyncio.create_task(wrap(agent, control=channel).run())
    await ready.wait()
    start = time.perf_counter()
    acks = await asyncio.gather(
        *(channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": f"t{i}"})) for i in range(k))
    )
    elapsed = time.perf_counter() - start
    assert all(a.ok for a in acks)
    await run
    return k / elapsed


def _pg_schema_drop(dsn: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description="durable decisions: latency and throughput per backend")
    parser.add_argument("--agent", metavar="LOCATION", help=argparse.SUPPRESS)
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    parser.add_argument("--concurrent", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--n", "-n", type=int, default=200, help="latency samples per backend (default 200)")
    parser.add_argument("-k", type=int, default=1000, help="approvals pending at once for the rate (default 1000)")
    parser.add_argument("--dsn", default=os.environ.get("GOLDFIVE_TEST_PG_DSN") or os.environ.get("GOLDFIVE_DSN"))
    parser.add_argument("--json", action="store_true", help="print the results as JSON too")
    args = parser.parse_args()
    if args.agent:
        asyncio.run(agent_main(args.agent, args.schema, args.n, args.concurrent))
        return

    results: dict[str, dict[str, Any]] = {}
    mem = asyncio.run(memory_latency(args.n))
    mem["rate"] = asyncio.run(memory_throughput(args.k))
    results["in-memory (1 process)"] = mem
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        lat = store_latency(db, None, args.n)
        lat["rate"] = store_throughput(db, None, args.k)
        results["SQLite (2 processes)"] = lat
    if args.dsn:
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        try:
            lat = store_latency(args.dsn, schema, args.n)
            lat["rate"] = store_throughput(args.dsn, schema, args.k)
            results["PostgreSQL (2 processes)"] = lat
        finally:
            _pg_schema_drop(args.dsn, schema)
    else:
        print("PostgreSQL skipped: pass --dsn or set GOLDFIVE_TEST_PG_DSN")

    print(f"\ndecide→resume latency over {args.n} decisions; rate with {args.k} pending at once\n")
    print(f"{'backend':<26} {'resume p50':>11} {'resume p99':>11} {'ack p50':>9} {'ack p99':>9} {'decisions/s':>12}")
    for name, r in results.items():
        print(
            f"{name:<26} {r['p50']:>9.2f}ms {r['p99']:>9.2f}ms {r['ack_p50']:>7.2f}ms {r['ack_p99']:>7.2f}ms "
            f"{r['rate']:>12,.0f}"
        )
    targets = {"SQLite (2 processes)": 50.0, "PostgreSQL (2 processes)": 10.0}
    for name, limit in targets.items():
        if name in results:
            verdict = "meets" if results[name]["p50"] <= limit else "MISSES"
            print(f"{name}: p50 {results[name]['p50']:.2f} ms {verdict} the target of {limit:g} ms")
    if args.json:
        print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
