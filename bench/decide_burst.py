"""Benchmark: decisions/s and burst latency of one ``goldfive serve``, this tree against a baseline, in one run.

    python bench/decide_burst.py --store sqlite --baseline /work/main
    python bench/decide_burst.py --store pg --dsn postgresql://goldfive@127.0.0.1:55432/postgres --baseline /work/main

One server over a fresh store per tree (a SQLite file, or its own PostgreSQL schema), ``--agents`` simulated HTTP
agents (each its own user and token, one run with pending requests, one ``/api/agent/stream``). An agent that
receives a decision does what a real ``HttpChannel`` does on the decision's path: it posts the run's
``ApprovalGranted`` event (appended to the audit chain) with its ack, in one request, when the server says it takes
events with acks (``X-Goldfive-Acks: events`` on the stream's answer), else the event and then the ack. A person (one
approver's token) decides:

1. a burst of ``--burst`` decisions at once (``--bursts`` times): p50/p99 of the decide request's answer (the 200
   the person sees, which comes after the agent's ack) and of decide → delivered on the agent's stream;
2. ``--sustained`` decisions with ``--concurrency`` in flight: decisions/s (each answered 200 after its ack).

The trees take turns (``--rounds`` of each, alternating, so a machine whose load moves affects both alike; each goes
first in every other round: the tree measured second did 0.7x the first's decisions/s whichever it was); the ratio
this tree / baseline is printed per measure. At the end, each tree's chain is verified (``audit verify``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import httpx
from _support import REPO, asked_events, event_json, ms_line, pct, serve, stream_frames

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import open_store
from goldfive_core.store.users import add_user

CHECKPOINTS = ("--checkpoint-every", "3600")
"""Each decision is vouched for by the checkpoint writer as in production; the periodic signing does not run."""


class _Agent:
    """One simulated agent: a run with pending requests, a stream, and the decision's event and ack on receipt."""

    def __init__(self, index: int, token: str, requests: int) -> None:
        self.run_id = f"burst-{index}"
        self.token = token
        self.targets = [f"{self.run_id}-t{k}" for k in range(requests)]
        self.sequence = requests + 1
        self.connected = asyncio.Event()
        self.with_events = False
        """The server takes the decision's event with its ack (one request)."""
        self.arrived: dict[str, float] = {}
        self.acked: dict[str, float] = {}
        self.retries = 0
        """When the agent's ack request was answered (its event posted before it)."""

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def register(self, client: httpx.AsyncClient, url: str) -> None:
        body = {"pid": os.getpid(), "host": "burst", "events": asked_events(self.run_id, self.targets)}
        await self._post(client, f"{url}/api/agent/events", body)  # a retry may find its first try stored: fine

    async def listen(self, client: httpx.AsyncClient, url: str) -> None:
        params = {"run": self.run_id, "endpoint": self.run_id}
        while True:  # a connection the loaded server dropped: the agent connects again, as an HttpChannel does
            with contextlib.suppress(httpx.TransportError):
                async with client.stream("GET", f"{url}/api/agent/stream", params=params, headers=self.headers()) as r:
                    self.with_events = r.headers.get("X-Goldfive-Acks") == "events"
                    if r.status_code == 200:
                        async for frame in stream_frames(r, self.connected):
                            await self._apply(client, url, frame)
            self.connected.clear()
            self.retries += 1
            await asyncio.sleep(0.5)

    async def _apply(self, client: httpx.AsyncClient, url: str, frame: dict) -> None:  # type: ignore[type-arg]
        message = frame["message"]
        decision = message.get("approve", {})
        target = str(decision.get("target_id", ""))
        self.arrived.setdefault(target, time.perf_counter())
        granted = events_pb2.ApprovalGranted(
            target_id=target, decided_by=str(decision.get("decided_by", "")), channel="api"
        )
        seq, self.sequence = self.sequence, self.sequence + 1
        body = {"pid": os.getpid(), "host": "burst", "events": [event_json(self.run_id, seq, granted)]}
        ack = {"control_id": message["id"], "result": "SUCCESS", "detail": "approved"}
        acks = {"endpoint": self.run_id, "acks": [{"inbox_id": frame["inbox_id"], "ack": ack}]}
        if self.with_events:  # one request: the server commits the event, then records the ack
            await self._post(client, f"{url}/api/agent/acks", {**acks, **body})
        else:
            await self._post(client, f"{url}/api/agent/events", body)
            await self._post(client, f"{url}/api/agent/acks", acks)
        self.acked.setdefault(target, time.perf_counter())

    async def _post(self, client: httpx.AsyncClient, url: str, body: dict) -> None:  # type: ignore[type-arg]
        """Posted until the server took it, as an agent's sink and ack retry (each retry counted)."""
        for attempt in range(20):
            with contextlib.suppress(httpx.TransportError):
                resp = await client.post(url, json=body, headers=self.headers())
                if resp.status_code == 200:
                    return
            self.retries += 1
            await asyncio.sleep(0.1 * (attempt + 1))


