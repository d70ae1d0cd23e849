"""The audit hash chain: each row stores ``sha256(prev_hash + canonical bytes of the event)``.

Editing, deleting or reordering a row breaks the chain from that row on; the
chain head (last seq and hash) is kept in its own row so a truncated tail is
detected too. :func:`verify_chain` walks the rows and names every break, and checks the
approval records (what ``pending`` and ``show`` print) against the events they were made from.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError

from ..approvals import ApprovalStatus, sources
from ..convert import timestamp_to_ms
from ..events import payload_name
from ..pb.v1 import events_pb2
from .base import AuditReport, AuditRow

if TYPE_CHECKING:
    from .base import ApprovalRow

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


_STORE_NOTE = "recorded in the store while the run's process was not running"
"""What ``decide_in_store`` adds to the detail of the decision event it writes."""

_Key = tuple[str, str]
_Decision = tuple[bool, "events_pb2.ApprovalGranted | events_pb2.ApprovalRejected"]


class _ApprovalHistory:
    """The latest request and its first decision per (run, target), as the chain tells them."""

    def __init__(self) -> None:
        self.requests: dict[_Key, tuple[events_pb2.Event, events_pb2.ApprovalRequested]] = {}
        self.decisions: dict[_Key, _Decision] = {}
        self.closed: dict[_Key, tuple[ApprovalStatus, str]] = {}
        """Status and detail of an undecided record, by its timeout and cancel events (the store's guards)."""

    def see(self, event: events_pb2.Event) -> None:
        kind = payload_name(event)
        if kind == "approval_requested":
            key = (event.run_id, event.approval_requested.target_id)
            self.requests[key] = (event, event.approval_requested)
            self.decisions.pop(key, None)  # asked again: a new record
            self.closed[key] = (ApprovalStatus.PENDING, "")
        elif kind == "approval_timed_out":
            out = event.approval_timed_out
            new = ApprovalStatus.TIMED_OUT if out.still_open else ApprovalStatus.EXPIRED
            self._close((event.run_id, out.target_id), new, out.detail)
        elif kind == "approval_cancelled":
            cancelled = event.approval_cancelled
            self._close((event.run_id, cancelled.target_id), ApprovalStatus.CANCELLED, cancelled.reason)
        elif kind in ("approval_granted", "approval_rejected"):
            granted = kind == "approval_granted"
            msg = event.approval_granted if granted else event.approval_rejected
            self.decisions.setdefault((event.run_id, msg.target_id), (granted, msg))  # the first one is final

    def _close(self, key: _Key, new: ApprovalStatus, detail: str) -> None:
        current = self.closed.get(key)
        if current is not None and key not in self.decisions and current[0] in sources(new):
            self.closed[key] = (new, detail)

    def check(self, records: Iterable[ApprovalRow | str]) -> list[str]:
        """``records``: every approval record, or the problem of one that could not be read."""
        problems: list[str] = []
        seen: set[_Key] = set()
        for row in records:
            if isinstance(row, str):
                problems.append(row)
                continue
            key = (row.run_id, row.target_id)
            seen.add(key)
            name = f"approval #{row.id} ({row.target_id!r} of run {row.run_id})"
            found = self.requests.get(key)
            if found is None:
                problems.append(f"{name} has no request on the audit log (inserted or edited)")
                continue
            event, req = found
            meta = dict(req.metadata)
            expires = timestamp_to_ms(req.expires_at) if req.HasField("expires_at") else 0
            shown = {
                "session_id": (row.session_id, event.session_id),
                "kind": (row.kind, req.kind),
                "prompt": (row.prompt, req.prompt),
                "task_id": (row.task_id, req.task_id),
                "tool_name": (row.tool_name, meta.get("tool_name", "")),
                # An edit in a quorum put other arguments on the table; the call's own are kept as the original.
                "args_json": (
                    row.original_args_json if row.original_args_digest else row.args_json,
                    meta.get("args_json", ""),
                ),
                "args_digest": (row.original_args_digest or row.args_digest, req.args_digest),
                "metadata": (dict(row.metadata), meta),
                "requested_at_ms": (row.requested_at_ms, timestamp_to_ms(event.emitted_at)),
                "expires_at_ms": (row.expires_at_ms, expires),
                "timeout_ms": (row.timeout_ms, req.timeout_ms),
            }
            edited = [column for column, (stored, logged) in shown.items() if stored != logged]
            if edited:
                problems.append(f"{name}: {', '.join(edited)} differs from its request on the audit log (edited)")
            problems.extend(self._check_decision(name, row, self.decisions.get(key), self.closed.get(key)))
        for run_id, target_id in self.requests.keys() - seen:
            problems.append(f"the request {target_id!r} of run {run_id} is on the audit log but its record is gone")
        return problems

    @staticmethod
    def _check_decision(
        name: str, row: ApprovalRow, logged: _Decision | None, closed: tuple[ApprovalStatus, str] | None
    ) -> list[str]:
        status = row.status.value
        if status not in ("granted", "rejected"):
            if logged is not None and status in ("pending", "timed_out"):
                return [f"{name} is {status} but the audit log has its decision (edited)"]
            want_status, want_detail = closed or (ApprovalStatus.PENDING, "")
            undecided = {
                "status": (status, want_status.value),
                "detail": (row.detail, want_detail),
                "decided_by": (row.decided_by, ""),
                "decision": (row.decision, ""),
                "edited_args_json": (row.edited_args_json, ""),
                "decided_via": (row.decided_via, ""),
                "decided_channel": (row.decided_channel, ""),
            }
            differs = [column for column, (stored, logged_value) in undecided.items() if stored != logged_value]
            if differs and logged is None:
                return [f"{name}: {', '.join(differs)} differs from what the audit log says of it (edited)"]
            return []
        if logged is None:
            return [
                f"{name} is {status} by {row.decided_by!r} but no decision for it is on the audit log "
                "(edited, or its run died before logging it)"
            ]
        granted, msg = logged
        edited_json = msg.edited_args_json if isinstance(msg, events_pb2.ApprovalGranted) else ""
        in_store = msg.detail == _STORE_NOTE or msg.detail.endswith(f" ({_STORE_NOTE})")
        details = {msg.detail, msg.detail.removesuffix(f" ({_STORE_NOTE})")}
        if msg.detail == _STORE_NOTE:
            details.add("")
        differs = [
            column
            for column, ok in (
                ("status", (status == "granted") == granted),
                ("decision", row.decision == ("approve" if granted else "reject")),
                ("decided_via", row.decided_via == ("store" if in_store else "run")),
                ("decided_channel", row.decided_channel == msg.channel),
                ("decided_by", row.decided_by == msg.decided_by),
                ("edited_args_json", _same_json(row.edited_args_json, edited_json)),
                ("detail", row.detail in details),
            )
            if not ok
        ]
        if differs:
            return [f"{name}: {', '.join(differs)} differs from its decision on the audit log (edited)"]
        return []


def _same_json(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return bool(json.loads(a or "null") == json.loads(b or "null"))
    except ValueError:
        return False


def verify_chain(
    rows: Iterable[AuditRow],
    *,
    head_seq: int | None,
    head_hash: str | None,
    approvals: Callable[[], Iterable[ApprovalRow | str]] | None = None,
) -> AuditReport:
    """Check every row's link and hash, that its columns match its hashed event, per-run sequences, and the head.

    Readers list and filter by the columns beside the body (run, kind, sequence, time), so each is
    checked against the event the chain hashes. A per-run sequence that skips numbers means events
    are missing (deleted, or dropped by a writer). ``head_seq`` None means the head row is missing.
    ``approvals`` (called after the walk) gives every approval record, each checked against its
    request and decision events: a shown column that differs, a record without a request, a request
    whose record is gone, a decision the log does not have.
    """
    problems: list[str] = []
    first_bad: int | None = None
    prev = GENESIS_HASH
    count = 0
    last_seq = 0
    next_sequence: dict[str, int] = {}
    history = _ApprovalHistory()

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
        history.see(event)
    if head_seq is None or head_hash is None:
        problem(last_seq, "the chain head row is missing (deleted): tampering; a truncated tail cannot be ruled out")
    elif count and (last_seq != head_seq or prev != head_hash):
        problem(last_seq, f"the chain ends at row {last_seq} but the recorded head is row {head_seq}: rows are missing")
    elif not count and head_seq:
        problem(0, f"the audit log is empty but the recorded head is row {head_seq}: rows are missing")
    if approvals is not None:
        for text in history.check(approvals()):
            if len(problems) < _MAX_PROBLEMS:
                problems.append(text)
    return AuditReport(ok=not problems, rows=count, head_hash=prev, problems=tuple(problems), first_bad_seq=first_bad)
