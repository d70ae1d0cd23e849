"""Fixtures for the agents-over-HTTP tests: real ``goldfive serve`` processes over SQLite or PostgreSQL."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "store"))
sys.path.insert(0, str(HERE.parent / "server"))

from store_support import NO_PG, PG_DSN, Backend  # noqa: E402


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """A fresh, empty store location on each backend."""
    if request.param == "sqlite":
        yield Backend("sqlite", str(tmp_path / "goldfive.db"))
        return
    yield from _pg(tmp_path)


@pytest.fixture
def pg_backend(tmp_path: Path) -> Iterator[Backend]:
    """PostgreSQL only (several servers over one database)."""
    yield from _pg(tmp_path)


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Backend:
    """SQLite only."""
    return Backend("sqlite", str(tmp_path / "goldfive.db"))


def _pg(tmp_path: Path) -> Iterator[Backend]:
    if not PG_DSN:
        pytest.skip(NO_PG)
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield Backend("postgres", PG_DSN, schema)
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
