"""PostgresStore: a goldfive store shared by several hosts (needs ``goldfive[postgres]``).

Writers serialize on the audit chain head row (``SELECT ... FOR UPDATE``);
waiting agents and deciders sleep in LISTEN and wake on NOTIFY — no polling.
Every table lives in ``schema`` (default ``public``), so one database can hold
several independent stores.
"""

from __future__ import annotations

import contextlib
import re
import selectors
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from ..control import ControlAck
from ..errors import MissingExtraError
from ..limits import Limits
from .base import DEFAULT_STALE_AFTER_MS, StoreUnavailableError
from .sql import SqlDb, SqlStore

try:
    import psycopg
    from psycopg import pq
    from psycopg import sql as pgsql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
except ImportError as _exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("goldfive_core.store.postgres (PostgresStore)", "postgres") from _exc

__all__ = ["PostgresDb", "PostgresStore"]

_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")


def _redact(dsn: str) -> str:
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "<unparseable dsn>"
    parts.pop("password", None)
    return make_conninfo("", **{k: v for k, v in parts.items() if v is not None})


_URL_PASSWORD_RE = re.compile(r"^[a-z]+://[^/@:]*:([^@]*)@", re.IGNORECASE)
_KV_PASSWORD_RE = re.compile(r"password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def _secrets_of(dsn: str) -> tuple[str, ...]:
    """Every spelling of the DSN's password, found even when the DSN does not parse (longest first)."""
    found: set[str] = set()
    match = _URL_PASSWORD_RE.match(dsn)
    if match and match.group(1):
        found.add(match.group(1))
        found.add(urllib.parse.unquote(match.group(1)))
    for value in _KV_PASSWORD_RE.findall(dsn):
        found.add(value)
        found.add(value.strip("'"))
    with contextlib.suppress(psycopg.Error):
        password = conninfo_to_dict(dsn).get("password")
        if password:
            found.add(str(password))
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


def _still_open(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle pooled connection is still usable, without a round trip: the server writes nothing to an
    idle connection unless it is closing it (a FATAL message, then EOF), so a readable socket means it is gone.
    A connection inside a transaction is never judged (nor swapped mid-transaction)."""
    if conn.closed or conn.broken:
        return False
    if conn.info.transaction_status is not pq.TransactionStatus.IDLE:
        return True
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(conn.fileno(), selectors.EVENT_READ)
            return not selector.select(timeout=0)
    except (OSError, ValueError, psycopg.Error):
        return False


class PostgresDb(SqlDb):
    """Connections to one schema of a PostgreSQL database; writers wake waiters by NOTIFY."""

    placeholder = "%s"
    now_expr = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
    ddl_types: ClassVar[Mapping[str, str]] = {"id": "BIGSERIAL PRIMARY KEY", "blob": "BYTEA", "big": "BIGINT"}
    unavailable_errors = (psycopg.OperationalError,)
    backend_errors = (psycopg.Error,)
    for_update = " FOR UPDATE"

    def __init__(self, dsn: str, *, schema: str, connect_timeout_s: int) -> None:
        super().__init__()
        self.dsn = dsn
        self.schema = schema
        self.connect_timeout_s = connect_timeout_s
        self._secrets = _secrets_of(dsn)
        self.url = _redact(dsn) + ("" if schema == "public" else f" (schema {schema})")
        self.channels = {"inbox": f"gf_inbox_{schema}", "ack": f"gf_ack_{schema}", "access": f"gf_user_{schema}"}
        """The NOTIFY channel of each kind of news (``inbox``, ``ack``, users' ``access``) in this schema."""

    def has_meta(self, conn: Any) -> bool:
        row = self.execute(conn, "SELECT to_regclass(?)", (f"{self.schema}.gf_meta",)).fetchone()
        return row is not None and row[0] is not None

    def scrub(self, text: str) -> str:
        """``text`` with the DSN's password replaced (driver messages may quote the DSN)."""
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def raw_connect(self) -> psycopg.Connection[Any]:
        """A new autocommit connection (no search path set): for DDL and LISTEN."""
        try:
            return psycopg.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=self.connect_timeout_s,
                application_name=f"goldfive:{self.schema}"[:63],
            )
        except psycopg.Error as exc:
            raise StoreUnavailableError(
                f"cannot connect to the goldfive store {self.url}: {self.scrub(str(exc))}"
            ) from None

    def conn(self) -> Any:
        """This thread's connection; one the server closed while it sat idle (a restart, a cut network) is
        replaced first, so the next caller is served instead of getting the dead connection's error."""
        conn = getattr(self.local, "conn", None)
        if conn is not None and not _still_open(conn):
            self.drop_conn()
        return super().conn()

    def connect(self) -> Any:
        conn = self.raw_connect()
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(self.schema)))
        return conn

    @contextlib.contextmanager
    def transaction(self, conn: Any, *, quiet: bool = False) -> Iterator[None]:
        with conn.transaction():  # PostgreSQL wakes waiters by explicit NOTIFYs only
            yield

    def notify(self, conn: Any, channel: str, payload: str) -> None:
        self.execute(conn, "SELECT pg_notify(?, ?)", (self.channels[channel], payload))

    def migration_lock(self, conn: Any) -> None:
        self.execute(conn, "SELECT pg_advisory_xact_lock(hashtext(?))", (f"goldfive-migrate-{self.schema}",))