class _Tree:
    """One tree's server over its own fresh store, its agents connected, and the decisions left to make."""

    def __init__(self, label: str, tree: Path, location: str, schema: str | None, agents: list[_Agent]) -> None:
        self.label, self.tree, self.location, self.schema, self.agents = label, tree, location, schema, agents
        self.queue = [(a, t) for k in range(len(agents[0].targets)) for a in agents for t in [a.targets[k]]]
        self.url = ""
        self.pid = 0
        self.cpu_s = 0.0
        """The server's CPU time while it decided (its bursts and sustained runs)."""
        self.decided = 0
        self.failed: list[str] = []
        """Decisions not answered "applied" (their status and verdict)."""
        self.dropped = 0
        """The person's decide requests whose connection the server dropped (asked again)."""
        self.person: dict[str, str] = {}
        self.answered: list[float] = []
        self.delivered: list[float] = []
        self.after_ack: list[float] = []
        """From the agent's ack answered to the person's answer: the server's share after the ack."""
        self.rates: list[float] = []

    async def decide(self, client: httpx.AsyncClient, agent: _Agent, target: str) -> tuple[float, float]:
        t0 = time.perf_counter()
        resp = None
        for _ in range(4):  # a connection the loaded server dropped: the person asks again (nothing doubles)
            try:
                resp = await client.post(f"{self.url}/api/approvals/{target}/approve", json={}, headers=self.person)
                break
            except httpx.TransportError:
                self.dropped += 1
        end = time.perf_counter()
        if resp is not None and resp.status_code == 409 and "already" in resp.json().get("detail", ""):
            resp = httpx.Response(200, json={"verdict": "applied"})  # an earlier try got through
        if resp is None or resp.status_code != 200 or resp.json().get("verdict") != "applied":
            self.failed.append("dropped" if resp is None else f"{resp.status_code} {resp.json().get('verdict')}")
            return float("nan"), float("nan")
        self.after_ack.append(end - agent.acked.get(target, end))
        return end - t0, agent.arrived[target] - t0

    async def burst(self, client: httpx.AsyncClient, n: int) -> None:
        wave, self.queue = self.queue[:n], self.queue[n:]
        got = await asyncio.gather(*(self.decide(client, a, t) for a, t in wave))
        self.answered += [a for a, _ in got if a == a]
        self.delivered += [d for _, d in got if d == d]

    async def sustained(self, client: httpx.AsyncClient, n: int, concurrency: int) -> None:
        todo, self.queue = self.queue[:n], self.queue[n:]
        gate = asyncio.Semaphore(concurrency)

        async def one(agent: _Agent, target: str) -> None:
            async with gate:
                await self.decide(client, agent, target)

        t0 = time.perf_counter()
        await asyncio.gather(*(one(a, t) for a, t in todo))
        self.rates.append(len(todo) / (time.perf_counter() - t0))


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _store_for(kind: str, dsn: str, tmp: Path, label: str) -> tuple[str, str | None]:
    if kind == "sqlite":
        return str(tmp / f"{label.replace(' ', '_')}.db"), None
    return dsn, f"burst_{uuid.uuid4().hex[:8]}"


async def _connect(tree: _Tree, client: httpx.AsyncClient, tasks: list[asyncio.Task[None]]) -> None:
    for start in range(0, len(tree.agents), 50):
        await asyncio.gather(*(a.register(client, tree.url) for a in tree.agents[start : start + 50]))
    tasks += [asyncio.create_task(a.listen(client, tree.url)) for a in tree.agents]
    await asyncio.wait_for(asyncio.gather(*(a.connected.wait() for a in tree.agents)), 300)


def _verify(tree: _Tree) -> str:
    env = dict(os.environ, PYTHONPATH=str(tree.tree))
    env.pop("GOLDFIVE_DB", None)
    env.pop("GOLDFIVE_DSN", None)
    if tree.schema is None:
        env["GOLDFIVE_DB"] = tree.location
    else:
        env["GOLDFIVE_DSN"], env["GOLDFIVE_PG_SCHEMA"] = tree.location, tree.schema
    done = subprocess.run(
        [sys.executable, "-m", "goldfive_core.cli", "audit", "verify"], env=env, cwd=tree.tree, capture_output=True
    )
    return "ok" if done.returncode == 0 else f"FAILED: {done.stdout.decode()[-300:]}{done.stderr.decode()[-300:]}"


