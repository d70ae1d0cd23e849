"""What led to a request: the context an approver reads beside it, derived from the run's own record.

From the audit log of the request's run: what the person asked the agent (the latest ``user_text`` step before
the request, else the run's ``RunStarted.input``), who started the run and whom its host says it serves, the
last few steps before the request (``RunStep`` events: model text, tool calls and results, each already clipped
when recorded), the rule that asked and why, and a link to the whole run. A host that records nothing says so
(:data:`NO_CONTEXT`). The inbox, ``GET /api/approvals`` and ``goldfive show`` all show this one shape.

Everything here is an agent's or a model's text: bounded in size, and shown inert by whoever renders it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from google.protobuf.message import DecodeError

from .._util import shorten
from ..pb.v1 import events_pb2
from ..policy import PolicyAuthority
from ..steps import StepKind
from .base import ApprovalRow, AuditRow, Store

__all__ = ["INPUT_LIMIT", "MAX_STEPS", "NO_CONTEXT", "NO_STEPS", "RunRecord", "approval_context"]

MAX_STEPS = 5
"""Steps shown before a request, at most (the newest)."""
INPUT_LIMIT = 1000
"""Characters shown of what the person asked."""
NO_CONTEXT = "no context from this host"
"""The note of a request whose run's host recorded neither an input nor any step."""
NO_STEPS = "no earlier steps from this host: it records the run's input only"
"""The note of a request whose host records no steps (a callable agent: it sees no model)."""

_SCAN = 4 * MAX_STEPS + 1  # steps read back from the request: the gated call's own, results, the last prompt
_ASKS = 200  # requests of the run read back to find this one's place on the record


def approval_context(
    store: Store,
    row: ApprovalRow,
    *,
    rules: PolicyAuthority | None = None,
    runs: dict[str, RunRecord] | None = None,
) -> dict[str, Any]:
    """The context of the request ``row`` (``rules``: the deciding side's policy, to say what its rule says).

    ``runs``: what was read of each run's record for earlier rows of a list (run id → :class:`RunRecord`),
    read once per run and filled in here.
    """
    record = (runs or {}).get(row.run_id) or RunRecord.read(store, row.run_id)
    if runs is not None:
        runs[row.run_id] = record
    started = record.started
    before = record.asked_at(row)
    found = (
        _steps(store.audit_rows_of_kind(("run_step",), run_id=row.run_id, before_seq=before, limit=_SCAN))
        if before
        else []  # not among the run's latest requests: which steps came before it is not looked for
    )
    asked = next((s for s in reversed(found) if s.kind == StepKind.USER_TEXT), None)
    steps = [s for s in found if s.kind != StepKind.USER_TEXT and s.call_id != row.target_id][-MAX_STEPS:]
    named = {s.call_id: s.name for s in found if s.kind == StepKind.TOOL_CALL and s.call_id}  # a result's tool
    text = asked.text if asked is not None else (started.input if started is not None else "")
    records = started is not None and started.records_steps
    note = ""
    if not text and not steps:
        note = NO_CONTEXT
    elif not records and not steps:
        note = NO_STEPS
    return {
        "input": shorten(text, INPUT_LIMIT),
        "adapter": started.adapter if started is not None else "",
        "agent": shorten(row.metadata.get("agent_name", ""), 200),
        "started_by": started.started_by if started is not None else "",
        "on_behalf_of": (started.on_behalf_of if started is not None else "") or row.metadata.get("mcp_client", ""),
        "steps": [
            {"kind": s.kind, "name": s.name or named.get(s.call_id, ""), "text": s.text, "call_id": s.call_id}
            for s in steps
        ],
        "records_steps": records,
        "note": note,
        **_why(row, rules),
        "run_link": f"#/runs/{quote(row.run_id, safe='')}",
    }


def _event(row: AuditRow) -> events_pb2.Event | None:
    try:
        return row.event()
    except DecodeError:  # a body that no longer parses: audit verify reports it; here it shows nothing
        return None


class RunRecord:
    """What a run's record says for the context of its requests: its ``RunStarted``, and where each request is."""

    __slots__ = ("asks", "started")

    def __init__(self, started: events_pb2.RunStarted | None, asks: list[tuple[str, str, int]]) -> None:
        self.started = started
        self.asks = asks
        """(target id, request id, audit seq) of the run's latest requests, newest first."""

    @classmethod
    def read(cls, store: Store, run_id: str) -> RunRecord:
        rows = store.audit_rows_of_kind(("run_started",), run_id=run_id, limit=1)
        event = _event(rows[0]) if rows else None
        asks = []
        for audit in store.audit_rows_of_kind(("approval_requested",), run_id=run_id, limit=_ASKS):
            asked = _event(audit)
            if asked is not None:
                asks.append((asked.approval_requested.target_id, asked.approval_requested.request_id, audit.seq))
        return cls(event.run_started if event is not None else None, asks)

    def asked_at(self, row: ApprovalRow) -> int:
        """The audit seq of ``row``'s ``approval_requested`` (0 when not among the run's latest requests)."""
        for target, request, seq in self.asks:
            if target == row.target_id and (not row.request_id or request == row.request_id):
                return seq
        return 0


def _steps(rows: Sequence[AuditRow]) -> list[events_pb2.RunStep]:
    """The steps of ``rows`` (newest first) in the order they happened."""
    events = (_event(r) for r in reversed(rows))
    return [e.run_step for e in events if e is not None]


_SAYS = {"deny": "denies this call", "allow": "allows this call without a person (the agent asked anyway)"}


def _why(row: ApprovalRow, rules: PolicyAuthority | None) -> dict[str, str]:
    # The rule that governs it: with the deciding side's policy, its own for the call (not the one the agent named).
    judged = (rules if rules is not None else PolicyAuthority()).judge(row)
    rule = judged.rule
    if rule:
        policy = rules.policy if rules is not None else None
        found = next((r for r in policy.rules if r.name == rule), None) if policy is not None else None
        when = f" when {found.when}" if found is not None and found.when else ""
        says = _SAYS.get(judged.action, "asks a person")
        return {"rule": rule, "why": shorten(f"the rule {rule!r} {says}{when}", 400)}
    if row.kind == "task":
        return {"rule": "", "why": "the agent asked for approval of its task (report_awaiting_approval)"}
    if row.kind == "input":
        return {"rule": "", "why": "a tool's server asks a person for input while it runs (elicitation)"}
    return {"rule": "", "why": "the tool asks for confirmation before it runs"}
