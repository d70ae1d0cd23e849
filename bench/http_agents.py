"""Benchmark: agents over HTTP (HttpChannel → goldfive serve) next to agents on the store directly.

    python bench/http_agents.py                       # SQLite in a temp dir
    python bench/http_agents.py --dsn postgresql://user@127.0.0.1:5432/db

A real ``goldfive serve`` process (uvicorn on 127.0.0.1) runs over a fresh store.

1. decide (``POST /api/approvals/ID/approve``) → the waiting agent resumes, p50/p99, one request at a
   time, alternating two agents in this process: one on an ``HttpChannel`` (agent token, no database)
   and one on a ``StoreChannel`` (the direct-store path). Target: HTTP p50 at most twice the store path's.
2. 1,000 waiting agents simulated in this process: each has one run with one pending request and holds
   one ``/api/agent/stream`` connection (as an HttpChannel does). The server's resident memory is read
   (``/proc/PID/status``) before and after they connect: memory per waiting agent. Then decisions are
   made one at a time and in bursts while all 1,000 wait: decide → that agent's stream delivers the
   message, p50/p99 (each simulated agent acks, so the decide call completes as with a real agent).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import httpx
from _support import event_json, ms_line, pct, serve

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import StoreChannel, open_store
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.users import add_user


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


# -- 1. decide → resume, HTTP agent vs store agent ----------------------------------------------------------------
class _Agent:
    """A callable agent that asks, on request, for approval of one task after another and notes when it resumes."""

    def __init__(self, channel: Any, prefix: str) -> None:
        self.channel = channel
        self.prefix = prefix
        self.go: asyncio.Queue[str | None] = asyncio.Queue()
        self.resumed: dict[str, float] = {}
        self.events: dict[str, asyncio.Event] = {}

        async def agent(task: Task, tools: AgentTools) -> None:
            while (target := await self.go.get()) is not None:
                await tools.report_task_started(target)
                answer = await tools.report_awaiting_approval("ok?", task_id=target, timeout_ms=60_000)
                self.resumed[target] = time.perf_counter()
                self.events[target].set()
                assert answer["decision"] == "approve", answer
                await tools.report_task_completed(task_id=target)

        self.task = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("bench"))


async def _latency(url: str, tokens: dict[str, str], location: str, schema: str | None, n: int) -> None:
    store = open_store(location, schema=schema)
    http_agent = _Agent(HttpChannel(url, token=tokens["bot"]), "h")
    store_agent = _Agent(StoreChannel(open_store(location, schema=schema)), "s")
    samples: dict[str, list[float]] = {"h": [], "s": []}
    auth = {"Authorization": f"Bearer {tokens['ana']}"}
    async with httpx.AsyncClient(base_url=url, headers=auth, timeout=30) as client:
        for i in range(2 * n + 4):
            agent = http_agent if i % 2 == 0 else store_agent
            target = f"{agent.prefix}-{uuid.uuid4().hex[:8]}"
            agent.events[target] = asyncio.Event()
            await agent.go.put(target)
            for _ in range(10_000):  # until the request is in the store and its run is live
                rows = await asyncio.to_thread(store.approvals_for, target)
                if rows and rows[0].open:
                    break
                await asyncio.sleep(0.002)
            await asyncio.sleep(0.05)  # let the agent settle into its wait (its stream, its LISTEN)
            t0 = time.perf_counter()
            resp = await client.post(f"/api/approvals/{target}/approve", json={})
            assert resp.status_code == 200, (agent.prefix, resp.text)
            await asyncio.wait_for(agent.events[target].wait(), 30)
            if i >= 4:  # the first rounds warm connections and caches
                samples[agent.prefix].append(agent.resumed[target] - t0)
    for agent in (http_agent, store_agent):
        await agent.go.put(None)
        await agent.task
        await agent.channel.aclose()
    h, s = pct(samples["h"], 0.5), pct(samples["s"], 0.5)
    print("1. decide (API) → the waiting agent resumes, one at a time")
    print(f"   HttpChannel (agent over HTTP)   {ms_line(samples['h'])}")
    print(f"   StoreChannel (direct store)     {ms_line(samples['s'])}")
    print(f"   ratio HTTP / store p50: {h / s:.2f}  (target ≤ 2)")


# -- 2. 1,000 waiting agents --------------------------------------------------------------------------------------
class _SimAgent:
    """One simulated agent: a run with one pending request, one stream, an ack for what it receives."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.target = f"{run_id}-pay"
        self.connected = asyncio.Event()
        self.got = asyncio.Event()
        self.got_at = 0.0

    async def listen(self, client: httpx.AsyncClient) -> None:
        params = {"run": self.run_id, "endpoint": self.run_id}
        async with client.stream("GET", "/api/agent/stream", params=params) as resp:
            assert resp.status_code == 200, resp.status_code
            data = ""
            async for line in resp.aiter_lines():
                if line.startswith(": connected"):
                    self.connected.set()
                elif line.startswith("data: "):
                    data = line[6:]
                elif line == "" and data:
                    frame = json.loads(data)
                    self.got_at = time.perf_counter()
                    self.got.set()
                    control_id = frame["message"]["id"]
                    ack = {"control_id": control_id, "result": "SUCCESS", "detail": "approved"}
                    await client.post(
                        "/api/agent/acks",
                        json={"endpoint": self.run_id, "acks": [{"inbox_id": frame["inbox_id"], "ack": ack}]},
                    )
                    data = ""


