"""The one connection-and-transaction helper every part of a SQL store shares.

A :class:`SqlDb` holds one connection per thread, rewrites ``?`` placeholders for its driver, opens write
transactions, and translates backend errors at this boundary into :class:`StoreUnavailableError` (cannot
reach / open / lock) or :class:`StoreError`. The store's roles (:mod:`goldfive_core.store.sql`) and the
modules beside them (agents, grants, outbox) write SQL through it by its public names; a dialect
(:class:`~goldfive_core.store.sqlite.SqliteDb`, :class:`~goldfive_core.store.postgres.PostgresDb`) supplies
connections, transactions and wake-ups.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from ..._util import shorten
from ...limits import Limits
from ...retry import retry
from .._storable import storable_params
from ..base import StoreError, StoreUnavailableError

__all__ = ["SqlDb", "SqlRole"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class SqlDb(abc.ABC):
    """One database: per-thread connections, write transactions, and the error boundary."""

    placeholder: ClassVar[str] = "?"
    now_expr: ClassVar[str] = "0"
    """SQL for the store's clock in epoch milliseconds: liveness is judged on one clock, never two hosts'."""
    ddl_types: ClassVar[Mapping[str, str]] = {}
    unavailable_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    backend_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    for_update: ClassVar[str] = ""
    """Appended to a SELECT whose row a transaction then changes (PostgreSQL: `` FOR UPDATE``; SQLite's
    ``BEGIN IMMEDIATE`` already holds the database)."""

    url: str
    """Where the database lives, for messages (a path or a DSN without its password)."""

    def __init__(self) -> None:
        self.local = threading.local()
        """Per-thread state: the connection, and what a dialect's waiters keep between looks."""
        self._sql_cache: dict[str, str] = {}

    # -- what a dialect supplies ---------------------------------------------------------------
    @abc.abstractmethod
    def connect(self) -> Any:
        """A new connection in autocommit mode."""

    @abc.abstractmethod
    def transaction(self, conn: Any, *, quiet: bool = False) -> contextlib.AbstractContextManager[None]:
        """A write transaction that serializes with other writers; ``quiet``: nobody waits for what it writes
        (a heartbeat), so waiters are not woken by its commit."""

    @abc.abstractmethod
    def has_meta(self, conn: Any) -> bool:
        """Whether the goldfive metadata table exists (read-only check)."""

    def notify(self, conn: Any, channel: str, payload: str) -> None:  # noqa: B027 - a hook; pollers need none
        """Wake listeners (PostgreSQL NOTIFY); pollers need nothing."""

    def migration_lock(self, conn: Any) -> None:  # noqa: B027 - a hook; SQLite needs none
        """Serialize concurrent migrations (inside the migration transaction)."""

    def scrub(self, text: str) -> str:
        """Remove secrets (a DSN's password) from a driver's message."""
        return text

    @contextlib.contextmanager
    def lenient_text(self, conn: Any) -> Iterator[None]:
        """Reads inside decode text that is not UTF-8 instead of failing (SQLite stores any bytes as TEXT)."""
        yield

    # -- shared ------------------------------------------------------------------------------------
    def conn(self) -> Any:
        """This thread's connection (made on first use)."""
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.connect()
            self.local.conn = conn
        return conn

    def sql(self, sql: str) -> str:
        """``sql`` with its ``?`` placeholders in the driver's style."""
        if self.placeholder == "?":
            return sql
        cached = self._sql_cache.get(sql)
        if cached is None:
            cached = sql.replace("?", self.placeholder)
            self._sql_cache[sql] = cached
        return cached

    def execute(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; every text written or looked up as the store holds it (NUL as ␀, on both backends)."""
        return conn.execute(self.sql(sql), storable_params(params))

    @contextlib.contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Translate what the driver raises while ``what`` into the store's errors (a broken connection is dropped)."""
        try:
            yield
        except StoreError:
            raise
        except (UnicodeError, OverflowError) as exc:
            # A value the database cannot hold (a lone surrogate, an integer beyond 64 bits): bad input.
            raise StoreError(f"store {self.url} refused a value while {what}: {shorten(str(exc), 200)}") from None
        except self.unavailable_errors as exc:
            self.drop_conn()
            message = self.scrub(str(exc))
            raise StoreUnavailableError(f"store {self.url} is unavailable while {what}: {message}") from None
        except self.backend_errors as exc:
            self.drop_conn()
            raise StoreError(f"store {self.url} failed while {what}: {self.scrub(str(exc))}") from None

    @contextlib.contextmanager
    def writing(self, what: str, *, quiet: bool = False) -> Iterator[Any]:
        """:meth:`guard` around a write transaction on this thread's connection; yields the connection."""
        with self.guard(what):
            conn = self.conn()
            with self.transaction(conn, quiet=quiet):
                yield conn

    def one(self, what: str, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first row of a read (None when there is none), guarded."""
        with self.guard(what):
            return self.execute(self.conn(), sql, params).fetchone()

    def all(self, what: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Every row of a read, guarded."""
        with self.guard(what):
            return list(self.execute(self.conn(), sql, params).fetchall())

    def clock_ms(self, conn: Any) -> int:
        """The database's clock (:attr:`now_expr`) in epoch milliseconds."""
        return int(self.execute(conn, f"SELECT {self.now_expr}").fetchone()[0])

    def drop_conn(self) -> None:
        """Close and forget this thread's connection (the next use connects anew)."""
        conn = getattr(self.local, "conn", None)
        self.local.conn = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def retrying(self, what: str, fn: Callable[[], T], *, budget_s: float) -> T:
        """Call ``fn`` (an idempotent store call); while the store is unavailable, reconnect and retry with the
        one backoff policy (:mod:`goldfive_core.retry`) for at most ``budget_s``, then raise the last
        StoreUnavailableError.

        Only calls that are safe to repeat go through here: reads, and writes whose second attempt
        after a lost answer changes nothing (a heartbeat, "done", an ack, one's own "executing").
        """
        return retry(fn, budget_s=budget_s, on=StoreUnavailableError, what=f"store {self.url} {what}", logger=logger)


class SqlRole:
    """What each role of a SQL store stands on: the shared :class:`SqlDb` and the store's settings."""

    db: SqlDb
    retry_budget_s: float
    stale_after_ms: int
    limits: Limits

    def retrying(self, what: str, fn: Callable[[], T]) -> T:
        """:meth:`SqlDb.retrying` within this store's ``retry_budget_s``."""
        return self.db.retrying(what, fn, budget_s=self.retry_budget_s)
