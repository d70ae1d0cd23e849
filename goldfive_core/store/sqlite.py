"""SqliteStore: the embedded default — one file, WAL, safe for several processes on one host.

Writers serialize with ``BEGIN IMMEDIATE`` (and wait up to ``busy_timeout_s``
for each other); readers never block.

Waiting (an agent for its inbox, a decider for its ack) is event-driven. SQLite
has no notification, so goldfive adds one beside the database: a waiter binds a
Unix datagram socket in ``<database>.wake/`` (a 0700 directory) for the length of
its wait, and every commit — by any process or thread, the command line,
``goldfive serve`` and ``StoreChannel.deliver`` included — sends one byte to each
socket there (see ``_wake``) — except a heartbeat's, which nobody waits for. An
agent's control channel keeps its socket bound while it serves and sleeps on it in
its event loop, so an idle agent wakes only when poked or for the fallback look
(no thread wakes in between). A poked waiter looks at ``PRAGMA data_version``
(changes when another connection commits; microseconds, touches no table) or at
the row it waits for. If a poke is lost, the waiter still looks every
``wake_fallback_s`` (5 s; env ``GOLDFIVE_SQLITE_WAKE_FALLBACK_S``): a lost poke
costs latency, never a message. A socket left by a killed process is removed by
the next writer. Failures of the wake path are logged once.

``wake=False`` (env ``GOLDFIVE_SQLITE_WAKE=0``), or a platform or directory where
the sockets cannot be made, waits by polling instead: fast right after activity,
backing off to ``idle_poll_interval_s`` (40 ms; env ``GOLDFIVE_SQLITE_IDLE_POLL_S``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from .._util import env_seconds
from ..control import ControlAck
from ..limits import Limits
from ._wake import Waiter, WakeDir
from .base import DEFAULT_STALE_AFTER_MS, StoreUnavailableError
from .sql import SqlDb, SqlStore

__all__ = ["DEFAULT_DB_PATH", "SqliteDb", "SqliteStore"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_IDLE_POLL_S = 0.04
"""Without wake-ups, the longest pause between two looks at ``PRAGMA data_version`` while a waiter sees
no change (env ``GOLDFIVE_SQLITE_IDLE_POLL_S``): a decision wakes a polling waiter within this long."""

DEFAULT_WAKE_FALLBACK_S = 5.0
"""With wake-ups, how long a waiter sleeps on its socket before looking anyway (env
``GOLDFIVE_SQLITE_WAKE_FALLBACK_S``): what a lost poke costs at most."""

DEFAULT_DB_PATH = "goldfive.db"
"""Where the command line and examples look when no ``--db`` / ``GOLDFIVE_DB`` is given."""


def _wake_from_env() -> bool:
    text = os.environ.get("GOLDFIVE_SQLITE_WAKE", "").strip().lower()
    if text in ("", "1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    logger.warning("GOLDFIVE_SQLITE_WAKE=%r is not 1/0 (on/off); wake-ups stay on", text)
    return True


def _decode_leniently(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _create_private(path: Path) -> None:
    """Create the file 0600 before SQLite opens it (SQLite gives -wal/-shm the database's mode)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:  # another process created it first: keep its mode
        return
    except OSError as exc:
        raise StoreUnavailableError(f"cannot create the goldfive store {path}: {exc}") from exc
    os.close(fd)


def _warn_if_world_readable(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if mode & stat.S_IROTH:
        logger.warning(
            "goldfive store %s is readable by every local user (mode %o); tool arguments may hold secrets: "
            "chmod 600 it (and its -wal/-shm files)",
            path,
            stat.S_IMODE(mode),
        )


class SqliteDb(SqlDb):
    """Connections to one SQLite file: ``BEGIN IMMEDIATE`` write transactions, each commit poking the waiters."""

    placeholder = "?"
    now_expr = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    ddl_types: ClassVar[Mapping[str, str]] = {
        "id": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "blob": "BLOB",
        "big": "INTEGER",
    }
    unavailable_errors = (sqlite3.OperationalError,)
    backend_errors = (sqlite3.Error,)

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Literal["NORMAL", "FULL"],
        busy_timeout_s: float,
        read_only: bool,
        wake: WakeDir | None,
    ) -> None:
        super().__init__()
        self.path = path
        self.url = str(path)
        self.synchronous = synchronous
        self.busy_timeout_s = busy_timeout_s
        self.read_only = read_only
        self.wake = wake
        """Where commits poke waiters (None: waiters poll)."""
        self._gone_logged = False
        self._identity = self._file_identity()

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def conn(self) -> Any:
        """This thread's connection — refused once the file was deleted or replaced under this process.

        SQLite keeps writing to a deleted file's inode (and would create a new, empty file on the next
        connect), so a run would carry on recording approvals and its ledger where nobody can read
        them. Each use first checks that the path still names the file opened: a microseconds stat.
        """
        identity = self._file_identity()
        if identity != self._identity:
            self.drop_conn()
            what = "deleted" if identity is None else "replaced by another file"
            if not self._gone_logged:
                self._gone_logged = True
                logger.error("goldfive store %s was %s while this process had it open", self.url, what)
            raise StoreUnavailableError(
                f"the goldfive store {self.url} was {what} while this process had it open; nothing more is "
                "read from or written to it (restore the file and restart the agent)"
            )
        return super().conn()

    def has_meta(self, conn: Any) -> bool:
        row = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'gf_meta'").fetchone()
        return row is not None

    def connect(self) -> Any:
        try:
            if self.read_only:
                conn = self._connect_read_only()
            else:
                conn = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")
            if not self.read_only:
                conn.execute(f"PRAGMA synchronous={self.synchronous}")
        except sqlite3.Error as exc:
            raise StoreUnavailableError(f"cannot open the goldfive store {self.url}: {exc}") from exc
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that cannot write; for files (and directories) this user may not write to.

        SQLite reads a WAL database read-only when its -wal/-shm files exist or can be created; when
        neither holds (a read-only directory after a clean shutdown removed them) the file is opened
        as immutable: a snapshot, which is all a reader without write access can have.
        """
        uri = self.path.absolute().as_uri()
        conn = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=self.busy_timeout_s, isolation_level=None)
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError:
            conn.close()
            conn = sqlite3.connect(
                uri + "?mode=ro&immutable=1", uri=True, timeout=self.busy_timeout_s, isolation_level=None
            )
        return conn

    @contextlib.contextmanager
    def lenient_text(self, conn: Any) -> Iterator[None]:
        """Text that is not UTF-8 (any bytes can be stored as TEXT) is read with the bad bytes escaped."""
        before = conn.text_factory
        conn.text_factory = _decode_leniently
        try:
            yield
        finally:
            conn.text_factory = before

    @contextlib.contextmanager
    def transaction(self, conn: Any, *, quiet: bool = False) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error):  # a broken connection: the original error is the news
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        if self.wake is not None and not quiet:
            self.wake.poke()


class SqliteStore(SqlStore):
    """A goldfive store in one SQLite file.

    ``create=False`` refuses to create a missing file (the command line uses
    this, so a typo in ``--db`` is an error rather than an empty store).
    ``synchronous="NORMAL"`` (the default) survives a killed process; choose
    ``"FULL"`` to survive power loss too, at the cost of an fsync per commit.

    A new database file is created with mode 0600 (SQLite gives its ``-wal`` and
    ``-shm`` files the same mode): tool arguments may hold secrets. An existing
    file keeps its mode; a world-readable one is logged as a warning.
    ``migrate=False`` never creates or upgrades tables (it checks the schema
    instead); ``read_only=True`` opens the file read-only (implies ``migrate=False``).

    Waiters sleep until a commit pokes them (``wake``, default on; env ``GOLDFIVE_SQLITE_WAKE``)
    and look anyway every ``wake_fallback_s``; without wake-ups they poll every ``poll_interval_s``,
    backing off to ``idle_poll_interval_s`` while idle (see the module docstring).
    """

    def __init__(
        self,
        path: str | Path = DEFAULT_DB_PATH,
        *,
        create: bool = True,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout_s: float = 5.0,
        poll_interval_s: float = 0.002,
        idle_poll_interval_s: float | None = None,
        wake: bool | None = None,
        wake_fallback_s: float | None = None,
        stale_after_ms: int = DEFAULT_STALE_AFTER_MS,
        migrate: bool = True,
        read_only: bool = False,
        limits: Limits | None = None,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if poll_interval_s <= 0:
            raise ValueError(f"poll_interval_s must be > 0, got {poll_interval_s}")
        self.path = Path(path)
        self.poll_interval_s = poll_interval_s
        if idle_poll_interval_s is None:
            idle_poll_interval_s = env_seconds("GOLDFIVE_SQLITE_IDLE_POLL_S", DEFAULT_IDLE_POLL_S, high=60.0)
        if not idle_poll_interval_s > 0:
            raise ValueError(f"idle_poll_interval_s must be > 0, got {idle_poll_interval_s}")
        self.idle_poll_interval_s = idle_poll_interval_s
        if wake is None:
            wake = _wake_from_env()
        if wake_fallback_s is None:
            wake_fallback_s = env_seconds("GOLDFIVE_SQLITE_WAKE_FALLBACK_S", DEFAULT_WAKE_FALLBACK_S)
        if not 0 < wake_fallback_s < float("inf"):
            raise ValueError(f"wake_fallback_s must be > 0 and finite, got {wake_fallback_s}")
        self.wake_fallback_s = wake_fallback_s
        self.stale_after_ms = stale_after_ms
        self.read_only = read_only
        self.limits = limits if limits is not None else Limits.from_env()
        if (not create or read_only) and not self.path.exists():
            raise StoreUnavailableError(
                f"no goldfive store at {self.path} (start an agent with a StoreChannel first, or pass --db PATH)"
            )
        if self.path.exists():
            _warn_if_world_readable(self.path)
        else:
            _create_private(self.path)
        # A read-only store never commits and never waits: it leaves no wake directory behind.
        db = SqliteDb(
            self.path,
            synchronous=synchronous,
            busy_timeout_s=busy_timeout_s,
            read_only=read_only,
            wake=WakeDir(self.path) if wake and not read_only else None,
        )
        super().__init__(db)
        self.db: SqliteDb = db
        if read_only or not migrate:
            self.check_schema()
            return
        with db.guard("opening"):
            db.conn().execute("PRAGMA journal_mode=WAL")
        self.migrate()

    def inbox_waiter(self) -> Waiter | None:
        """A wake socket bound until closed (poked by every commit but heartbeats), or None without wake-ups."""
        waiter = self.db.wake.bind() if self.db.wake is not None else None
        if waiter is not None:
            waiter.fallback_s = self.wake_fallback_s
        return waiter

    def _data_version(self) -> int:
        row = self.db.conn().execute("PRAGMA data_version").fetchone()
        return int(row[0])

    def _next_poll(self, interval: float) -> float:
        """Back off from ``poll_interval_s`` towards ``idle_poll_interval_s`` while nothing changes."""
        return min(interval * 1.5, max(self.idle_poll_interval_s, self.poll_interval_s))

    def _wait_for(self, ready: Callable[[], T | None], timeout_s: float, interval: float) -> tuple[T | None, float]:
        """Call ``ready`` until it returns something or ``timeout_s`` passed; returns it and the poll interval.

        Between looks this sleeps on a wake socket (poked by every commit, see ``_wake``), looking again
        at least every ``wake_fallback_s`` in case a poke was lost; without wake-ups it polls, backing
        off from ``interval`` to ``idle_poll_interval_s``.
        """
        deadline = time.monotonic() + max(timeout_s, 0.0)
        result = ready()
        if result is not None or time.monotonic() >= deadline:
            return result, interval
        with contextlib.ExitStack() as stack:
            waiter = stack.enter_context(self.db.wake.waiter()) if self.db.wake is not None else None
            if waiter is not None:
                result = ready()  # bound now: a commit after this look pokes us
            while result is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if waiter is not None:
                    waiter.wait(min(self.wake_fallback_s, left))
                else:
                    time.sleep(min(interval, left))
                    interval = self._next_poll(interval)
                result = ready()
        return result, interval

    def wait_inbox(self, timeout_s: float) -> None:
        """Return when another connection committed (the inbox may have news) or at the deadline.

        Looks at ``PRAGMA data_version`` (microseconds, touches no table), which changes when another
        connection commits; in between it sleeps until a writer pokes it (see :meth:`_wait_for`).
        """
        with self.db.guard("waiting for control messages"):
            seen = getattr(self.db.local, "data_version", None)

            def changed() -> bool | None:
                current = self._data_version()
                if current == seen:
                    return None
                self.db.local.data_version = current
                return True

            news, interval = self._wait_for(changed, timeout_s, getattr(self.db.local, "poll", self.poll_interval_s))
            self.db.local.poll = self.poll_interval_s if news else interval

    def wait_access_news(self, seen: str | None, timeout_s: float) -> str:
        """Return the access version once it differs from ``seen`` (a user changed by any process) or at the
        deadline, sleeping on the commit wake-ups between looks (like :meth:`wait_inbox`)."""
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while True:
            version = self.access_version()
            left = deadline - time.monotonic()
            if version != seen or left <= 0:
                return version
            self.wait_inbox(left)

    def wait_ack_news(self, timeout_s: float) -> None:
        """Return when another connection committed (an ack may be stored) or at the deadline (like
        :meth:`wait_inbox`: a commit since this thread's last look returns at once)."""
        self.wait_inbox(timeout_s)

    def wait_ack(self, control_id: str, timeout_s: float) -> ControlAck | None:
        """The ack of ``control_id`` once stored, or None after ``timeout_s`` (sleeping like :meth:`wait_inbox`)."""
        return self._wait_for(lambda: self.get_ack(control_id), timeout_s, self.poll_interval_s)[0]
