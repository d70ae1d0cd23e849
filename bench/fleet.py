"""Benchmark: a fleet — 3 ``goldfive serve`` over one PostgreSQL, N waiting agents over HTTP, one server killed.

    python bench/fleet.py                          # a throwaway PostgreSQL cluster, 10,000 agents
    python bench/fleet.py --agents 600 --baseline /work/main
    python bench/fleet.py --dsn postgresql://user@127.0.0.1:5432/db

Each simulated agent is its own agent user (its own token), owns one run with ``--requests`` pending requests,
holds one ``/api/agent/stream`` (to server ``i % 3``, falling over to the next when its server goes away),
acks what it receives and heartbeats its run every 5 s as its own request — unless its stream's server says it
keeps the run alive itself (``X-Goldfive-Liveness: stream``, as an ``HttpChannel`` does; a baseline server
without it gets the requests). The agents share this process's
event loop. Reported, in this order:

1. memory per waiting agent per server (RSS before and after its agents connected) and PostgreSQL connections;
2. idle: the servers' CPU and PostgreSQL transactions/s (``pg_stat_database.xact_commit``) while every agent
   waits and heartbeats and nobody decides (with the throwaway cluster nothing else commits);
3. decide → that agent's stream delivers, one at a time and in bursts (``--burst`` at once), deciding from all
   three servers; then sustained decisions/s (``--concurrency`` in flight);
4. server 3 killed (SIGKILL) in the middle of a burst: time until its agents are all connected to the others,
   and decisions lost (answered applied, never delivered) or duplicated (delivered twice as different messages).

With ``--baseline TREE`` parts 1-3 are measured first against servers running TREE's code (e.g. main's
checkout), on the same cluster and agent users (each tree's fleet with runs of its own), and the burst ratio is
printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import httpx
import psycopg
from _support import REPO, Served, asked_events, free_port, ms_line, pct, serve

from goldfive_core.store import open_store
from goldfive_core.store.agents import LIVENESS_HEADER, LIVENESS_ON_STREAM, PASS_HEADER
from goldfive_core.store.users import add_user

SERVERS = 3
BEAT_S = 5.0
PG_BIN = Path("/usr/lib/postgresql/15/bin")
CHECKPOINTS = ("--checkpoint-every", "3600")
"""Each decision is still vouched for (a store read and an fsync'd line), but the periodic check of the chain
does not run during the bench: the simulated agents ack without writing the decision events a real agent's sink
writes, so it would refuse to sign, and re-verify the whole log on every round."""
KEEPALIVE_S = 3.0
"""The clients drop an idle connection before the server does (it closes them after 5 s): no request is sent on a
connection the server is closing."""


# -- a throwaway cluster -----------------------------------------------------------------------------------------
@contextlib.contextmanager
def _cluster(tmp: Path) -> Iterator[str]:
    """A PostgreSQL cluster of our own (initdb, started, stopped and removed): its DSN."""
    data = tmp / "pg"
    data.mkdir()
    port = free_port()
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_pg:
        shutil.chown(data, "postgres")
        shutil.chown(tmp, "postgres")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "check": True}
    subprocess.run([*as_pg, str(PG_BIN / "initdb"), "-D", str(data), "-U", "goldfive", "--auth=trust"], **quiet)
    opts = (
        f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off"
        " -c shared_preload_libraries=pg_stat_statements"
    )
    subprocess.run([*as_pg, str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "start"], **quiet)
    try:
        yield f"postgresql://goldfive@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_pg, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], **quiet)


def _pg_counts(dsn: str) -> tuple[int, int]:
    """(transactions committed so far in the database, connections to it now)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        commits = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        xacts = int(commits.fetchone()[0])  # type: ignore[index]
        conns = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return xacts, int(conns.fetchone()[0]) - 1  # type: ignore[index]


def _crashed(dsn: str, schema: str, runs: list[str]) -> int:
    """How many of ``runs`` the store has judged crashed (a live agent's run judged crashed is the bug to see)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            f"SELECT count(*) FROM {schema}.gf_runs WHERE status = 'crashed' AND run_id = ANY(%s)", (runs,)
        )
        return int(found.fetchone()[0])  # type: ignore[index]


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- one simulated agent -----------------------------------------------------------------------------------------
class _Sim:
    """One agent: its token, one run with pending requests, one stream (failing over), acks, heartbeats."""

    def __init__(self, index: int, token: str, requests: int, *, prefix: str = "fleet") -> None:
        self.run_id = f"{prefix}-{index}"
        self.token = token
        self.proof = ""
        """The pass its servers gave for its token (PASS_HEADER), sent back as an HttpChannel does."""
        self.home = index % SERVERS
        self.targets = [f"{self.run_id}-t{k}" for k in range(requests)]
        self.connected = asyncio.Event()
        self.carried = False
        """Whether its stream's server keeps its run alive (as an HttpChannel, it then sends no heartbeats)."""
        self.server = -1
        self.got: dict[str, list[str]] = {}
        """target → the control ids delivered for it (a repeat of the same id is a resend, skipped)."""
        self.seen: set[int] = set()
        self.arrived: dict[str, asyncio.Event] = {t: asyncio.Event() for t in self.targets}
        self.at: dict[str, float] = {}

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **({PASS_HEADER: self.proof} if self.proof else {})}

    async def register(self, client: httpx.AsyncClient, url: str) -> None:
        body = {"pid": os.getpid(), "host": "fleet", "events": asked_events(self.run_id, self.targets)}
        for attempt in range(5):  # a connection the loaded server dropped: the agent's sink retries too
            try:
                resp = await client.post(f"{url}/api/agent/events", json=body, headers=self.headers())
            except httpx.TransportError:
                await asyncio.sleep(0.5 * (attempt + 1))
                continue
            assert resp.status_code == 200 or attempt > 0, resp.text  # a retry may find its first try stored
            return
        raise RuntimeError(f"{self.run_id}: could not register")

    async def beat(self, client: httpx.AsyncClient, urls: list[str], alive: list[bool]) -> None:
        await asyncio.sleep(BEAT_S * (hash(self.run_id) % 1000) / 1000)  # spread over the interval
        while True:
            if self.carried and self.connected.is_set():  # its server keeps the run alive: no request
                await asyncio.sleep(BEAT_S)
                continue
            for step in range(SERVERS):
                server = (self.home + step) % SERVERS
                if not alive[server]:
                    continue
                with contextlib.suppress(httpx.HTTPError):
                    url = f"{urls[server]}/api/agent/heartbeat"
                    resp = await client.post(url, json={"run_ids": [self.run_id]}, headers=self.headers())
                    if resp.status_code == 200:
                        break
            await asyncio.sleep(BEAT_S)

    async def listen(self, client: httpx.AsyncClient, urls: list[str], alive: list[bool]) -> None:
        step = 0
        while True:
            server = (self.home + step) % SERVERS
            if not alive[server]:
                step += 1
                continue
            params = {"run": self.run_id, "endpoint": self.run_id}
            try:
                async with client.stream(
                    "GET", f"{urls[server]}/api/agent/stream", params=params, headers=self.headers()
                ) as resp:
                    if resp.status_code != 200:
                        raise httpx.HTTPError(f"stream: {resp.status_code}")
                    self.carried = resp.headers.get(LIVENESS_HEADER) == LIVENESS_ON_STREAM
                    self.proof = resp.headers.get(PASS_HEADER, self.proof)
                    await self._read(client, urls[server], server, resp)
            except httpx.HTTPError:
                pass
            self.connected.clear()
            step += 1
            await asyncio.sleep(0.2)

    async def _read(self, client: httpx.AsyncClient, url: str, server: int, resp: httpx.Response) -> None:
        data = ""
        async for line in resp.aiter_lines():
            if line.startswith(": connected"):
                self.server = server
                self.connected.set()
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "" and data:
                frame, data = json.loads(data), ""
                inbox_id, message = frame["inbox_id"], frame["message"]
                target = str(message.get("approve", {}).get("target_id", ""))
                if inbox_id not in self.seen:  # a resend after a broken connection is skipped, as an agent does
                    self.seen.add(inbox_id)
                    self.got.setdefault(target, []).append(message["id"])
                    if target in self.arrived:
                        self.at[target] = time.perf_counter()
                        self.arrived[target].set()
                ack = {"control_id": message["id"], "result": "SUCCESS", "detail": "approved"}
                body = {"endpoint": self.run_id, "acks": [{"inbox_id": inbox_id, "ack": ack}]}
                await client.post(f"{url}/api/agent/acks", json=body, headers=self.headers())