class PostgresStore(SqlStore):
    """A goldfive store in a PostgreSQL database (LISTEN/NOTIFY wakes waiters)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "public",
        connect_timeout_s: int = 5,
        stale_after_ms: int = DEFAULT_STALE_AFTER_MS,
        migrate: bool = True,
        limits: Limits | None = None,
    ) -> None:
        if not _SCHEMA_RE.match(schema):
            raise ValueError(f"schema must be a lower-case SQL identifier, got {schema!r}")
        db = PostgresDb(dsn, schema=schema, connect_timeout_s=connect_timeout_s)
        super().__init__(db)
        self.db: PostgresDb = db
        self.dsn = dsn
        self.schema = schema
        self.connect_timeout_s = connect_timeout_s
        self.stale_after_ms = stale_after_ms
        self.limits = limits if limits is not None else Limits.from_env()
        if not migrate:
            self.check_schema()
            return
        if schema != "public":
            with db.guard("creating the schema"), db.raw_connect() as conn:
                conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(schema)))
        self.migrate()

    def _listener(self, channel: str) -> psycopg.Connection[Any]:
        """This thread's connection LISTENing on ``channel`` (created once; notifications queue up on it)."""
        attr = f"listen_{channel}"
        conn: psycopg.Connection[Any] | None = getattr(self.db.local, attr, None)
        if conn is None or conn.closed:
            conn = self.db.raw_connect()
            conn.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(self.db.channels[channel])))
            setattr(self.db.local, attr, conn)
        return conn

    def _drop_listener(self, channel: str) -> None:
        attr = f"listen_{channel}"
        conn = getattr(self.db.local, attr, None)
        setattr(self.db.local, attr, None)
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def close(self) -> None:
        """Close this thread's connections, listeners included."""
        super().close()
        for channel in self.db.channels:
            self._drop_listener(channel)

    def wait_inbox(self, timeout_s: float) -> None:
        """Sleep in LISTEN until a message is posted or ``timeout_s`` passed."""
        try:
            with self.db.guard("waiting for control messages"):
                conn = self._listener("inbox")
                for _ in conn.notifies(timeout=max(timeout_s, 0.0), stop_after=1):
                    break
        except StoreUnavailableError:
            self._drop_listener("inbox")
            raise

    def wait_ack_news(self, timeout_s: float) -> None:
        """Sleep in LISTEN until some ack is stored or ``timeout_s`` passed (0: just make sure this thread listens).

        The LISTEN connection stays open between calls, so an ack stored between two calls wakes the next at once.
        """
        try:
            with self.db.guard("waiting for control acks"):
                conn = self._listener("ack")
                if timeout_s > 0:
                    for _ in conn.notifies(timeout=timeout_s, stop_after=1):
                        break
                for _ in conn.notifies(timeout=0):  # drain what queued meanwhile: one look covers them all
                    pass
        except StoreUnavailableError:
            self._drop_listener("ack")
            raise

    def wait_access_news(self, seen: str | None, timeout_s: float) -> str:
        """Sleep in LISTEN until a user's access changes (any process) or ``timeout_s`` passed; the access version.

        Listens before it looks, so a change committed between two calls is seen by the next at once.
        """
        try:
            with self.db.guard("waiting for news of users' access"):
                conn = self._listener("access")
                for _ in conn.notifies(timeout=0):  # what queued is covered by the look below
                    pass
                version = self.access_version()
                if version != seen or timeout_s <= 0:
                    return version
                for _ in conn.notifies(timeout=timeout_s, stop_after=1):
                    break
                return self.access_version()
        except StoreUnavailableError:
            self._drop_listener("access")
            raise

    def wait_ack(self, control_id: str, timeout_s: float) -> ControlAck | None:
        """Sleep in LISTEN until the message's ack is stored or ``timeout_s`` passed."""
        deadline = time.monotonic() + max(timeout_s, 0.0)
        try:
            with self.db.guard(f"waiting for the ack of {control_id}"):
                conn = self._listener("ack")  # listen first, then look: no ack can slip between
                while True:
                    ack = self.get_ack(control_id)
                    left = deadline - time.monotonic()
                    if ack is not None or left <= 0:
                        return ack
                    for note in conn.notifies(timeout=left, stop_after=1):
                        if note.payload == control_id:
                            break
        except StoreUnavailableError:
            self._drop_listener("ack")
            raise
