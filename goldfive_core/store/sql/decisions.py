"""The one write of an approval's decision, and which record a decision, vote or ack may write.

Shared by the roles that decide a record: a run's ApprovalGranted/Rejected event (:mod:`.apply`), an applied
APPROVE/REJECT's ack (:mod:`.inbox`) and a decision recorded while the run is down (:mod:`.approvals`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...approvals import ApprovalStatus, sources
from ...control import ControlAck
from ..base import OPEN_STATUSES
from .db import SqlDb

__all__ = ["OPEN_MARKS", "acked_request", "decided_at", "marks", "request_where", "sources_of", "write_decision"]

OPEN_MARKS = ", ".join("?" for _ in OPEN_STATUSES)
"""Placeholders for :data:`~goldfive_core.store.base.OPEN_STATUSES` in ``status IN (...)``."""


def sources_of(new: ApprovalStatus) -> tuple[str, ...]:
    """The stored statuses a record may move to ``new`` from (the core's transition table)."""
    return tuple(s.value for s in sources(new))


def marks(new: ApprovalStatus) -> str:
    """Placeholders for :func:`sources_of` ``new``."""
    return ", ".join("?" for _ in sources(new))


def request_where(run_id: str, target_id: str, request_id: str) -> tuple[str, tuple[str, ...]]:
    """The record a decision, vote or ack of ``request_id`` may write: that request only, never a re-ask of it.

    A decision that names no request (a writer from before requests had ids) writes the target's record.
    """
    if request_id:
        return "run_id = ? AND target_id = ? AND request_id = ?", (run_id, target_id, request_id)
    return "run_id = ? AND target_id = ?", (run_id, target_id)


def acked_request(ack: ControlAck, payload: Mapping[str, Any]) -> str:
    """The request an applied decision resolved: the agent's word in its ack, else the decision's own."""
    for source in (ack.data, payload):
        value = source.get("request_id") if isinstance(source, Mapping) else None
        if isinstance(value, str) and value:
            return value
    return ""


def decided_at(ack: ControlAck) -> int:
    """When an applied decision's ack says its ApprovalGranted/Rejected was emitted (the time audit verify checks
    the record against), else the ack's own time (an agent from before acks carried it)."""
    value = ack.data.get("decided_at_ms") if isinstance(ack.data, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**62:
        return value
    return ack.acked_at_ms


def write_decision(
    db: SqlDb,
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
    cur = db.execute(
        conn,
        "UPDATE gf_approvals SET status = ?, decision = ?, detail = ?, decided_by = ?, decided_at_ms = ?, "
        "edited_args_json = ?, decided_via = ?, decided_channel = ?, decision_sig = ? "
        f"WHERE {where} AND status IN ({marks(new)})",
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
            *sources_of(new),
        ),
    )
    return int(cur.rowcount)
