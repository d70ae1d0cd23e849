"""What each event appended to the audit chain changes in the records beside it (runs, approvals, grants)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..._util import canonical_json, now_ms
from ...approvals import ApprovalStatus
from ...convert import timestamp_to_ms
from ...events import payload_name
from ...pb.v1 import events_pb2, types_pb2
from .._schema import APPROVAL_COLS, RUN_COLS
from .db import SqlDb
from .decisions import marks, request_where, sources_of, write_decision

__all__ = ["apply_event"]


_Apply = Callable[[SqlDb, Any, events_pb2.Event, int, int, str], None]


def apply_event(db: SqlDb, conn: Any, event: events_pb2.Event, *, pid: int, host: str) -> None:
    """What an appended event changes in the records: runs, approvals and grants (in its transaction)."""
    kind = payload_name(event)
    apply = _APPLY.get(kind)
    if apply is not None:
        apply(db, conn, event, timestamp_to_ms(event.emitted_at) or now_ms(), pid, host)


def _run_started(db: SqlDb, conn: Any, event: events_pb2.Event, at: int, pid: int, host: str) -> None:
    """A run (re)started in a process: it is running there."""
    db.execute(
        conn,
        f"INSERT INTO gf_runs ({RUN_COLS}) VALUES (?, ?, ?, ?, ?, 'running', ?, {db.now_expr}, 0) "
        "ON CONFLICT (run_id) DO UPDATE SET pid = excluded.pid, host = excluded.host, status = 'running', "
        "heartbeat_at_ms = excluded.heartbeat_at_ms",
        (event.run_id, event.session_id, event.run_started.adapter, pid, host, at),
    )


def _run_ended(db: SqlDb, conn: Any, event: events_pb2.Event, at: int, pid: int, host: str) -> None:
    """A run ended: finished, or detached while a parked call of it waits (``detach_after``)."""
    # A run that ended to wait for a person on a parked call (detach_after) is "detached" until resumed.
    detached = event.HasField("run_aborted") and event.run_aborted.status == types_pb2.RUN_STATUS_DETACHED
    db.execute(
        conn,
        "UPDATE gf_runs SET status = CASE WHEN ? = 1 AND EXISTS (SELECT 1 FROM gf_detached d "
        "WHERE d.run_id = gf_runs.run_id AND d.status <> 'resumed') THEN 'detached' ELSE 'finished' END, "
        "ended_at_ms = ? WHERE run_id = ?",
        (1 if detached else 0, at, event.run_id),
    )


def _approval_requested(db: SqlDb, conn: Any, event: events_pb2.Event, at: int, pid: int, host: str) -> None:
    """A request opens a record (a re-ask of the target opens it anew: a new request, not a transition)."""
    req = event.approval_requested
    meta = dict(req.metadata)
    expires = timestamp_to_ms(req.expires_at) if req.HasField("expires_at") else 0
    db.execute(
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


def _approval_decided(db: SqlDb, conn: Any, event: events_pb2.Event, at: int, pid: int, host: str) -> None:
    """A decision the run applied (usually what its ack already recorded, at this event's time; then nothing is
    written); it never overwrites one."""
    granted = event.HasField("approval_granted")
    msg = event.approval_granted if granted else event.approval_rejected
    where, params = request_where(event.run_id, msg.target_id, msg.request_id)
    if write_decision(
        db,
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
        signature=_delivered_signature(db, conn, event.run_id, msg.target_id, granted, msg.decided_by),
    ):
        return
    # The record's time is its event's: an ack from an agent that did not say it (older) has its own time, and
    # audit verify checks decided_at_ms against the chain.
    db.execute(
        conn,
        f"UPDATE gf_approvals SET decided_at_ms = ? "
        f"WHERE {where} AND decided_via = 'run' AND decision = ? AND decided_at_ms <> ?",
        (at, *params, "approve" if granted else "reject", at),
    )


def _delivered_signature(db: SqlDb, conn: Any, run_id: str, target_id: str, approved: bool, decided_by: str) -> str:
    """The server's signature of the decision the run received through the inbox, when the run's event records the
    decision before the run's ack does: the one write then carries it ("" when the decision came unsigned)."""
    rows = db.execute(
        conn,
        "SELECT payload_json FROM gf_inbox WHERE run_id = ? AND kind = ? AND status IN ('claimed', 'acked') "
        "ORDER BY id DESC LIMIT 20",
        (run_id, "APPROVE" if approved else "REJECT"),
    ).fetchall()
    for (payload_json,) in rows:
        try:
            payload = json.loads(payload_json)
        except ValueError:
            continue
        signature = payload.get("signature") if isinstance(payload, dict) else None
        if (
            payload.get("target_id") == target_id
            and payload.get("decided_by") == decided_by
            and isinstance(signature, dict)
        ):
            return canonical_json(signature)
    return ""


def _approval_timed_out(db: SqlDb, conn: Any, event: events_pb2.Event, at: int, pid: int, host: str) -> None:
    """The wait ended: the record stays open (timed out) or expires."""
    out = event.approval_timed_out
    new = ApprovalStatus.TIMED_OUT if out.still_open else ApprovalStatus.EXPIRED
    db.execute(
        conn,
        "UPDATE gf_approvals SET status = ?, detail = ? "
        f"WHERE run_id = ? AND target_id = ? AND status IN ({marks(new)})",
        (new.value, out.detail, event.run_id, out.target_id, *sources_of(new)),
    )


def _approval_voted(db: SqlDb, conn: Any, event: events_pb2.Event, at: int, pid: int, host: str) -> None:
    """One vote of a quorum: the tally."""
    # Also after the decision: the last vote's tally ("2 of 2: ana, bo") stays on the record.
    vote = event.approval_voted
    where, params = request_where(event.run_id, vote.target_id, vote.request_id)
    db.execute(conn, f"UPDATE gf_approvals SET quorum_progress = ? WHERE {where}", (vote.progress, *params))


def _grant_created(db: SqlDb, conn: Any, event: events_pb2.Event, at: int, pid: int, host: str) -> None:
    """A standing grant the run made from a person's approval."""
    g = event.grant_created
    db.execute(
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


def _approval_cancelled(db: SqlDb, conn: Any, event: events_pb2.Event, at: int, pid: int, host: str) -> None:
    """The run withdrew its request."""
    cancelled = event.approval_cancelled
    gone = ApprovalStatus.CANCELLED
    db.execute(
        conn,
        "UPDATE gf_approvals SET status = ?, detail = ? "
        f"WHERE run_id = ? AND target_id = ? AND status IN ({marks(gone)})",
        (gone.value, cancelled.reason, event.run_id, cancelled.target_id, *sources_of(gone)),
    )


_APPLY: dict[str, _Apply] = {
    "run_started": _run_started,
    "run_completed": _run_ended,
    "run_aborted": _run_ended,
    "approval_requested": _approval_requested,
    "approval_granted": _approval_decided,
    "approval_rejected": _approval_decided,
    "approval_timed_out": _approval_timed_out,
    "approval_voted": _approval_voted,
    "grant_created": _grant_created,
    "approval_cancelled": _approval_cancelled,
}
