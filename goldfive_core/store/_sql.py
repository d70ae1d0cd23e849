"""The SQL both backends share: schema migrations and every query, written once.

Queries use ``?`` placeholders; a dialect rewrites them for its driver. Each
thread gets its own connection. Backend errors are translated at this boundary
into :class:`StoreUnavailableError` (cannot reach / open / lock) or
:class:`StoreError`.
"""

from __future__ import annotations

import abc
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from google.protobuf.message import DecodeError

from .._stored import storable
from .._util import canonical_json, env_seconds, new_id, now_ms, shorten
from ..approvals import DECIDED_STATUSES, ApprovalStatus, sources
from ..control import AckVerdict, ControlAck, ControlMessage, check_message
from ..convert import timestamp_to_ms
from ..events import payload_name
from ..pb.v1 import events_pb2, types_pb2

if TYPE_CHECKING:
    from ..signing import TrustKey
from ._schema import (
    APPROVAL_COLS,
    APPROVAL_SELECT,
    AUDIT_COLS,
    DETACHED_COLS,
    EXEC_COLS,
    INBOX_COLS,
    MIGRATIONS,
    RUN_COLS,
    SCHEMA_VERSION,
    USER_COLS,
    approval_row,
    audit_row,
    detached_row,
    execution_row,
    inbox_row,
    lenient_audit_row,
    run_row,
    user_row,
)
from ._storable import storable_event, storable_params
from .audit import GRANT_COLUMNS, chain_hash, result_digest, verify_chain
from .base import (
    HOST,
    OPEN_STATUSES,
    ApprovalPage,
    ApprovalRow,
    AuditReport,
    AuditRow,
    DetachedRow,
    DetachedStatus,
    ExecutionRow,
    ExecutionState,
    InboxRow,
    RunRow,
    SchemaVersionError,
    Store,
    StoredDecision,
    StoreError,
    StoreUnavailableError,
    UserRow,
    WebSession,
    ack_from_columns,
)

logger = logging.getLogger(__name__)


DEFAULT_RETRY_BUDGET_S = 10.0
"""Retry budget of the agent-side store calls through an outage (env ``GOLDFIVE_STORE_RETRY_S``)."""


def _from(new: ApprovalStatus) -> tuple[str, ...]:
    """The stored statuses a record may move to ``new`` from (the core's transition table)."""
    return tuple(s.value for s in sources(new))


def _marks(new: ApprovalStatus) -> str:
    return ", ".join("?" for _ in sources(new))


def _request_where(run_id: str, target_id: str, request_id: str) -> tuple[str, tuple[str, ...]]:
    """The record a decision, vote or ack of ``request_id`` may write: that request only, never a re-ask of it.

    A decision that names no request (a writer from before requests had ids) writes the target's record.
    """
    if request_id:
        return "run_id = ? AND target_id = ? AND request_id = ?", (run_id, target_id, request_id)
    return "run_id = ? AND target_id = ?", (run_id, target_id)


def _acked_request(ack: ControlAck, payload: Mapping[str, Any]) -> str:
    """The request an applied decision resolved: the agent's word in its ack, else the decision's own."""
    for source in (ack.data, payload):
        value = source.get("request_id") if isinstance(source, Mapping) else None
        if isinstance(value, str) and value:
            return value
    return ""


T = TypeVar("T")


_RUN_OWNER = "COALESCE((SELECT agent FROM gf_run_owners WHERE run_id = {run}), '')"
"""The ledger owner of a run: the agent user who owns it over HTTP, '' for a process writing the store directly."""


