"""SqlStore: every role of the store over one :class:`~goldfive_core.store.sql.db.SqlDb`, and its schema."""

from __future__ import annotations

import logging

from ..._util import env_seconds, shorten
from .._schema import MIGRATIONS, SCHEMA_VERSION
from ..base import SchemaVersionError, Store
from .approvals import SqlApprovalRecords
from .audit import SqlAuditLog
from .db import SqlDb
from .inbox import SqlControlInbox
from .ledger import SqlExecutionRecords
from .parking import SqlParking
from .runs import SqlRunRegistry
from .users import SqlUsers

__all__ = ["DEFAULT_RETRY_BUDGET_S", "SqlStore"]

logger = logging.getLogger(__name__)

DEFAULT_RETRY_BUDGET_S = 10.0
"""Retry budget of the agent-side store calls through an outage (env ``GOLDFIVE_STORE_RETRY_S``)."""


class SqlStore(
    SqlAuditLog,
    SqlApprovalRecords,
    SqlRunRegistry,
    SqlExecutionRecords,
    SqlParking,
    SqlControlInbox,
    SqlUsers,
    Store,
):
    """Every Store role over a DB-API database; a dialect (``db``) supplies connections and wake-ups.

    Each role is its own small class over the shared ``db``; the backends (:class:`SqliteStore`,
    :class:`PostgresStore`) add how a waiter sleeps until the inbox changes.
    """

    def __init__(self, db: SqlDb) -> None:
        self.db = db
        self.url = db.url
        self.retry_budget_s = env_seconds("GOLDFIVE_STORE_RETRY_S", DEFAULT_RETRY_BUDGET_S, zero_ok=True)

    def close(self) -> None:
        """Close this thread's connection."""
        self.db.drop_conn()

    def migrate(self) -> int:
        """Bring the schema to the current version; returns the version found before."""
        return self._migrate(SCHEMA_VERSION, refuse_newer=True)

    def migrate_to(self, version: int) -> None:
        """Apply migrations up to ``version`` only (tests of the migration path use this)."""
        self._migrate(version, refuse_newer=False)

    def _migrate(self, version: int, *, refuse_newer: bool) -> int:
        with self.db.writing("migrating the schema") as conn:
            self.db.migration_lock(conn)
            self.db.execute(conn, "CREATE TABLE IF NOT EXISTS gf_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            found = self._read_version()
            if refuse_newer and found > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.url} has schema version {found}, newer than this goldfive understands "
                    f"({SCHEMA_VERSION}); upgrade goldfive"
                )
            for step, statements in MIGRATIONS:
                if not found < step <= version:
                    continue
                for statement in statements:
                    self.db.execute(conn, statement.format(**self.db.ddl_types))
                self.db.execute(
                    conn,
                    "INSERT INTO gf_meta (key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(step),),
                )
                if refuse_newer:
                    logger.info("store %s: migrated schema to version %d", self.url, step)
            return found

    def _read_version(self) -> int:
        row = self.db.execute(self.db.conn(), "SELECT value FROM gf_meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            return 0
        try:
            return int(str(row[0]))
        except ValueError:
            raise SchemaVersionError(
                f"{self.url}: the schema version is corrupt ({shorten(repr(row[0]), 40)}); this is not a usable "
                "goldfive store"
            ) from None

    def check_schema(self) -> int:
        """Check, without writing anything, that this is a goldfive store of the current schema.

        Read commands use this instead of :meth:`migrate`: they never create or upgrade tables.
        """
        with self.db.guard("reading the schema version"):
            if not self.db.has_meta(self.db.conn()):
                raise SchemaVersionError(f"{self.url} is not a goldfive store (it has no goldfive tables)")
            found = self._read_version()
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self.url} has schema version {found}, newer than this goldfive understands "
                f"({SCHEMA_VERSION}); upgrade goldfive"
            )
        if found < SCHEMA_VERSION:
            raise SchemaVersionError(
                f"{self.url} has schema version {found}, older than this goldfive ({SCHEMA_VERSION}); "
                "an agent using this goldfive upgrades it when it opens the store"
            )
        return found

    def schema_version(self) -> int:
        """The schema version of the database."""
        with self.db.guard("reading the schema version"):
            return self._read_version()
