"""The schema (versioned migrations) and the row mappers both SQL backends share."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .._util import shorten
from ..approvals import ApprovalStatus
from .audit import GENESIS_HASH
from .base import (
    ApprovalRow,
    AuditRow,
    DetachedRow,
    DetachedStatus,
    ExecutionRow,
    ExecutionState,
    InboxRow,
    RunRow,
    StoreError,
    UserRow,
)

__all__ = [
    "APPROVAL_COLS",
    "APPROVAL_SELECT",
    "AUDIT_COLS",
    "DETACHED_COLS",
    "EXEC_COLS",
    "MIGRATIONS",
    "RUN_COLS",
    "SCHEMA_VERSION",
    "USER_COLS",
]

SCHEMA_VERSION = 15

# Migrations: (version, statements). Types are filled in per dialect: {id} an auto-increment
# primary key, {blob} bytes, {big} a 64-bit integer. Never edit a released step; add one.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            "CREATE TABLE gf_chain_head (id INTEGER PRIMARY KEY, seq {big} NOT NULL, hash TEXT NOT NULL)",
            "INSERT INTO gf_chain_head (id, seq, hash) VALUES (1, 0, '" + GENESIS_HASH + "')",
            """CREATE TABLE gf_audit (
                seq {id}, run_id TEXT NOT NULL, sequence {big} NOT NULL, kind TEXT NOT NULL,
                event_id TEXT NOT NULL, emitted_at_ms {big} NOT NULL, body {blob} NOT NULL,
                prev_hash TEXT NOT NULL, hash TEXT NOT NULL)""",
            "CREATE INDEX gf_audit_run ON gf_audit (run_id, sequence)",
            """CREATE TABLE gf_runs (
                run_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, adapter TEXT NOT NULL, pid {big} NOT NULL,
                host TEXT NOT NULL, status TEXT NOT NULL, started_at_ms {big} NOT NULL,
                heartbeat_at_ms {big} NOT NULL, ended_at_ms {big} NOT NULL)""",
            """CREATE TABLE gf_approvals (
                id {id}, run_id TEXT NOT NULL, session_id TEXT NOT NULL, target_id TEXT NOT NULL,
                kind TEXT NOT NULL, prompt TEXT NOT NULL, task_id TEXT NOT NULL, tool_name TEXT NOT NULL,
                args_json TEXT NOT NULL, args_digest TEXT NOT NULL, metadata_json TEXT NOT NULL,
                status TEXT NOT NULL, requested_at_ms {big} NOT NULL, expires_at_ms {big} NOT NULL,
                timeout_ms {big} NOT NULL, decided_at_ms {big} NOT NULL, decided_by TEXT NOT NULL,
                decision TEXT NOT NULL, detail TEXT NOT NULL, edited_args_json TEXT NOT NULL,
                decided_via TEXT NOT NULL, UNIQUE (run_id, target_id))""",
            "CREATE INDEX gf_approvals_target ON gf_approvals (target_id)",
            "CREATE INDEX gf_approvals_status ON gf_approvals (status)",
            """CREATE TABLE gf_inbox (
                id {id}, control_id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, payload_json TEXT NOT NULL,
                run_id TEXT NOT NULL, issued_at_ms {big} NOT NULL, status TEXT NOT NULL,
                claimed_by TEXT NOT NULL, claimed_at_ms {big} NOT NULL, ack_result TEXT NOT NULL,
                ack_detail TEXT NOT NULL, ack_data_json TEXT NOT NULL, acked_at_ms {big} NOT NULL)""",
            "CREATE INDEX gf_inbox_status ON gf_inbox (status, id)",
        ),
    ),
    (
        2,
        (
            # The at-most-once ledger for approved tool bodies (replay after a restart).
            """CREATE TABLE gf_executions (
                target_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, state TEXT NOT NULL,
                started_at_ms {big} NOT NULL, finished_at_ms {big} NOT NULL, result_json TEXT NOT NULL,
                pid {big} NOT NULL, host TEXT NOT NULL)""",
        ),
    ),
    (
        3,
        (
            # goldfive serve: people who log in, their web sessions, and who decided how (signed).
            """CREATE TABLE gf_users (
                name TEXT PRIMARY KEY, role TEXT NOT NULL, token_id TEXT NOT NULL UNIQUE, token_hash TEXT NOT NULL,
                disabled {big} NOT NULL, created_at_ms {big} NOT NULL, updated_at_ms {big} NOT NULL,
                failed_logins {big} NOT NULL, locked_until_ms {big} NOT NULL)""",
            """CREATE TABLE gf_web_sessions (
                id_hash TEXT PRIMARY KEY, user_name TEXT NOT NULL, csrf TEXT NOT NULL,
                created_at_ms {big} NOT NULL, expires_at_ms {big} NOT NULL)""",
            "ALTER TABLE gf_approvals ADD COLUMN decided_channel TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE gf_approvals ADD COLUMN decision_sig TEXT NOT NULL DEFAULT ''",
            "CREATE INDEX gf_approvals_expiry ON gf_approvals (expires_at_ms, id)",
        ),
    ),
    (
        4,
        # The execution ledger keys on the call id and the args digest: a reused call id with other
        # arguments is a new call (its own decision, its own execution).
        ("ALTER TABLE gf_executions ADD COLUMN args_digest TEXT NOT NULL DEFAULT ''",),
    ),
    (
        5,
        (
            # The notification outbox (goldfive serve --notify): one row per (event, channel), claimed under a
            # lease, retried with backoff; and the audit seq the notifiers have scanned up to.
            """CREATE TABLE gf_outbox (
                id {id}, dedup_key TEXT NOT NULL UNIQUE, channel TEXT NOT NULL, kind TEXT NOT NULL,
                target_id TEXT NOT NULL, run_id TEXT NOT NULL, event_id TEXT NOT NULL, audit_seq {big} NOT NULL,
                notice_json TEXT NOT NULL, event_json TEXT NOT NULL, status TEXT NOT NULL, attempts {big} NOT NULL,
                next_at_ms {big} NOT NULL, lease_owner TEXT NOT NULL, lease_until_ms {big} NOT NULL,
                last_error TEXT NOT NULL, receipt_json TEXT NOT NULL, created_at_ms {big} NOT NULL,
                sent_at_ms {big} NOT NULL)""",
            "CREATE INDEX gf_outbox_due ON gf_outbox (status, next_at_ms)",
            "CREATE INDEX gf_outbox_target ON gf_outbox (target_id, channel)",
            "CREATE TABLE gf_notify_cursor (id INTEGER PRIMARY KEY, seq {big} NOT NULL)",
        ),
    ),
    (
        6,
        (
            # Agents over HTTP (goldfive serve): which agent user owns a run (it alone may write its events and
            # read its control messages), and the inbox by run for the server's per-run delivery.
            """CREATE TABLE gf_run_owners (
                run_id TEXT PRIMARY KEY, agent TEXT NOT NULL, created_at_ms {big} NOT NULL)""",
            "CREATE INDEX gf_inbox_run ON gf_inbox (run_id, status)",
        ),
    ),
    (
        7,
        (
            # Policies: standing grants ("approve, and allow matching calls for this run / session / 1 h") as
            # records that are listed and revoked from outside the run and outlive its process; and the
            # quorum tally of a request that needs several approvers ("1 of 2: ana").
            """CREATE TABLE gf_grants (
                grant_id TEXT PRIMARY KEY, rule TEXT NOT NULL, tool TEXT NOT NULL, granted_by TEXT NOT NULL,
                scope TEXT NOT NULL, run_id TEXT NOT NULL, session_id TEXT NOT NULL, args_constraint TEXT NOT NULL,
                created_at_ms {big} NOT NULL, expires_at_ms {big} NOT NULL, target_id TEXT NOT NULL,
                description TEXT NOT NULL, channel TEXT NOT NULL, revoked_at_ms {big} NOT NULL,
                revoked_by TEXT NOT NULL, revoke_reason TEXT NOT NULL)""",
            "CREATE INDEX gf_grants_rule ON gf_grants (rule, tool)",
            "ALTER TABLE gf_approvals ADD COLUMN quorum_progress TEXT NOT NULL DEFAULT ''",
        ),
    ),
    (
        8,
        (
            # ADK invocations that ended to wait for a person (detach_after), and who is resuming each (a lease).
            """CREATE TABLE gf_detached (
                target_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, app_name TEXT NOT NULL, user_id TEXT NOT NULL,
                session_id TEXT NOT NULL, invocation_id TEXT NOT NULL, status TEXT NOT NULL,
                detached_at_ms {big} NOT NULL, claimed_by TEXT NOT NULL, lease_until_ms {big} NOT NULL,
                resumed_at_ms {big} NOT NULL, detail TEXT NOT NULL)""",
            "CREATE INDEX gf_detached_status ON gf_detached (status, app_name)",
        ),
    ),
    (
        9,
        # Policy groups of a user (comma-separated, sorted): a rule's ``role:finance`` approvers match a user in
        # group finance, besides their one permission role.
        ("ALTER TABLE gf_users ADD COLUMN policy_groups TEXT NOT NULL DEFAULT ''",),
    ),
    (
        10,
        (
            # The run whose person's approval made a grant (any scope): an agent over HTTP reads the grants made
            # in its own runs (GET /api/agent/grants), session and time grants included. '' for older rows.
            "ALTER TABLE gf_grants ADD COLUMN made_in_run TEXT NOT NULL DEFAULT ''",
            "CREATE INDEX gf_grants_made_in_run ON gf_grants (made_in_run)",
        ),
    ),
    (
        11,
        (
            # A quorum whose arguments an approver edited: the edited ones are on the table (args_json and
            # args_digest, what the next approver reads and votes on); the call's own stay reviewable here.
            "ALTER TABLE gf_approvals ADD COLUMN original_args_json TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE gf_approvals ADD COLUMN original_args_digest TEXT NOT NULL DEFAULT ''",
        ),
    ),
    (
        12,
        (
            # From here on audit rows and approval records are numbered without gaps under the chain's lock (audit
            # verify checks each number). Rows written before keep their numbers: they are checked for order only.
            "INSERT INTO gf_meta (key, value) SELECT 'audit_numbered_after', CAST(seq AS TEXT) FROM gf_chain_head "
            "WHERE id = 1 ON CONFLICT (key) DO NOTHING",
            "INSERT INTO gf_meta (key, value) SELECT 'approvals_numbered_after', CAST(COALESCE(MAX(id), 0) AS TEXT) "
            "FROM gf_approvals WHERE 1 = 1 ON CONFLICT (key) DO NOTHING",
        ),
    ),
    (
        13,
        (
            # From here on every change of the execution ledger is an event on the chain (execution_recorded), and
            # audit verify checks each gf_executions row against it. Rows started before keep no event.
            "INSERT INTO gf_meta (key, value) SELECT 'executions_audited_after_ms', "
            "CAST(COALESCE(MAX(started_at_ms), 0) AS TEXT) FROM gf_executions WHERE 1 = 1 ON CONFLICT (key) DO NOTHING",
        ),
    ),
    (
        14,
        (
            # Each request has an identity of its own (a re-ask of the target is a new request): a decision is
            # written only to the request it names, and a server's signature covers it. Records before have none.
            "ALTER TABLE gf_approvals ADD COLUMN request_id TEXT NOT NULL DEFAULT ''",
        ),
    ),
    (
        15,
        (
            # Agents own their calls: the ledger is keyed by (owner, call id), the owner being the agent user who
            # owns the claiming run over HTTP ('' for processes that write the store), so one agent can neither
            # claim nor finish another's call and two agents reusing a call id never collide. Rows keep the owner
            # of their run; ledger events written before carry no owner (audit verify matches them by call id).
            """CREATE TABLE gf_executions_owned (
                owner TEXT NOT NULL, target_id TEXT NOT NULL, run_id TEXT NOT NULL, state TEXT NOT NULL,
                started_at_ms {big} NOT NULL, finished_at_ms {big} NOT NULL, result_json TEXT NOT NULL,
                pid {big} NOT NULL, host TEXT NOT NULL, args_digest TEXT NOT NULL, PRIMARY KEY (owner, target_id))""",
            "INSERT INTO gf_executions_owned (owner, target_id, run_id, state, started_at_ms, finished_at_ms, "
            "result_json, pid, host, args_digest) SELECT COALESCE((SELECT o.agent FROM gf_run_owners o "
            "WHERE o.run_id = e.run_id), ''), e.target_id, e.run_id, e.state, e.started_at_ms, e.finished_at_ms, "
            "e.result_json, e.pid, e.host, e.args_digest FROM gf_executions e",
            "DROP TABLE gf_executions",
            "ALTER TABLE gf_executions_owned RENAME TO gf_executions",
            "CREATE INDEX gf_executions_target ON gf_executions (target_id)",
            "INSERT INTO gf_meta (key, value) SELECT 'executions_owned_after_seq', CAST(seq AS TEXT) "
            "FROM gf_chain_head WHERE id = 1 ON CONFLICT (key) DO NOTHING",
        ),
    ),
)

APPROVAL_COLS = (
    "id, run_id, session_id, target_id, kind, prompt, task_id, tool_name, args_json, args_digest, metadata_json, "
    "status, requested_at_ms, expires_at_ms, timeout_ms, decided_at_ms, decided_by, decision, detail, "
    "edited_args_json, decided_via"
)
APPROVAL_SELECT = APPROVAL_COLS + (
    ", decided_channel, decision_sig, quorum_progress, original_args_json, original_args_digest, request_id"
)
"""What reads select: the record and how it was decided (columns with defaults, kept out of inserts)."""
RUN_COLS = "run_id, session_id, adapter, pid, host, status, started_at_ms, heartbeat_at_ms, ended_at_ms"
AUDIT_COLS = "seq, run_id, sequence, kind, event_id, emitted_at_ms, body, prev_hash, hash"
INBOX_COLS = "id, control_id, kind, payload_json, run_id, issued_at_ms, status"
USER_COLS = (
    "name, role, token_id, token_hash, disabled, created_at_ms, updated_at_ms, failed_logins, locked_until_ms, "
    "policy_groups"
)
EXEC_COLS = "target_id, run_id, state, started_at_ms, finished_at_ms, result_json, pid, host, args_digest, owner"
DETACHED_COLS = (
    "target_id, run_id, app_name, user_id, session_id, invocation_id, status, detached_at_ms, claimed_by, "
    "lease_until_ms, resumed_at_ms, detail"
)


def _status(ident: Any, text: Any) -> ApprovalStatus:
    try:
        return ApprovalStatus(text)
    except ValueError:
        raise StoreError(f"approval row #{ident} has an unknown status {text!r}") from None


def approval_row(row: Sequence[Any]) -> ApprovalRow:
    return ApprovalRow(
        id=row[0],
        run_id=row[1],
        session_id=row[2],
        target_id=row[3],
        kind=row[4],
        prompt=row[5],
        task_id=row[6],
        tool_name=row[7],
        args_json=row[8],
        args_digest=row[9],
        metadata=json.loads(row[10] or "{}"),
        status=_status(row[0], row[11]),
        requested_at_ms=row[12],
        expires_at_ms=row[13],
        timeout_ms=row[14],
        decided_at_ms=row[15],
        decided_by=row[16],
        decision=row[17],
        detail=row[18],
        edited_args_json=row[19],
        decided_via=row[20],
        decided_channel=row[21] if len(row) > 21 else "",
        decision_sig=row[22] if len(row) > 22 else "",
        quorum_progress=row[23] if len(row) > 23 else "",
        original_args_json=row[24] if len(row) > 24 else "",
        original_args_digest=row[25] if len(row) > 25 else "",
        request_id=row[26] if len(row) > 26 else "",
    )


def run_row(row: Sequence[Any]) -> RunRow:
    return RunRow(
        run_id=row[0],
        session_id=row[1],
        adapter=row[2],
        pid=row[3],
        host=row[4],
        status=row[5],
        started_at_ms=row[6],
        heartbeat_at_ms=row[7],
        ended_at_ms=row[8],
    )


def audit_row(row: Sequence[Any]) -> AuditRow:
    return AuditRow(
        seq=row[0],
        run_id=row[1],
        sequence=row[2],
        kind=row[3],
        event_id=row[4],
        emitted_at_ms=row[5],
        body=bytes(row[6]),
        prev_hash=row[7],
        hash=row[8],
    )


def lenient_audit_row(row: Sequence[Any]) -> AuditRow:
    """An audit row as ``audit verify`` reads it: a cell of the wrong type never raises, it fails the checks.

    A body that is not bytes is hashed as its text (so it does not match its hash); a text column that is
    not text, or a number that is not a number, keeps a value that differs from the hashed event's.
    """

    def text(value: Any) -> str:
        return value if isinstance(value, str) else repr(value)

    def number(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else -1

    raw = row[6]
    if isinstance(raw, bytes | bytearray | memoryview):
        body = bytes(raw)
    else:
        body = text(raw).encode("utf-8", "surrogateescape")
    return AuditRow(
        seq=number(row[0]),
        run_id=text(row[1]),
        sequence=number(row[2]),
        kind=text(row[3]),
        event_id=text(row[4]),
        emitted_at_ms=number(row[5]),
        body=body,
        prev_hash=text(row[7]),
        hash=text(row[8]),
    )


def execution_row(row: Sequence[Any]) -> ExecutionRow:
    return ExecutionRow(
        target_id=row[0],
        run_id=row[1],
        state=ExecutionState(row[2]),
        started_at_ms=row[3],
        finished_at_ms=row[4],
        result_json=row[5],
        pid=row[6],
        host=row[7],
        args_digest=row[8],
        owner=row[9],
    )


def inbox_row(row: Sequence[Any]) -> InboxRow:
    """An inbox row; a malformed one (written by hand, by an old or broken writer) says why in ``problem``.

    A bad row must never stop the inbox: it is parsed on its own, and whoever claims it answers it
    with a FAILURE ack that names it instead of dispatching it.
    """
    ident, control_id, kind, raw, run_id, issued, status = row[:7]
    problem = ""
    payload: Any = {}
    try:
        payload = json.loads(raw) if isinstance(raw, str) else None
    except (ValueError, RecursionError) as exc:
        problem = f"its payload is not JSON ({shorten(str(exc), 80)})"
        payload = {}
    else:
        if not isinstance(payload, dict):
            problem = f"its payload is not a JSON object (got {type(payload).__name__})"
            payload = {}
    if not problem and not isinstance(kind, str):
        problem = "its kind is not text"
    return InboxRow(
        id=int(ident),
        control_id=str(control_id),
        kind=str(kind),
        payload=payload,
        run_id=str(run_id or ""),
        issued_at_ms=int(issued) if isinstance(issued, int) else 0,
        status=str(status),
        problem=problem,
    )


def user_row(row: Sequence[Any]) -> UserRow:
    return UserRow(
        name=row[0],
        role=row[1],
        token_id=row[2],
        token_hash=row[3],
        disabled=bool(row[4]),
        created_at_ms=row[5],
        updated_at_ms=row[6],
        failed_logins=row[7],
        locked_until_ms=row[8],
        groups=tuple(g for g in str(row[9] or "").split(",") if g),
    )


def detached_row(row: Sequence[Any]) -> DetachedRow:
    return DetachedRow(
        target_id=row[0],
        run_id=row[1],
        app_name=row[2],
        user_id=row[3],
        session_id=row[4],
        invocation_id=row[5],
        status=DetachedStatus(row[6]),
        detached_at_ms=row[7],
        claimed_by=row[8],
        lease_until_ms=row[9],
        resumed_at_ms=row[10],
        detail=row[11],
    )