async def _main(args: argparse.Namespace, tmp: Path) -> None:
    trees = ([("baseline", Path(args.baseline))] if args.baseline else []) + [("this tree", REPO)]
    per_round = args.bursts * args.burst + args.sustained
    print(
        f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; store {args.store}; {args.agents} agents, "
        f"{args.rounds} round(s) per tree of {args.bursts} burst(s) of {args.burst} and {args.sustained} sustained "
        f"({args.concurrency} in flight)"
    )
    requests = -(-per_round * args.rounds // args.agents)
    with contextlib.ExitStack() as stack:
        runs: list[_Tree] = []
        for label, path in trees:
            location, schema = _store_for(args.store, args.dsn, tmp, label)
            store = open_store(location, schema=schema) if schema else open_store(location)
            person = add_user(store, "ana", "approver").token
            tokens = [add_user(store, f"bot{i}", "agent").token for i in range(args.agents)]
            store.close()
            tree = _Tree(label, path, location, schema, [_Agent(i, t, requests) for i, t in enumerate(tokens)])
            tree.person = {"Authorization": f"Bearer {person}"}
            served = stack.enter_context(serve(location, schema, tmp / "key.pem", tree=path, extra=CHECKPOINTS))
            tree.url, tree.pid = served.url, served.pid
            runs.append(tree)
        limits = httpx.Limits(max_connections=4 * args.agents + 4 * args.burst, max_keepalive_connections=None)
        tasks: list[asyncio.Task[None]] = []
        async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120)) as client:
            try:
                for tree in runs:
                    await _connect(tree, client, tasks)
                for turn in range(args.rounds):
                    for tree in runs if turn % 2 == 0 else runs[::-1]:  # each tree goes first in every other round
                        cpu0 = _cpu_s(tree.pid)
                        for _ in range(args.bursts):
                            await tree.burst(client, args.burst)
                        await tree.sustained(client, args.sustained, args.concurrency)
                        tree.cpu_s += _cpu_s(tree.pid) - cpu0
                        tree.decided += args.bursts * args.burst + args.sustained
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
    for tree in runs:
        rate = _median(tree.rates)
        print(f"[{tree.label}] burst of {args.burst}, answered: {ms_line(tree.answered)}")
        print(f"[{tree.label}] burst of {args.burst}, delivered: {ms_line(tree.delivered)}")
        print(f"[{tree.label}] every decision, agent's ack answered → person's answer: {ms_line(tree.after_ack)}")
        print(f"[{tree.label}] server CPU: {tree.cpu_s / max(1, tree.decided) * 1000:.1f} ms per decision")
        print(
            f"[{tree.label}] sustained: {rate:.0f} decisions/s (median of {', '.join(f'{r:.0f}' for r in tree.rates)})"
        )
        retries = sum(a.retries for a in tree.agents)
        failed = f"{len(tree.failed)} {sorted(set(tree.failed))}"
        again = f"agents' posts retried: {retries}; decide asked again: {tree.dropped}"
        print(f"[{tree.label}] not applied: {failed}; {again}")
        print(f"[{tree.label}] audit verify: {_verify(tree)}")
    if len(runs) == 2:
        base, this = runs
        p99 = pct(this.answered, 0.99) / pct(base.answered, 0.99)
        p50 = pct(this.answered, 0.5) / pct(base.answered, 0.5)
        rate = _median(this.rates) / _median(base.rates)
        print(f"ratio this tree / baseline: burst answered p99 {p99:.2f}, p50 {p50:.2f}; decisions/s {rate:.2f}")


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", choices=("sqlite", "pg"), default="sqlite")
    parser.add_argument("--dsn", default=os.environ.get("GOLDFIVE_TEST_PG_DSN", ""), help="PostgreSQL DSN (--store pg)")
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--burst", type=int, default=200, help="decisions at once")
    parser.add_argument("--bursts", type=int, default=2)
    parser.add_argument("--sustained", type=int, default=1000, help="decisions in the sustained run")
    parser.add_argument("--concurrency", type=int, default=100, help="decisions in flight in the sustained run")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per tree, the trees taking turns")
    parser.add_argument("--baseline", default="", help="a checkout measured in the same run (e.g. /work/main)")
    args = parser.parse_args()
    if args.store == "pg" and not args.dsn:
        parser.error("--store pg needs --dsn (or GOLDFIVE_TEST_PG_DSN)")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_main(args, Path(tmp)))


if __name__ == "__main__":
    main()