# -- the fleet ------------------------------------------------------------------------------------------------------
class _Fleet:
    def __init__(self, servers: list[Served], sims: list[_Sim], person: str, dsn: str, schema: str) -> None:
        self.servers = servers
        self.schema = schema
        self.urls = [s.url for s in servers]
        self.alive = [True] * len(servers)
        self.sims = sims
        self.person = {"Authorization": f"Bearer {person}"}
        self.dsn = dsn
        self.queue = [(sim, target) for k in range(len(sims[0].targets)) for sim in sims for target in [sim.targets[k]]]
        self.applied: list[tuple[_Sim, str]] = []
        self.recorded = 0
        self.retried = 0
        self.unanswered: list[tuple[_Sim, str]] = []
        self.unreachable = 0
        """Decisions whose request never got an answer (every try's connection dropped)."""
        """Decisions answered "no answer in time": the message was taken by a stream that went away unacked."""
        """Decisions recorded in the store instead (their run was judged crashed): a heartbeat came too late."""
        self.turn = 0

    def next_decisions(self, n: int) -> list[tuple[_Sim, str]]:
        taken, self.queue = self.queue[:n], self.queue[n:]
        return taken

    async def decide(self, client: httpx.AsyncClient, sim: _Sim, target: str, *, servers: list[int]) -> float:
        server = servers[self.turn % len(servers)]
        self.turn += 1
        t0 = time.perf_counter()
        resp = None
        for attempt in range(4):  # a connection dropped by a loaded server: the person asks again (nothing doubles)
            try:
                resp = await client.post(
                    f"{self.urls[server]}/api/approvals/{target}/approve", json={}, headers=self.person
                )
                break
            except httpx.TransportError:
                self.retried += 1
                server = servers[(self.turn + attempt) % len(servers)]
        if resp is None:  # four dropped connections in a row: the server is overloaded; counted, not delivered
            self.unreachable += 1
            return float("nan")
        if resp.status_code == 409 and "already" in resp.json().get("detail", ""):  # the first try got through
            resp = httpx.Response(200, json={"verdict": "applied"})
        if resp.status_code == 504 or resp.json().get("verdict") == "no_answer":  # taken, not acked in time
            self.unanswered.append((sim, target))  # (its stream's server was killed holding it): sent again later
            return float("nan")
        assert resp.status_code == 200, resp.text
        if resp.json()["verdict"] != "applied":  # its run was seen as crashed (no heartbeat): recorded in the store
            self.recorded += 1
            return float("nan")
        self.applied.append((sim, target))
        await asyncio.wait_for(sim.arrived[target].wait(), 120)
        return sim.at[target] - t0


