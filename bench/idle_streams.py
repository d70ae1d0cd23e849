"""Benchmark: one idle ``goldfive serve`` holding N agent streams — its CPU and PostgreSQL's work while nobody decides.

    python bench/idle_streams.py --agents 1000 --seconds 60 --baseline /work/main
    python bench/idle_streams.py --pg --agents 10000 --rounds 1     # a throwaway PostgreSQL cluster

N simulated agents (``bench/_sim_agents.py``, spread over client processes by ``bench/_swarm.py``), each its own
agent user (its own token, given a cheap hash so thousands connect in seconds rather than a scrypt check each —
the check is not what is measured; the bench says so), register a run and hold one ``/api/agent/stream`` each, as
an ``HttpChannel`` does: they heartbeat as requests until their stream's server says it keeps their runs alive, so
no run is judged crashed while thousands join. Once all are connected, the server's CPU time over ``--seconds``
(``/proc/PID/stat``) is the idle cost; on PostgreSQL also the transactions committed (``pg_stat_database``), the
heartbeat writes and, with the throwaway cluster (``--pg``), the busiest statements (``pg_stat_statements``). Each
turn has a store (a schema, or a SQLite file) of its own. With ``--baseline TREE`` the same is measured against a
server running TREE's code, the trees taking turns (``--rounds``), so both see the same load. SQLite by default,
``--dsn`` or ``--pg`` for PostgreSQL. Targets (issue 25): 1,000 idle agents ≤ 2 % of a core; 10,000 waiting agents'
heartbeats on one server ≤ 1 core and ≤ 200 PostgreSQL transactions/s. With ``GOLDFIVE_BENCH_PROFILE=DIR`` the
server is profiled over the window alone (``bench/_serve_timed.py``).
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
from _support import REPO, cpu_s, rss_kib, serve
from _swarm import CHEAP_HASH_N, Sim, Swarm, cheap_users, raise_fd_limit

SETTLE_S = 12.0
"""After the join, before the window: the join's own work done, and PostgreSQL's counts of it reported (a backend
reports up to 10 s after it went idle)."""


def _load() -> str:
    return "load " + " / ".join(f"{x:.1f}" for x in os.getloadavg())


async def _idle(tree: Path, location: str, schema: str | None, tmp: Path, args: argparse.Namespace) -> None:
    """One turn: a server running ``tree``'s code over a fresh store, N agents joined, the idle window measured."""
    t0 = time.perf_counter()
    tokens = cheap_users(location, schema, "idle", args.agents)
    made = time.perf_counter() - t0
    sims = [Sim(run_id=f"idle-{i}", token=token, order=[0]) for i, token in enumerate(tokens)]
    pg = location.startswith("postgres")
    with serve(location, schema, tmp / "key.pem", tree=tree) as served:
        rss0 = rss_kib(served.pid)
        processes = math.ceil(args.agents / args.per_process)
        async with Swarm([served.url], sims, tmp, processes=processes) as swarm:
            seconds, failed = await swarm.join(args.wave)
            await asyncio.sleep(SETTLE_S)
            rss1 = rss_kib(served.pid)
            print(
                f"   {swarm.connected()} of {args.agents} agents joined in {seconds:.1f} s ({failed} failed; users "
                f"made in {made:.0f} s); server RSS {rss0 / 1024:.0f} → {rss1 / 1024:.0f} MiB "
                f"({(rss1 - rss0) / max(1, args.agents):.1f} KiB per agent); {_load()}"
            )
            beats0, _, _ = await swarm.stats()
            if pg:
                _pg.statements(location, reset=True)
                x0, _ = _pg.counts(location)
            if os.environ.get("GOLDFIVE_BENCH_PROFILE"):  # the profile covers the window alone
                os.kill(served.pid, signal.SIGUSR1)
            cpu0, w0 = cpu_s(served.pid), time.monotonic()
            await asyncio.sleep(args.seconds)
            share, elapsed = (cpu_s(served.pid) - cpu0), time.monotonic() - w0
            if os.environ.get("GOLDFIVE_BENCH_PROFILE"):
                os.kill(served.pid, signal.SIGUSR2)
            beats1, uncarried, connected = await swarm.stats()
            print(
                f"   server CPU {share / elapsed * 100:.2f} % of a core over {elapsed:.0f} s; {connected} agents "
                f"connected, {uncarried} not kept alive by the stream, heartbeat requests "
                f"{(beats1 - beats0) / elapsed:.1f}/s ({_load()})"
            )
            if pg:
                x1, conns = _pg.counts(location)
                writes, statements = _pg.write_work(location)
                print(
                    f"   PostgreSQL: {(x1 - x0 - _pg.COUNTING_XACTS) / elapsed:.2f} transactions/s, {conns} "
                    "connections; "
                    f"write transactions {writes / elapsed:.2f}/s (the heartbeat stamps and batches among them: "
                    f"{statements / elapsed:.2f} UPDATE statements/s, one per 500 runs)"
                )
                for calls, query in _pg.statements(location, reset=False, top=args.top):
                    print(f"     {calls / elapsed:7.2f}/s  {query}")
                print(f"   runs judged crashed: {_pg.crashed(location, schema or 'public', [s.run_id for s in sims])}")
            if swarm.errors:
                print(f"   agents' errors: {len(swarm.errors)}, e.g. {swarm.errors[:3]}")


async def _main(args: argparse.Namespace, dsn: str, tmp: Path) -> None:
    soft, _ = raise_fd_limit()
    trees = [("this tree", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(
        f"{args.agents} idle agent streams, {args.seconds:g} s each; {os.cpu_count()} cores, {_load()}; open files "
        f"{soft}; {'PostgreSQL ' + dsn.rsplit('@', 1)[-1] if dsn else 'SQLite'}; agent users with a cheap token hash "
        f"(scrypt N={CHEAP_HASH_N}, for the bench only: goldfive's is 2^14)"
    )
    for turn in range(args.rounds):
        for name, tree in trees if turn % 2 == 0 else trees[::-1]:
            print(f"[{name}, turn {turn + 1}]")
            schema = f"idle_{uuid.uuid4().hex[:8]}" if dsn else None
            location = dsn or str(tmp / f"goldfive-{uuid.uuid4().hex[:8]}.db")
            await _idle(tree, location, schema, tmp, args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="", help="PostgreSQL DSN (default: SQLite in a temp dir)")
    parser.add_argument("--pg", action="store_true", help="PostgreSQL: a throwaway cluster, started and removed")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0, help="the idle window (pings go every 30 s)")
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. /work/main) measured in turns")
    parser.add_argument("--rounds", type=int, default=2, help="turns each tree takes")
    parser.add_argument("--wave", type=int, default=50, help="agents joining at once, per client process")
    parser.add_argument("--per-process", type=int, default=2500, help="agents per client process")
    parser.add_argument("--top", type=int, default=8, help="the busiest statements listed (with --pg)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="goldfive-bench-idle-") as tmp, contextlib.ExitStack() as stack:
        dsn = stack.enter_context(_pg.cluster(Path(tmp))) if args.pg else args.dsn
        asyncio.run(_main(args, dsn, Path(tmp)))


if __name__ == "__main__":
    main()
