"""Benchmark: goldfive serve — listing a big inbox, HTTP decisions vs the command line's path, live fan-out.

    python bench/serve.py                       # SQLite in a temp dir
    python bench/serve.py --dsn postgresql://user@127.0.0.1:5432/db

A real ``goldfive serve`` process (uvicorn on 127.0.0.1) runs over a fresh store; this process is
the agent (a callable run under a trusting ``StoreChannel``) and the clients.

* ``GET /api/approvals`` with 1,000 pending (a first page of 100 and the total), p50/p99.
  Target: p50 ≤ 50 ms.
* decide → the agent's tool body starts, p50/p99, one call pending at a time, alternating:
  ``POST /api/approvals/ID/approve`` (HTTP) and ``decide()`` straight on the store — what
  ``goldfive approve`` runs, without the interpreter's start-up. Target: HTTP p50 at most 1.5 times the CLI
  path's. ``--baseline TREE`` measures the same against a server running another checkout's code, both servers
  up at once over the same store and the blocks interleaved (this tree, the baseline, this tree, ...:
  ``--blocks``), so a change in the machine's load falls on both alike; each tree's ratio is reported.
* 50 SSE clients on ``/api/events``: from sending a decision until the 50th client has received
  its ``approval_granted``, p50/p99 over the decisions. Target: p99 ≤ 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import httpx
from _agent import ask_and_run
from _support import bench_event, ms_line, serve

from goldfive_core import AgentTools, Task, wrap
from goldfive_core._util import args_digest, canonical_json
from goldfive_core.approvals import Principal
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.signing import DecisionSigner, TrustKey, load_or_create_signing_key
from goldfive_core.store import StoreChannel, decide, open_store
from goldfive_core.store.base import HOST
from goldfive_core.store.users import add_user


async def _list_bench(client: httpx.AsyncClient, store: Any, rounds: int) -> list[float]:
    run_id = f"run-bench-{uuid.uuid4().hex[:8]}"
    events = [bench_event(run_id, 0, events_pb2.RunStarted(adapter="callable"))]
    for i in range(1000):
        req = events_pb2.ApprovalRequested(
            target_id=f"list-{i}",
            kind="tool",
            prompt="pay?",
            metadata={"tool_name": "transfer_funds", "args_json": canonical_json({"n": i})},
            args_digest=args_digest("transfer_funds", {"n": i}),
        )
        req.expires_at.FromMilliseconds(int(time.time() * 1000) + 3_600_000 + i)
        events.append(bench_event(run_id, i + 1, req))
    store.append_events(events, pid=os.getpid(), host=HOST)
    store.heartbeat([run_id])
    first = (await client.get("/api/approvals")).json()
    assert first["total"] == 1000, first.get("total")
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        resp = await client.get("/api/approvals")
        resp.json()
        samples.append(time.perf_counter() - t0)
    store.append_events(
        [bench_event(run_id, 1001, events_pb2.RunCompleted(status="RUN_STATUS_COMPLETED"))], pid=0, host=HOST
    )
    return samples


class _Fanout:
    """Counts the SSE clients that saw each decision; an event fires when the last one did."""

    def __init__(self, clients: int) -> None:
        self.clients = clients
        self.counts: dict[str, int] = {}
        self.all_seen: dict[str, asyncio.Event] = {}
        self.last_at: dict[str, float] = {}

    def event(self, target: str) -> asyncio.Event:
        return self.all_seen.setdefault(target, asyncio.Event())

    def saw(self, target: str) -> None:
        self.counts[target] = self.counts.get(target, 0) + 1
        if self.counts[target] == self.clients:
            self.last_at[target] = time.perf_counter()
            self.event(target).set()


async def _sse_client(client: httpx.AsyncClient, after: int, fanout: _Fanout, ready: asyncio.Event) -> None:
    async with client.stream("GET", "/api/events", headers={"Last-Event-ID": str(after)}) as resp:
        ready.set()
        async for line in resp.aiter_lines():
            if line.startswith("data: ") and '"approval_granted"' in line:
                fanout.saw(line.split('"target_id":"', 1)[1].split('"', 1)[0])


async def _until(predicate: Any) -> None:
    """Poll the store (another writer's change has no in-process signal) until ``predicate()`` holds."""
    for _ in range(30_000):
        if predicate():
            return
        await asyncio.sleep(0.002)
    raise TimeoutError("the store never showed the request")


async def _decisions(
    url: str, token: str, location: str, schema: str | None, signer: DecisionSigner, n: int, sse: int
) -> tuple[list[float], list[float], list[float]]:
    trust = signer.trust_key
    store = open_store(location, schema=schema)
    channel = StoreChannel(open_store(location, schema=schema), trust_key=trust)
    prefix = f"b{uuid.uuid4().hex[:6]}"
    started: dict[str, float] = {}
    body_started: dict[str, asyncio.Event] = {}
    asked: asyncio.Queue[str] = asyncio.Queue()

    async def agent(task: Task, tools: AgentTools) -> None:
        for i in range(2 * n + 2):
            call_id = f"{prefix}-{i}"

            async def body(args: Mapping[str, Any], call_id: str = call_id) -> str:
                started[call_id] = time.perf_counter()
                body_started.setdefault(call_id, asyncio.Event()).set()
                return "ok"

            asked.put_nowait(call_id)
            await ask_and_run(tools.session, channel.store, call_id, body, trust=channel.trust_key)

    headers = {"Authorization": f"Bearer {token}"}
    http_lat: list[float] = []
    cli_lat: list[float] = []
    fanout: list[float] = []
    limits = httpx.Limits(max_connections=sse + 10)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30, limits=limits) as client:
        after = store.audit_head()[0]
        seen = _Fanout(sse)
        readies = [asyncio.Event() for _ in range(sse)]
        readers = [asyncio.create_task(_sse_client(client, after, seen, readies[i])) for i in range(sse)]
        await asyncio.gather(*(r.wait() for r in readies))
        run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("bench"))
        for i in range(2 * n + 2):
            call_id = await asyncio.wait_for(asked.get(), 30)
            await _until(lambda call_id=call_id: any(r.open for r in store.approvals_for(call_id)))
            t0 = time.perf_counter()
            if i % 2 == 0:
                resp = await client.post(f"/api/approvals/{call_id}/approve", json={})
                assert resp.status_code == 200, resp.text
            else:
                result = await asyncio.to_thread(
                    decide,
                    store,
                    call_id,
                    approve=True,
                    principal=Principal(name="bench", channel="cli"),
                    signer=signer,
                )
                assert result.ok, result.detail
            await asyncio.wait_for(body_started.setdefault(call_id, asyncio.Event()).wait(), 30)
            if i % 2 == 0 and sse:
                await asyncio.wait_for(seen.event(call_id).wait(), 30)
            if i < 2:
                continue  # warm-up: the server's worker threads open their store connections
            (http_lat if i % 2 == 0 else cli_lat).append(started[call_id] - t0)
            if i % 2 == 0 and sse:
                fanout.append(seen.last_at[call_id] - t0)
        await asyncio.wait_for(run, 30)
        for r in readers:
            r.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
    await channel.aclose()
    return http_lat, cli_lat, fanout


