"""Benchmark: a legitimate user's latency while wrong secrets for a real token id hit ``goldfive serve``.

    python bench/wrong_secret.py                  # SQLite in a temp dir, 24 wrong-secret requests/s
    python bench/wrong_secret.py --rate 48 --seconds 20

A real ``goldfive serve`` process (uvicorn on 127.0.0.1) runs over a fresh store with two users. One
client (the user ``ana``) sends ``GET /api/me`` one after the other; another sends ``--rate`` requests a
second with the *real* token id of the user ``mallory`` and a wrong secret (the attack of issue #27:
each one used to cost a scrypt check, ~60 ms of CPU). Printed: ana's p50/p99 without the attack, then
with it, and what the attacker's requests got (status counts). Target: p50 under attack within 2x quiet.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import httpx
from _support import ms_line, serve

from goldfive_core.store import open_store
from goldfive_core.store.users import add_user


async def _legit(client: httpx.AsyncClient, token: str, seconds: float) -> list[float]:
    took: list[float] = []
    headers = {"Authorization": f"Bearer {token}"}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        resp = await client.get("/api/me", headers=headers)
        took.append(time.perf_counter() - started)
        assert resp.status_code == 200, resp.text
        await asyncio.sleep(0.02)
    return took


async def _attack(client: httpx.AsyncClient, token_id: str, rate: float, seconds: float) -> collections.Counter[int]:
    statuses: collections.Counter[int] = collections.Counter()
    wrong = f"gf5_{token_id}_{'W' * 43}"

    async def one() -> None:
        resp = await client.get("/api/me", headers={"Authorization": f"Bearer {wrong}"})
        statuses[resp.status_code] += 1

    pending: set[asyncio.Task[None]] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        task = asyncio.create_task(one())
        pending.add(task)
        task.add_done_callback(pending.discard)
        await asyncio.sleep(1 / rate)
    await asyncio.gather(*pending)
    return statuses


async def _main(url: str, ana: str, mallory_id: str, rate: float, seconds: float) -> None:
    limits = httpx.Limits(max_connections=200)
    async with (
        httpx.AsyncClient(base_url=url, timeout=30) as good,
        httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as bad,
    ):
        await _legit(good, ana, 1.0)  # warm up: ana's token is verified once, then cached
        quiet = await _legit(good, ana, seconds)
        print(f"ana, no attack:              {ms_line(quiet)}")
        attacked, statuses = await asyncio.gather(_legit(good, ana, seconds), _attack(bad, mallory_id, rate, seconds))
        print(f"ana, {rate:g} wrong secrets/s:    {ms_line(attacked)}")
        print(f"attacker's answers: {dict(sorted(statuses.items()))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=24.0, help="wrong-secret requests a second")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each phase lasts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "goldfive.db")
        store = open_store(db)
        ana = add_user(store, "ana", "approver").token
        mallory_id = add_user(store, "mallory", "approver").user.token_id
        with serve(db, None, Path(tmp) / "key.pem") as served:
            asyncio.run(_main(served.url, ana, mallory_id, args.rate, args.seconds))


if __name__ == "__main__":
    main()
