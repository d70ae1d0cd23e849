"""Appending to the audit chain inside a write transaction, holding the chain head's lock.

Every writer of the chain (a run's events, a crashed run's closing event, a decision recorded in the
store, a ledger change, the server's own entries) appends through :func:`appending`: the head is locked
first, rows are numbered 1, 2, 3, ... with no gaps (audit verify checks it, so a row's number cannot be
changed either), and the head is written back once at the end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ...convert import timestamp_to_ms
from ...events import payload_name
from ...pb.v1 import events_pb2
from .._storable import storable_event
from ..audit import chain_hash
from ..base import SchemaVersionError
from ..witness import note_appended
from .db import SqlDb

__all__ = ["ChainWriter", "appending", "next_sequence"]


class ChainWriter:
    """The chain's head while a transaction appends to it (made by :func:`appending`)."""

    def __init__(self, db: SqlDb, conn: Any) -> None:
        self.db = db
        self.conn = conn
        row = db.execute(conn, f"SELECT seq, hash FROM gf_chain_head WHERE id = 1{db.for_update}").fetchone()
        if row is None:  # nothing is appended to a chain whose head was deleted: the writer is told, never crashes
            raise SchemaVersionError(
                f"{db.url}: the audit chain head row is missing (deleted): nothing more is written; "
                "run goldfive audit verify"
            )
        self.seq, self.hash = int(row[0]), str(row[1])

    def append(self, event: events_pb2.Event) -> events_pb2.Event:
        """Append after the head; returns the event as it was stored (its text made storable before it is
        hashed, so the columns made from it and the chain say the same on every backend)."""
        event, body = storable_event(event)
        digest = chain_hash(self.hash, body)
        kind = payload_name(event)
        row = self.db.execute(
            self.conn,
            "INSERT INTO gf_audit (seq, run_id, sequence, kind, event_id, emitted_at_ms, body, prev_hash, hash) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq",
            (
                self.seq + 1,
                event.run_id,
                event.sequence,
                kind,
                event.event_id,
                timestamp_to_ms(event.emitted_at),
                body,
                self.hash,
                digest,
            ),
        ).fetchone()
        self.seq, self.hash = int(row[0]), digest
        note_appended(self.seq, event.event_id, kind, body)
        return event

    def next_sequence(self, run_id: str) -> int:
        """The sequence the next event of ``run_id`` takes (0 for a run with none)."""
        return next_sequence(self.db, self.conn, run_id)

    def write_head(self) -> None:
        """Record the new head (the last appended row)."""
        self.db.execute(self.conn, "UPDATE gf_chain_head SET seq = ?, hash = ? WHERE id = 1", (self.seq, self.hash))


@contextlib.contextmanager
def appending(db: SqlDb, conn: Any) -> Iterator[ChainWriter]:
    """Lock the chain's head in the caller's open transaction, append, and write the head back at the end."""
    chain = ChainWriter(db, conn)
    yield chain
    chain.write_head()


def next_sequence(db: SqlDb, conn: Any, run_id: str) -> int:
    """One past the highest sequence ``run_id`` has on the chain (0 for a run with none)."""
    last = db.execute(conn, "SELECT MAX(sequence) FROM gf_audit WHERE run_id = ?", (run_id,)).fetchone()
    return (int(last[0]) + 1) if last is not None and last[0] is not None else 0
