"""Benchmark: a fleet — 3 ``goldfive serve`` over one PostgreSQL, N waiting agents over HTTP, one server killed.

    python bench/fleet.py                          # a throwaway PostgreSQL cluster, 10,000 agents
    python bench/fleet.py --agents 600 --baseline /work/main
    python bench/fleet.py --dsn postgresql://user@127.0.0.1:5432/db

Each simulated agent (``bench/_sim_agents.py``, spread over client processes by ``bench/_swarm.py``) is its own
agent user (its own token), owns one run with ``--requests`` pending requests, holds one ``/api/agent/stream`` (to
server ``i % 3``, moving to another when its server goes away), acks what it receives and heartbeats its run every
5 s as its own request until its stream's server says it keeps the run alive (``X-Goldfive-Liveness: stream``, as
an ``HttpChannel`` does). The agents join in waves: each registers its run and opens its stream at once. Their
users get a cheap token hash (the bench says so), but for ``--scrypt-agents`` of the last server's agents, made as
goldfive makes users: ``--forget-pass`` of those forget the pass their server gave (``X-Goldfive-Pass``), as an
agent from before the pass would, and the others keep it, so the failover shows what the pass spares (each
scrypt check: ≈ 50 ms of a survivor's CPU). Reported, in this order:

1. memory per waiting agent per server (RSS before and after its agents joined) and PostgreSQL connections;
2. idle: the servers' CPU, PostgreSQL transactions/s (``pg_stat_database.xact_commit``) and heartbeat writes/s
   (``pg_stat_statements``, with the throwaway cluster) while every agent waits and nobody decides;
3. decide → that agent's stream delivers, one at a time and in bursts (``--burst`` at once), deciding from all
   three servers; then sustained decisions/s (``--concurrency`` in flight);
4. server 3 killed (SIGKILL) in the middle of a burst: time until its agents are all served by the others (by
   kind of agent), and decisions lost (answered applied, never delivered) or duplicated (delivered twice as
   different messages).

With ``--baseline TREE`` parts 1-3 are measured first against servers running TREE's code (e.g. main's
checkout), on the same cluster (each tree's fleet in a schema of its own), and the burst ratio is
printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import _pg
import httpx
from _agent import monotonic
from _support import REPO, Served, cpu_s, ms_line, pct, rss_kib, serve
from _swarm import CHEAP_HASH_N, Sim, Swarm, cheap_users, orders, raise_fd_limit

from goldfive_core.store import open_store
from goldfive_core.store.users import add_user

SERVERS = 3
CHECKPOINTS = ("--checkpoint-every", "3600")
"""Each decision is still vouched for (a store read and an fsync'd line), but the periodic check of the chain
does not run during the bench: the simulated agents ack without writing the decision events a real agent's sink
writes, so it would refuse to sign, and re-verify the whole log on every round."""
SETTLE_S = 12.0
"""Between the join and the idle window: PostgreSQL's backends report their counts up to 10 s after they went idle,
so the join's transactions would be counted in the window otherwise."""
PERSON_CONNECTIONS = 50
"""Connections per person client (one httpx pool looks over all its connections at every request: several small)."""


def _load() -> str:
    return "load " + " / ".join(f"{x:.1f}" for x in os.getloadavg())


# -- the fleet ------------------------------------------------------------------------------------------------------
class _Fleet:
    def __init__(self, servers: list[Served], swarm: Swarm, person: str, dsn: str, schema: str) -> None:
        self.servers = servers
        self.schema = schema
        self.urls = [s.url for s in servers]
        self.swarm = swarm
        self.sims = swarm.sims
        self.person = {"Authorization": f"Bearer {person}"}
        self.dsn = dsn
        depth = max(len(s.targets) for s in self.sims)
        self.queue = [(s, s.targets[k]) for k in range(depth) for s in self.sims if k < len(s.targets)]
        self.applied: list[tuple[Sim, str]] = []
        self.recorded = 0
        """Decisions recorded in the store instead (their run was judged crashed): a heartbeat came too late."""
        self.retried = 0
        self.unanswered: list[tuple[Sim, str]] = []
        """Decisions answered "no answer in time": the message was taken by a stream that went away unacked."""
        self.unreachable = 0
        """Decisions whose request never got an answer (every try's connection dropped)."""
        self.turn = 0
        self.top = 8
        self.alive = [True] * len(servers)

    def next_decisions(self, n: int) -> list[tuple[Sim, str]]:
        taken, self.queue = self.queue[:n], self.queue[n:]
        return taken

    async def decide(self, clients: list[httpx.AsyncClient], sim: Sim, target: str, *, servers: list[int]) -> float:
        """Approve ``target`` at one of ``servers`` (in turn); decide → delivered in seconds (NaN: not delivered)."""
        server = servers[self.turn % len(servers)]
        client = clients[self.turn % len(clients)]
        self.turn += 1
        t0 = monotonic()
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
        try:
            await asyncio.wait_for(sim.arrived(target).wait(), 120)
        except TimeoutError:  # answered applied, never delivered: counted as lost at the end
            return float("nan")
        return sim.at[target] - t0


def _delivered(latencies: list[float]) -> list[float]:
    return [x for x in latencies if x == x]  # NaN: recorded, not delivered


@contextlib.asynccontextmanager
async def _people(n: int):  # type: ignore[no-untyped-def]
    limits = httpx.Limits(max_connections=PERSON_CONNECTIONS, max_keepalive_connections=PERSON_CONNECTIONS)
    clients = [httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(120)) for _ in range(n)]
    try:
        yield clients
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))


