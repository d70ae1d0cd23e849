"""What ``goldfive serve`` needs from the store to serve agents over HTTP: run ownership and per-run delivery.

An agent that reaches the server with an ``agent`` token never holds database credentials; the
server writes for it. These functions keep it to its own runs: the first agent user to write a run
owns it, another agent (or a run some in-process agent started on the store directly) is refused.
They work on both SQL backends; every call is short and bounded, like the store's own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .._stored import storable
from .._util import now_ms
from ..approvals import OPEN_STATUSES
from ..events import payload_name
from ..pb.v1 import events_pb2
from ._schema import INBOX_COLS, RUN_COLS, inbox_row, run_row
from .base import InboxRow, RunRow, Store, StoreError
from .liveness import RunLiveness, StoredRunStatus, judge_liveness
from .sql import SqlStore, appending

__all__ = [
    "AGENT_ENDPOINT_PREFIX",
    "ACKS_HEADER",
    "ACKS_WITH_EVENTS",
    "LIVENESS_HEADER",
    "LIVENESS_ON_STREAM",
    "PASS_HEADER",
    "append_server_event",
    "claim_run",
    "claim_for_streams",
    "claimed_for",
    "decision_delivered",
    "execution_owner",
    "gone_runs",
    "grant_delivered",
    "owned_runs",
    "owners_of",
    "pending_for_runs",
    "run_owner",
]

AGENT_ENDPOINT_PREFIX = "agent:"
"""Inbox rows an HTTP agent claims are claimed by ``agent:<user>:<its endpoint>``, so no agent acks another's."""

LIVENESS_HEADER = "X-Goldfive-Liveness"
"""The header of ``GET /api/agent/stream`` by which a server says it keeps the stream's runs alive itself."""
LIVENESS_ON_STREAM = "stream"
"""Its value: while this stream is open, the agent need not heartbeat its runs (an older server sends nothing,
and its agents heartbeat as before; an older agent heartbeats anyway, which is harmless)."""

ACKS_HEADER = "X-Goldfive-Acks"
"""The header of ``GET /api/agent/stream``'s answer by which a server says that ``POST /api/agent/acks`` takes the
agent's events too (``"events"``, ``"pid"``, ``"host"``), committing them to the audit chain before it records the
acks: a decision's event and its ack in one request. An agent sends events with acks only to a server that said so
(an older one would ignore them)."""
ACKS_WITH_EVENTS = "events"
"""Its value."""

PASS_HEADER = "X-Goldfive-Pass"
"""A server's proof that it checked the agent's token: sent with ``GET /api/agent/stream``'s answer, and sent back
by the agent with its token on every request, so another server sharing the key file takes the token without a
scrypt check of its own (a fleet's agents failing over are served at once, not queued behind one check each)."""

SERVER_AUDIT_RUN = "goldfive-serve"
"""The run id under which the server puts its own audit entries (e.g. an agent token that tried to decide)."""


def _sql(store: Store) -> SqlStore:
    if not isinstance(store, SqlStore):
        raise StoreError(f"{type(store).__name__} cannot serve agents over HTTP (a SQL store is needed)")
    return store


def run_owner(store: Store, run_id: str) -> str | None:
    """The agent user who owns ``run_id`` (None: no agent over HTTP ever wrote it)."""
    sql = _sql(store)
    with sql.db.guard("reading a run's owner"):
        row = sql.db.execute(sql.db.conn(), "SELECT agent FROM gf_run_owners WHERE run_id = ?", (run_id,)).fetchone()
    return str(row[0]) if row is not None else None