def _delivered(latencies: list[float]) -> list[float]:
    return [x for x in latencies if x == x]  # NaN: recorded, not delivered


async def _measure(fleet: _Fleet, args: argparse.Namespace, label: str, *, kill: bool) -> list[float]:
    limits = httpx.Limits(
        max_connections=args.burst + 50, max_keepalive_connections=args.burst + 50, keepalive_expiry=KEEPALIVE_S
    )
    everyone = list(range(SERVERS))
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120)) as person:
        singles = fleet.next_decisions(args.one)
        one = _delivered([await fleet.decide(person, s, t, servers=everyone) for s, t in singles])
        print(f"   [{label}] decide → delivered, one at a time:          {ms_line(one)}")
        bursts: list[float] = []
        for _ in range(args.bursts):
            wave = fleet.next_decisions(args.burst)
            bursts += _delivered(await asyncio.gather(*(fleet.decide(person, s, t, servers=everyone) for s, t in wave)))
        print(f"   [{label}] decide → delivered, {args.burst} at once (x{args.bursts}):    {ms_line(bursts)}")
        if kill:
            await _sustained(fleet, person, args, label)
            await _kill(fleet, person, args)
    return bursts


async def _sustained(fleet: _Fleet, person: httpx.AsyncClient, args: argparse.Namespace, label: str) -> None:
    todo = fleet.next_decisions(args.sustained)
    gate = asyncio.Semaphore(args.concurrency)
    everyone = list(range(SERVERS))

    async def one(sim: _Sim, target: str) -> float:
        async with gate:
            return await fleet.decide(person, sim, target, servers=everyone)

    t0 = time.perf_counter()
    done = _delivered(await asyncio.gather(*(one(s, t) for s, t in todo)))
    elapsed = time.perf_counter() - t0
    print(
        f"   [{label}] sustained: {len(done)} decisions, {args.concurrency} in flight: "
        f"{len(done) / elapsed:.0f} decisions/s ({ms_line(done)})"
    )


