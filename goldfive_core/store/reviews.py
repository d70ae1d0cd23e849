"""The reviewer verdicts on the audit log, each with the person's decision on the same call (``review stats``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..approvals import DECIDED_STATUSES
from ..review import ReviewedCall
from .base import Store

__all__ = ["reviewed_calls"]

_PAGE = 1000


def reviewed_calls(store: Store, *, run_id: str | None = None) -> Iterator[ReviewedCall]:
    """Every reviewer verdict on the audit log, oldest first, with the person's decision on the same call."""
    after = 0
    while True:
        rows = store.audit_rows(after_seq=after, run_id=run_id, limit=_PAGE)
        for row in rows:
            if row.kind == "reviewer_verdict":
                yield _with_person(store, row.run_id, row.event().reviewer_verdict)
        if len(rows) < _PAGE:
            return
        after = rows[-1].seq


def _with_person(store: Store, run_id: str, verdict: Any) -> ReviewedCall:
    decided = next(
        (r for r in store.approvals_for(verdict.call_id) if r.run_id == run_id and r.status in DECIDED_STATUSES),
        None,
    )
    person = decided.decision if decided is not None and decided.decision in ("approve", "reject") else ""
    return ReviewedCall(
        run_id=run_id,
        call_id=verdict.call_id,
        tool_name=verdict.tool_name,
        rule=verdict.rule,
        reviewer=verdict.decided_by,
        verdict=verdict.verdict,
        reason=verdict.reason,
        mode=verdict.mode,
        outcome=verdict.outcome,
        error=verdict.error,
        person=person,  # type: ignore[arg-type]  # checked just above
        decided_by=decided.decided_by if decided is not None and person else "",
        detail=decided.detail if decided is not None and person else "",
    )
