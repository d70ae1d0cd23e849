"""The JSON shapes of approval records, runs and in-doubt calls, one definition for every reader.

``goldfive serve``'s API and inbox, the ``goldfive`` command against the database and the same command
against a server (``--url``) all show these, so a script reading ``--json`` sees the same object
whichever way it reached the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from .._util import now_ms
from ..approvals import DECIDED_STATUSES, ApprovalStatus
from ..convert import timestamp_to_ms
from ..elicitation import form_from_metadata
from ..pb.v1 import events_pb2
from ..policy import Judgment, PolicyAuthority, format_duration
from ..review import review_json
from .base import ApprovalRow, ExecutionState, RunRow, Store
from .context import RunRecord, approval_context
from .liveness import DETACHED_LIVENESS, RunLiveness, judge_liveness
from .sql.ledger import LATE_FINISH, RELEASED

__all__ = [
    "InboxState",
    "inbox_state",
    "approval_json",
    "approvals_json",
    "cli_approval",
    "execution_fields",
    "in_doubt_json",
    "json_or_none",
    "pause_json",
    "policy_json",
    "run_json",
]


class InboxState(StrEnum):
    """Where an approval stands for a person: the ``state`` of :func:`approval_json` (the inbox's tabs)."""

    PENDING = "pending"
    """Open, and a process waits for the decision (or a parked run resumes by itself when decided)."""
    DECIDED = "decided"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    """Withdrawn before a decision, superseded by a new request, or ended with its run."""
    ORPHANED = "orphaned"
    """Open, but no process waits for it any more (its run's process is gone)."""


def inbox_state(row: ApprovalRow, *, liveness: RunLiveness) -> InboxState:
    """Where ``row`` stands for a person, given its run's liveness."""
    if row.open:
        # A run parked by detach_after still waits: it resumes by itself when decided.
        return InboxState.PENDING if liveness.waits else InboxState.ORPHANED
    if row.status in DECIDED_STATUSES:
        return InboxState.DECIDED
    return InboxState.EXPIRED if row.status is ApprovalStatus.EXPIRED else InboxState.CANCELLED


def json_or_none(text: str) -> Any:
    """The parsed JSON of a stored text, or None when empty or not JSON (nested too deep included: the text
    came from an agent, and the raw ``*_json`` field beside it still shows it)."""
    if not text:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def approval_json(
    row: ApprovalRow, *, liveness: RunLiveness | str, rules: PolicyAuthority | None = None
) -> dict[str, Any]:
    """The JSON shape of one approval record (the inbox renders these); ``liveness``: its run's.

    ``rules``: the deciding side's authority (``goldfive serve --policy``); with a policy of its own, ``rule``,
    ``policy`` and ``expires_at_ms`` show the rule it judged the call by (the one enforced), not the one the agent
    named (that stays in ``metadata`` and ``policy.requested_rule``).
    """
    judged = (rules if rules is not None else PolicyAuthority()).judge(row)
    policy = policy_json(row, judged)
    run = liveness if isinstance(liveness, RunLiveness) else RunLiveness.of_words(liveness)
    state = inbox_state(row, liveness=run)
    return {
        "id": row.id,
        "target_id": row.target_id,
        "run_id": row.run_id,
        "session_id": row.session_id,
        "kind": row.kind,
        "agent": row.metadata.get("agent_name", ""),
        "prompt": row.prompt,
        "task_id": row.task_id,
        "tool_name": row.tool_name,
        "args": json_or_none(row.args_json),
        "args_json": row.args_json,
        "args_digest": row.args_digest,
        # An approver of a quorum edited the arguments: args/args_digest above are the edited ones on the table
        # (read and vote on those); the call's own stay here so the change is reviewable. None/"" otherwise.
        "original_args": json_or_none(row.original_args_json),
        "original_args_digest": row.original_args_digest,
        "original_args_json": row.original_args_json,
        "metadata": dict(row.metadata),
        "form": form_from_metadata(row.metadata) if row.kind == "input" else None,
        "state": state.value,
        "status": row.status,
        "orphaned_reason": "" if state is not InboxState.ORPHANED else f"run {row.run_id} is not running: {run.reason}",
        "liveness": run.reason,
        "requested_at_ms": row.requested_at_ms,
        "expires_at_ms": _expires_at(row, policy),
        "timeout_ms": row.timeout_ms,
        "decision": row.decision,
        "decided_by": row.decided_by,
        "decided_at_ms": row.decided_at_ms,
        "decided_via": row.decided_via,
        "decided_channel": row.decided_channel,
        "signed": bool(row.decision_sig),
        # The server's Ed25519 signature over the decision (hex); `goldfive audit verify` checks it.
        "decision_sig": row.decision_sig,
        "detail": row.detail,
        "edited_args": json_or_none(row.edited_args_json),
        "edited_args_json": row.edited_args_json,
        "rule": judged.rule or None,
        "policy": policy,
        "quorum_progress": row.quorum_progress,
        # What the rule's reviewer said before a person was asked (None: no reviewer, or shadow mode).
        "review": review_json(row.metadata, rules=rules, rule=judged.rule),
        # This request's own identity (a re-ask of the target is a new request); decisions name it.
        "request_id": row.request_id,
    }


def policy_json(row: ApprovalRow, judged: Judgment) -> dict[str, Any] | None:
    """What the rule that governs ``row`` says (who may answer, how many, escalation, expiry, grants offered); None
    when no rule does.

    ``judged`` is :meth:`PolicyAuthority.judge` of ``row``: with a policy on the deciding side (``serve --policy``)
    its own rule for the call (``source`` ``"server"``), else the ``policy_*`` fields the agent wrote (``source``
    ``"request"``). ``requested_rule`` is the rule the request names; ``disagrees`` says the server's rule is another
    one (or the same name with other terms); ``note`` says why, for a person. ``error``: why no decision may be
    taken, or why the agent's policy asked (``policy_error``).
    """
    if not judged.rule and not judged.refusal and judged.source == "request":
        return None
    ask = judged.ask
    escalate = ask.escalate if ask is not None else None
    expires_ms = ask.expires_ms if ask is not None else None
    requested_at_ms = row.requested_at_ms
    return {
        # Nobody answered within escalate.after: the escalation group may answer now too.
        "escalated": bool(escalate and requested_at_ms and now_ms() >= requested_at_ms + escalate.after_ms),
        "rule": judged.rule,
        "source": judged.source,
        "action": judged.action,
        "requested_rule": judged.requested_rule,
        "disagrees": judged.disagrees,
        "note": judged.note,
        "approvers": list(ask.approvers) if ask else [],
        "quorum": ask.quorum if ask else 1,
        "barred": list(ask.barred) if ask else [],
        "escalate_after": format_duration(escalate.after_ms) if escalate else "",
        "escalate_to": ",".join(escalate.to) if escalate else "",
        "expires": format_duration(expires_ms) if expires_ms else "",
        "expires_at_ms": requested_at_ms + expires_ms if expires_ms and requested_at_ms else 0,
        # What an approver may extend an approval to, in the words they read before confirming: only what the
        # governing rule offers one approver (with serve --policy, the server's own rule), what a decision may ask.
        "grants": [{"scope": g.text(), "label": g.label()} for g in judged.grants],
        "error": judged.refusal or row.metadata.get("policy_error", ""),
        # What the governing rule lets anyone decide: ["approve", "reject"]; ["reject"] when the server's rule denies
        # the call; [] when it could not judge it. The inbox offers no button the server would refuse (why: error).
        "decisions": list(judged.decisions),
    }


def _expires_at(row: ApprovalRow, policy: Mapping[str, Any] | None) -> int:
    """When the request ends: its wait's end, or its rule's ``expires`` when that comes first."""
    by_rule = int(policy["expires_at_ms"]) if policy else 0
    if by_rule and (not row.expires_at_ms or by_rule < row.expires_at_ms):
        return by_rule
    return row.expires_at_ms


def run_json(store: Store, run: RunRow, *, now: int | None = None) -> dict[str, Any]:
    """The JSON shape of one run; liveness on the store's clock (``now`` = ``store.clock_ms()`` read once for a
    list, else read here)."""
    stale = store.stale_after_ms
    liveness = store.liveness_of(run) if now is None else judge_liveness(run, stale_after_ms=stale, now=now)
    return {
        "run_id": run.run_id,
        "session_id": run.session_id,
        "adapter": run.adapter,
        "pid": run.pid,
        "host": run.host,
        "status": run.status,
        "live": liveness.live,
        "liveness": liveness.reason,
        "started_at_ms": run.started_at_ms,
        "heartbeat_at_ms": run.heartbeat_at_ms,
        "ended_at_ms": run.ended_at_ms,
        # A live run waiting for RESUME / STEER (paused by a person, or escalated by the ladder); None otherwise.
        "paused": pause_json(store.pause_of(run.run_id)) if liveness.live else None,
    }


def pause_json(pause: events_pb2.RunPaused | None) -> dict[str, Any] | None:
    """Who paused a run and why (an escalation names its drift), from its standing ``run_paused`` event."""
    if pause is None:
        return None
    return {
        "by": pause.paused_by,
        "channel": pause.channel,
        "reason": pause.reason,
        "escalated": pause.escalated,
        "drift_kind": pause.drift_kind,
        "deadline_at_ms": timestamp_to_ms(pause.deadline_at) if pause.HasField("deadline_at") else 0,
    }


def approvals_json(
    store: Store,
    rows: Sequence[ApprovalRow],
    *,
    known: Mapping[str, RunLiveness] | None = None,
    rules: PolicyAuthority | None = None,
    context: bool = False,
) -> list[dict[str, Any]]:
    """:func:`approval_json` of each row (``rules`` as there), its run's liveness from ``known`` (run id →
    liveness) or read once per run on the store's clock; ``context``: with what led to each request
    (:func:`~goldfive_core.store.context.approval_context`, a few reads of its run's record each)."""
    liveness = dict(known or {})
    missing = {row.run_id for row in rows} - liveness.keys()
    if missing:
        now = store.clock_ms()
        for run_id in missing:
            liveness[run_id] = judge_liveness(store.run(run_id), stale_after_ms=store.stale_after_ms, now=now)
    items = [approval_json(row, liveness=liveness[row.run_id], rules=rules) for row in rows]
    if context:
        runs: dict[str, RunRecord] = {}  # each run's record read once for the list
        for item, row in zip(items, rows, strict=True):
            item["context"] = approval_context(store, row, rules=rules, runs=runs)
    return items


def cli_approval(item: Mapping[str, Any]) -> dict[str, Any]:
    """An :func:`approval_json` object as the ``goldfive`` command shows it: ``status`` says whether a person
    can still help (``detached``: a parked run resumes when decided; ``orphaned``: no process waits)."""
    shown = dict(item)
    if item["state"] == InboxState.ORPHANED:
        shown["status"] = InboxState.ORPHANED.value
    elif item["state"] == InboxState.PENDING and item.get("liveness") == DETACHED_LIVENESS:
        shown["status"] = "detached"
        shown["orphaned_reason"] = f"run {item['run_id']} is {DETACHED_LIVENESS}"
    return shown


def in_doubt_json(store: Store) -> list[dict[str, Any]]:
    """Approved calls that started and whose process stopped before recording a result, newest first."""
    doubts = []
    executing = store.executions(state=ExecutionState.EXECUTING)
    now = store.clock_ms() if executing else 0
    for ex in executing:
        liveness = judge_liveness(store.run(ex.run_id), stale_after_ms=store.stale_after_ms, now=now)
        if liveness.live:
            continue
        shown = liveness.reason
        doubts.append(
            {"target_id": ex.target_id, "run_id": ex.run_id, "started_at_ms": ex.started_at_ms, "liveness": shown}
        )
    return doubts


def execution_fields(store: Store, target_id: str, run_id: str) -> dict[str, Any]:
    """What ``show`` says of a call's execution: the ledger's state and start, and, when its body finished after a
    person resolved it as not run (on the audit log, :data:`~goldfive_core.store.sql.ledger.LATE_FINISH`), when;
    ``released`` when the run gave back its claim without starting the body
    (:data:`~goldfive_core.store.sql.ledger.RELEASED`)."""
    ex = store.execution(target_id, run_id=run_id)
    data: dict[str, Any] = {
        "execution": ex.state.value if ex is not None else "none",
        "execution_started_at_ms": ex.started_at_ms if ex is not None else 0,
    }
    ledger = [
        event
        for event in (
            r.event() for r in store.audit_rows(run_id=run_id, limit=1_000_000) if r.kind == "execution_recorded"
        )
        if event.execution_recorded.target_id == target_id
    ]
    late = [event for event in ledger if event.execution_recorded.state == LATE_FINISH]
    if late:
        data["finished_after_resolved_at_ms"] = timestamp_to_ms(late[-1].emitted_at)
    if ex is None and ledger and ledger[-1].execution_recorded.state == RELEASED:
        data["execution"] = "released"  # claimed by the approval's ack, given back unstarted: a re-ask may run it
        data["execution_released_at_ms"] = timestamp_to_ms(ledger[-1].emitted_at)
    return data
