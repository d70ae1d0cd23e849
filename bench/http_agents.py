"""Benchmark: agents over HTTP (HttpChannel → goldfive serve) next to agents on the store directly.

    python bench/http_agents.py                       # SQLite in a temp dir
    python bench/http_agents.py --dsn postgresql://user@127.0.0.1:5432/db

A real ``goldfive serve`` process (uvicorn on 127.0.0.1) runs over a fresh store.

1. decide (``POST /api/approvals/ID/approve``) → the agent's tool body starts, p50/p99, one request at a
   time, alternating two agent processes (``bench/_agent.py``, what a user runs): one on an ``HttpChannel``
   (agent token, no database) and one on a ``StoreChannel`` (the direct-store path), each asking through the
   gate and the execution ledger (``run_approved``) and trusting the server's key. The body's first line is
   timed in the agent's process (``CLOCK_MONOTONIC``, one clock for the machine). Target: HTTP p50 at most 1.5 times the
   store path's. ``--baseline TREE`` runs a second server and agent pair from another checkout (main's) in the
   same rounds, so both ratios see the same load.
2. 1,000 waiting agents simulated in this process: each has one run with one pending request and holds
   one ``/api/agent/stream`` connection (as an HttpChannel does). The server's resident memory is read
   (``/proc/PID/status``) before and after they connect: memory per waiting agent. Then decisions are
   made one at a time and in bursts while all 1,000 wait: decide → that agent's stream delivers the
   message, p50/p99 (each simulated agent acks, so the decide call completes as with a real agent).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sys
import tempfile
import time
import uuid
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import httpx
from _agent import monotonic
from _support import REPO, event_json, ms_line, pct, serve, stream_frames

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import open_store
from goldfive_core.store.users import add_user


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


# -- 1. decide → the tool body starts, an HTTP agent process vs a store agent process ------------------------------
_AGENT_SCRIPT = str(Path(__file__).resolve().parent / "_agent.py")


class _AgentProcess:
    """``bench/_agent.py`` in a process of its own, running ``tree``'s code: asks for calls, reports body starts."""

    def __init__(self, tree: Path, args: list[str], env: dict[str, str]) -> None:
        self.tree, self.args, self.env = tree, args, env
        self.proc: asyncio.subprocess.Process | None = None
        self.bodies: dict[str, float] = {}
        self.events: dict[str, asyncio.Event] = {}
        self.ready = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(self.tree), **self.env)
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, _AGENT_SCRIPT, *self.args, env=env, cwd=self.tree, stdin=PIPE, stdout=PIPE
        )
        self._reader = asyncio.create_task(self._read())
        await asyncio.wait_for(self.ready.wait(), 60)

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := (await self.proc.stdout.readline()).decode():
            if line.startswith("ready"):
                self.ready.set()
            elif line.startswith("body "):
                _, call_id, at = line.split()
                self.bodies[call_id] = float(at)
                self.events.setdefault(call_id, asyncio.Event()).set()

    async def ask(self, call_id: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(f"{call_id}\n".encode())
        await self.proc.stdin.drain()

    async def body_started(self, call_id: str) -> float:
        await asyncio.wait_for(self.events.setdefault(call_id, asyncio.Event()).wait(), 30)
        return self.bodies[call_id]

    async def stop(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"\n")
        await self.proc.stdin.drain()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        finally:
            if self.proc.returncode is None:
                self.proc.kill()
            if self._reader is not None:
                await asyncio.gather(self._reader, return_exceptions=True)


@dataclasses.dataclass
class _Setup:
    """One server and its two agent processes, all running one checkout's code."""

    name: str
    url: str
    token: str
    """The approver's (``ana``)."""
    store: Any
    agents: dict[str, _AgentProcess]
    samples: dict[str, list[float]] = dataclasses.field(default_factory=lambda: {"http": [], "store": []})


async def _start_setup(
    name: str, tree: Path, served: Any, tokens: dict[str, str], location: str, schema: str | None
) -> _Setup:
    trust = {"GOLDFIVE_TRUST_KEY": served.trust_line}  # both agents apply only decisions the server signed
    store_args = ["store", location, *([schema] if schema else [])]
    agents = {
        "http": _AgentProcess(tree, ["http", served.url, tokens["bot"]], trust),
        "store": _AgentProcess(tree, store_args, trust),
    }
    await asyncio.gather(*(a.start() for a in agents.values()))
    return _Setup(name, served.url, tokens["ana"], open_store(location, schema=schema), agents)


async def _one(setup: _Setup, kind: str, client: httpx.AsyncClient) -> float:
    """Ask one call on ``setup``'s ``kind`` agent; decide it over the API once it is pending; decide → body start."""
    agent = setup.agents[kind]
    call_id = f"{kind[0]}-{uuid.uuid4().hex[:10]}"
    await agent.ask(call_id)
    for _ in range(10_000):  # until the request is in the store (its run live: the agent heartbeats)
        rows = await asyncio.to_thread(setup.store.approvals_for, call_id)
        if rows and rows[0].open:
            break
        await asyncio.sleep(0.002)
    await asyncio.sleep(0.05)  # let the agent settle into its wait (its stream, its LISTEN)
    t0 = monotonic()
    auth = {"Authorization": f"Bearer {setup.token}"}
    resp = await client.post(f"{setup.url}/api/approvals/{call_id}/approve", json={}, headers=auth)
    assert resp.status_code == 200, (setup.name, kind, resp.text)
    return await agent.body_started(call_id) - t0


async def _latency(setups: list[_Setup], n: int, warmup: int = 2) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        for i in range(n + warmup):
            # Every setup and both agents in each round, the order turned each round: they share the load.
            order = [(s, k) for s in setups for k in ("http", "store")]
            for setup, kind in order if i % 2 == 0 else reversed(order):
                took = await _one(setup, kind, client)
                if i >= warmup:  # the first rounds warm connections and caches
                    setup.samples[kind].append(took)
    print("1. decide (POST /api/approvals/ID/approve) → the tool body starts in the agent's own process, one at a time")
    print(
        "   (run_approved: the gate, the ledger's executing claim, then the body; both agents trust the server's key)"
    )
    for setup in setups:
        h, s = setup.samples["http"], setup.samples["store"]
        print(f"   {setup.name}: HttpChannel agent process  {ms_line(h)}")
        print(f"   {setup.name}: StoreChannel agent process {ms_line(s)}")
        print(f"   {setup.name}: ratio HTTP / store p50: {pct(h, 0.5) / pct(s, 0.5):.2f}  (target ≤ 1.5)")
    for setup in setups:
        for agent in setup.agents.values():
            await agent.stop()


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
            async for frame in stream_frames(resp, self.connected):
                self.got_at = time.perf_counter()
                self.got.set()
                control_id = frame["message"]["id"]
                ack = {"control_id": control_id, "result": "SUCCESS", "detail": "approved"}
                await client.post(
                    "/api/agent/acks",
                    json={"endpoint": self.run_id, "acks": [{"inbox_id": frame["inbox_id"], "ack": ack}]},
                )


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
    parser.add_argument("--n", type=int, default=30, help="decisions per agent in part 1")
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. /work/main) measured in part 1's rounds")
    parser.add_argument("--agents", type=int, default=1000, help="waiting agents in part 2 (0: skip part 2)")
    parser.add_argument("--decisions", type=int, default=200, help="one-at-a-time decisions in part 2")
    parser.add_argument("--burst", type=int, default=20, help="decisions at once in part 2")
    args = parser.parse_args()
    trees = [("this tree", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    schemas: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        try:
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"store: {'PostgreSQL' if args.dsn else 'SQLite'}; machine: {os.cpu_count()} cores; load {load}")
            setups: list[_Setup] = []
            first: tuple[Any, dict[str, str]] | None = None
            for index, (name, tree) in enumerate(trees):
                schema = f"bench_{uuid.uuid4().hex[:8]}" if args.dsn else None
                schemas += [schema] if schema else []
                location = args.dsn or str(Path(tmp) / f"goldfive-{index}.db")
                store = open_store(location, schema=schema)
                tokens = {n: add_user(store, n, role).token for n, role in (("ana", "approver"), ("bot", "agent"))}
                key = Path(tmp) / f"keys-{index}" / "key.pem"  # each server its own key and checkpoint
                served = stack.enter_context(serve(location, schema, key, tree=tree))
                setups.append(await _start_setup(name, tree, served, tokens, location, schema))
                first = first or (served, tokens)
            await _latency(setups, args.n)
            if args.agents and first is not None:
                served, tokens = first
                await _many(served.url, served.pid, tokens, args.agents, args.decisions, args.burst)
            print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        finally:
            if args.dsn:
                import psycopg

                with psycopg.connect(args.dsn, autocommit=True) as conn:
                    for schema in schemas:
                        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    asyncio.run(main())
