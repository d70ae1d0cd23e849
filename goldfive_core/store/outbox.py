"""The notification outbox: notices waiting to be sent, claimed under a lease, retried, then sent or failed.

Rows are keyed by ``dedup_key`` (event id + channel), so several ``goldfive
serve`` processes scanning the same audit log enqueue each notice once; a row is
sent by whoever claims it first (a conditional UPDATE), and a claim whose owner
died is taken over when its lease runs out. Lease times come from the store's
clock (PostgreSQL ``clock_timestamp()``; SQLite lives on one host), never from
comparing two hosts' clocks.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .._util import now_ms
from .sql import SqlStore

__all__ = [
    "OutboxItem",
    "OutboxRow",
    "claim_due",
    "defer",
    "enqueue",
    "fail",
    "mark_sent",
    "notify_cursor",
    "outbox_rows",
    "outbox_summary",
    "request_row",
    "store_now_ms",
]

OutboxStatus = Literal["pending", "sent", "failed"]
_COLS = (
    "id, dedup_key, channel, kind, target_id, run_id, event_id, audit_seq, notice_json, event_json, status, "
    "attempts, next_at_ms, lease_owner, lease_until_ms, last_error, receipt_json, created_at_ms, sent_at_ms"
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutboxItem:
    """A notice to enqueue for one channel."""

    dedup_key: str
    channel: str
    kind: str
    target_id: str
    run_id: str
    event_id: str
    audit_seq: int
    notice: Mapping[str, Any]
    event_json: Mapping[str, Any]


@dataclasses.dataclass(frozen=True, kw_only=True)
class OutboxRow:
    """One outbox row as stored."""

    id: int
    dedup_key: str
    channel: str
    kind: str
    target_id: str
    run_id: str
    event_id: str
    audit_seq: int
    notice: dict[str, Any]
    event_json: dict[str, Any]
    status: OutboxStatus
    attempts: int
    next_at_ms: int
    lease_owner: str
    lease_until_ms: int
    last_error: str
    receipt: dict[str, Any]
    created_at_ms: int
    sent_at_ms: int

    def failure(self) -> dict[str, Any]:
        """The row as a failed delivery is shown (``goldfive notify status --json``, ``GET /api/notifications``)."""
        return {
            "id": self.id,
            "channel": self.channel,
            "kind": self.kind,
            "target_id": self.target_id,
            "run_id": self.run_id,
            "attempts": self.attempts,
            "error": self.last_error,
            "at_ms": self.next_at_ms or self.created_at_ms,
        }


def _row(r: Sequence[Any]) -> OutboxRow:
    return OutboxRow(
        id=int(r[0]),
        dedup_key=r[1],
        channel=r[2],
        kind=r[3],
        target_id=r[4],
        run_id=r[5],
        event_id=r[6],
        audit_seq=int(r[7]),
        notice=json.loads(r[8]),
        event_json=json.loads(r[9]),
        status=r[10],
        attempts=int(r[11]),
        next_at_ms=int(r[12]),
        lease_owner=r[13],
        lease_until_ms=int(r[14]),
        last_error=r[15],
        receipt=json.loads(r[16] or "{}"),
        created_at_ms=int(r[17]),
        sent_at_ms=int(r[18]),
    )


def store_now_ms(store: SqlStore) -> int:
    """The store's clock in ms: PostgreSQL's for a shared database, this host's for SQLite (one host)."""
    if store.db.placeholder == "?":
        return now_ms()
    with store.db.guard("reading the database clock"):
        row = store.db.execute(
            store.db.conn(), "SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint"
        ).fetchone()
    return int(row[0])


def notify_cursor(store: SqlStore, *, start_at: int) -> int:
    """The last audit seq scanned for notices; the first caller sets it to ``start_at``."""
    with store.db.guard("reading the notification cursor"):
        conn = store.db.conn()
        with store.db.transaction(conn):
            store.db.execute(
                conn, "INSERT INTO gf_notify_cursor (id, seq) VALUES (1, ?) ON CONFLICT (id) DO NOTHING", (start_at,)
            )
            row = store.db.execute(conn, "SELECT seq FROM gf_notify_cursor WHERE id = 1").fetchone()
    return int(row[0])


def enqueue(store: SqlStore, items: Sequence[OutboxItem], *, scanned_to: int) -> int:
    """Insert the notices not already there and move the cursor to ``scanned_to``; returns how many were new."""
    created = now_ms()
    added = 0
    with store.db.guard(f"enqueueing {len(items)} notifications"):
        conn = store.db.conn()
        with store.db.transaction(conn):
            for item in items:
                cur = store.db.execute(
                    conn,
                    f"INSERT INTO gf_outbox ({_COLS.split(', ', 1)[1]}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, 0, '', 0, '', '{}', ?, 0) "
                    "ON CONFLICT (dedup_key) DO NOTHING",
                    (
                        item.dedup_key,
                        item.channel,
                        item.kind,
                        item.target_id,
                        item.run_id,
                        item.event_id,
                        item.audit_seq,
                        json.dumps(dict(item.notice), sort_keys=True),
                        json.dumps(dict(item.event_json), sort_keys=True),
                        created,
                    ),
                )
                added += max(cur.rowcount, 0)
            store.db.execute(
                conn, "UPDATE gf_notify_cursor SET seq = ? WHERE id = 1 AND seq < ?", (scanned_to, scanned_to)
            )
    return added