async def _main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="goldfive-bench-serve-"))
    schema = None
    if args.dsn:
        location = args.dsn
        schema = f"bench_{uuid.uuid4().hex[:10]}"
    else:
        location = str(tmp / "goldfive.db")
    store = open_store(location, schema=schema)
    token = add_user(store, "bench", "admin").token
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"goldfive serve benchmark on {store.url}; load average {load} on {os.cpu_count()} CPUs")
    with contextlib.ExitStack() as servers:
        served = servers.enter_context(serve(location, schema, tmp / "key.pem"))
        url, trust = served.url, TrustKey.parse(served.trust_line)
        base_url = ""
        if args.baseline:  # up beside this tree's server for the whole run: the two are measured in turns
            base_url = servers.enter_context(serve(location, schema, tmp / "key.pem", tree=args.baseline.resolve())).url
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
            listing = await _list_bench(c, store, args.rounds)
        # The agent trusts the server's key; the CLI path signs with the same key file (a CLI holding the key),
        # so both paths are signed and verified alike.
        signer, _ = load_or_create_signing_key(tmp / "key.pem")
        assert signer.trust_key.raw == trust.raw
        # SSE clients live in this process too: measure decide→body without them, then the fan-out.
        blocks = max(1, args.blocks if args.baseline else 1)
        per_block = max(1, args.n // blocks)
        http_lat: list[float] = []
        cli_lat: list[float] = []
        base_http: list[float] = []
        base_cli: list[float] = []
        for _ in range(blocks):  # this tree, the baseline, this tree, ...: the same machine, moment by moment
            http, cli, _ = await _decisions(url, token, location, schema, signer, per_block, 0)
            http_lat += http
            cli_lat += cli
            if base_url:
                http, cli, _ = await _decisions(base_url, token, location, schema, signer, per_block, 0)
                base_http += http
                base_cli += cli
        _, _, fanout = await _decisions(url, token, location, schema, signer, args.n, args.sse)
    print(f"GET /api/approvals, 1,000 pending:         {ms_line(listing)}   target p50 <= 50 ms")
    print(f"decide -> tool body starts, HTTP approve:  {ms_line(http_lat)}")
    print(f"decide -> tool body starts, CLI path:      {ms_line(cli_lat)}")
    ratio = statistics.median(http_lat) / statistics.median(cli_lat)
    print(f"  HTTP / CLI p50 ratio: {ratio:.2f}   target <= 1.5")
    if base_url:
        print(f"baseline ({args.baseline}) server, HTTP approve: {ms_line(base_http)}   ({blocks} turns)")
        print(f"baseline ({args.baseline}) server, CLI path:     {ms_line(base_cli)}")
        print(f"  baseline HTTP / CLI p50 ratio: {statistics.median(base_http) / statistics.median(base_cli):.2f}")
        mine, theirs = statistics.median(http_lat), statistics.median(base_http)
        print(f"  HTTP approve p50, this tree / baseline: {mine / theirs:.2f}")
        # The CLI path never touches either server: its samples from both trees' turns measure one thing.
        pooled = statistics.median(cli_lat + base_cli)
        print(
            f"  HTTP / CLI p50 over the CLI samples of both turns (p50 {pooled * 1000:.2f} ms): "
            f"this tree {mine / pooled:.2f}, baseline {theirs / pooled:.2f}"
        )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{args.sse} SSE clients, decision -> all saw it: {ms_line(fanout)}   target p99 <= 1000 ms")
    if args.dsn:
        import psycopg

        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: SQLite in a temp dir)")
    parser.add_argument("--rounds", type=int, default=50, help="GET /api/approvals requests to time")
    parser.add_argument("-n", type=int, default=20, help="decisions per path")
    parser.add_argument("--sse", type=int, default=50, help="SSE clients connected during the decisions")
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. /work/main) whose server is measured too")
    parser.add_argument("--blocks", type=int, default=5, help="with --baseline: turns each tree's decisions take")
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
