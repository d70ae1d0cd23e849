"""The audit hash chain: each row stores ``sha256(prev_hash + canonical bytes of the event)``.

Editing, deleting or reordering a row breaks the chain from that row on; the
chain head (last seq and hash) is kept in its own row so a truncated tail is
detected too. :func:`verify_chain` walks the rows and names every break.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ..pb.v1 import events_pb2
from .base import AuditReport, AuditRow

__all__ = ["GENESIS_HASH", "canonical_event_bytes", "chain_hash", "verify_chain"]

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first row."""

_MAX_PROBLEMS = 20


def canonical_event_bytes(event: events_pb2.Event) -> bytes:
    """The bytes the chain hashes: deterministic protobuf serialization of the event."""
    return event.SerializeToString(deterministic=True)


def chain_hash(prev_hash: str, body: bytes) -> str:
    """The hash of one row given the previous row's hash."""
    return hashlib.sha256(prev_hash.encode("ascii") + body).hexdigest()


def verify_chain(rows: Iterable[AuditRow], *, head_seq: int, head_hash: str) -> AuditReport:
    """Check every row's link and hash, and that the last row is the recorded head."""
    problems: list[str] = []
    first_bad: int | None = None
    prev = GENESIS_HASH
    count = 0
    last_seq = 0

    def problem(seq: int, text: str) -> None:
        nonlocal first_bad
        if first_bad is None:
            first_bad = seq
        if len(problems) < _MAX_PROBLEMS:
            problems.append(text)

    for row in rows:
        count += 1
        last_seq = row.seq
        if row.prev_hash != prev:
            problem(row.seq, f"row {row.seq}: prev_hash {row.prev_hash[:12]}… does not match row before ({prev[:12]}…)")
        expected = chain_hash(row.prev_hash, row.body)
        if row.hash != expected:
            problem(row.seq, f"row {row.seq} ({row.kind} of run {row.run_id}): content does not match its hash")
        prev = row.hash
    if count and (last_seq != head_seq or prev != head_hash):
        problem(last_seq, f"the chain ends at row {last_seq} but the recorded head is row {head_seq}: rows are missing")
    if not count and head_seq:
        problem(0, f"the audit log is empty but the recorded head is row {head_seq}: rows are missing")
    return AuditReport(ok=not problems, rows=count, head_hash=prev, problems=tuple(problems), first_bad_seq=first_bad)