def claim_due(store: SqlStore, *, owner: str, lease_ms: int, limit: int = 50) -> list[OutboxRow]:
    """Claim up to ``limit`` due rows for ``owner``; a row is claimed by exactly one caller."""
    with store.db.guard("claiming notifications"):
        conn = store.db.conn()
        now = store_now_ms(store)
        ids = [
            int(r[0])
            for r in store.db.execute(
                conn,
                "SELECT id FROM gf_outbox WHERE status = 'pending' AND next_at_ms <= ? AND lease_until_ms < ? "
                "ORDER BY id LIMIT ?",
                (now, now, limit),
            ).fetchall()
        ]
        claimed: list[OutboxRow] = []
        for row_id in ids:
            with store.db.transaction(conn):
                cur = store.db.execute(
                    conn,
                    "UPDATE gf_outbox SET lease_owner = ?, lease_until_ms = ? "
                    "WHERE id = ? AND status = 'pending' AND lease_until_ms < ?",
                    (owner, now + lease_ms, row_id, now),
                )
                if cur.rowcount == 1:
                    row = store.db.execute(conn, f"SELECT {_COLS} FROM gf_outbox WHERE id = ?", (row_id,)).fetchone()
                    claimed.append(_row(row))
        return claimed


def _settle(store: SqlStore, what: str, sql: str, params: Sequence[Any]) -> bool:
    with store.db.guard(what):
        conn = store.db.conn()
        with store.db.transaction(conn):
            return bool(store.db.execute(conn, sql, params).rowcount == 1)


def mark_sent(store: SqlStore, row_id: int, *, owner: str, receipt: Mapping[str, Any]) -> bool:
    """Record a delivery (only by the claim's owner)."""
    return _settle(
        store,
        "recording a sent notification",
        "UPDATE gf_outbox SET status = 'sent', attempts = attempts + 1, receipt_json = ?, sent_at_ms = ?, "
        "last_error = '', lease_until_ms = 0 WHERE id = ? AND lease_owner = ? AND status = 'pending'",
        (json.dumps(dict(receipt), sort_keys=True), now_ms(), row_id, owner),
    )


def fail(store: SqlStore, row_id: int, *, owner: str, error: str, retry_at_ms: int | None) -> bool:
    """Record a failed try: retried at ``retry_at_ms``, or marked failed for good when it is None."""
    status = "pending" if retry_at_ms is not None else "failed"
    return _settle(
        store,
        "recording a failed notification",
        "UPDATE gf_outbox SET status = ?, attempts = attempts + 1, next_at_ms = ?, last_error = ?, "
        "lease_until_ms = 0 WHERE id = ? AND lease_owner = ? AND status = 'pending'",
        (status, retry_at_ms or 0, error[:500], row_id, owner),
    )


def defer(store: SqlStore, row_id: int, *, owner: str, until_ms: int) -> bool:
    """Put a claimed row back without counting a try (a follow-up whose request is not sent yet)."""
    return _settle(
        store,
        "deferring a notification",
        "UPDATE gf_outbox SET next_at_ms = ?, lease_until_ms = 0 "
        "WHERE id = ? AND lease_owner = ? AND status = 'pending'",
        (until_ms, row_id, owner),
    )


def request_row(store: SqlStore, *, target_id: str, run_id: str, channel: str) -> OutboxRow | None:
    """The request notice sent (or being sent) for a target on a channel: a follow-up answers it."""
    with store.db.guard("reading the outbox"):
        row = store.db.execute(
            store.db.conn(),
            f"SELECT {_COLS} FROM gf_outbox WHERE target_id = ? AND run_id = ? AND channel = ? "
            "AND kind = 'approval_requested' ORDER BY id DESC LIMIT 1",
            (target_id, run_id, channel),
        ).fetchone()
    return _row(row) if row else None


def outbox_rows(store: SqlStore, *, status: OutboxStatus | None = None, limit: int = 100) -> list[OutboxRow]:
    """Outbox rows, newest first (optionally of one status)."""
    where, params = ("WHERE status = ?", (status,)) if status else ("", ())
    with store.db.guard("reading the outbox"):
        rows = store.db.execute(
            store.db.conn(), f"SELECT {_COLS} FROM gf_outbox {where} ORDER BY id DESC LIMIT ?", (*params, limit)
        ).fetchall()
    return [_row(r) for r in rows]


def outbox_summary(store: SqlStore) -> dict[str, dict[str, int]]:
    """``{channel: {"pending": n, "sent": n, "failed": n}}``."""
    with store.db.guard("reading the outbox"):
        rows = store.db.execute(
            store.db.conn(), "SELECT channel, status, COUNT(*) FROM gf_outbox GROUP BY channel, status ORDER BY channel"
        ).fetchall()
    summary: dict[str, dict[str, int]] = {}
    for channel, status, count in rows:
        summary.setdefault(channel, {"pending": 0, "sent": 0, "failed": 0})[status] = int(count)
    return summary