async def _kill(fleet: _Fleet, person: httpx.AsyncClient, args: argparse.Namespace) -> None:
    victim = SERVERS - 1
    wave = fleet.next_decisions(args.burst)
    survivors = [s for s in range(SERVERS) if s != victim]
    decisions = asyncio.gather(*(fleet.decide(person, s, t, servers=survivors) for s, t in wave))
    await asyncio.sleep(0.02)  # mid-burst
    t0 = time.perf_counter()
    os.kill(fleet.servers[victim].pid, signal.SIGKILL)
    fleet.alive[victim] = False
    moved = [s for s in fleet.sims if s.server == victim]
    for _ in range(6000):
        if all(s.connected.is_set() and s.server != victim for s in moved):
            break
        await asyncio.sleep(0.05)
    back = time.perf_counter() - t0
    latencies = _delivered(await decisions)
    late = fleet.unanswered
    with contextlib.suppress(TimeoutError):  # an agent that reconnected gets them again from the database
        await asyncio.wait_for(asyncio.gather(*(s.arrived[t].wait() for s, t in late)), 60)
    lost = [(s.run_id, t) for s, t in [*fleet.applied, *late] if t not in s.got]
    duplicated = [(s.run_id, t) for s in fleet.sims for t, ids in s.got.items() if len(set(ids)) > 1]
    print(f"4. server {victim + 1} killed (SIGKILL) in a burst of {len(wave)} decisions from the other two")
    print(f"   its {len(moved)} agents all connected to the others again after {back:.2f} s")
    print(f"   that burst: {ms_line(latencies)}")
    print(
        f"   decisions applied in the whole run: {len(fleet.applied)}; lost {len(lost)}, duplicated {len(duplicated)}"
    )
    if late:
        print(f"   ({len(late)} answered 'no answer in time', then delivered once their agent was back)")
    print(
        f"   decisions recorded instead (their run judged crashed): {fleet.recorded}; "
        f"never answered (connections dropped): {fleet.unreachable}"
    )


