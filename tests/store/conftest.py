"""Fixtures for the store tests: every backend test runs on SQLite and on a real PostgreSQL.

PostgreSQL tests need ``GOLDFIVE_TEST_PG_DSN`` (``.ci/run`` starts a throwaway
loopback server and sets it). Where PostgreSQL is expected — ``CI=true``, or the
DSN is set — and it cannot be reached, the run stops at collection with the
reason instead of skipping; elsewhere the PostgreSQL tests are skipped. The
terminal summary (tests/conftest.py) says how many tests ran against PostgreSQL.
Each PostgreSQL test gets its own schema, dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_support import NO_PG, PG_DSN, PG_RAN, PG_WANTED, Backend, pg_expected, pg_problem

_PG_RAN = PG_RAN
_PG_WANTED = PG_WANTED


def _wants_pg(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    on_pg = callspec is not None and callspec.params.get("backend") == "postgres"
    return on_pg or "postgres_backend" in getattr(item, "fixturenames", ())


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    wanted = sum(1 for item in session.items if _wants_pg(item))
    config.stash[_PG_WANTED] = wanted
    config.stash[_PG_RAN] = []
    if wanted and pg_expected():
        problem = pg_problem()
        if problem:
            raise pytest.UsageError(
                f"{wanted} tests need PostgreSQL, which is expected here (CI=true or GOLDFIVE_TEST_PG_DSN set) "
                f"but unavailable: {problem}"
            )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist a worker hands its counts to the controller, which prints the summary."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["pg_wanted"] = session.config.stash.get(_PG_WANTED, 0)
        output["pg_ran"] = session.config.stash.get(_PG_RAN, [])


def _pg_drop(schema: str) -> None:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh, empty store location on each backend."""
    if request.param == "sqlite":
        yield Backend("sqlite", str(tmp_path / "goldfive.db"))
        return
    yield request.getfixturevalue("postgres_backend")


@pytest.fixture
def postgres_backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """PostgreSQL only (tests of server-side faults); skipped without GOLDFIVE_TEST_PG_DSN (unless expected)."""
    if not PG_DSN:
        pytest.skip(NO_PG)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    request.config.stash.setdefault(_PG_RAN, []).append(request.node.nodeid)
    try:
        yield Backend("postgres", PG_DSN, schema)
    finally:
        _pg_drop(schema)


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Backend:
    """SQLite only (tests of file-level faults)."""
    return Backend("sqlite", str(tmp_path / "goldfive.db"))