class SqlStore(Store):
    """Every Store method over a DB-API connection; dialects supply connections and wake-ups."""

    placeholder = "?"
    now_expr = "0"
    """SQL for the store's clock in epoch milliseconds: liveness is judged on one clock, never two hosts'."""
    ddl_types: ClassVar[Mapping[str, str]] = {}
    unavailable_errors: tuple[type[BaseException], ...] = ()
    backend_errors: tuple[type[BaseException], ...] = ()
    for_update = ""
    """Appended to a SELECT whose row a transaction then changes (PostgreSQL: `` FOR UPDATE``; SQLite's
    ``BEGIN IMMEDIATE`` already holds the database)."""

    def __init__(self) -> None:
        self.retry_budget_s = env_seconds("GOLDFIVE_STORE_RETRY_S", DEFAULT_RETRY_BUDGET_S, zero_ok=True)
        self._local = threading.local()
        self._sql_cache: dict[str, str] = {}

    # -- dialect hooks -----------------------------------------------------------------
    @abc.abstractmethod
    def _connect(self) -> Any:
        """A new connection in autocommit mode."""

    @abc.abstractmethod
    def _transaction(self, conn: Any, *, quiet: bool = False) -> contextlib.AbstractContextManager[None]:
        """A write transaction that serializes with other writers; ``quiet``: nobody waits for what it writes
        (a heartbeat), so waiters are not woken by its commit."""

    def _lock_chain_head(self, conn: Any) -> tuple[int, str]:
        row = self._exec(conn, f"SELECT seq, hash FROM gf_chain_head WHERE id = 1{self.for_update}").fetchone()
        if row is None:  # nothing is appended to a chain whose head was deleted: the writer is told, never crashes
            raise SchemaVersionError(
                f"{self.url}: the audit chain head row is missing (deleted): nothing more is written; "
                "run goldfive audit verify"
            )
        return int(row[0]), str(row[1])

    def _notify(self, conn: Any, channel: str, payload: str) -> None:
        """Wake listeners (PostgreSQL NOTIFY); pollers need nothing."""

    def _migration_lock(self, conn: Any) -> None:
        """Serialize concurrent migrations (inside the migration transaction)."""

    # -- plumbing ------------------------------------------------------------------------
    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
        return conn

    def _sql(self, sql: str) -> str:
        if self.placeholder == "?":
            return sql
        cached = self._sql_cache.get(sql)
        if cached is None:
            cached = sql.replace("?", self.placeholder)
            self._sql_cache[sql] = cached
        return cached

    def _exec(self, conn: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        # Every text written or looked up as the store holds it (NUL as ␀, the same on both backends).
        return conn.execute(self._sql(sql), storable_params(params))

    @contextlib.contextmanager
    def _guard(self, what: str) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except (UnicodeError, OverflowError) as exc:
            # A value the database cannot hold (a lone surrogate, an integer beyond 64 bits): bad input.
            raise StoreError(f"store {self.url} refused a value while {what}: {shorten(str(exc), 200)}") from None
        except self.unavailable_errors as exc:
            self._drop_conn()
            message = self._scrub(str(exc))
            raise StoreUnavailableError(f"store {self.url} is unavailable while {what}: {message}") from None
        except self.backend_errors as exc:
            self._drop_conn()
            raise StoreError(f"store {self.url} failed while {what}: {self._scrub(str(exc))}") from None

    def _drop_conn(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        """Close this thread's connection."""
        self._drop_conn()

    def _retrying(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """Call ``fn`` (an idempotent store call); while the store is unavailable, reconnect and retry with
        backoff for at most ``retry_budget_s``, then raise the last StoreUnavailableError.

        Only calls that are safe to repeat go through here: reads, and writes whose second attempt
        after a lost answer changes nothing (a heartbeat, "done", an ack, one's own "executing").
        """
        deadline = time.monotonic() + max(self.retry_budget_s, 0.0)
        delay = 0.05
        while True:
            try:
                return fn(*args)
            except StoreUnavailableError as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                logger.warning("store %s unavailable while %s; retrying in %.2f s: %s", self.url, what, delay, exc)
                time.sleep(min(delay, left))
                delay = min(delay * 2, 2.0)

    def migrate(self) -> int:
        """Bring the schema to the current version; returns the version found before."""
        with self._guard("migrating the schema"):
            conn = self._conn()
            with self._transaction(conn):
                self._migration_lock(conn)
                self._exec(conn, "CREATE TABLE IF NOT EXISTS gf_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                found = self._read_version(conn)
                if found > SCHEMA_VERSION:
                    raise SchemaVersionError(
                        f"{self.url} has schema version {found}, newer than this goldfive understands "
                        f"({SCHEMA_VERSION}); upgrade goldfive"
                    )
                for version, statements in MIGRATIONS:
                    if version <= found:
                        continue
                    for statement in statements:
                        self._exec(conn, statement.format(**self.ddl_types))
                    self._exec(
                        conn,
                        "INSERT INTO gf_meta (key, value) VALUES ('schema_version', ?) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        (str(version),),
                    )
                    logger.info("store %s: migrated schema to version %d", self.url, version)
            return found

    def migrate_to(self, version: int) -> None:
        """Apply migrations up to ``version`` only (tests of the migration path use this)."""
        with self._guard("migrating the schema"):
            conn = self._conn()
            with self._transaction(conn):
                self._migration_lock(conn)
                self._exec(conn, "CREATE TABLE IF NOT EXISTS gf_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                found = self._read_version(conn)
                for step, statements in MIGRATIONS:
                    if found < step <= version:
                        for statement in statements:
                            self._exec(conn, statement.format(**self.ddl_types))
                        self._exec(
                            conn,
                            "INSERT INTO gf_meta (key, value) VALUES ('schema_version', ?) "
                            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                            (str(step),),
                        )

    def _read_version(self, conn: Any) -> int:
        row = self._exec(conn, "SELECT value FROM gf_meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            return 0
        try:
            return int(str(row[0]))
        except ValueError:
            raise SchemaVersionError(
                f"{self.url}: the schema version is corrupt ({shorten(repr(row[0]), 40)}); this is not a usable "
                "goldfive store"
            ) from None

    @abc.abstractmethod
    def _has_meta(self, conn: Any) -> bool:
        """Whether the goldfive metadata table exists (read-only check)."""

    def _scrub(self, text: str) -> str:
        """Remove secrets (a DSN's password) from a driver's message."""
        return text

    def check_schema(self) -> int:
        """Check, without writing anything, that this is a goldfive store of the current schema.

        Read commands use this instead of :meth:`migrate`: they never create or upgrade tables.
        """
        with self._guard("reading the schema version"):
            conn = self._conn()
            if not self._has_meta(conn):
                raise SchemaVersionError(f"{self.url} is not a goldfive store (it has no goldfive tables)")
            found = self._read_version(conn)
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
        with self._guard("reading the schema version"):
            return self._read_version(self._conn())

    # -- events and the audit chain ----------------------------------------------------
    def append_events(self, events: Sequence[events_pb2.Event], *, pid: int, host: str) -> None:
        """Append events to the chain and apply them to approvals and runs (one transaction)."""
        if not events:
            return
        with self._guard(f"appending {len(events)} events"):
            conn = self._conn()
            with self._transaction(conn):
                head_seq, head_hash = self._lock_chain_head(conn)
                for event in events:
                    stored, head_seq, head_hash = self._append(conn, event, head_seq, head_hash)
                    self._apply(conn, stored, pid=pid, host=host)
                self._exec(conn, "UPDATE gf_chain_head SET seq = ?, hash = ? WHERE id = 1", (head_seq, head_hash))

    def _append_one(self, conn: Any, event: events_pb2.Event, head_seq: int, prev_hash: str) -> tuple[int, str]:
        """Append after the head (we hold its lock): rows are numbered 1, 2, 3, ... with no gaps (audit verify
        checks it, so a row's number cannot be changed either), also where a rolled-back write took a number."""
        _, seq, digest = self._append(conn, event, head_seq, prev_hash)
        return seq, digest

    def _append(
        self, conn: Any, event: events_pb2.Event, head_seq: int, prev_hash: str
    ) -> tuple[events_pb2.Event, int, str]:
        """:meth:`_append_one`, also returning the event as it was stored (its text made storable before it is
        hashed, so the columns made from it and the chain say the same on every backend)."""
        event, body = storable_event(event)
        digest = chain_hash(prev_hash, body)
        row = self._exec(
            conn,
            "INSERT INTO gf_audit (seq, run_id, sequence, kind, event_id, emitted_at_ms, body, prev_hash, hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
            (
                head_seq + 1,
                event.run_id,
                event.sequence,
                payload_name(event),
                event.event_id,
                timestamp_to_ms(event.emitted_at),
                body,
                prev_hash,
                digest,
            ),
        ).fetchone()
        return event, int(row[0]), digest

    def _apply(self, conn: Any, event: events_pb2.Event, *, pid: int, host: str) -> None:
        kind = payload_name(event)
        at = timestamp_to_ms(event.emitted_at) or now_ms()
        if kind == "run_started":
            self._exec(
                conn,
                f"INSERT INTO gf_runs ({RUN_COLS}) VALUES (?, ?, ?, ?, ?, 'running', ?, {self.now_expr}, 0) "
                "ON CONFLICT (run_id) DO UPDATE SET pid = excluded.pid, host = excluded.host, status = 'running', "
                "heartbeat_at_ms = excluded.heartbeat_at_ms",
                (event.run_id, event.session_id, event.run_started.adapter, pid, host, at),
            )
        elif kind in ("run_completed", "run_aborted"):
            # A run that ended to wait for a person on a parked call (detach_after) is "detached" until resumed.
            detached = kind == "run_aborted" and event.run_aborted.status == types_pb2.RUN_STATUS_DETACHED
            self._exec(
                conn,
                "UPDATE gf_runs SET status = CASE WHEN ? = 1 AND EXISTS (SELECT 1 FROM gf_detached d "
                "WHERE d.run_id = gf_runs.run_id AND d.status <> 'resumed') THEN 'detached' ELSE 'finished' END, "
                "ended_at_ms = ? WHERE run_id = ?",
                (1 if detached else 0, at, event.run_id),
            )
        elif kind == "approval_requested":
            req = event.approval_requested
            meta = dict(req.metadata)
            expires = timestamp_to_ms(req.expires_at) if req.HasField("expires_at") else 0
            self._exec(
                conn,
                # Records are numbered 1, 2, 3, ... in the order their calls were first requested (we hold the
                # chain's lock), so audit verify can check a record's number against the chain.
                f"INSERT INTO gf_approvals ({APPROVAL_COLS}, request_id) "
                "VALUES ((SELECT COALESCE(MAX(id), 0) + 1 FROM gf_approvals), "
                "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, '', '', '', '', '', ?) "
                "ON CONFLICT (run_id, target_id) DO UPDATE SET kind = excluded.kind, prompt = excluded.prompt, "
                "task_id = excluded.task_id, tool_name = excluded.tool_name, args_json = excluded.args_json, "
                "args_digest = excluded.args_digest, metadata_json = excluded.metadata_json, status = excluded.status, "
                "requested_at_ms = excluded.requested_at_ms, expires_at_ms = excluded.expires_at_ms, "
                "timeout_ms = excluded.timeout_ms, decided_at_ms = 0, decided_by = '', decision = '', detail = '', "
                "edited_args_json = '', decided_via = '', decided_channel = '', decision_sig = '', "
                "quorum_progress = '', original_args_json = '', original_args_digest = '', "
                "request_id = excluded.request_id",
                (
                    event.run_id,
                    event.session_id,
                    req.target_id,
                    req.kind,
                    req.prompt,
                    req.task_id,
                    meta.get("tool_name", ""),
                    meta.get("args_json", ""),
                    req.args_digest,
                    canonical_json(meta),
                    ApprovalStatus.PENDING.value,  # a new request is a new record, not a transition
                    at,
                    expires,
                    req.timeout_ms,
                    req.request_id,
                ),
            )
        elif kind in ("approval_granted", "approval_rejected"):
            granted = kind == "approval_granted"
            msg = event.approval_granted if granted else event.approval_rejected
            # Usually says again what the ack already recorded; it never overwrites a recorded decision.
            where, params = _request_where(event.run_id, msg.target_id, msg.request_id)
            self._write_decision(
                conn,
                where,
                params,
                approved=granted,
                detail=msg.detail,
                decided_by=msg.decided_by,
                at=at,
                edited_args_json=event.approval_granted.edited_args_json if granted else "",
                via="run",
                channel=msg.channel,
            )
            # The record's time is its event's (the ack that usually recorded it first has the agent's time):
            # audit verify checks decided_at_ms against the chain.
            self._exec(
                conn,
                f"UPDATE gf_approvals SET decided_at_ms = ? WHERE {where} AND decided_via = 'run' AND decision = ?",
                (at, *params, "approve" if granted else "reject"),
            )
        elif kind == "approval_timed_out":
            out = event.approval_timed_out
            new = ApprovalStatus.TIMED_OUT if out.still_open else ApprovalStatus.EXPIRED
            self._exec(
                conn,
                "UPDATE gf_approvals SET status = ?, detail = ? "
                f"WHERE run_id = ? AND target_id = ? AND status IN ({_marks(new)})",
                (new.value, out.detail, event.run_id, out.target_id, *_from(new)),
            )
        elif kind == "approval_voted":
            # Also after the decision: the last vote's tally ("2 of 2: ana, bo") stays on the record.
            vote = event.approval_voted
            where, params = _request_where(event.run_id, vote.target_id, vote.request_id)
            self._exec(conn, f"UPDATE gf_approvals SET quorum_progress = ? WHERE {where}", (vote.progress, *params))
        elif kind == "grant_created":
            g = event.grant_created
            self._exec(
                conn,
                "INSERT INTO gf_grants (grant_id, rule, tool, granted_by, scope, run_id, session_id, args_constraint, "
                "created_at_ms, expires_at_ms, target_id, description, channel, revoked_at_ms, revoked_by, "
                "revoke_reason, made_in_run) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, '', '', ?) "
                "ON CONFLICT (grant_id) DO NOTHING",
                (
                    g.grant_id,
                    g.rule,
                    g.tool,
                    g.granted_by,
                    g.scope,
                    event.run_id if g.scope == "run" else "",
                    g.session_id,
                    g.args_constraint,
                    g.created_at_ms or at,
                    g.expires_at_ms,
                    g.target_id,
                    g.description,
                    g.channel,
                    event.run_id,
                ),
            )
        elif kind == "approval_cancelled":
            cancelled = event.approval_cancelled
            gone = ApprovalStatus.CANCELLED
            self._exec(
                conn,
                "UPDATE gf_approvals SET status = ?, detail = ? "
                f"WHERE run_id = ? AND target_id = ? AND status IN ({_marks(gone)})",
                (gone.value, cancelled.reason, event.run_id, cancelled.target_id, *_from(gone)),
            )

    def heartbeat(self, run_ids: Sequence[str]) -> None:
        """Refresh the heartbeat of live runs (retried through an outage)."""
        if run_ids:
            self._retrying("writing a heartbeat", self._heartbeat, run_ids)

    def _heartbeat(self, run_ids: Sequence[str]) -> None:
        with self._guard("writing a heartbeat"):
            conn = self._conn()
            with self._transaction(conn, quiet=True):  # every 5 s: an idle agent is not woken by its own
                for run_id in run_ids:
                    self._exec(
                        conn,
                        f"UPDATE gf_runs SET heartbeat_at_ms = {self.now_expr} WHERE run_id = ? AND status = 'running'",
                        (run_id,),
                    )

    def clock_ms(self) -> int:
        """The store's clock (the database server's, for PostgreSQL), in epoch milliseconds."""
        with self._guard("reading the store's clock"):
            return int(self._exec(self._conn(), f"SELECT {self.now_expr}").fetchone()[0])

    def _stale_runs(self, conn: Any, limit: int) -> tuple[int, list[Any]]:
        """The store's clock and up to ``limit`` running runs whose heartbeat is older than ``stale_after_ms``."""
        now = int(self._exec(conn, f"SELECT {self.now_expr}").fetchone()[0])
        rows = self._exec(
            conn,
            f"SELECT {RUN_COLS} FROM gf_runs WHERE status = 'running' AND heartbeat_at_ms < ? "
            f"ORDER BY started_at_ms LIMIT {int(limit)}",
            (now - self.stale_after_ms,),
        ).fetchall()
        return now, rows

    def reap_crashed(self) -> list[str]:
        """Close runs whose process stopped heartbeating: status ``crashed`` and a closing RunAborted event.

        Judged by the store's clock against the heartbeat the store's clock wrote, so no two hosts'
        clocks are compared. Their open approvals stay open (listed as orphaned): a decision can still
        be recorded for a replay of the call.
        """
        closed: list[str] = []
        with self._guard("closing crashed runs"):
            conn = self._conn()
            # Every live agent asks every 10 s: when nothing is stale (nearly always) a read says so, with no
            # write lock taken and no waiter woken by an empty commit.
            if not self._stale_runs(conn, 1)[1]:
                return []
            with self._transaction(conn):
                now, rows = self._stale_runs(conn, 100)
                if not rows:
                    return []
                head_seq, head_hash = self._lock_chain_head(conn)
                for run in (run_row(r) for r in rows):
                    last = self._exec(
                        conn, "SELECT MAX(sequence) FROM gf_audit WHERE run_id = ?", (run.run_id,)
                    ).fetchone()
                    event = events_pb2.Event(
                        event_id=f"ev-crashed-{run.run_id}",
                        run_id=run.run_id,
                        session_id=run.session_id,
                        sequence=(int(last[0]) + 1) if last is not None and last[0] is not None else 0,
                    )
                    event.emitted_at.FromMilliseconds(now)
                    event.run_aborted.reason = (
                        f"crashed: no heartbeat from process {run.pid} on {run.host} for "
                        f"{(now - run.heartbeat_at_ms) / 1000:.0f} s (the store's clock)"
                    )
                    event.run_aborted.status = types_pb2.RUN_STATUS_ABORTED
                    head_seq, head_hash = self._append_one(conn, event, head_seq, head_hash)
                    self._exec(
                        conn,
                        "UPDATE gf_runs SET status = 'crashed', ended_at_ms = ? "
                        "WHERE run_id = ? AND status = 'running'",
                        (now, run.run_id),
                    )
                    closed.append(run.run_id)
                self._exec(conn, "UPDATE gf_chain_head SET seq = ?, hash = ? WHERE id = 1", (head_seq, head_hash))
        for run_id in closed:
            logger.warning("store %s: run %s crashed (no heartbeat); closed it", self.url, run_id)
        return closed

    def audit_rows(self, *, after_seq: int = 0, run_id: str | None = None, limit: int = 1000) -> list[AuditRow]:
        """Audit rows after ``after_seq``, in chain order."""
        with self._guard("reading the audit log"):
            if run_id:
                cur = self._exec(
                    self._conn(),
                    f"SELECT {AUDIT_COLS} FROM gf_audit WHERE seq > ? AND run_id = ? ORDER BY seq LIMIT ?",
                    (after_seq, run_id, limit),
                )
            else:
                cur = self._exec(
                    self._conn(),
                    f"SELECT {AUDIT_COLS} FROM gf_audit WHERE seq > ? ORDER BY seq LIMIT ?",
                    (after_seq, limit),
                )
            return [audit_row(r) for r in cur.fetchall()]

    def audit_head(self) -> tuple[int, str]:
        """The seq and hash of the last audit row."""
        with self._guard("reading the audit head"):
            row = self._exec(self._conn(), "SELECT seq, hash FROM gf_chain_head WHERE id = 1").fetchone()
        if row is None:
            raise StoreError(f"{self.url}: the audit chain head row is missing (deleted): run goldfive audit verify")
        return int(row[0]), str(row[1])

    @contextlib.contextmanager
    def _lenient_text(self, conn: Any) -> Iterator[None]:
        """Reads inside decode text that is not UTF-8 instead of failing (SQLite stores any bytes as TEXT)."""
        yield

    def verify_audit(self, *, trust_key: TrustKey | None = None) -> AuditReport:
        """Walk the whole chain (in pages) and report every break; check approvals, runs and grants against it.

        Never fails on what it reads: a cell of the wrong type, NULL or text that is not UTF-8 is reported
        as tampering with its row named. ``trust_key``: verify every decision signature with it too.
        """
        with self._guard("verifying the audit log"):
            conn = self._conn()
            with self._lenient_text(conn):
                return self._verify_audit(conn, trust_key)

    def _verify_audit(self, conn: Any, trust_key: TrustKey | None) -> AuditReport:
        head = self._exec(conn, "SELECT seq, hash FROM gf_chain_head WHERE id = 1").fetchone()
        meta = dict(
            self._exec(
                conn,
                "SELECT key, value FROM gf_meta WHERE key IN "
                "('audit_numbered_after', 'approvals_numbered_after', 'executions_audited_after_ms', "
                "'executions_owned_after_seq')",
            ).fetchall()
        )

        def after(key: str) -> int:
            try:  # missing or garbled: every row is checked by its number
                return max(0, int(str(meta.get(key, 0))))
            except ValueError:
                return 0

        def pages() -> Iterator[AuditRow]:
            after = -(2**62)
            while True:
                page = self._exec(
                    conn, f"SELECT {AUDIT_COLS} FROM gf_audit WHERE seq > ? ORDER BY seq LIMIT 2000", (after,)
                ).fetchall()
                if not page:
                    return
                yield from (lenient_audit_row(r) for r in page)
                after = page[-1][0]

        def table(what: str, columns: Sequence[str]) -> Iterator[dict[str, Any]]:
            offset = 0  # by offset: a key edited into text that is not UTF-8 cannot be passed back as a parameter
            while True:
                page = self._exec(
                    conn,
                    f"SELECT {', '.join(columns)} FROM {what} ORDER BY {columns[0]} LIMIT 2000 OFFSET ?",
                    (offset,),
                ).fetchall()
                if not page:
                    return
                yield from (dict(zip(columns, r, strict=True)) for r in page)
                offset += len(page)

        def records() -> Iterator[ApprovalRow | str]:
            after = -(2**62)
            while True:
                page = self._exec(
                    conn,
                    f"SELECT {APPROVAL_SELECT} FROM gf_approvals WHERE id > ? ORDER BY id LIMIT 2000",
                    (after,),
                ).fetchall()
                if not page:
                    return
                for raw in page:
                    try:
                        yield approval_row(raw)
                    except (StoreError, ValueError, TypeError, RecursionError) as exc:  # an edited status, metadata
                        yield f"approval #{raw[0]!r} cannot be read (edited): {shorten(str(exc), 120)}"
                after = page[-1][0]

        def runs() -> Iterator[dict[str, Any]]:
            return table("gf_runs", RUN_COLS.split(", "))

        def grants() -> Iterator[dict[str, Any]]:
            return table("gf_grants", GRANT_COLUMNS)

        def executions() -> Iterator[dict[str, Any]]:
            return table("gf_executions", EXEC_COLS.split(", "))

        if head is None:
            head_seq, head_hash = None, None
        else:
            head_seq = head[0] if isinstance(head[0], int) else -1
            head_hash = head[1] if isinstance(head[1], str) else repr(head[1])
        return verify_chain(
            pages(),
            head_seq=head_seq,
            head_hash=head_hash,
            approvals=records,
            runs=runs,
            grants=grants,
            executions=executions,
            executions_after_ms=after("executions_audited_after_ms"),
            executions_owned_after=after("executions_owned_after_seq"),
            trust=trust_key,
            numbered_after=(after("audit_numbered_after"), after("approvals_numbered_after")),
        )

    # -- approvals ----------------------------------------------------------------------------
    @staticmethod
    def _approval_filter(open_only: bool, run_id: str | None) -> tuple[str, list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        if open_only:
            where.append("status IN (?, ?)")
            params.extend(s.value for s in OPEN_STATUSES)
        if run_id:
            where.append("run_id = ?")
            params.append(run_id)
        return (f"WHERE {' AND '.join(where)} " if where else ""), params

    def approvals(
        self,
        *,
        open_only: bool = True,
        run_id: str | None = None,
        limit: int = 500,
        offset: int = 0,
        oldest_first: bool = False,
    ) -> list[ApprovalRow]:
        """Approval records, newest first (``oldest_first``: the order in which they expire)."""
        clause, params = self._approval_filter(open_only, run_id)
        order = "ASC" if oldest_first else "DESC"
        with self._guard("listing approvals"):
            cur = self._exec(
                self._conn(),
                f"SELECT {APPROVAL_SELECT} FROM gf_approvals {clause}ORDER BY id {order} LIMIT ? OFFSET ?",
                (*params, max(limit, 0), max(offset, 0)),
            )
            return [approval_row(r) for r in cur.fetchall()]

    def count_approvals(self, *, open_only: bool = True, run_id: str | None = None) -> int:
        """How many records :meth:`approvals` would list without a limit."""
        clause, params = self._approval_filter(open_only, run_id)
        with self._guard("counting approvals"):
            row = self._exec(self._conn(), f"SELECT COUNT(*) FROM gf_approvals {clause}", params).fetchone()
            return int(row[0])

    def approvals_for(self, target_id: str) -> list[ApprovalRow]:
        """Every record for ``target_id``, newest first."""
        with self._guard(f"reading approval {target_id!r}"):
            cur = self._exec(
                self._conn(),
                f"SELECT {APPROVAL_SELECT} FROM gf_approvals WHERE target_id = ? ORDER BY id DESC",
                (target_id,),
            )
            return [approval_row(r) for r in cur.fetchall()]

    def run(self, run_id: str) -> RunRow | None:
        """The run row, if recorded."""
        with self._guard(f"reading run {run_id!r}"):
            row = self._exec(self._conn(), f"SELECT {RUN_COLS} FROM gf_runs WHERE run_id = ?", (run_id,)).fetchone()
            return run_row(row) if row is not None else None

    def runs(self, *, running_only: bool = True, limit: int | None = None, offset: int = 0) -> list[RunRow]:
        """Runs, newest first."""
        clause = "WHERE status = 'running' " if running_only else ""
        page = "LIMIT ? OFFSET ?" if limit is not None else ""
        params = (max(limit, 0), max(offset, 0)) if limit is not None else ()
        with self._guard("listing runs"):
            cur = self._exec(
                self._conn(), f"SELECT {RUN_COLS} FROM gf_runs {clause}ORDER BY started_at_ms DESC {page}", params
            )
            return [run_row(r) for r in cur.fetchall()]

    def count_runs(self, *, running_only: bool = True) -> int:
        """How many runs :meth:`runs` would list without a limit."""
        clause = "WHERE status = 'running'" if running_only else ""
        with self._guard("counting runs"):
            return int(self._exec(self._conn(), f"SELECT COUNT(*) FROM gf_runs {clause}").fetchone()[0])

    def count_audit(self, *, run_id: str | None = None) -> int:
        """How many audit rows there are (of one run)."""
        with self._guard("counting audit rows"):
            if run_id:
                row = self._exec(self._conn(), "SELECT COUNT(*) FROM gf_audit WHERE run_id = ?", (run_id,)).fetchone()
            else:
                row = self._exec(self._conn(), "SELECT COUNT(*) FROM gf_audit").fetchone()
            return int(row[0])

    def pause_of(self, run_id: str) -> events_pb2.RunPaused | None:
        """The run's standing pause: its last pause/resume event, when that is a pause."""
        with self._guard(f"reading run {run_id!r}'s pause"):
            row = self._exec(
                self._conn(),
                f"SELECT {AUDIT_COLS} FROM gf_audit WHERE run_id = ? AND kind IN ('run_paused', 'run_resumed') "
                "ORDER BY sequence DESC LIMIT 1",
                (run_id,),
            ).fetchone()
        if row is None:
            return None
        found = audit_row(row)
        if found.kind != "run_paused":
            return None
        try:
            return found.event().run_paused
        except DecodeError:  # a body that no longer parses: audit verify reports it; here the run shows no pause
            return None

    def decide_in_store(
        self,
        approval_id: int,
        *,
        approved: bool,
        detail: str,
        decided_by: str,
        edited_args_json: str = "",
        args_digest: str = "",
        channel: str = "",
        signature: str = "",
        request_id: str = "",
    ) -> bool:
        """Record a decision (exactly once among concurrent deciders) and audit it as an event of its run."""
        with self._guard(f"recording a decision on approval #{approval_id}"):
            conn = self._conn()
            with self._transaction(conn):
                at = now_ms()
                written = self._write_decision(
                    conn,
                    # A decision bound to a digest and a request applies only to the call it was given for (the
                    # request may have been re-asked, with other arguments or the same, since the decider looked).
                    "id = ? AND (? = '' OR args_digest = '' OR args_digest = ?) AND (? = '' OR request_id = ?)",
                    (approval_id, args_digest, args_digest, request_id, request_id),
                    approved=approved,
                    detail=detail,
                    decided_by=decided_by,
                    at=at,
                    edited_args_json=edited_args_json,
                    via="store",
                    channel=channel,
                    signature=signature,
                )
                if written != 1:
                    return False
                row = self._exec(
                    conn,
                    "SELECT run_id, session_id, target_id, request_id FROM gf_approvals WHERE id = ?",
                    (approval_id,),
                ).fetchone()
                run_id, session_id, target_id, request = str(row[0]), str(row[1]), str(row[2]), str(row[3])
                last = self._exec(conn, "SELECT MAX(sequence) FROM gf_audit WHERE run_id = ?", (run_id,)).fetchone()
                event = events_pb2.Event(
                    event_id=f"ev-store-{approval_id}-{at}",
                    run_id=run_id,
                    session_id=session_id,
                    sequence=(int(last[0]) + 1) if last is not None and last[0] is not None else 0,
                )
                event.emitted_at.FromMilliseconds(at)
                note = "recorded in the store while the run's process was not running"
                if approved:
                    event.approval_granted.target_id = target_id
                    event.approval_granted.detail = f"{detail} ({note})" if detail else note
                    event.approval_granted.decided_by = decided_by
                    event.approval_granted.edited_args_json = edited_args_json
                    event.approval_granted.channel = channel
                    event.approval_granted.request_id = request
                else:
                    event.approval_rejected.target_id = target_id
                    event.approval_rejected.detail = f"{detail} ({note})" if detail else note
                    event.approval_rejected.decided_by = decided_by
                    event.approval_rejected.channel = channel
                    event.approval_rejected.request_id = request
                head_seq, head_hash = self._lock_chain_head(conn)
                head_seq, head_hash = self._append_one(conn, event, head_seq, head_hash)
                self._exec(conn, "UPDATE gf_chain_head SET seq = ?, hash = ? WHERE id = 1", (head_seq, head_hash))
                # Wake what waits on the inbox (a detached run's Resumer picks the decision up now, not at its
                # next poll; SQLite's commit pokes waiters by itself).
                self._notify(conn, "inbox", "")
                return True

    def find_decision(self, target_id: str, *, run_id: str | None = None) -> StoredDecision | None:
        """The newest decision for ``target_id`` that no execution has claimed (retried through an outage).

        With ``run_id``, only among the requests of runs of the same owner (see :meth:`mark_executing`).
        """
        return self._retrying(f"looking up a decision for {target_id!r}", self._find_decision, target_id, run_id)

    def _find_decision(self, target_id: str, run_id: str | None) -> StoredDecision | None:
        with self._guard(f"looking up a decision for {target_id!r}"):
            conn = self._conn()
            owned, params = "", []
            if run_id is not None:
                owner = self._owner_of(conn, run_id)
                owned = f"AND {_RUN_OWNER.format(run='a.run_id')} = ? "
                params = [owner]
            claimed = "e.owner = ? AND " if run_id is not None else ""
            row = self._exec(
                conn,
                f"SELECT {APPROVAL_SELECT} FROM gf_approvals a "
                f"WHERE target_id = ? AND status IN (?, ?) {owned}"
                f"AND NOT EXISTS (SELECT 1 FROM gf_executions e WHERE {claimed}e.target_id = a.target_id "
                "AND (e.args_digest = '' OR a.args_digest = '' OR e.args_digest = a.args_digest "
                "OR e.args_digest = a.original_args_digest)) "
                "ORDER BY id DESC LIMIT 1",
                (target_id, *sorted(s.value for s in DECIDED_STATUSES), *params, *params),
            ).fetchone()
        if row is None:
            return None
        rec = approval_row(row)
        edited = json.loads(rec.edited_args_json) if rec.edited_args_json else None
        return StoredDecision(
            approval_id=rec.id,
            run_id=rec.run_id,
            target_id=rec.target_id,
            approved=rec.status is ApprovalStatus.GRANTED,
            detail=rec.detail,
            decided_by=rec.decided_by,
            # The call's own digest (what a replay of it carries), also when a quorum voted on edited arguments.
            args_digest=rec.original_args_digest or rec.args_digest,
            edited_args=edited,
            decided_at_ms=rec.decided_at_ms,
            decided_via=rec.decided_via,
            decided_channel=rec.decided_channel,
            signature=rec.decision_sig,
            request_id=rec.request_id,
            request_digest=rec.request_digest if rec.request_id else "",  # as signed: a record with no id, none
        )

    # -- execution ledger -----------------------------------------------------------------------
    # A call belongs to the owner of the run that claims it: the agent user owning the run over HTTP
    # (gf_run_owners), '' for the processes writing the store directly. Rows are keyed by (owner, call id).
    def _owner_of(self, conn: Any, run_id: str) -> str:
        row = self._exec(conn, f"SELECT {_RUN_OWNER.format(run='?')}", (run_id,)).fetchone()
        return str(row[0]) if row is not None else ""

    def mark_executing(
        self, target_id: str, *, run_id: str, pid: int = 0, host: str = HOST, args_digest: str = ""
    ) -> bool:
        """Claim the tool body for ``target_id`` (and ``args_digest``) in ``run_id``'s owner's ledger; True exactly
        once (retried through an outage).

        Idempotent for the claimer: when an earlier attempt committed but its answer was lost (the
        connection dropped), the retry finds this run's own "executing" entry and says True again.
        """
        return self._retrying(
            f"marking {target_id!r} executing", self._mark_executing, target_id, run_id, pid, host, args_digest
        )

    def _mark_executing(self, target_id: str, run_id: str, pid: int, host: str, args_digest: str) -> bool:
        with self._guard(f"marking {target_id!r} executing"):
            conn = self._conn()
            with self._transaction(conn):
                owner = self._owner_of(conn, run_id)
                cur = self._exec(
                    conn,
                    f"INSERT INTO gf_executions ({EXEC_COLS}) VALUES (?, ?, 'executing', ?, 0, '', ?, ?, ?, ?) "
                    # A finished call whose id is reused with other arguments is another call: it takes the row.
                    "ON CONFLICT (owner, target_id) DO UPDATE SET run_id = excluded.run_id, state = excluded.state, "
                    "started_at_ms = excluded.started_at_ms, finished_at_ms = 0, result_json = '', "
                    "pid = excluded.pid, host = excluded.host, args_digest = excluded.args_digest "
                    "WHERE gf_executions.state = 'done' AND gf_executions.args_digest <> '' "
                    "AND excluded.args_digest <> '' AND gf_executions.args_digest <> excluded.args_digest",
                    (target_id, run_id, at := now_ms(), pid, host, args_digest, owner),
                )
                if cur.rowcount == 1:
                    self._record_execution(
                        conn, target_id, run_id, "executing", at, owner, args_digest=args_digest, pid=pid, host=host
                    )
                    return True
                row = self._exec(
                    conn,
                    "SELECT run_id, state, pid, host, args_digest FROM gf_executions WHERE owner = ? AND target_id = ?",
                    (owner, target_id),
                ).fetchone()
                mine = (storable(run_id), "executing", pid, storable(host), storable(args_digest))
                return row is not None and tuple(row) == mine

    def mark_done(self, target_id: str, *, result_json: str, run_id: str | None = None) -> bool:
        """Record the finished tool body and its result (retried through an outage); False: no such claim.

        With ``run_id``, only the claim that run made (in its owner's ledger); None: the call's entry of any owner.
        """
        return self._retrying(f"marking {target_id!r} done", self._mark_done, target_id, result_json, run_id)

    def _mark_done(self, target_id: str, result_json: str, run_id: str | None) -> bool:
        with self._guard(f"marking {target_id!r} done"):
            conn = self._conn()
            with self._transaction(conn):
                where, params = self._claim_filter(conn, target_id, run_id)
                row = self._exec(
                    conn,
                    f"UPDATE gf_executions SET state = 'done', finished_at_ms = ?, result_json = ? WHERE {where} "
                    "RETURNING run_id, owner",
                    (at := now_ms(), result_json, *params),
                ).fetchone()
                if row is None:
                    return False
                self._record_execution(conn, target_id, str(row[0]), "done", at, str(row[1]), result_json=result_json)
                return True

    def _claim_filter(self, conn: Any, target_id: str, run_id: str | None) -> tuple[str, list[Any]]:
        """The WHERE of the ledger row ``run_id`` claimed for ``target_id`` (None: the call's row of any owner)."""
        if run_id is None:
            return "target_id = ?", [target_id]
        return "owner = ? AND target_id = ? AND run_id = ?", [self._owner_of(conn, run_id), target_id, run_id]

    def resolve_execution(self, target_id: str, *, ran: bool, by: str, run_id: str | None = None) -> bool:
        """Settle an in-doubt call on a person's word (with ``run_id``: the one that run claimed)."""
        with self._guard(f"resolving execution {target_id!r}"):
            conn = self._conn()
            with self._transaction(conn):
                at = now_ms()
                where, params = self._claim_filter(conn, target_id, run_id)
                if ran:
                    result = canonical_json({"resolved_by": by, "detail": "a person confirmed it ran"})
                    row = self._exec(
                        conn,
                        "UPDATE gf_executions SET state = 'done', finished_at_ms = ?, result_json = ? "
                        f"WHERE {where} AND state = 'executing' RETURNING run_id, owner",
                        (at, result, *params),
                    ).fetchone()
                else:
                    result = ""
                    row = self._exec(
                        conn,
                        f"DELETE FROM gf_executions WHERE {where} AND state = 'executing' RETURNING run_id, owner",
                        params,
                    ).fetchone()
                if row is None:
                    return False
                state = "resolved_ran" if ran else "resolved_not_run"
                self._record_execution(
                    conn, target_id, str(row[0]), state, at, str(row[1]), result_json=result, resolved_by=by
                )
                return True

    def _record_execution(
        self,
        conn: Any,
        target_id: str,
        run_id: str,
        state: str,
        at: int,
        owner: str,
        *,
        args_digest: str = "",
        pid: int = 0,
        host: str = "",
        result_json: str = "",
        resolved_by: str = "",
    ) -> None:
        """Put a change of the execution ledger on the audit chain, in the ledger write's own transaction, so
        ``audit verify`` can check every ledger row (outside the run's own numbering: sequence 0)."""
        event = events_pb2.Event(
            event_id=new_id("ev-ledger"),
            run_id=run_id,
            sequence=0,
            execution_recorded=events_pb2.ExecutionRecorded(
                target_id=target_id,
                state=state,
                args_digest=args_digest,
                pid=pid,
                host=host,
                result_digest=result_digest(result_json),
                resolved_by=resolved_by,
                owner=owner,
            ),
        )
        event.emitted_at.FromMilliseconds(at)
        head_seq, head_hash = self._lock_chain_head(conn)
        head_seq, head_hash = self._append_one(conn, event, head_seq, head_hash)
        self._exec(conn, "UPDATE gf_chain_head SET seq = ?, hash = ? WHERE id = 1", (head_seq, head_hash))

    def execution(self, target_id: str, *, run_id: str | None = None) -> ExecutionRow | None:
        """The ledger entry for ``target_id`` in ``run_id``'s owner's ledger (retried through an outage).

        None for ``run_id``: the newest entry for the call id of any owner (the command line, a person's look).
        """
        return self._retrying(f"reading execution {target_id!r}", self._execution, target_id, run_id)

    def _execution(self, target_id: str, run_id: str | None) -> ExecutionRow | None:
        with self._guard(f"reading execution {target_id!r}"):
            conn = self._conn()
            if run_id is None:
                row = self._exec(
                    conn,
                    f"SELECT {EXEC_COLS} FROM gf_executions WHERE target_id = ? ORDER BY started_at_ms DESC LIMIT 1",
                    (target_id,),
                ).fetchone()
            else:
                row = self._exec(
                    conn,
                    f"SELECT {EXEC_COLS} FROM gf_executions WHERE owner = ? AND target_id = ?",
                    (self._owner_of(conn, run_id), target_id),
                ).fetchone()
            return execution_row(row) if row is not None else None

    def executions(self, *, state: ExecutionState | None = None) -> list[ExecutionRow]:
        """Ledger entries, newest first."""
        with self._guard("listing executions"):
            if state is None:
                cur = self._exec(self._conn(), f"SELECT {EXEC_COLS} FROM gf_executions ORDER BY started_at_ms DESC")
            else:
                cur = self._exec(
                    self._conn(),
                    f"SELECT {EXEC_COLS} FROM gf_executions WHERE state = ? ORDER BY started_at_ms DESC",
                    (state.value,),
                )
            return [execution_row(r) for r in cur.fetchall()]

    # -- detached invocations -----------------------------------------------------------------
    def record_detached(
        self,
        target_id: str,
        *,
        run_id: str,
        app_name: str,
        user_id: str,
        session_id: str,
        invocation_id: str,
        detail: str = "",
    ) -> None:
        """Record that an invocation ended waiting for ``target_id`` (WAITING, no lease)."""
        with self._guard(f"recording detached invocation {invocation_id!r}"):
            conn = self._conn()
            with self._transaction(conn):
                self._exec(
                    conn,
                    f"INSERT INTO gf_detached ({DETACHED_COLS}) "
                    f"VALUES (?, ?, ?, ?, ?, ?, 'waiting', {self.now_expr}, '', 0, 0, ?) "
                    "ON CONFLICT (target_id) DO UPDATE SET run_id = excluded.run_id, app_name = excluded.app_name, "
                    "user_id = excluded.user_id, session_id = excluded.session_id, "
                    "invocation_id = excluded.invocation_id, status = 'waiting', "
                    "detached_at_ms = excluded.detached_at_ms, claimed_by = '', lease_until_ms = 0, "
                    "resumed_at_ms = 0, detail = excluded.detail",
                    (target_id, run_id, app_name, user_id, session_id, invocation_id, shorten(detail, 500)),
                )

    def detached(self, target_id: str) -> DetachedRow | None:
        """The detached invocation waiting for ``target_id`` (retried through an outage)."""
        return self._retrying(f"reading detached invocation for {target_id!r}", self._detached, target_id)

    def _detached(self, target_id: str) -> DetachedRow | None:
        with self._guard(f"reading detached invocation for {target_id!r}"):
            row = self._exec(
                self._conn(), f"SELECT {DETACHED_COLS} FROM gf_detached WHERE target_id = ?", (target_id,)
            ).fetchone()
            return detached_row(row) if row is not None else None

    def detached_runs(
        self, *, status: DetachedStatus | None = DetachedStatus.WAITING, app_name: str | None = None, limit: int = 100
    ) -> list[DetachedRow]:
        """Detached invocations, oldest first."""
        where: list[str] = []
        params: list[Any] = []
        if status is not None:
            where.append("status = ?")
            params.append(status.value)
        if app_name is not None:
            where.append("app_name = ?")
            params.append(app_name)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        with self._guard("listing detached invocations"):
            cur = self._exec(
                self._conn(),
                f"SELECT {DETACHED_COLS} FROM gf_detached {clause}ORDER BY detached_at_ms, target_id LIMIT ?",
                (*params, max(limit, 0)),
            )
            return [detached_row(r) for r in cur.fetchall()]

    def claim_detached(self, target_id: str, *, owner: str, lease_ms: int) -> bool:
        """Take the resume lease; exactly one concurrent caller wins (the lease runs on the store's clock)."""
        if not owner:
            raise StoreError("claim_detached needs a non-empty owner")
        with self._guard(f"claiming detached invocation for {target_id!r}"):
            conn = self._conn()
            with self._transaction(conn):
                cur = self._exec(
                    conn,
                    f"UPDATE gf_detached SET status = 'resuming', claimed_by = ?, lease_until_ms = {self.now_expr} + ? "
                    "WHERE target_id = ? AND (status = 'waiting' OR "
                    f"(status = 'resuming' AND lease_until_ms < {self.now_expr}))",
                    (owner, max(int(lease_ms), 1), target_id),
                )
                return bool(cur.rowcount == 1)

    def settle_detached(self, target_id: str, *, owner: str, resumed: bool, detail: str = "") -> bool:
        """RESUMED (the call was taken up) or back to WAITING; only the lease holder may."""
        with self._guard(f"settling detached invocation for {target_id!r}"):
            conn = self._conn()
            with self._transaction(conn):
                if not resumed:
                    cur = self._exec(
                        conn,
                        "UPDATE gf_detached SET status = 'waiting', claimed_by = '', lease_until_ms = 0 "
                        "WHERE target_id = ? AND claimed_by = ? AND status = 'resuming'",
                        (target_id, owner),
                    )
                    return bool(cur.rowcount == 1)
                cur = self._exec(
                    conn,
                    f"UPDATE gf_detached SET status = 'resumed', resumed_at_ms = {self.now_expr}, detail = ? "
                    "WHERE target_id = ? AND claimed_by = ? AND status = 'resuming'",
                    (shorten(detail, 500), target_id, owner),
                )
                if cur.rowcount != 1:
                    return False
                # The detached run is over: the resumed invocation carries on as a new run.
                self._exec(
                    conn,
                    "UPDATE gf_runs SET status = 'finished' WHERE status = 'detached' AND run_id IN "
                    "(SELECT run_id FROM gf_detached WHERE target_id = ?)",
                    (target_id,),
                )
                return True

    # -- control inbox --------------------------------------------------------------------------
    def post_control(self, msg: ControlMessage, *, run_id: str = "") -> int:
        """Insert a message; raises StoreError when it could not be read back (not JSON, too big, bad ids)."""
        problem = check_message(msg)
        if problem is not None:
            raise StoreError(f"control message refused: {problem.detail}")
        try:
            payload_json = canonical_json(dict(msg.payload))
            payload_json.encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            raise StoreError(f"control message {msg.id}: payload is not JSON: {shorten(str(exc), 200)}") from None
        if len(payload_json) > self.limits.max_payload_chars:
            raise StoreError(
                f"control message {msg.id}: payload is {len(payload_json)} characters; the limit is "
                f"{self.limits.max_payload_chars}"
            )
        for name, value in (("id", msg.id), ("run_id", run_id)):
            if not isinstance(value, str) or len(value) > self.limits.max_id_chars:
                raise StoreError(f"control message {name} must be a string of at most {self.limits.max_id_chars} chars")
        if not isinstance(msg.issued_at_ms, int) or not 0 <= msg.issued_at_ms < 2**62:
            raise StoreError(f"control message {msg.id}: issued_at_ms must be a non-negative 62-bit integer")
        with self._guard(f"posting control message {msg.id}"):
            conn = self._conn()
            with self._transaction(conn):
                row = self._exec(
                    conn,
                    "INSERT INTO gf_inbox (control_id, kind, payload_json, run_id, issued_at_ms, status, claimed_by, "
                    "claimed_at_ms, ack_result, ack_detail, ack_data_json, acked_at_ms) "
                    "VALUES (?, ?, ?, ?, ?, 'pending', '', 0, '', '', '', 0) RETURNING id",
                    (msg.id, str(msg.kind), payload_json, run_id, msg.issued_at_ms),
                ).fetchone()
                self._notify(conn, "inbox", "")
                return int(row[0])

    def pending_controls(self, *, limit: int = 100) -> list[InboxRow]:
        """Unclaimed messages, oldest first."""
        with self._guard("reading the control inbox"):
            cur = self._exec(
                self._conn(),
                f"SELECT {INBOX_COLS} FROM gf_inbox WHERE status = 'pending' ORDER BY id LIMIT ?",
                (limit,),
            )
            return self._inbox_rows(cur)

    def claimed_controls(self, *, endpoint: str) -> list[InboxRow]:
        """Messages ``endpoint`` claimed and has not acked, oldest first."""
        with self._guard("reading claimed control messages"):
            cur = self._exec(
                self._conn(),
                f"SELECT {INBOX_COLS} FROM gf_inbox WHERE status = 'claimed' AND claimed_by = ? ORDER BY id",
                (endpoint,),
            )
            return self._inbox_rows(cur)

    @staticmethod
    def _inbox_rows(cur: Any) -> list[InboxRow]:
        return [inbox_row(r) for r in cur.fetchall()]

    def claim_controls(self, ids: Sequence[int], *, endpoint: str) -> list[int]:
        """Claim unclaimed messages; returns the ids won."""
        if not ids:
            return []
        won = []
        with self._guard("claiming control messages"):
            conn = self._conn()
            with self._transaction(conn):
                at = now_ms()
                for ident in ids:
                    cur = self._exec(
                        conn,
                        "UPDATE gf_inbox SET status = 'claimed', claimed_by = ?, claimed_at_ms = ? "
                        "WHERE id = ? AND status = 'pending'",
                        (endpoint, at, ident),
                    )
                    if cur.rowcount == 1:
                        won.append(ident)
        return won

    def ack_controls(self, acks: Sequence[tuple[int, ControlAck]]) -> None:
        """Store acks and wake the senders (retried through an outage; writing an ack twice changes nothing)."""
        if acks:
            self._retrying("storing control acks", self._ack_controls, acks)

    def _ack_controls(self, acks: Sequence[tuple[int, ControlAck]]) -> None:
        with self._guard("storing control acks"):
            conn = self._conn()
            with self._transaction(conn):
                for ident, ack in acks:
                    try:
                        data_json = canonical_json(dict(ack.data)) if ack.data is not None else ""
                    except (TypeError, ValueError):
                        data_json = canonical_json({"unserializable": repr(ack.data)[:500]})
                    self._exec(
                        conn,
                        "UPDATE gf_inbox SET status = 'acked', ack_result = ?, ack_detail = ?, ack_data_json = ?, "
                        "acked_at_ms = ? WHERE id = ?",
                        (ack.result.value, ack.detail, data_json, ack.acked_at_ms, ident),
                    )
                    if ack.ok:
                        self._record_applied_decision(conn, ident, ack)
                    self._notify(conn, "ack", ack.control_id)

    def _record_applied_decision(self, conn: Any, ident: int, ack: ControlAck) -> None:
        """An applied APPROVE/REJECT updates its approval record with its ack, in the same transaction.

        The decision is then durable the moment the decider sees its ack, even if the agent's
        process dies before its sink writes ApprovalGranted/Rejected (which later says the same).
        """
        row = self._exec(conn, "SELECT kind, payload_json, run_id FROM gf_inbox WHERE id = ?", (ident,)).fetchone()
        if row is None or row[0] not in ("APPROVE", "REJECT"):
            return
        payload = json.loads(row[1])
        run_id = row[2] or payload.get("run_id") or ""
        target = payload.get("target_id")
        if not run_id or not isinstance(target, str):
            return  # unaddressed: the sink records it from the run's events
        if ack.verdict is AckVerdict.EXPIRED:
            return  # the server's expiry notice, not a decision: the run's approval_timed_out records it
        # Written to the request the agent resolved only: if the target was asked again since (a new request),
        # a late ack never lands on the new one (the run's event already recorded the old one's decision).
        where, params = _request_where(run_id, target, _acked_request(ack, payload))
        if ack.verdict is AckVerdict.COUNTED and isinstance(ack.data, Mapping):
            # One vote of a quorum: the request stays pending; only the tally changes ("1 of 2: ana").
            self._exec(
                conn,
                "UPDATE gf_approvals SET quorum_progress = ? "
                f"WHERE {where} AND status IN ({', '.join('?' for _ in OPEN_STATUSES)})",
                (str(ack.data.get("quorum_progress") or ""), *params, *(s.value for s in OPEN_STATUSES)),
            )
            self._put_quorum_args(conn, where, params, ack.data)
            return
        approved = row[0] == "APPROVE"
        edited = payload.get("edited_args")
        quorum = ack.verdict is AckVerdict.QUORUM
        decided_by = payload.get("decided_by")
        detail = payload.get("detail") or payload.get("reason") or ""
        if quorum:  # the last vote of a quorum: decided by all who approved, with the tally
            assert isinstance(ack.data, Mapping)
            decided_by = ack.data.get("decided_by") or decided_by
            detail = ack.data.get("detail") or detail  # what the run's decision event says
            edited = ack.data.get("edited_args") if approved else None
            self._exec(
                conn,
                f"UPDATE gf_approvals SET quorum_progress = ? WHERE {where}",
                (str(ack.data.get("quorum_progress") or ""), *params),
            )
        self._write_decision(
            conn,
            where,
            params,
            approved=approved,
            detail=str(detail),
            decided_by=str(decided_by or ""),
            at=ack.acked_at_ms,
            edited_args_json=canonical_json(edited) if approved and isinstance(edited, dict) else "",
            via="run",
            channel=str(payload.get("channel") or ""),
        )
        signature = payload.get("signature")
        if isinstance(signature, dict):  # keep the server's signature even if the run's event got here first
            self._exec(
                conn,
                f"UPDATE gf_approvals SET decision_sig = ? WHERE {where} AND decision = ?",
                (canonical_json(signature), *params, "approve" if approved else "reject"),
            )

    def _put_quorum_args(self, conn: Any, where: str, params: Sequence[Any], data: Mapping[str, Any]) -> None:
        """An edit restarted a quorum: its arguments are on the table (what the next approver reads and votes on).

        The call's own arguments move to ``original_args_*`` once (a second edit keeps them), so the change
        stays reviewable; the digest the store hands out as the default for a vote is the edited one.
        """
        digest, args = data.get("args_digest"), data.get("args")
        if not isinstance(digest, str) or not digest or not isinstance(args, Mapping):
            return
        self._exec(
            conn,
            "UPDATE gf_approvals SET "
            "original_args_json = CASE WHEN original_args_digest = '' THEN args_json ELSE original_args_json END, "
            "original_args_digest = CASE WHEN original_args_digest = '' THEN args_digest "
            "ELSE original_args_digest END, args_json = ?, args_digest = ? "
            f"WHERE {where} AND args_digest <> ? "
            f"AND status IN ({', '.join('?' for _ in OPEN_STATUSES)})",
            (canonical_json(dict(args)), digest, *params, digest, *(s.value for s in OPEN_STATUSES)),
        )

    def _write_decision(
        self,
        conn: Any,
        where: str,
        params: Sequence[Any],
        *,
        approved: bool,
        detail: str,
        decided_by: str,
        at: int,
        edited_args_json: str,
        via: str,
        channel: str = "",
        signature: str = "",
    ) -> int:
        """The one write of an approval's decision columns; returns how many records it decided (0 or 1).

        Guarded by status: only a record still open (pending, timed out) takes a decision, so a
        recorded decision is final — a later event, ack or ``decide_in_store`` never overwrites it.
        """
        new = ApprovalStatus.GRANTED if approved else ApprovalStatus.REJECTED
        cur = self._exec(
            conn,
            "UPDATE gf_approvals SET status = ?, decision = ?, detail = ?, decided_by = ?, decided_at_ms = ?, "
            "edited_args_json = ?, decided_via = ?, decided_channel = ?, decision_sig = ? "
            f"WHERE {where} AND status IN ({_marks(new)})",
            (
                new.value,
                "approve" if approved else "reject",
                detail,
                decided_by,
                at,
                edited_args_json,
                via,
                channel,
                signature,
                *params,
                *_from(new),
            ),
        )
        return int(cur.rowcount)

    def get_ack(self, control_id: str) -> ControlAck | None:
        """The ack once the message was answered."""
        with self._guard(f"reading the ack of {control_id}"):
            row = self._exec(
                self._conn(),
                "SELECT status, ack_result, ack_detail, ack_data_json, acked_at_ms FROM gf_inbox WHERE control_id = ?",
                (control_id,),
            ).fetchone()
        if row is None or row[0] != "acked":
            return None
        data = json.loads(row[3]) if row[3] else None
        return ack_from_columns(control_id, row[1], row[2], data, row[4])

    def withdraw_control(self, control_id: str) -> bool:
        """Withdraw an unclaimed message."""
        with self._guard(f"withdrawing {control_id}"):
            conn = self._conn()
            with self._transaction(conn):
                cur = self._exec(
                    conn,
                    "UPDATE gf_inbox SET status = 'withdrawn' WHERE control_id = ? AND status = 'pending'",
                    (control_id,),
                )
                return bool(cur.rowcount == 1)

    # -- approvals, paged (goldfive serve) -------------------------------------------------------
    def approval_page(
        self,
        *,
        statuses: Sequence[str],
        run_ids: Sequence[str] | None = None,
        exclude_run_ids: Sequence[str] | None = None,
        run_id: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> ApprovalPage:
        """Matching records, soonest expiry first (records without an expiry last), and their total."""
        where = [f"status IN ({', '.join('?' for _ in statuses)})"] if statuses else ["1 = 0"]
        params: list[Any] = list(statuses)
        if run_ids is not None:
            if not run_ids:
                return ApprovalPage(rows=[], total=0)
            where.append(f"run_id IN ({', '.join('?' for _ in run_ids)})")
            params.extend(run_ids)
        if exclude_run_ids:
            where.append(f"run_id NOT IN ({', '.join('?' for _ in exclude_run_ids)})")
            params.extend(exclude_run_ids)
        for column, value in (("run_id", run_id), ("tool_name", tool)):
            if value:
                where.append(f"{column} = ?")
                params.append(value)
        if agent:  # metadata is canonical JSON: the agent's name appears exactly so
            needle = canonical_json({"agent_name": storable(agent)})[1:-1]
            escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append("metadata_json LIKE ? ESCAPE '\\'")
            params.append(f"%{escaped}%")
        clause = " AND ".join(where)
        with self._guard("listing approvals"):
            conn = self._conn()
            total = self._exec(conn, f"SELECT COUNT(*) FROM gf_approvals WHERE {clause}", params).fetchone()
            cur = self._exec(
                conn,
                f"SELECT {APPROVAL_SELECT} FROM gf_approvals WHERE {clause} "
                "ORDER BY CASE WHEN expires_at_ms = 0 THEN 1 ELSE 0 END, expires_at_ms, id LIMIT ? OFFSET ?",
                (*params, limit, offset),
            )
            return ApprovalPage(rows=[approval_row(r) for r in cur.fetchall()], total=int(total[0]))

    # -- users and web sessions ---------------------------------------------------------------------
    def add_user(self, user: UserRow) -> bool:
        """Create a user; False when the name is taken."""
        with self._guard(f"adding user {user.name!r}"):
            conn = self._conn()
            with self._transaction(conn):
                cur = self._exec(
                    conn,
                    f"INSERT INTO gf_users ({USER_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, ?) "
                    "ON CONFLICT (name) DO NOTHING",
                    (
                        user.name,
                        user.role,
                        user.token_id,
                        user.token_hash,
                        int(user.disabled),
                        user.created_at_ms,
                        user.updated_at_ms,
                        ",".join(sorted(set(user.groups))),
                    ),
                )
                return bool(cur.rowcount == 1)

    def user(self, name: str) -> UserRow | None:
        """The user called ``name``."""
        with self._guard(f"reading user {name!r}"):
            row = self._exec(self._conn(), f"SELECT {USER_COLS} FROM gf_users WHERE name = ?", (name,)).fetchone()
            return user_row(row) if row is not None else None

    def user_by_token_id(self, token_id: str) -> UserRow | None:
        """The user whose current token has this id."""
        with self._guard("looking up a token"):
            row = self._exec(
                self._conn(), f"SELECT {USER_COLS} FROM gf_users WHERE token_id = ?", (token_id,)
            ).fetchone()
            return user_row(row) if row is not None else None

    def users(self) -> list[UserRow]:
        """Every user, by name."""
        with self._guard("listing users"):
            cur = self._exec(self._conn(), f"SELECT {USER_COLS} FROM gf_users ORDER BY name")
            return [user_row(r) for r in cur.fetchall()]

    def change_user_groups(
        self, name: str, change: Callable[[tuple[str, ...]], tuple[str, ...]]
    ) -> tuple[str, ...] | None:
        """A user's policy groups replaced by ``change(current)`` in one transaction; None when unknown."""
        with self._guard(f"changing user {name!r}'s groups"):
            conn = self._conn()
            with self._transaction(conn):
                row = self._exec(
                    conn, f"SELECT policy_groups FROM gf_users WHERE name = ?{self.for_update}", (name,)
                ).fetchone()
                if row is None:
                    return None
                groups = change(tuple(g for g in str(row[0] or "").split(",") if g))
                self._exec(
                    conn,
                    "UPDATE gf_users SET policy_groups = ?, updated_at_ms = ? WHERE name = ?",
                    (",".join(sorted(set(groups))), now_ms(), name),
                )
                return tuple(sorted(set(groups)))

    def update_user(
        self,
        name: str,
        *,
        disabled: bool | None = None,
        token_id: str | None = None,
        token_hash: str | None = None,
        role: str | None = None,
        groups: tuple[str, ...] | None = None,
    ) -> bool:
        """Change a user; a new token or disabling ends their web sessions. False when unknown."""
        sets = ["updated_at_ms = ?"]
        params: list[Any] = [now_ms()]
        for column, value in (("disabled", disabled), ("token_id", token_id), ("token_hash", token_hash)):
            if value is not None:
                sets.append(f"{column} = ?")
                params.append(int(value) if isinstance(value, bool) else value)
        if role is not None:
            sets.append("role = ?")
            params.append(role)
        if groups is not None:
            sets.append("policy_groups = ?")
            params.append(",".join(sorted(set(groups))))
        with self._guard(f"updating user {name!r}"):
            conn = self._conn()
            with self._transaction(conn):
                cur = self._exec(conn, f"UPDATE gf_users SET {', '.join(sets)} WHERE name = ?", (*params, name))
                if cur.rowcount != 1:
                    return False
                if disabled or token_hash is not None:
                    self._exec(conn, "DELETE FROM gf_web_sessions WHERE user_name = ?", (name,))
                return True

    def note_login(self, name: str, *, ok: bool, lock_until_ms: int = 0) -> int:
        """Count a failed login (returns the new count) or reset the count after a good one."""
        with self._guard(f"recording a login of {name!r}"):
            conn = self._conn()
            with self._transaction(conn):
                if ok:
                    self._exec(
                        conn, "UPDATE gf_users SET failed_logins = 0, locked_until_ms = 0 WHERE name = ?", (name,)
                    )
                    return 0
                self._exec(
                    conn,
                    "UPDATE gf_users SET failed_logins = failed_logins + 1, locked_until_ms = ? WHERE name = ?",
                    (lock_until_ms, name),
                )
                row = self._exec(conn, "SELECT failed_logins FROM gf_users WHERE name = ?", (name,)).fetchone()
                return int(row[0]) if row is not None else 0

    def add_web_session(self, session: WebSession) -> None:
        """Store a new web session (and drop expired ones)."""
        with self._guard("storing a web session"):
            conn = self._conn()
            with self._transaction(conn):
                self._exec(conn, "DELETE FROM gf_web_sessions WHERE expires_at_ms < ?", (now_ms(),))
                self._exec(
                    conn,
                    "INSERT INTO gf_web_sessions (id_hash, user_name, csrf, created_at_ms, expires_at_ms) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (session.id_hash, session.user_name, session.csrf, session.created_at_ms, session.expires_at_ms),
                )

    def web_session(self, id_hash: str) -> WebSession | None:
        """A web session that has not expired."""
        with self._guard("reading a web session"):
            row = self._exec(
                self._conn(),
                "SELECT id_hash, user_name, csrf, created_at_ms, expires_at_ms FROM gf_web_sessions "
                "WHERE id_hash = ? AND expires_at_ms > ?",
                (id_hash, now_ms()),
            ).fetchone()
        if row is None:
            return None
        return WebSession(id_hash=row[0], user_name=row[1], csrf=row[2], created_at_ms=row[3], expires_at_ms=row[4])

    def end_web_session(self, id_hash: str) -> None:
        """Log a web session out."""
        with self._guard("ending a web session"):
            conn = self._conn()
            with self._transaction(conn):
                self._exec(conn, "DELETE FROM gf_web_sessions WHERE id_hash = ?", (id_hash,))