async def _measure(fleet: _Fleet, args: argparse.Namespace, label: str, *, kill: bool) -> list[float]:
    everyone = list(range(SERVERS))
    async with _people(math.ceil((max(args.burst, args.concurrency) + 1) / (PERSON_CONNECTIONS - 5))) as people:
        singles = fleet.next_decisions(args.one)
        one = _delivered([await fleet.decide(people, s, t, servers=everyone) for s, t in singles])
        print(f"   [{label}] decide → delivered, one at a time:          {ms_line(one)}")
        bursts: list[float] = []
        for _ in range(args.bursts):
            wave = fleet.next_decisions(args.burst)
            bursts += _delivered(await asyncio.gather(*(fleet.decide(people, s, t, servers=everyone) for s, t in wave)))
        print(f"   [{label}] decide → delivered, {args.burst} at once (x{args.bursts}): {ms_line(bursts)}  ({_load()})")
        if kill:
            await _sustained(fleet, people, args, label)
            await _kill(fleet, people, args)
    return bursts


async def _sustained(fleet: _Fleet, people: list[httpx.AsyncClient], args: argparse.Namespace, label: str) -> None:
    todo = fleet.next_decisions(args.sustained)
    gate = asyncio.Semaphore(args.concurrency)
    everyone = list(range(SERVERS))

    async def one(sim: Sim, target: str) -> float:
        async with gate:
            return await fleet.decide(people, sim, target, servers=everyone)

    t0 = time.perf_counter()
    done = _delivered(await asyncio.gather(*(one(s, t) for s, t in todo)))
    elapsed = time.perf_counter() - t0
    print(
        f"   [{label}] sustained: {len(done)} decisions, {args.concurrency} in flight: "
        f"{len(done) / elapsed:.0f} decisions/s ({ms_line(done)})  ({_load()})"
    )


