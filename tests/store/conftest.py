"""Fixtures for the store tests: every backend test runs on SQLite and on a real PostgreSQL.

PostgreSQL tests need ``GOLDFIVE_TEST_PG_DSN`` (``.ci/run`` starts a throwaway
loopback server and sets it). Where PostgreSQL is expected — ``CI=true``, or the
DSN is set — and it cannot be reached, the run stops at collection with the
reason instead of skipping; elsewhere the PostgreSQL tests are skipped. Both, and
the terminal summary of how many tests ran against PostgreSQL, are tests/conftest.py's.
Each PostgreSQL test gets its own schema, dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_support import NO_PG, PG_DSN, Backend


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
    try:
        yield Backend("postgres", PG_DSN, schema)
    finally:
        _pg_drop(schema)


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Backend:
    """SQLite only (tests of file-level faults)."""
    return Backend("sqlite", str(tmp_path / "goldfive.db"))
