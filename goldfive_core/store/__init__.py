"""Durable approvals: a store (SQLite by default, PostgreSQL across hosts), its control channel and audit sink.

::

    from goldfive_core import wrap
    from goldfive_core.store import StoreChannel, open_store

    channel = StoreChannel(open_store("goldfive.db"))
    runner = wrap(agent, control=channel, sinks=[channel.sink])

Then, from another terminal: ``goldfive pending`` and ``goldfive approve ID``.
``PostgresStore`` needs ``pip install 'goldfive[postgres]'`` and is imported on
first use only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import (
    ApprovalRow,
    AuditReport,
    AuditRow,
    ExecutionRow,
    ExecutionState,
    InboxRow,
    RunRow,
    SchemaVersionError,
    Store,
    StoredDecision,
    StoreError,
    StoreUnavailableError,
    run_liveness,
)
from .channel import DeliveryTimeout, RunGone, StoreChannel
from .execution import GuardedResult, run_approved
from .sink import SinkStatistics, StoreSink
from .sqlite import DEFAULT_DB_PATH, SqliteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "DEFAULT_DB_PATH",
    "ApprovalRow",
    "AuditReport",
    "AuditRow",
    "DeliveryTimeout",
    "ExecutionRow",
    "ExecutionState",
    "GuardedResult",
    "InboxRow",
    "PostgresStore",
    "RunGone",
    "RunRow",
    "SchemaVersionError",
    "SinkStatistics",
    "SqliteStore",
    "Store",
    "StoreChannel",
    "StoreError",
    "StoreSink",
    "StoreUnavailableError",
    "StoredDecision",
    "open_store",
    "run_approved",
    "run_liveness",
]


def open_store(location: str | Path | None = None, *, create: bool = True, schema: str | None = None) -> Store:
    """Open a store: a ``postgresql://`` / ``postgres://`` DSN, else a SQLite file path.

    With no location: ``GOLDFIVE_DSN``, else ``GOLDFIVE_DB``, else ``./goldfive.db``.
    ``schema`` (PostgreSQL only; env ``GOLDFIVE_PG_SCHEMA``, default ``public``)
    keeps several stores apart in one database.
    """
    if location is None:
        location = os.environ.get("GOLDFIVE_DSN") or os.environ.get("GOLDFIVE_DB") or DEFAULT_DB_PATH
    text = str(location)
    if text.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgresStore

        return PostgresStore(text, schema=schema or os.environ.get("GOLDFIVE_PG_SCHEMA") or "public")
    return SqliteStore(text, create=create)


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":  # psycopg is imported only when PostgreSQL is used
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