async def _kill(fleet: _Fleet, people: list[httpx.AsyncClient], args: argparse.Namespace) -> None:
    victim = SERVERS - 1
    wave = fleet.next_decisions(args.burst)
    survivors = [s for s in range(SERVERS) if s != victim]
    cpu0 = [cpu_s(fleet.servers[s].pid) for s in survivors]
    decisions = asyncio.gather(*(fleet.decide(people, s, t, servers=survivors) for s, t in wave))
    await asyncio.sleep(0.02)  # mid-burst
    moved = [s for s in fleet.sims if s.server == victim]
    crashed0 = _pg.crashed(fleet.dsn, fleet.schema, [s.run_id for s in fleet.sims])
    await fleet.swarm.stats()  # the clients' lag from here on
    print(f"4. server {victim + 1} killed (SIGKILL) in a burst of {len(wave)} decisions from the other two ({_load()})")
    _profile_phase(fleet, "failover", signal.SIGUSR1)
    t0 = monotonic()
    os.kill(fleet.servers[victim].pid, signal.SIGKILL)
    fleet.alive[victim] = False
    everyone = await _failover(fleet, t0, moved, victim, survivors, args.failover_wait)
    _profile_phase(fleet, "failover", signal.SIGUSR2)
    back = {s.run_id: s.up_at - t0 for s in moved if s.server not in (-1, victim) and s.up_at > t0}
    cpu = [cpu_s(fleet.servers[s].pid) - c for s, c in zip(survivors, cpu0, strict=True)]
    await fleet.swarm.stats()
    crashed = _pg.crashed(fleet.dsn, fleet.schema, [s.run_id for s in fleet.sims]) - crashed0
    latencies = _delivered(await decisions)
    late = fleet.unanswered
    with contextlib.suppress(TimeoutError):  # an agent that reconnected gets them again from the database
        await asyncio.wait_for(asyncio.gather(*(s.arrived(t).wait() for s, t in late)), 60)
    lost = [(s.run_id, t) for s, t in [*fleet.applied, *late] if t not in s.got]
    duplicated = [(s.run_id, t) for s in fleet.sims for t, ids in s.got.items() if len(set(ids)) > 1]
    print(
        f"   its {len(moved)} agents served by the others again: {len(back)} of them, the last after "
        f"{max(back.values(), default=float('nan')):.2f} s; every agent of the fleet on a survivor: "
        + (f"after {everyone:.2f} s" if everyone == everyone else f"not within {args.failover_wait:g} s")
        + f"; the survivors used {cpu[0]:.1f} s and {cpu[1]:.1f} s of CPU; the client processes' worst event-loop "
        f"lag {fleet.swarm.lag:.1f} s; runs judged crashed meanwhile: {crashed}"
    )
    seen = [s.down_at - t0 for s in moved if s.down_at > t0]
    again = [s for s in moved if s.run_id in back]
    if seen and again:
        sent = [s.asked - t0 for s in again]
        waited = [s.answered - s.asked for s in again]
        print(
            f"     their streams ended (seen by the agents) after p50 {pct(seen, 0.5):.2f} s, max {max(seen):.2f} s; "
            f"stream requests until served again: p50 {pct([s.tries for s in again], 0.5)}, "
            f"max {max(s.tries for s in again)}; the last one sent after p50 {pct(sent, 0.5):.2f} s, max "
            f"{max(sent):.2f} s, and answered {pct(waited, 0.5):.2f} s (p50), {max(waited):.2f} s (max) after sent"
        )
    for group in sorted({s.group for s in moved}):
        times = [back[s.run_id] for s in moved if s.group == group and s.run_id in back]
        missing = sum(1 for s in moved if s.group == group and s.run_id not in back)
        if times:
            print(
                f"     {group}: {len(times)} agents, back after p50 {pct(times, 0.5):.2f} s, "
                f"max {max(times):.2f} s" + (f" ({missing} not back)" if missing else "")
            )
    print(f"   that burst: {ms_line(latencies)}")
    print(
        f"   decisions applied in the whole run: {len(fleet.applied)}; lost {len(lost)}, duplicated {len(duplicated)}"
    )
    if late:
        print(f"   ({len(late)} answered 'no answer in time', then delivered once their agent was back)")
    print(
        f"   decisions recorded instead (their run judged crashed): {fleet.recorded}; "
        f"never answered (connections dropped): {fleet.unreachable}; person's retries: {fleet.retried}"
    )
    if lost or duplicated:
        print(f"   lost: {lost[:10]}; duplicated: {duplicated[:10]}")


