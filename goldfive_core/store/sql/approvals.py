"""The approval records of a SQL store: listed, paged, decided while the run is down, and found for a replay."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..._stored import storable
from ..._util import canonical_json, now_ms
from ...approvals import DECIDED_STATUSES, ApprovalStatus
from ...pb.v1 import events_pb2
from .._schema import (
    APPROVAL_SELECT,
    approval_row,
)
from ..base import (
    OPEN_STATUSES,
    ApprovalPage,
    ApprovalRow,
    StoredDecision,
)
from ..rows import reads_shared
from .chain import appending, next_sequence
from .db import SqlRole
from .decisions import marks, sources_of, write_decision
from .ledger import RUN_OWNER, owner_of

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


class SqlApprovalRecords(SqlRole):
    """Approval records: reads, pages, and the decisions recorded in the store."""

    # -- approvals ----------------------------------------------------------------------------
    @staticmethod
    def _approval_filter(open_only: bool, run_id: str | None) -> tuple[str, list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        if open_only:
            where.append("status IN (?, ?)")
            params.extend(s.value for s in OPEN_STATUSES)
        if run_id:
            where.append("run_id = ?")
            params.append(run_id)
        return (f"WHERE {' AND '.join(where)} " if where else ""), params

    def approvals(
        self,
        *,
        open_only: bool = True,
        run_id: str | None = None,
        limit: int = 500,
        offset: int = 0,
        oldest_first: bool = False,
    ) -> list[ApprovalRow]:
        """Approval records, newest first (``oldest_first``: the order in which they expire)."""
        clause, params = self._approval_filter(open_only, run_id)
        order = "ASC" if oldest_first else "DESC"
        with self.db.guard("listing approvals"):
            cur = self.db.execute(
                self.db.conn(),
                f"SELECT {APPROVAL_SELECT} FROM gf_approvals {clause}ORDER BY id {order} LIMIT ? OFFSET ?",
                (*params, max(limit, 0), max(offset, 0)),
            )
            return [approval_row(r) for r in cur.fetchall()]

    def count_approvals(self, *, open_only: bool = True, run_id: str | None = None) -> int:
        """How many records :meth:`approvals` would list without a limit."""
        clause, params = self._approval_filter(open_only, run_id)
        with self.db.guard("counting approvals"):
            row = self.db.execute(self.db.conn(), f"SELECT COUNT(*) FROM gf_approvals {clause}", params).fetchone()
            return int(row[0])

    def approvals_for(self, target_id: str) -> list[ApprovalRow]:
        """Every record for ``target_id``, newest first."""
        with self.db.guard(f"reading approval {target_id!r}"):
            cur = self.db.execute(
                self.db.conn(),
                f"SELECT {APPROVAL_SELECT} FROM gf_approvals WHERE target_id = ? ORDER BY id DESC",
                (target_id,),
            )
            return [approval_row(r) for r in cur.fetchall()]

    # -- approvals, paged (goldfive serve) -------------------------------------------------------
    def approval_page(
        self,
        *,
        statuses: Sequence[str],
        run_ids: Sequence[str] | None = None,
        exclude_run_ids: Sequence[str] | None = None,
        run_id: str | None = None,
        agent: str | None = None,
        tool: str | None = None,
        decided_by: str | None = None,
        since_ms: int = 0,
        until_ms: int = 0,
        newest_first: bool = False,
        limit: int = 100,
        offset: int = 0,
    ) -> ApprovalPage:
        """Matching records, soonest expiry first (records without an expiry last) or newest first, and their
        total (see :meth:`goldfive_core.store.base.Store.approval_page`)."""
        where = [f"status IN ({', '.join('?' for _ in statuses)})"] if statuses else ["1 = 0"]
        params: list[Any] = list(statuses)
        if run_ids is not None:
            if not run_ids:
                return ApprovalPage(rows=[], total=0)
            where.append(f"run_id IN ({', '.join('?' for _ in run_ids)})")
            params.extend(run_ids)
        if exclude_run_ids:
            where.append(f"run_id NOT IN ({', '.join('?' for _ in exclude_run_ids)})")
            params.extend(exclude_run_ids)
        for column, value in (("run_id", run_id), ("tool_name", tool)):
            if value:
                where.append(f"{column} = ?")
                params.append(value)
        if agent:  # metadata is canonical JSON: the agent's name appears exactly so
            needle = canonical_json({"agent_name": storable(agent)})[1:-1]
            escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append("metadata_json LIKE ? ESCAPE '\\'")
            params.append(f"%{escaped}%")
        when = "CASE WHEN decided_at_ms > 0 THEN decided_at_ms ELSE requested_at_ms END"
        if decided_by:  # one of a quorum's deciders too: decided_by is "ana, bo" then
            escaped = storable(decided_by).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append("(', ' || decided_by || ', ') LIKE ? ESCAPE '\\'")
            params.append(f"%, {escaped}, %")
        if since_ms:
            where.append(f"{when} >= ?")
            params.append(since_ms)
        if until_ms:
            where.append(f"{when} < ?")
            params.append(until_ms)
        order = (
            f"{when} DESC, id DESC"
            if newest_first
            else "CASE WHEN expires_at_ms = 0 THEN 1 ELSE 0 END, expires_at_ms, id"
        )
        clause = " AND ".join(where)
        with self.db.guard("listing approvals"):
            conn = self.db.conn()
            total = self.db.execute(conn, f"SELECT COUNT(*) FROM gf_approvals WHERE {clause}", params).fetchone()
            cur = self.db.execute(
                conn,
                f"SELECT {APPROVAL_SELECT} FROM gf_approvals WHERE {clause} ORDER BY {order} LIMIT ? OFFSET ?",
                (*params, limit, offset),
            )
            return ApprovalPage(rows=[approval_row(r) for r in cur.fetchall()], total=int(total[0]))

    def decide_in_store(
        self,
        approval_id: int,
        *,
        approved: bool,
        detail: str,
        decided_by: str,
        edited_args_json: str = "",
        args_digest: str = "",
        channel: str = "",
        signature: str = "",
        request_id: str = "",
    ) -> bool:
        """Record a decision (exactly once among concurrent deciders) and audit it as an event of its run."""
        with self.db.guard(f"recording a decision on approval #{approval_id}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                at = now_ms()
                written = write_decision(
                    self.db,
                    conn,
                    # A decision bound to a digest and a request applies only to the call it was given for (the
                    # request may have been re-asked, with other arguments or the same, since the decider looked).
                    "id = ? AND (? = '' OR args_digest = '' OR args_digest = ?) AND (? = '' OR request_id = ?)",
                    (approval_id, args_digest, args_digest, request_id, request_id),
                    approved=approved,
                    detail=detail,
                    decided_by=decided_by,
                    at=at,
                    edited_args_json=edited_args_json,
                    via="store",
                    channel=channel,
                    signature=signature,
                )
                if written != 1:
                    return False
                row = self.db.execute(
                    conn,
                    "SELECT run_id, session_id, target_id, request_id FROM gf_approvals WHERE id = ?",
                    (approval_id,),
                ).fetchone()
                event = _recorded_decision(
                    row,
                    approval_id=approval_id,
                    at=at,
                    approved=approved,
                    detail=detail,
                    decided_by=decided_by,
                    edited_args_json=edited_args_json,
                    channel=channel,
                    sequence=next_sequence(self.db, conn, str(row[0])),
                )
                with appending(self.db, conn) as chain:
                    chain.append(event)
                # Wake what waits on the inbox (a detached run's Resumer picks the decision up now, not at its
                # next poll; SQLite's commit pokes waiters by itself).
                self.db.notify(conn, "inbox", "")
                return True

    def expire_in_store(
        self,
        approval_id: int,
        *,
        detail: str,
        expired_by: str,
        timeout_ms: int,
        channel: str = "",
        signature: str = "",
        request_id: str = "",
    ) -> bool:
        """Close a pending record as expired by the deciding side's rule, audited as its run's ``approval_timed_out``
        naming who expired it (see :meth:`ApprovalRecords.expire_in_store`)."""
        with self.db.guard(f"recording the expiry of approval #{approval_id}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                at = now_ms()
                new = ApprovalStatus.EXPIRED
                row = self.db.execute(
                    conn,
                    "UPDATE gf_approvals SET status = ?, detail = ?, decided_by = ?, decided_at_ms = ?, "
                    "decided_via = 'store', decided_channel = ?, decision_sig = ? "
                    f"WHERE id = ? AND (? = '' OR request_id = ?) AND status IN ({marks(new)}) "
                    "RETURNING run_id, session_id, target_id, request_id",
                    (
                        new.value,
                        detail,
                        expired_by,
                        at,
                        channel,
                        signature,
                        approval_id,
                        request_id,
                        request_id,
                        *sources_of(new),
                    ),
                ).fetchone()
                if row is None:
                    return False
                event = events_pb2.Event(
                    event_id=f"ev-store-{approval_id}-{at}",
                    run_id=str(row[0]),
                    session_id=str(row[1]),
                    sequence=next_sequence(self.db, conn, str(row[0])),
                )
                event.emitted_at.FromMilliseconds(at)
                event.approval_timed_out.CopyFrom(
                    events_pb2.ApprovalTimedOut(
                        target_id=str(row[2]),
                        timeout_ms=timeout_ms,
                        still_open=False,
                        detail=detail,
                        expired_by=expired_by,
                        channel=channel,
                        request_id=str(row[3]),
                    )
                )
                with appending(self.db, conn) as chain:
                    chain.append(event)
                self.db.notify(conn, "inbox", "")  # a parked call's Resumer takes it up now, as for a decision
                return True

    def find_decision(self, target_id: str, *, run_id: str | None = None) -> StoredDecision | None:
        """The newest decision for ``target_id`` that no execution has claimed (retried through an outage).

        With ``run_id``, only among the requests of runs of the same owner (see :meth:`mark_executing`).
        """
        return self.retrying(f"looking up a decision for {target_id!r}", lambda: self._find_decision(target_id, run_id))

    def _find_decision(self, target_id: str, run_id: str | None) -> StoredDecision | None:
        with self.db.guard(f"looking up a decision for {target_id!r}"):
            conn = self.db.conn()
            owned, params = "", []
            if run_id is not None:
                owner = owner_of(self.db, conn, run_id)
                owned = f"AND {RUN_OWNER.format(run='a.run_id')} IN (?, ?) "
                # An app's ledger holds the shared one's too: where its runs kept their calls before it had a name.
                params = [owner, "" if reads_shared(owner) else owner]
            claimed = "e.owner IN (?, ?) AND " if run_id is not None else ""
            row = self.db.execute(
                conn,
                f"SELECT {APPROVAL_SELECT} FROM gf_approvals a "
                # A record the deciding side's rule expired (it names who did) is found too: replayed as a timeout.
                f"WHERE target_id = ? AND (status IN (?, ?) OR (status = ? AND decided_by <> '')) {owned}"
                f"AND NOT EXISTS (SELECT 1 FROM gf_executions e WHERE {claimed}e.target_id = a.target_id "
                "AND (e.args_digest = '' OR a.args_digest = '' OR e.args_digest = a.args_digest "
                "OR e.args_digest = a.original_args_digest)) "
                "ORDER BY id DESC LIMIT 1",
                (target_id, *sorted(s.value for s in DECIDED_STATUSES), ApprovalStatus.EXPIRED.value, *params, *params),
            ).fetchone()
        if row is None:
            return None
        rec = approval_row(row)
        edited = json.loads(rec.edited_args_json) if rec.edited_args_json else None
        return StoredDecision(
            approval_id=rec.id,
            run_id=rec.run_id,
            target_id=rec.target_id,
            approved=rec.status is ApprovalStatus.GRANTED,
            detail=rec.detail,
            decided_by=rec.decided_by,
            # The call's own digest (what a replay of it carries), also when a quorum voted on edited arguments.
            args_digest=rec.original_args_digest or rec.args_digest,
            edited_args=edited,
            decided_at_ms=rec.decided_at_ms,
            decided_via=rec.decided_via,
            decided_channel=rec.decided_channel,
            signature=rec.decision_sig,
            request_id=rec.request_id,
            request_digest=rec.request_digest if rec.request_id else "",  # as signed: a record with no id, none
            expired=rec.status is ApprovalStatus.EXPIRED,
        )


def _recorded_decision(
    row: Sequence[Any],
    *,
    approval_id: int,
    at: int,
    approved: bool,
    detail: str,
    decided_by: str,
    edited_args_json: str,
    channel: str,
    sequence: int,
) -> events_pb2.Event:
    """The audit event of a decision recorded in the store for ``row`` (run id, session id, target id, request id)."""
    run_id, session_id, target_id, request = str(row[0]), str(row[1]), str(row[2]), str(row[3])
    event = events_pb2.Event(
        event_id=f"ev-store-{approval_id}-{at}", run_id=run_id, session_id=session_id, sequence=sequence
    )
    event.emitted_at.FromMilliseconds(at)
    note = "recorded in the store while the run's process was not running"
    said = f"{detail} ({note})" if detail else note
    if approved:
        event.approval_granted.CopyFrom(
            events_pb2.ApprovalGranted(
                target_id=target_id,
                detail=said,
                decided_by=decided_by,
                edited_args_json=edited_args_json,
                channel=channel,
                request_id=request,
            )
        )
    else:
        event.approval_rejected.CopyFrom(
            events_pb2.ApprovalRejected(
                target_id=target_id, detail=said, decided_by=decided_by, channel=channel, request_id=request
            )
        )
    return event
