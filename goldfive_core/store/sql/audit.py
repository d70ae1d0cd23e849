"""The audit log role of a SQL store: the hash chain of events, read, counted and verified."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from ..._util import shorten
from ...pb.v1 import events_pb2
from .._schema import (
    APPROVAL_SELECT,
    AUDIT_COLS,
    EXEC_COLS,
    RUN_COLS,
    approval_row,
    audit_row,
    lenient_audit_row,
)
from ..audit import GRANT_COLUMNS, verify_chain
from ..base import (
    ApprovalRow,
    AuditReport,
    AuditRow,
    StoreError,
)
from .apply import apply_event
from .chain import appending
from .db import SqlRole

if TYPE_CHECKING:
    from ...signing import TrustKey

logger = logging.getLogger(__name__)


class SqlAuditLog(SqlRole):
    """Append events to the chain (and apply them to the records), read it, verify it."""

    def append_events(self, events: Sequence[events_pb2.Event], *, pid: int, host: str) -> None:
        """Append events to the chain and apply them to approvals and runs (one transaction)."""
        if not events:
            return
        with self.db.writing(f"appending {len(events)} events") as conn, appending(self.db, conn) as chain:
            for event in events:
                apply_event(self.db, conn, chain.append(event), pid=pid, host=host)

    def audit_rows(self, *, after_seq: int = 0, run_id: str | None = None, limit: int = 1000) -> list[AuditRow]:
        """Audit rows after ``after_seq``, in chain order."""
        with self.db.guard("reading the audit log"):
            if run_id:
                cur = self.db.execute(
                    self.db.conn(),
                    f"SELECT {AUDIT_COLS} FROM gf_audit WHERE seq > ? AND run_id = ? ORDER BY seq LIMIT ?",
                    (after_seq, run_id, limit),
                )
            else:
                cur = self.db.execute(
                    self.db.conn(),
                    f"SELECT {AUDIT_COLS} FROM gf_audit WHERE seq > ? ORDER BY seq LIMIT ?",
                    (after_seq, limit),
                )
            return [audit_row(r) for r in cur.fetchall()]

    def audit_rows_of_kind(
        self,
        kinds: Sequence[str],
        *,
        run_id: str | None = None,
        before_seq: int = 0,
        since_ms: int = 0,
        until_ms: int = 0,
        limit: int = 100,
    ) -> list[AuditRow]:
        """Audit rows of these kinds (of one run), newest first: before ``before_seq`` when given, emitted in
        ``[since_ms, until_ms)`` when given."""
        if not kinds:
            return []
        where = [f"kind IN ({', '.join('?' for _ in kinds)})"]
        params: list[Any] = list(kinds)
        for clause, value in (
            ("run_id = ?", run_id),
            ("seq < ?", before_seq),
            ("emitted_at_ms >= ?", since_ms),
            ("emitted_at_ms < ?", until_ms),
        ):
            if value:
                where.append(clause)
                params.append(value)
        sql = f"SELECT {AUDIT_COLS} FROM gf_audit WHERE {' AND '.join(where)} ORDER BY seq DESC LIMIT ?"
        with self.db.guard("reading the audit log"):
            cur = self.db.execute(self.db.conn(), sql, (*params, limit))
            return [audit_row(r) for r in cur.fetchall()]

    def audit_head(self) -> tuple[int, str]:
        """The seq and hash of the last audit row."""
        with self.db.guard("reading the audit head"):
            row = self.db.execute(self.db.conn(), "SELECT seq, hash FROM gf_chain_head WHERE id = 1").fetchone()
        if row is None:
            raise StoreError(f"{self.db.url}: the audit chain head row is missing (deleted): run goldfive audit verify")
        return int(row[0]), str(row[1])

    def verify_audit(self, *, trust_key: TrustKey | None = None) -> AuditReport:
        """Walk the whole chain (in pages) and report every break; check approvals, runs and grants against it.

        Never fails on what it reads: a cell of the wrong type, NULL or text that is not UTF-8 is reported
        as tampering with its row named. ``trust_key``: verify every decision signature with it too.
        """
        with self.db.guard("verifying the audit log"):
            conn = self.db.conn()
            with self.db.lenient_text(conn):
                return self._verify_audit(conn, trust_key)

    def _verify_audit(self, conn: Any, trust_key: TrustKey | None) -> AuditReport:
        head = self.db.execute(conn, "SELECT seq, hash FROM gf_chain_head WHERE id = 1").fetchone()
        meta = dict(
            self.db.execute(
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
                page = self.db.execute(
                    conn, f"SELECT {AUDIT_COLS} FROM gf_audit WHERE seq > ? ORDER BY seq LIMIT 2000", (after,)
                ).fetchall()
                if not page:
                    return
                yield from (lenient_audit_row(r) for r in page)
                after = page[-1][0]

        def table(what: str, columns: Sequence[str]) -> Iterator[dict[str, Any]]:
            offset = 0  # by offset: a key edited into text that is not UTF-8 cannot be passed back as a parameter
            while True:
                page = self.db.execute(
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
                page = self.db.execute(
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

    def count_audit(self, *, run_id: str | None = None) -> int:
        """How many audit rows there are (of one run)."""
        if run_id:
            row = self.db.one("counting audit rows", "SELECT COUNT(*) FROM gf_audit WHERE run_id = ?", (run_id,))
        else:
            row = self.db.one("counting audit rows", "SELECT COUNT(*) FROM gf_audit")
        return int(row[0])

    def pause_of(self, run_id: str) -> events_pb2.RunPaused | None:
        """The run's standing pause: its last pause/resume event, when that is a pause."""
        with self.db.guard(f"reading run {run_id!r}'s pause"):
            row = self.db.execute(
                self.db.conn(),
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
