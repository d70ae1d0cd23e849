"""Standing grants as records, and what deciders do that the audit log must keep (refusals, revocations).

A grant is made inside a run (an approval with ``grant=run|session|<duration>``): the run emits
``GrantCreated`` and the store keeps it as a ``gf_grants`` row, so it is listed (``goldfive grants``,
``GET /api/grants``, the inbox), revoked from outside the run (``goldfive grants revoke ID``,
``POST /api/grants/{id}/revoke``) and outlives the agent's process (a session or time grant still
applies after a restart). A running agent reads the rows before it lets a call through on a grant,
so a revoked grant stops allowing calls at once.

Decider-side events (a decision refused because the decider may not decide or the request expired,
a revocation) are appended to the audit chain under the stream :data:`DECIDERS_STREAM` (the server's own
stream, ``goldfive-serve``): a live run owns the sequence numbers of its own run id, so nothing outside it
may write there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from .._util import now_ms
from ..errors import GrantNotFound
from ..pb.v1 import events_pb2
from .agents import SERVER_AUDIT_RUN, append_server_event
from .base import Store, StoreError
from .roles import GrantReader, StoreHandle
from .rows import GrantRow
from .sql import SqlStore

__all__ = [
    "DECIDERS_STREAM",
    "GrantNotFound",
    "GrantRow",
    "append_decider_event",
    "audit_refusal",
    "grant_row",
    "grant_rows",
    "revoke_grant",
]

DECIDERS_STREAM = SERVER_AUDIT_RUN
"""The audit stream (``run_id`` of its events) of what was done outside any run: refused decisions,
revoked grants, refused agent tokens (``goldfive-serve``; the command line writes there too)."""

_COLS = (
    "grant_id, rule, tool, granted_by, scope, run_id, session_id, args_constraint, created_at_ms, expires_at_ms, "
    "target_id, description, channel, revoked_at_ms, revoked_by, revoke_reason, "
    "(SELECT r.status FROM gf_runs r WHERE r.run_id = g.run_id AND g.scope = 'run')"
)
_RUN_ENDED = "EXISTS (SELECT 1 FROM gf_runs r WHERE r.run_id = g.run_id AND r.status <> 'running')"
"""A run grant whose run is over can let nothing through any more."""


def _row(r: Any) -> GrantRow:
    return GrantRow(
        grant_id=r[0],
        rule=r[1],
        tool=r[2],
        granted_by=r[3],
        scope=r[4],
        run_id=r[5],
        session_id=r[6],
        args_constraint=r[7],
        created_at_ms=int(r[8]),
        expires_at_ms=int(r[9]),
        target_id=r[10],
        description=r[11],
        channel=r[12],
        revoked_at_ms=int(r[13]),
        revoked_by=r[14],
        revoke_reason=r[15],
        run_status=str(r[16] or ""),
    )


def _sql(store: StoreHandle) -> SqlStore:
    if not isinstance(store, SqlStore):
        raise StoreError(f"store {store.url} keeps no grants")
    return store


def grant_rows(
    store: StoreHandle,
    *,
    active_only: bool = False,
    rule: str | None = None,
    tool: str | None = None,
    at_ms: int | None = None,
    limit: int = 1000,
    agent: str | None = None,
    made_in: Sequence[str] | None = None,
) -> list[GrantRow]:
    """Grants, newest first; ``active_only``: neither revoked, expired at ``at_ms`` (default: now), nor ended.

    ``agent``: only the grants made in runs that agent token owns, any scope (what ``/api/agent/grants`` answers);
    ``made_in``: only those made in these runs.
    A store that is not SQL but reads grants itself (an HttpChannel's :class:`RemoteStore`, which asks
    ``goldfive serve`` for its own agent's grants) is asked; any other store keeps no grants.
    """
    if not isinstance(store, SqlStore) and isinstance(store, GrantReader) and agent is None and made_in is None:
        return store.grant_rows(active_only=active_only, rule=rule, tool=tool, at_ms=at_ms, limit=limit)
    s = _sql(store)
    where: list[str] = ["1 = 1"]
    params: list[object] = []
    if agent is not None:
        where.append("made_in_run IN (SELECT o.run_id FROM gf_run_owners o WHERE o.agent = ?)")
        params.append(agent)
    if made_in is not None:
        where.append(f"made_in_run IN ({', '.join('?' for _ in made_in) or 'NULL'})")
        params.extend(made_in)
    if rule is not None:
        where.append("rule = ?")
        params.append(rule)
    if tool is not None:
        where.append("tool = ?")
        params.append(tool)
    if active_only:
        where.append(
            f"revoked_at_ms = 0 AND (expires_at_ms = 0 OR expires_at_ms > ?) AND NOT (scope = 'run' AND {_RUN_ENDED})"
        )
        params.append(at_ms if at_ms is not None else now_ms())
    with s.db.guard("reading grants"):
        rows = s.db.execute(
            s.db.conn(),
            f"SELECT {_COLS} FROM gf_grants g WHERE {' AND '.join(where)} "
            "ORDER BY created_at_ms DESC, grant_id LIMIT ?",
            (*params, limit),
        ).fetchall()
    return [_row(r) for r in rows]


def grant_row(store: Store, grant_id: str) -> GrantRow | None:
    """The grant with that id, if the store has it."""
    s = _sql(store)
    with s.db.guard(f"reading grant {grant_id!r}"):
        r = s.db.execute(s.db.conn(), f"SELECT {_COLS} FROM gf_grants g WHERE grant_id = ?", (grant_id,)).fetchone()
    return _row(r) if r is not None else None


def append_decider_event(store: Store, fill: Callable[[events_pb2.Event], None], *, conn: Any = None) -> None:
    """Append one event of :data:`DECIDERS_STREAM` to the audit chain (``fill`` sets its payload).

    With ``conn`` the caller's open transaction is used; otherwise one is opened.
    """
    event = events_pb2.Event(event_id=f"ev-decider-{os.urandom(8).hex()}")
    event.emitted_at.FromMilliseconds(now_ms())
    fill(event)
    append_server_event(store, event, conn=conn)


def audit_refusal(
    store: Store,
    *,
    target_id: str,
    run_id: str,
    approve: bool,
    decided_by: str,
    reason: str,
    channel: str = "",
) -> None:
    """Put a refused decision on the audit log (``DecisionRefused`` with the request's run); nothing else changes."""

    def fill(event: events_pb2.Event) -> None:
        refused = event.decision_refused
        refused.target_id = target_id
        refused.decision = "approve" if approve else "reject"
        refused.decided_by = decided_by
        refused.reason = reason
        refused.channel = channel
        refused.request_run_id = run_id

    append_decider_event(store, fill)


def revoke_grant(store: Store, grant_id: str, *, by: str, reason: str = "", channel: str = "") -> GrantRow:
    """Revoke a grant (once) and audit it (``GrantRevoked``); returns the row as it is now.

    Raises :class:`StoreError` naming the grant when there is no such grant, or it was already revoked.
    """
    s = _sql(store)
    with s.db.guard(f"revoking grant {grant_id!r}"):
        conn = s.db.conn()
        with s.db.transaction(conn):
            at = now_ms()
            done = s.db.execute(
                conn,
                "UPDATE gf_grants SET revoked_at_ms = ?, revoked_by = ?, revoke_reason = ? "
                "WHERE grant_id = ? AND revoked_at_ms = 0",
                (at, by, reason, grant_id),
            ).rowcount
            if done == 1:

                def fill(event: events_pb2.Event) -> None:
                    event.emitted_at.FromMilliseconds(at)  # the record's revoked_at_ms (audit verify checks it)
                    event.grant_revoked.grant_id = grant_id
                    event.grant_revoked.revoked_by = by
                    event.grant_revoked.reason = reason
                    event.grant_revoked.channel = channel

                append_decider_event(store, fill, conn=conn)
    row = grant_row(store, grant_id)
    if row is None:
        raise GrantNotFound(f"unknown grant {grant_id!r}: no such grant (goldfive grants lists them)")
    if done != 1:
        raise GrantNotFound(
            f"grant {grant_id!r} was already revoked by {row.revoked_by or 'someone'}; nothing was changed"
        )
    return row
