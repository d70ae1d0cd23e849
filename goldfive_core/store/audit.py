"""The audit hash chain: each row stores ``sha256(prev_hash + canonical bytes of the event)``.

Editing, deleting or reordering a row breaks the chain from that row on; the
chain head (last seq and hash) is kept in its own row so a truncated tail is
detected too. :func:`verify_chain` walks the rows and names every break.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from google.protobuf.message import DecodeError

from ..convert import timestamp_to_ms
from ..events import payload_name
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


def verify_chain(rows: Iterable[AuditRow], *, head_seq: int | None, head_hash: str | None) -> AuditReport:
    """Check every row's link and hash, that its columns match its hashed event, per-run sequences, and the head.

    Readers list and filter by the columns beside the body (run, kind, sequence, time), so each is
    checked against the event the chain hashes. A per-run sequence that skips numbers means events
    are missing (deleted, or dropped by a writer). ``head_seq`` None means the head row is missing.
    """
    problems: list[str] = []
    first_bad: int | None = None
    prev = GENESIS_HASH
    count = 0
    last_seq = 0
    next_sequence: dict[str, int] = {}

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
        event = events_pb2.Event()
        try:
            event.ParseFromString(row.body)
        except DecodeError:
            problem(row.seq, f"row {row.seq}: its body is not an event")
            continue
        shown = {
            "run_id": (row.run_id, event.run_id),
            "sequence": (row.sequence, event.sequence),
            "kind": (row.kind, payload_name(event)),
            "event_id": (row.event_id, event.event_id),
            "emitted_at_ms": (row.emitted_at_ms, timestamp_to_ms(event.emitted_at)),
        }
        edited = [name for name, (column, hashed) in shown.items() if column != hashed]
        if edited:
            problem(row.seq, f"row {row.seq}: column {', '.join(edited)} differs from the hashed event (edited)")
        want = next_sequence.get(event.run_id, 0)
        if event.sequence > want:
            missing = f"#{want}" if event.sequence == want + 1 else f"#{want}-#{event.sequence - 1}"
            problem(row.seq, f"run {event.run_id}: events {missing} are missing before row {row.seq} (a gap)")
        next_sequence[event.run_id] = max(want, event.sequence + 1)
    if head_seq is None or head_hash is None:
        problem(last_seq, "the chain head row is missing (deleted): tampering; a truncated tail cannot be ruled out")
    elif count and (last_seq != head_seq or prev != head_hash):
        problem(last_seq, f"the chain ends at row {last_seq} but the recorded head is row {head_seq}: rows are missing")
    elif not count and head_seq:
        problem(0, f"the audit log is empty but the recorded head is row {head_seq}: rows are missing")
    return AuditReport(ok=not problems, rows=count, head_hash=prev, problems=tuple(problems), first_bad_seq=first_bad)
