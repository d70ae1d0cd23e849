"""open_store(): a store from a location (a PostgreSQL DSN or a SQLite path)."""

from __future__ import annotations

import os
from pathlib import Path

from .base import Store
from .sqlite import DEFAULT_DB_PATH, SqliteStore

__all__ = ["open_store"]


def open_store(
    location: str | Path | None = None,
    *,
    create: bool = True,
    schema: str | None = None,
    migrate: bool = True,
    read_only: bool = False,
) -> Store:
    """Open a store: a ``postgresql://`` / ``postgres://`` DSN, else a SQLite file path.

    With no location: ``GOLDFIVE_DSN``, else ``GOLDFIVE_DB``, else ``./goldfive.db``.
    ``schema`` (PostgreSQL only; env ``GOLDFIVE_PG_SCHEMA``, default ``public``)
    keeps several stores apart in one database. ``migrate=False`` never creates
    or upgrades tables (a file that is not a goldfive store raises
    :class:`SchemaVersionError`); ``read_only=True`` also opens a SQLite file
    read-only (what the command line's read commands use).
    """
    if location is None:
        location = os.environ.get("GOLDFIVE_DSN") or os.environ.get("GOLDFIVE_DB") or DEFAULT_DB_PATH
    text = str(location)
    if text.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(
            text, schema=schema or os.environ.get("GOLDFIVE_PG_SCHEMA") or "public", migrate=migrate and not read_only
        )
    return SqliteStore(text, create=create, migrate=migrate, read_only=read_only)
