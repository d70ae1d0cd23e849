"""Fuzz: 10,000 junk requests over every route of ``goldfive serve``; none may get a 500 or log a traceback.

    python bench/fuzz_api.py                      # SQLite in a temp dir
    python bench/fuzz_api.py --dsn postgresql://user@127.0.0.1:5432/db
    python bench/fuzz_api.py --requests 50000 --seed 7

The app runs under uvicorn with ``goldfive serve``'s own settings on 127.0.0.1, in this process, so
its log is read directly; the requests are raw HTTP over real sockets (tests/server/fuzz_support.py,
which the suite's bounded fuzz test uses too: the routes come from the app's route table). Prints the
counts (requests, statuses by class, answers >= 500, tracebacks in the server's log) and every
failure; exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run from a checkout without installing
sys.path.insert(0, str(REPO / "tests" / "server"))

from fuzz_support import fuzz, live_server, log_in, seed  # noqa: E402

from goldfive_core.store import open_store  # noqa: E402


async def _run(location: str, schema: str | None, key_dir: Path, requests: int, seed_value: int) -> int:
    with live_server(open_store(location, schema=schema), key_dir) as live:
        seeds = seed(live)
        await log_in(live, seeds)
        started = time.monotonic()
        report = await fuzz(live, seeds, requests=requests, seed_value=seed_value)
        took = time.monotonic() - started
    print(f"goldfive serve fuzz over {live.store.url}, seed {seed_value}: {took:.1f} s ({requests / took:.0f} req/s)")
    print(report.summary())
    for line in report.failures:
        print("FAILURE", line)
    for line in report.tracebacks:
        print("TRACEBACK", line)
    return 1 if report.failures or report.tracebacks or report.server_errors else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a PostgreSQL DSN (a fresh schema is made and dropped); default: SQLite")
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=27)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.dsn:
            return asyncio.run(_run(str(Path(tmp) / "goldfive.db"), None, Path(tmp), args.requests, args.seed))
        import psycopg

        schema = f"fuzz_{uuid.uuid4().hex[:10]}"
        try:
            return asyncio.run(_run(args.dsn, schema, Path(tmp), args.requests, args.seed))
        finally:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    raise SystemExit(main())