async def _many(url: str, pid: int, tokens: dict[str, str], agents: int, decisions: int, burst: int) -> None:
    limits = httpx.Limits(max_connections=agents + 50, max_keepalive_connections=agents + 50)
    timeout = httpx.Timeout(60, read=120)
    bot = {"Authorization": f"Bearer {tokens['bot']}"}
    ana = {"Authorization": f"Bearer {tokens['ana']}"}
    prefix = f"sim{uuid.uuid4().hex[:6]}"
    sims = [_SimAgent(f"{prefix}-{i}") for i in range(agents)]
    async with (
        httpx.AsyncClient(base_url=url, headers=bot, limits=limits, timeout=timeout) as client,
        httpx.AsyncClient(base_url=url, headers=ana, timeout=timeout) as person,
    ):
        for start in range(0, agents, 100):  # each run: RunStarted + one ApprovalRequested
            events = []
            for sim in sims[start : start + 100]:
                events.append(event_json(sim.run_id, 0, events_pb2.RunStarted(adapter="callable")))
                req = events_pb2.ApprovalRequested(target_id=sim.target, kind="task", prompt="pay?", timeout_ms=600_000)
                events.append(event_json(sim.run_id, 1, req))
            resp = await client.post("/api/agent/events", json={"pid": os.getpid(), "host": "bench", "events": events})
            assert resp.status_code == 200, resp.text

        async def beat() -> None:
            while True:
                for start in range(0, agents, 250):
                    ids = [s.run_id for s in sims[start : start + 250]]
                    await client.post("/api/agent/heartbeat", json={"run_ids": ids})
                await asyncio.sleep(2.0)

        beating = asyncio.create_task(beat())
        await asyncio.sleep(1.0)
        before = _rss_kib(pid)
        listeners: list[asyncio.Task[None]] = []
        t0 = time.perf_counter()
        for start in range(0, agents, 100):  # in waves, as agents start; a storm of 1,000 at once starves heartbeats
            wave = sims[start : start + 100]
            listeners += [asyncio.create_task(sim.listen(client)) for sim in wave]
            await asyncio.wait_for(asyncio.gather(*(s.connected.wait() for s in wave)), 300)
        connect_s = time.perf_counter() - t0
        await asyncio.sleep(2.0)
        after = _rss_kib(pid)
        print(f"2. {agents} waiting agents on one goldfive serve (each: one run, one pending request, one stream)")
        print(
            f"   all connected in {connect_s:.1f} s; server RSS {before / 1024:.1f} → {after / 1024:.1f} MiB: ", end=""
        )
        print(f"{(after - before) / agents:.1f} KiB per waiting agent")

        async def decide(sim: _SimAgent) -> float:
            t = time.perf_counter()
            resp = await person.post(f"/api/approvals/{sim.target}/approve", json={})
            assert resp.status_code == 200 and resp.json()["verdict"] == "applied", (sim.got.is_set(), resp.text)
            await asyncio.wait_for(sim.got.wait(), 60)
            return sim.got_at - t

        one = [await decide(sim) for sim in sims[:decisions]]
        print(f"   decide → that agent's stream delivers, one at a time:      {ms_line(one)}")
        bursty: list[float] = []
        rest = sims[decisions:]
        for start in range(0, min(len(rest), 4 * burst), burst):
            bursty += await asyncio.gather(*(decide(sim) for sim in rest[start : start + burst]))
        if bursty:
            print(f"   decide → delivered, {burst} decisions at once (x{len(bursty) // burst}): {ms_line(bursty)}")
        beating.cancel()
        for task in listeners:
            task.cancel()
        await asyncio.gather(beating, *listeners, return_exceptions=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="", help="PostgreSQL DSN (default: SQLite in a temp dir)")
    parser.add_argument("--n", type=int, default=30, help="decisions per path in part 1")
    parser.add_argument("--agents", type=int, default=1000, help="waiting agents in part 2")
    parser.add_argument("--decisions", type=int, default=200, help="one-at-a-time decisions in part 2")
    parser.add_argument("--burst", type=int, default=20, help="decisions at once in part 2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        schema = None
        location = args.dsn or str(Path(tmp) / "goldfive.db")
        if args.dsn:
            schema = f"bench_{uuid.uuid4().hex[:8]}"
        store = open_store(location, schema=schema)
        tokens = {name: add_user(store, name, role).token for name, role in (("ana", "approver"), ("bot", "agent"))}
        try:
            print(f"store: {'PostgreSQL' if args.dsn else 'SQLite'}; machine: {os.cpu_count()} cores")
            with serve(location, schema, Path(tmp) / "key.pem") as served:
                url, pid = served.url, served.pid
                await _latency(url, tokens, location, schema, args.n)
                await _many(url, pid, tokens, args.agents, args.decisions, args.burst)
        finally:
            if args.dsn:
                import psycopg

                with psycopg.connect(args.dsn, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    asyncio.run(main())