async def _failover(
    fleet: _Fleet, t0: float, moved: list[Sim], victim: int, survivors: list[int], limit_s: float
) -> float:
    """Wait (at most ``limit_s``) until every agent's stream is on a survivor, the moved ones' since the kill;
    a line every 5 s: how many are, the survivors' and the client processes' CPU, runs judged crashed. The
    seconds it took (NaN: not within the limit)."""
    pids = [fleet.servers[s].pid for s in survivors]
    last = (monotonic(), [cpu_s(p) for p in pids], sum(cpu_s(p) for p in fleet.swarm.pids))
    while monotonic() - t0 < limit_s:
        done = all(s.server not in (-1, victim) and (s.up_at > t0 or s not in moved) for s in fleet.sims)
        if done:
            return monotonic() - t0
        await asyncio.sleep(0.05)
        now = monotonic()
        if now - last[0] < 5.0:
            continue
        servers, clients = [cpu_s(p) for p in pids], sum(cpu_s(p) for p in fleet.swarm.pids)
        span = now - last[0]
        on = sum(1 for s in fleet.sims if s.server not in (-1, victim))
        crashed = _pg.crashed(fleet.dsn, fleet.schema, [s.run_id for s in fleet.sims])
        locked, open_xacts = _pg.waiting(fleet.dsn)
        print(
            f"     +{now - t0:5.0f} s: {on} of {len(fleet.sims)} agents streaming from a survivor "
            f"({sum(1 for s in moved if s.server not in (-1, victim))} of the {len(moved)} moved); survivors' CPU "
            + ", ".join(f"{(b - a) / span * 100:.0f} %" for a, b in zip(last[1], servers, strict=True))
            + f"; clients' {(clients - last[2]) / span * 100:.0f} %; runs judged crashed {crashed}; PostgreSQL: "
            f"{open_xacts} in a transaction, {locked} waiting for a lock; {_load()}",
            flush=True,
        )
        last = (now, servers, clients)
    return float("nan")


def _profile_phase(fleet: _Fleet, phase: str, sig: int) -> None:
    """With ``GOLDFIVE_BENCH_PROFILE``: the servers' profiles cover ``GOLDFIVE_BENCH_PHASE`` alone (``idle``, the
    default, or ``failover``): SIGUSR1 as it starts, SIGUSR2 as it ends (bench/_serve_timed.py)."""
    if os.environ.get("GOLDFIVE_BENCH_PROFILE") and os.environ.get("GOLDFIVE_BENCH_PHASE", "idle") == phase:
        for server, alive in zip(fleet.servers, fleet.alive, strict=True):
            if alive:
                os.kill(server.pid, sig)


async def _idle(fleet: _Fleet, seconds: float, label: str) -> None:
    _profile_phase(fleet, "idle", signal.SIGUSR1)  # each server's profile starts with the window ...
    cpu0 = [cpu_s(s.pid) for s in fleet.servers]
    beats0, _, _ = await fleet.swarm.stats()
    _pg.statements(fleet.dsn, reset=True)
    x0, _ = _pg.counts(fleet.dsn)
    t0 = time.monotonic()
    await asyncio.sleep(seconds)
    elapsed = time.monotonic() - t0
    _profile_phase(fleet, "idle", signal.SIGUSR2)  # ... and ends with it
    x1, conns = _pg.counts(fleet.dsn)
    cpu = [(cpu_s(s.pid) - c) / elapsed for s, c in zip(fleet.servers, cpu0, strict=True)]
    beats1, uncarried, connected = await fleet.swarm.stats()
    writes, hb_statements = _pg.write_work(fleet.dsn)
    print(
        f"2. [{label}] idle, nobody deciding ({elapsed:.0f} s, {_load()}); {connected} of {len(fleet.sims)} agents "
        f"connected, {uncarried} not kept alive by their stream's server; heartbeat requests sent: "
        f"{(beats1 - beats0) / elapsed:.1f}/s"
    )
    print(f"   [{label}] server CPU: " + ", ".join(f"{c * 100:.2f} %" for c in cpu) + " of a core")
    print(
        f"   [{label}] PostgreSQL: {(x1 - x0 - _pg.COUNTING_XACTS) / elapsed:.1f} transactions/s for "
        f"{len(fleet.sims)} agents, {conns} connections; write transactions {writes / elapsed:.2f}/s "
        f"(the heartbeat stamps and batches among them: {hb_statements / elapsed:.1f} UPDATE statements/s, one per 500 "
        "runs)"
    )
    for calls, query in _pg.statements(fleet.dsn, reset=False, top=fleet.top):
        print(f"     {calls / elapsed:7.2f}/s  {query}")
    crashed = _pg.crashed(fleet.dsn, fleet.schema, [s.run_id for s in fleet.sims])
    print(f"   [{label}] runs judged crashed so far: {crashed}")


