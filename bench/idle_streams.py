"""Benchmark: one idle ``goldfive serve`` holding N agent streams — its CPU while nobody decides.

    python bench/idle_streams.py --agents 1000 --seconds 60 --baseline /work/main

N agent users (each its own token; given a cheap token hash, so a thousand connect in seconds rather than a
scrypt check each — the check is not what is measured) each register a run and hold one ``/api/agent/stream``
from this process, as an ``HttpChannel`` does. Once all are connected, the server's CPU time over ``--seconds``
(``/proc/PID/stat``) is the idle cost. With ``--baseline TREE`` the same is measured against a server running
TREE's code, the trees taking turns (``--rounds``), so both see the same load. SQLite by default, ``--dsn`` for
PostgreSQL. Target (issue 25): 1,000 idle agents ≤ 2 % of a core.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import httpx
from _support import REPO, event_json, serve

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import open_store
from goldfive_core.store.base import UserRow
from goldfive_core.store.users import hash_token


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _users(location: str, schema: str | None, n: int) -> list[str]:
    """N agent users with a cheap token hash (what is measured is the idle stream, not the check): their tokens."""
    store = open_store(location, schema=schema)
    tokens = []
    for i in range(n):
        token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)[:43]
        row = UserRow(
            name=f"idle{i}",
            role="agent",
            token_id=token_id,
            token_hash=hash_token(secret, n=2),
            disabled=False,
            created_at_ms=0,
            updated_at_ms=0,
            failed_logins=0,
            locked_until_ms=0,
        )
        store.add_user(row)
        tokens.append(f"gf5_{token_id}_{secret}")
    store.close()
    return tokens


async def _post(client: httpx.AsyncClient, url: str, token: str, body: object) -> None:
    for attempt in range(5):  # a connection the loaded server dropped: an agent's sink retries too
        try:
            await client.post(url, json=body, headers={"Authorization": f"Bearer {token}"})
            return
        except httpx.TransportError:
            await asyncio.sleep(0.5 * (attempt + 1))


async def _hold(client: httpx.AsyncClient, url: str, token: str, run: str, connected: asyncio.Event) -> None:
    params = {"run": run, "endpoint": run}
    while True:
        try:
            async with client.stream(
                "GET", f"{url}/api/agent/stream", params=params, headers={"Authorization": f"Bearer {token}"}
            ) as resp:
                async for line in resp.aiter_lines():
                    if line.startswith(": connected"):
                        connected.set()
        except httpx.HTTPError:
            await asyncio.sleep(0.5)


async def _idle_cpu(
    tree: Path, location: str, schema: str | None, key: Path, tokens: list[str], seconds: float
) -> float:
    """The share of a core an idle server running ``tree``'s code uses while every agent holds its stream."""
    prefix = f"idle-{uuid.uuid4().hex[:6]}"
    with serve(location, schema, key, tree=tree) as served:
        limits = httpx.Limits(max_connections=2 * len(tokens) + 10, max_keepalive_connections=2 * len(tokens))
        async with httpx.AsyncClient(limits=limits, timeout=120) as client:
            for start in range(0, len(tokens), 100):
                await asyncio.gather(
                    *(
                        _post(
                            client,
                            f"{served.url}/api/agent/events",
                            token,
                            {
                                "pid": 1,
                                "host": "idle",
                                "events": [event_json(f"{prefix}-{i}", 0, events_pb2.RunStarted())],
                            },
                        )
                        for i, token in enumerate(tokens[start : start + 100], start=start)
                    )
                )
            connected = [asyncio.Event() for _ in tokens]
            tasks = [
                asyncio.create_task(_hold(client, served.url, token, f"{prefix}-{i}", connected[i]))
                for i, token in enumerate(tokens)
            ]
            try:
                await asyncio.wait_for(asyncio.gather(*(c.wait() for c in connected)), 600)
                await asyncio.sleep(3.0)  # the connect's own work done
                cpu0, t0 = _cpu_s(served.pid), time.monotonic()
                await asyncio.sleep(seconds)
                return (_cpu_s(served.pid) - cpu0) / (time.monotonic() - t0)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)


async def _main(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="goldfive-bench-idle-"))
    location = args.dsn or str(tmp / "goldfive.db")
    schema = f"idle_{uuid.uuid4().hex[:8]}" if args.dsn else None
    tokens = _users(location, schema, args.agents)
    trees = [("this tree", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    print(f"{args.agents} idle agent streams, {args.seconds:g} s each; {os.cpu_count()} cores")
    for turn in range(args.rounds):
        for name, tree in trees:
            share = await _idle_cpu(tree, location, schema, tmp / "key.pem", tokens, args.seconds)
            print(
                f"   [{name}, turn {turn + 1}] server CPU {share * 100:.2f} % of a core (load {os.getloadavg()[0]:.1f})"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="", help="PostgreSQL DSN (default: SQLite in a temp dir)")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0, help="the idle window (pings go every 30 s)")
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. /work/main) measured in turns")
    parser.add_argument("--rounds", type=int, default=2, help="turns each tree takes")
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
