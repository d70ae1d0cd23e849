"""Fixtures for the goldfive serve tests: a real store (SQLite; PostgreSQL when GOLDFIVE_TEST_PG_DSN is set),
the app over it with a fresh signing key, and users of each role."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "store"))

from server_support import Server, make_server
from store_support import NO_PG, PG_DSN, Backend


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh, empty store location on each backend."""
    if request.param == "sqlite":
        yield Backend("sqlite", str(tmp_path / "goldfive.db"))
        return
    if not PG_DSN:
        pytest.skip(NO_PG)
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield Backend("postgres", PG_DSN, schema)
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Backend:
    """SQLite only."""
    return Backend("sqlite", str(tmp_path / "goldfive.db"))


@pytest.fixture
async def server(backend: Backend, tmp_path: Path) -> AsyncIterator[Server]:
    """The app over ``backend`` with users ana (approver), vic (viewer) and root (admin)."""
    async with make_server(backend, tmp_path) as srv:
        yield srv


@pytest.fixture
async def sqlite_server(sqlite_backend: Backend, tmp_path: Path) -> AsyncIterator[Server]:
    """Like ``server``, on SQLite only."""
    async with make_server(sqlite_backend, tmp_path) as srv:
        yield srv