def _statements(dsn: str, *, reset: bool) -> list[tuple[int, str]]:
    """(calls, statement) of the busiest statements since the last reset (pg_stat_statements; [] without it)."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            if reset:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.execute("SELECT pg_stat_statements_reset()")
                return []
            rows = conn.execute(
                "SELECT calls, query FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%' "
                "ORDER BY calls DESC LIMIT 6"
            ).fetchall()
            return [(int(calls), " ".join(str(query).split())[:90]) for calls, query in rows]
    except psycopg.Error:
        return []


async def _idle(fleet: _Fleet, seconds: float, label: str) -> None:
    cpu0 = [_cpu_s(s.pid) for s in fleet.servers]
    _statements(fleet.dsn, reset=True)
    x0, _ = _pg_counts(fleet.dsn)
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    elapsed = time.monotonic() - t0
    x1, conns = _pg_counts(fleet.dsn)
    cpu = [(_cpu_s(s.pid) - c) / elapsed for s, c in zip(fleet.servers, cpu0, strict=True)]
    beats = sum(1 for s in fleet.sims if not s.carried)
    print(
        f"2. [{label}] idle, nobody deciding ({elapsed:.0f} s, load {os.getloadavg()[0]:.1f}); {beats} agents send "
        f"heartbeat requests every {BEAT_S:g} s, {len(fleet.sims) - beats} are kept alive by their stream's server:"
    )
    print(f"   [{label}] server CPU: " + ", ".join(f"{c * 100:.1f} %" for c in cpu) + " of a core")
    print(
        f"   [{label}] PostgreSQL: {(x1 - x0 - 2) / elapsed:.1f} transactions/s for {len(fleet.sims)} agents; "
        f"{conns} connections"
    )
    for calls, query in _statements(fleet.dsn, reset=False):
        print(f"     {calls / elapsed:7.1f}/s  {query}")
    crashed = _crashed(fleet.dsn, fleet.schema, [s.run_id for s in fleet.sims])
    print(f"   [{label}] runs judged crashed so far: {crashed}")


async def _run(args: argparse.Namespace, dsn: str, tmp: Path) -> None:
    schema = f"fleet_{uuid.uuid4().hex[:8]}"
    store = open_store(dsn, schema=schema)
    t0 = time.perf_counter()
    person = add_user(store, "ana", "approver").token
    tokens = [add_user(store, f"bot{i}", "agent").token for i in range(args.agents)]
    store.close()
    print(
        f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.agents} agents (users made in "
        f"{time.perf_counter() - t0:.0f} s), {args.requests} requests each; PostgreSQL {dsn.rsplit('@', 1)[-1]}"
    )
    trees = ([Path(args.baseline)] if args.baseline else []) + [REPO]
    baseline: list[float] = []
    for tree in trees:
        label = "baseline" if tree != REPO else "this tree"
        # Each tree's fleet has runs of its own, registered at its servers: a run left by the other tree's servers
        # would age while its agent's first request to the new ones waited for a scrypt check (judged crashed).
        sims = [
            _Sim(i, token, args.requests, prefix="fleet" if tree == REPO else "base") for i, token in enumerate(tokens)
        ]
        with contextlib.ExitStack() as stack:
            servers = [
                stack.enter_context(serve(dsn, schema, tmp / "key.pem", tree=tree, extra=CHECKPOINTS))
                for _ in range(SERVERS)
            ]
            fleet = _Fleet(servers, sims, person, dsn, schema)
            await _fleet_run(fleet, args, label, tree == REPO, baseline)


async def _fleet_run(fleet: _Fleet, args: argparse.Namespace, label: str, main: bool, baseline: list[float]) -> None:
    limits = httpx.Limits(
        max_connections=2 * len(fleet.sims) + 50,
        max_keepalive_connections=2 * len(fleet.sims),
        keepalive_expiry=KEEPALIVE_S,
    )
    async with httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120)) as client:
        tasks: list[asyncio.Task[None]] = []
        try:
            await _start_agents(fleet, client, tasks, main=main)
            await _idle(fleet, args.idle, label)
            if args.idle_only:
                return
            print(f"3. [{label}] decisions, from all three servers")
            bursts = await _measure(fleet, args, label, kill=main)
            if not main:
                baseline.extend(bursts)
            elif baseline and bursts:
                print(f"   burst p99 this tree / baseline: {pct(bursts, 0.99) / pct(baseline, 0.99):.2f}")
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for s in fleet.sims:
                s.connected.clear()


async def _start_agents(
    fleet: _Fleet, client: httpx.AsyncClient, tasks: list[asyncio.Task[None]], *, main: bool
) -> None:
    async def join(sim: _Sim) -> None:
        await sim.register(client, fleet.urls[sim.home])  # its run and requests, by the agent itself (it owns the run)
        # Beating from the moment its run exists (not once its whole batch is in: each agent's first request
        # waits for its token's scrypt check, and a batch of them takes longer than a run stays fresh).
        tasks.append(asyncio.create_task(sim.beat(client, fleet.urls, fleet.alive)))

    for start in range(0, len(fleet.sims), 50):
        await asyncio.gather(*(join(s) for s in fleet.sims[start : start + 50]))
    before = [_rss_kib(s.pid) for s in fleet.servers]
    t0 = time.perf_counter()
    for start in range(0, len(fleet.sims), 100):  # in waves, as agents start
        wave = fleet.sims[start : start + 100]
        tasks += [asyncio.create_task(s.listen(client, fleet.urls, fleet.alive)) for s in wave]
        await asyncio.wait_for(asyncio.gather(*(s.connected.wait() for s in wave)), 600)
    connect_s = time.perf_counter() - t0
    await asyncio.sleep(2.0)
    crashed = _crashed(fleet.dsn, fleet.schema, [s.run_id for s in fleet.sims])
    print(f"   {len(fleet.sims)} agents connected in {connect_s:.1f} s; runs judged crashed meanwhile: {crashed}")
    after = [_rss_kib(s.pid) for s in fleet.servers]
    if main:
        per = [
            (a - b) / max(1, sum(1 for s in fleet.sims if s.home == i))
            for i, (b, a) in enumerate(zip(before, after, strict=True))
        ]
        print(
            f"1. {len(fleet.sims)} agents connected in {connect_s:.1f} s; memory per waiting agent: "
            + ", ".join(f"server {i + 1} {p:.1f} KiB" for i, p in enumerate(per))
        )


def main() -> None:
    global SERVERS  # every agent and phase reads it
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="", help="PostgreSQL DSN (default: a throwaway cluster, started and removed)")
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=4, help="pending requests per agent")
    parser.add_argument("--one", type=int, default=50, help="decisions one at a time")
    parser.add_argument("--burst", type=int, default=200, help="decisions at once")
    parser.add_argument("--bursts", type=int, default=2)
    parser.add_argument("--sustained", type=int, default=1000, help="decisions in the sustained run")
    parser.add_argument("--concurrency", type=int, default=100, help="decisions in flight in the sustained run")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of the idle measurement")
    parser.add_argument("--baseline", default="", help="a checkout whose servers give the burst's baseline")
    parser.add_argument("--servers", type=int, default=SERVERS, help="how many servers (the kill needs 2 or more)")
    parser.add_argument("--idle-only", action="store_true", help="stop after the idle measurement (part 2)")
    args = parser.parse_args()
    SERVERS = args.servers
    if SERVERS < 2 and not args.idle_only:
        parser.error("--servers 1 needs --idle-only (the kill moves agents to another server)")
    need = args.one + args.bursts * args.burst
    need += args.sustained + args.burst  # each tree's fleet has runs (and requests) of its own
    if need > args.agents * args.requests and not args.idle_only:
        parser.error(f"{need} decisions need --agents x --requests ≥ {need}")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        dsn = args.dsn or stack.enter_context(_cluster(Path(tmp)))
        asyncio.run(_run(args, dsn, Path(tmp)))


if __name__ == "__main__":
    main()