def claim_run(store: Store, run_id: str, agent: str) -> str | None:
    """Make ``agent`` the owner of ``run_id`` if nobody owns it; None when ``agent`` owns it, else why not."""
    if not run_id:
        return "an event or subscription must name its run (run_id is empty)"
    sql = _sql(store)
    with sql.db.guard(f"claiming run {run_id}"):
        conn = sql.db.conn()
        mine = sql.db.execute(conn, "SELECT agent FROM gf_run_owners WHERE run_id = ?", (run_id,)).fetchone()
        if mine is not None and str(mine[0]) == agent:
            return None  # owned already (every event batch after the first): a read, no write transaction
        with sql.db.transaction(conn):
            row = sql.db.execute(conn, "SELECT agent FROM gf_run_owners WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                known = sql.db.execute(conn, "SELECT 1 FROM gf_runs WHERE run_id = ?", (run_id,)).fetchone()
                if known is not None:
                    return f"run {run_id!r} was started by a process writing to the store directly, not by {agent!r}"
                sql.db.execute(
                    conn,
                    "INSERT INTO gf_run_owners (run_id, agent, created_at_ms) VALUES (?, ?, ?) "
                    "ON CONFLICT (run_id) DO NOTHING",
                    (run_id, agent, now_ms()),
                )
                row = sql.db.execute(conn, "SELECT agent FROM gf_run_owners WHERE run_id = ?", (run_id,)).fetchone()
    owner = str(row[0]) if row is not None else ""
    return None if owner == agent else f"run {run_id!r} belongs to another agent"


def owned_runs(store: Store, agent: str, run_ids: Sequence[str]) -> set[str]:
    """Which of ``run_ids`` ``agent`` owns."""
    if not run_ids:
        return set()
    sql = _sql(store)
    marks = ", ".join("?" for _ in run_ids)
    with sql.db.guard("reading run owners"):
        rows = sql.db.execute(
            sql.db.conn(),
            f"SELECT run_id FROM gf_run_owners WHERE agent = ? AND run_id IN ({marks})",
            (agent, *run_ids),
        ).fetchall()
    found = {str(r[0]) for r in rows}
    return {r for r in run_ids if storable(r) in found}  # the ids as asked (a NUL is stored as ␀)


def owners_of(store: Store, run_ids: Sequence[str]) -> dict[str, str]:
    """The agent user owning each of ``run_ids`` that an agent owns (one read per 500 runs): the ownership checks of
    many agents' heartbeats made together."""
    sql = _sql(store)
    owner: dict[str, str] = {}
    with sql.db.guard("reading run owners"):
        for start in range(0, len(run_ids), 500):
            page = run_ids[start : start + 500]
            marks = ", ".join("?" for _ in page)
            rows = sql.db.execute(
                sql.db.conn(), f"SELECT run_id, agent FROM gf_run_owners WHERE run_id IN ({marks})", tuple(page)
            ).fetchall()
            owner.update((str(run), str(agent)) for run, agent in rows)
    return {r: owner[storable(r)] for r in run_ids if storable(r) in owner}  # the ids as asked (NUL stored as ␀)


def execution_owner(store: Store, call_id: str) -> tuple[str, str | None] | None:
    """``(run_id, owner)`` of the ledger entry for ``call_id`` (None: no entry)."""
    row = store.execution(call_id)
    if row is None:
        return None
    return row.run_id, run_owner(store, row.run_id)


def pending_for_runs(store: Store, run_ids: Sequence[str], *, limit: int = 500) -> list[InboxRow]:
    """Unclaimed messages addressed to ``run_ids``, oldest first."""
    if not run_ids:
        return []
    sql = _sql(store)
    marks = ", ".join("?" for _ in run_ids)
    with sql.db.guard("reading the control inbox by run"):
        cur = sql.db.execute(
            sql.db.conn(),
            f"SELECT {INBOX_COLS} FROM gf_inbox WHERE status = 'pending' AND run_id IN ({marks}) ORDER BY id LIMIT ?",
            (*run_ids, limit),
        )
        return [inbox_row(r) for r in cur.fetchall()]


def claim_for_streams(store: Store, claims: Sequence[tuple[int, str]]) -> set[int]:
    """Claim each ``(inbox id, endpoint)`` for its endpoint, all in one transaction; the ids won (a row claimed
    for another endpoint, here or by another server, is not; one claimed for the same endpoint and not acked is: a
    server killed between its claim's commit and the frame's delivery leaves it owed to that agent's stream)."""
    return set(_sql(store).claim_controls_for(claims, again=True))


def gone_runs(store: Store, run_ids: Sequence[str]) -> dict[str, RunLiveness]:
    """:meth:`~goldfive_core.store.base.Store.liveness_of` of many runs at once, those not live only (one read of
    the runs per 500, the store's clock read with them): the liveness checks of a burst of decisions waiting for
    acks."""
    ids = list(dict.fromkeys(run_ids))
    sql = _sql(store)
    rows: dict[str, RunRow] = {}
    clock: list[int] = []
    with sql.db.guard("reading runs"):
        conn = sql.db.conn()
        for start in range(0, len(ids), 500):
            page = ids[start : start + 500]
            marks = ", ".join("?" for _ in page)
            # The store's clock read with the rows (one statement, not a second one for the clock).
            query = f"SELECT {RUN_COLS}, {sql.db.now_expr} FROM gf_runs WHERE run_id IN ({marks})"
            for raw in sql.db.execute(conn, query, page):
                row = run_row(raw[:-1])
                rows[row.run_id] = row
                clock.append(int(raw[-1]))
    running = any(row.status is StoredRunStatus.RUNNING for row in rows.values())
    now = max(clock) if running else None  # the latest reading: the rows read are at least this old
    gone: dict[str, RunLiveness] = {}
    for run_id in ids:
        liveness = judge_liveness(rows.get(storable(run_id)), stale_after_ms=store.stale_after_ms, now=now)
        if not liveness.live:
            gone[run_id] = liveness
    return gone


def claimed_for(store: Store, endpoint: str) -> list[InboxRow]:
    """Messages ``endpoint`` claimed and has not acked (what an agent must still dispatch after a reconnect)."""
    return store.claimed_controls(endpoint=endpoint)


def decision_delivered(store: Store, run_id: str, target_id: str, *, approved: bool) -> bool:
    """Whether a person's decision for ``target_id`` reached ``run_id``: recorded on its approval, or delivered.

    An agent's ApprovalGranted/ApprovalRejected event is accepted only then: an agent can say that it
    applied a decision, never make one.
    """
    sql = _sql(store)
    decision = "approve" if approved else "reject"
    with sql.db.guard("checking a decision an agent reported"):
        conn = sql.db.conn()
        row = sql.db.execute(
            conn, "SELECT status, decision FROM gf_approvals WHERE run_id = ? AND target_id = ?", (run_id, target_id)
        ).fetchone()
        if row is None:
            return True  # no request on record: the event changes no approval (e.g. a replay's note)
        if row[0] not in OPEN_STATUSES:
            return str(row[1]) == decision or not row[1]
    return _delivered(store, run_id, target_id, "APPROVE" if approved else "REJECT")


def grant_delivered(store: Store, run_id: str, target_id: str) -> bool:
    """Whether a person's approval *with a grant* for ``target_id`` reached ``run_id``.

    An agent's GrantCreated event is accepted only then: a standing grant (a ``time`` grant lets calls of
    any run through) is made by a person's approval, never written by an agent on its own.
    """
    return _delivered(store, run_id, target_id, "APPROVE", grant=True)


def _delivered(store: Store, run_id: str, target_id: str, kind: str, *, grant: bool = False) -> bool:
    sql = _sql(store)
    with sql.db.guard("checking a decision an agent reported"):
        rows = sql.db.execute(
            sql.db.conn(),
            "SELECT payload_json FROM gf_inbox WHERE run_id = ? AND kind = ? AND status IN ('claimed', 'acked')",
            (run_id, kind),
        ).fetchall()
    stored = storable(target_id)  # a decision names the id as the store holds it, the run as it asked
    for (payload_json,) in rows:
        try:
            payload = json.loads(payload_json)
        except ValueError:
            continue
        if not isinstance(payload, dict) or not isinstance(named := payload.get("target_id"), str):
            continue
        if storable(named) == stored and (not grant or payload.get("grant")):
            return True
    return False


def append_server_event(store: Store, event: events_pb2.Event, *, conn: Any = None) -> int:
    """Append an event of the server's own to the audit chain under :data:`SERVER_AUDIT_RUN`; returns its seq.

    The sequence is taken under the chain's lock, so two servers on one database never collide. With
    ``conn`` the caller's open write transaction is used (the event commits with the caller's change).
    """
    sql = _sql(store)

    def write(c: Any) -> int:
        with appending(sql.db, c) as chain:
            event.run_id = SERVER_AUDIT_RUN
            event.sequence = chain.next_sequence(SERVER_AUDIT_RUN)
            if not event.HasField("emitted_at"):
                event.emitted_at.FromMilliseconds(now_ms())
            chain.append(event)
        return chain.seq

    if conn is not None:
        return write(conn)
    with sql.db.writing(f"auditing {payload_name(event)}") as c:
        return write(c)
