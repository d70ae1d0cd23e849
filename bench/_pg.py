"""PostgreSQL for the fleet benches: a throwaway cluster, and what the database says about the servers' work."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
from _support import free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")


@contextlib.contextmanager
def cluster(tmp: Path) -> Iterator[str]:
    """A PostgreSQL cluster of our own (initdb, started, stopped and removed; ``pg_stat_statements`` loaded, no
    fsync): its DSN. Nothing else commits in it, so its counters are the servers' alone."""
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


def counts(dsn: str) -> tuple[int, int]:
    """(transactions committed so far in the database, connections to it now, this one not counted)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        commits = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        xacts = int(commits.fetchone()[0])  # type: ignore[index]
        conns = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return xacts, int(conns.fetchone()[0]) - 1  # type: ignore[index]


COUNTING_XACTS = 2
"""The transactions one :func:`counts` call commits itself (subtracted from a window's count)."""


def crashed(dsn: str, schema: str, runs: list[str]) -> int:
    """How many of ``runs`` the store has judged crashed (a live agent's run judged crashed is the bug to see)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute(
            f"SELECT count(*) FROM {schema}.gf_runs WHERE status = 'crashed' AND run_id = ANY(%s)", (runs,)
        )
        return int(found.fetchone()[0])  # type: ignore[index]


def statements(dsn: str, *, reset: bool, top: int = 8) -> list[tuple[int, str]]:
    """(calls, statement) of the busiest statements since the last reset (``pg_stat_statements``; [] without it).
    Statements that differ only in how many values an ``IN (...)`` lists are counted as one."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            if reset:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.execute("SELECT pg_stat_statements_reset()")
                return []
            rows = conn.execute(
                "SELECT calls, query FROM pg_stat_statements "
                "WHERE query NOT LIKE '%pg_stat%' AND dbid = (SELECT oid FROM pg_database WHERE datname = "
                "current_database())"
            ).fetchall()
    except psycopg.Error:
        return []
    merged: dict[str, int] = {}
    for calls, query in rows:
        text = " ".join(str(query).split())
        head, sep, rest = text.partition(" IN (")
        if sep:  # "IN ($1, $2, ...)": one statement whatever the list's length
            text = f"{head} IN (...{rest[rest.find(')') :]}"
        merged[text] = merged.get(text, 0) + int(calls)
    ordered = sorted(((calls, text[:110]) for text, calls in merged.items()), reverse=True)
    return ordered[:top]


def write_work(dsn: str) -> tuple[int, int]:
    """(write transactions begun, heartbeat UPDATE statements) since the last reset of ``pg_stat_statements``.

    goldfive's writes are explicit transactions (``BEGIN`` ... ``COMMIT``); reads are single statements. A heartbeat
    write (a server's batch of beats, or its stamp of its open streams' runs) is one of them, with one UPDATE per
    page of 500 runs."""
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT calls, query FROM pg_stat_statements WHERE (query = 'BEGIN' OR query LIKE "
                "'UPDATE gf_runs SET heartbeat_at_ms%') AND dbid = (SELECT oid FROM pg_database WHERE datname = "
                "current_database())"
            ).fetchall()
    except psycopg.Error:
        return 0, 0
    begun = sum(int(calls) for calls, query in rows if query == "BEGIN")
    return begun, sum(int(calls) for calls, query in rows if query != "BEGIN")


def waiting(dsn: str) -> tuple[int, int]:
    """(connections waiting for a lock now, connections inside a transaction now) in the database."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), count(*) FILTER (WHERE xact_start IS NOT NULL "
            "AND pid <> pg_backend_pid()) FROM pg_stat_activity WHERE datname = current_database()"
        ).fetchone()
        return int(row[0]), int(row[1])  # type: ignore[index]