def _sims(tokens: list[str], args: argparse.Namespace, prefix: str) -> list[Sim]:
    """One sim per token; the first ``--scrypt-agents`` tokens (made by goldfive's add_user) go to the last server's
    agents, the first ``--forget-pass`` of those forgetting their pass."""
    victim = SERVERS - 1
    homes = [i % SERVERS for i in range(len(tokens))]
    scrypt_slots = [i for i, home in enumerate(homes) if home == victim][: args.scrypt_agents]
    kind = dict.fromkeys(range(len(tokens)), "cheap hash")
    token_of = {}
    for k, slot in enumerate(scrypt_slots):
        token_of[slot] = tokens[k]
        kind[slot] = "goldfive's hash, pass " + ("forgotten" if k < args.forget_pass else "kept")
    rest = iter(tokens[len(scrypt_slots) :])
    sims = []
    for i, home in enumerate(homes):
        token = token_of[i] if i in token_of else next(rest)
        sims.append(
            Sim(
                run_id=f"{prefix}-{i}",
                token=token,
                order=orders(home, i // SERVERS, SERVERS),
                targets=[f"{prefix}-{i}-t{k}" for k in range(args.requests)],
                keep_pass=not kind[i].endswith("forgotten"),
                group=kind[i],
                early=i in token_of,
            )
        )
    return sims


async def _run(args: argparse.Namespace, dsn: str, tmp: Path) -> None:
    soft, _ = raise_fd_limit()
    scrypt = min(args.scrypt_agents, args.agents // SERVERS)
    print(
        f"machine: {os.cpu_count()} cores, {_load()}; open files {soft}; {args.agents} agents, {args.requests} "
        f"requests each, in {math.ceil(args.agents / args.per_process)} client processes; their users have a cheap "
        f"token hash (scrypt N={CHEAP_HASH_N}, for the bench only: goldfive's is 2^14) but for {scrypt} of server "
        f"{SERVERS}'s agents; PostgreSQL {dsn.rsplit('@', 1)[-1]}"
    )
    trees = ([Path(args.baseline)] if args.baseline else []) + [REPO]
    baseline: list[float] = []
    for tree in trees:
        label = "baseline" if tree != REPO else "this tree"
        # Each tree's fleet in a schema of its own: the other's runs, left without heartbeats, would be closed as
        # crashed (an audit event each) by these servers while they are measured.
        schema = f"fleet_{uuid.uuid4().hex[:8]}"
        store = open_store(dsn, schema=schema)
        person = add_user(store, "ana", "approver").token
        store.close()
        t0 = time.perf_counter()
        tokens = cheap_users(dsn, schema, "bot", args.agents, scrypt=scrypt)
        print(f"   [{label}] {args.agents} agent users made in {time.perf_counter() - t0:.0f} s")
        sims = _sims(tokens, args, "fleet")
        with contextlib.ExitStack() as stack:
            servers = [
                stack.enter_context(serve(dsn, schema, tmp / "key.pem", tree=tree, extra=CHECKPOINTS))
                for _ in range(SERVERS)
            ]
            processes = math.ceil(args.agents / args.per_process)
            async with Swarm([s.url for s in servers], sims, tmp, processes=processes) as swarm:
                fleet = _Fleet(servers, swarm, person, dsn, schema)
                fleet.top = args.top
                await _fleet_run(fleet, args, label, tree == REPO, baseline)


async def _fleet_run(fleet: _Fleet, args: argparse.Namespace, label: str, main: bool, baseline: list[float]) -> None:
    await _join(fleet, args, main=main)
    await _idle(fleet, args.idle, label)
    if args.idle_only:
        return
    print(f"3. [{label}] decisions, from all three servers")
    bursts = await _measure(fleet, args, label, kill=main)
    if not main:
        baseline.extend(bursts)
    elif baseline and bursts:
        print(f"   burst p99 this tree / baseline: {pct(bursts, 0.99) / pct(baseline, 0.99):.2f}")
    if fleet.swarm.errors:
        print(f"   agents' errors: {len(fleet.swarm.errors)}, e.g. {fleet.swarm.errors[:3]}")


async def _join(fleet: _Fleet, args: argparse.Namespace, *, main: bool) -> None:
    # The agents with goldfive's own hash first: each scrypt check holds 16 MiB while it runs, not a waiting agent's.
    early, _ = await fleet.swarm.join(args.wave, early=True)
    before = [rss_kib(s.pid) for s in fleet.servers]
    seconds, failed = await fleet.swarm.join(args.wave)
    await asyncio.sleep(2.0)
    crashed = _pg.crashed(fleet.dsn, fleet.schema, [s.run_id for s in fleet.sims])
    print(
        f"   {fleet.swarm.connected()} of {len(fleet.sims)} agents joined (registered, streaming) in {seconds:.1f} s "
        f"({args.wave} at a time per client process; {failed} failed; the {sum(s.early for s in fleet.sims)} with "
        f"goldfive's hash first, in {early:.1f} s); runs judged crashed meanwhile: {crashed}; {_load()}"
    )
    await asyncio.sleep(SETTLE_S)
    after = [rss_kib(s.pid) for s in fleet.servers]
    on = [sum(1 for s in fleet.sims if s.server == i and not s.early) for i in range(SERVERS)]
    _, conns = _pg.counts(fleet.dsn)
    if main:
        print(
            "1. memory per waiting agent: "
            + ", ".join(
                f"server {i + 1} {(a - b) / max(1, n):.1f} KiB ({n} agents, RSS {b / 1024:.0f} → {a / 1024:.0f} MiB)"
                for i, (b, a, n) in enumerate(zip(before, after, on, strict=True))
            )
            + f"; PostgreSQL connections: {conns}"
        )


def main() -> None:
    global SERVERS  # every agent and phase reads it
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="", help="PostgreSQL DSN (default: a throwaway cluster, started and removed)")
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=1, help="pending requests per agent")
    parser.add_argument("--one", type=int, default=50, help="decisions one at a time")
    parser.add_argument("--burst", type=int, default=200, help="decisions at once")
    parser.add_argument("--bursts", type=int, default=2)
    parser.add_argument("--sustained", type=int, default=1000, help="decisions in the sustained run")
    parser.add_argument("--concurrency", type=int, default=100, help="decisions in flight in the sustained run")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of the idle measurement")
    parser.add_argument("--wave", type=int, default=50, help="agents joining at once, per client process")
    parser.add_argument("--per-process", type=int, default=2500, help="agents per client process")
    parser.add_argument(
        "--scrypt-agents", type=int, default=300, help="of the last server's agents, how many have goldfive's own hash"
    )
    parser.add_argument(
        "--forget-pass", type=int, default=50, help="of those, how many forget their pass (agents from before it)"
    )
    parser.add_argument("--top", type=int, default=8, help="the idle part's busiest statements listed")
    parser.add_argument(
        "--failover-wait", type=float, default=600.0, help="longest wait for every agent to be served again"
    )
    parser.add_argument("--baseline", default="", help="a checkout whose servers give the burst's baseline")
    parser.add_argument("--servers", type=int, default=SERVERS, help="how many servers (the kill needs 2 or more)")
    parser.add_argument("--idle-only", action="store_true", help="stop after the idle measurement (part 2)")
    args = parser.parse_args()
    SERVERS = args.servers
    if SERVERS < 2 and not args.idle_only:
        parser.error("--servers 1 needs --idle-only (the kill moves agents to another server)")
    need = args.one + args.bursts * args.burst + args.sustained + args.burst
    if need > args.agents * args.requests and not args.idle_only:
        parser.error(f"{need} decisions need --agents x --requests ≥ {need}")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        dsn = args.dsn or stack.enter_context(_pg.cluster(Path(tmp)))
        asyncio.run(_run(args, dsn, Path(tmp)))


if __name__ == "__main__":
    main()
