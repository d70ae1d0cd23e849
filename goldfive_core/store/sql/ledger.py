"""The execution ledger of a SQL store: at most one run of a tool body per approved call, per owner."""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from ..._stored import storable
from ..._util import canonical_json, new_id, now_ms
from ...pb.v1 import events_pb2
from .._schema import (
    AUDIT_COLS,
    EXEC_COLS,
    audit_row,
    execution_row,
)
from ..audit import result_digest
from ..base import (
    HOST,
    ExecutionClaim,
    ExecutionRow,
    ExecutionState,
    StoreError,
)
from ..rows import reads_shared
from .chain import appending
from .db import SqlDb, SqlRole

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

__all__ = ["LATE_FINISH", "RELEASED", "RUN_OWNER", "SqlExecutionRecords", "owner_of"]

RUN_OWNER = "COALESCE((SELECT agent FROM gf_run_owners WHERE run_id = {run}), '')"
"""The ledger owner of a run: the agent user who owns it over HTTP, ``store:<id>`` for a process writing the store
directly under an agent identity (``GOLDFIVE_AGENT_ID``), ``app:<name>`` for one whose host names its app (an ADK
``App``; that ledger also reads the shared one, see :data:`~goldfive_core.store.rows.APP_OWNER_PREFIX`), '' for an
unnamed one."""


def owner_of(db: SqlDb, conn: Any, run_id: str) -> str:
    """Whose ledger ``run_id``'s calls are kept in (see :data:`RUN_OWNER`)."""
    row = db.execute(conn, f"SELECT {RUN_OWNER.format(run='?')}", (run_id,)).fetchone()
    return str(row[0]) if row is not None else ""


RELEASED = "released_not_run"
"""The ledger event of a claim its run gave back without starting the body (cancelled or paused first)."""

LATE_FINISH = "finished_after_resolved"
"""The ledger event of a body whose "done" came after a person settled its call as not run (the row stays settled)."""


class SqlExecutionRecords(SqlRole):
    """Claims, results and a person's settling of calls in doubt; each change audited."""

    def own_run(self, run_id: str, owner: str) -> None:
        """Keep ``run_id``'s calls in ``owner``'s ledger (a store agent's identity, ``store:<id>``; retried through an
        outage); StoreError when the run is another owner's (the first to name a run keeps it)."""
        self.retrying(f"registering the owner of run {run_id!r}", lambda: self._own_run(run_id, owner))

    def _own_run(self, run_id: str, owner: str) -> None:
        with self.db.guard(f"registering the owner of run {run_id!r}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                self.db.execute(
                    conn,
                    "INSERT INTO gf_run_owners (run_id, agent, created_at_ms) VALUES (?, ?, ?) "
                    "ON CONFLICT (run_id) DO NOTHING",
                    (run_id, owner, now_ms()),
                )
                found = owner_of(self.db, conn, run_id)
        if found != storable(owner):
            raise StoreError(f"run {run_id!r} keeps its calls in the ledger of {found!r}, not of {owner!r}")

    def mark_executing(
        self, target_id: str, *, run_id: str, pid: int = 0, host: str = HOST, args_digest: str = ""
    ) -> bool:
        """Claim the tool body for ``target_id`` (and ``args_digest``) in ``run_id``'s owner's ledger; True exactly
        once (retried through an outage).

        Idempotent for the claimer: when an earlier attempt committed but its answer was lost (the
        connection dropped), the retry finds this run's own "executing" entry and says True again.
        """
        return self.retrying(
            f"marking {target_id!r} executing", lambda: self._mark_executing(target_id, run_id, pid, host, args_digest)
        )

    def claim_in(self, conn: Any, claim: ExecutionClaim) -> bool:
        """:meth:`mark_executing` in the caller's transaction (an APPROVE's ack that carries the claim)."""
        return self._mark_executing(claim.target_id, claim.run_id, claim.pid, claim.host, claim.args_digest, conn)

    def _mark_executing(
        self, target_id: str, run_id: str, pid: int, host: str, args_digest: str, within: Any = None
    ) -> bool:
        with self.db.guard(f"marking {target_id!r} executing"):
            conn = within if within is not None else self.db.conn()
            with contextlib.nullcontext() if within is not None else self.db.transaction(conn):
                owner = owner_of(self.db, conn, run_id)
                if reads_shared(owner) and self._shared_holds(conn, target_id, args_digest):
                    return False  # done or in doubt in the shared ledger the app kept its calls in before its name
                cur = self.db.execute(
                    conn,
                    f"INSERT INTO gf_executions ({EXEC_COLS}) VALUES (?, ?, 'executing', ?, 0, '', ?, ?, ?, ?) "
                    # A finished call whose id is reused with other arguments is another call: it takes the row.
                    "ON CONFLICT (owner, target_id) DO UPDATE SET run_id = excluded.run_id, state = excluded.state, "
                    "started_at_ms = excluded.started_at_ms, finished_at_ms = 0, result_json = '', "
                    "pid = excluded.pid, host = excluded.host, args_digest = excluded.args_digest "
                    "WHERE gf_executions.state = 'done' AND gf_executions.args_digest <> '' "
                    "AND excluded.args_digest <> '' AND gf_executions.args_digest <> excluded.args_digest",
                    (target_id, run_id, at := now_ms(), pid, host, args_digest, owner),
                )
                if cur.rowcount == 1:
                    self._record_execution(
                        conn, target_id, run_id, "executing", at, owner, args_digest=args_digest, pid=pid, host=host
                    )
                    return True
                row = self.db.execute(
                    conn,
                    "SELECT run_id, state, pid, host, args_digest FROM gf_executions WHERE owner = ? AND target_id = ?",
                    (owner, target_id),
                ).fetchone()
                mine = (storable(run_id), "executing", pid, storable(host), storable(args_digest))
                return row is not None and tuple(row) == mine

    def _shared_holds(self, conn: Any, target_id: str, args_digest: str) -> bool:
        """Whether the shared ledger (owner "") holds ``target_id`` as in doubt, or as done for these arguments: an
        app-named ledger's claim then loses, as it would to its own entry (fail closed across the upgrade)."""
        row = self.db.execute(
            conn,
            "SELECT 1 FROM gf_executions WHERE owner = '' AND target_id = ? AND (state = 'executing' "
            "OR args_digest = '' OR ? = '' OR args_digest = ?)",
            (target_id, args_digest, args_digest),
        ).fetchone()
        return row is not None

    def mark_done(self, target_id: str, *, result_json: str, run_id: str | None = None) -> bool:
        """Record the finished tool body and its result (retried through an outage); False: no such claim.

        With ``run_id``, only the claim that run made (in its owner's ledger); None: the call's entry of any owner.
        """
        return self.retrying(f"marking {target_id!r} done", lambda: self._mark_done(target_id, result_json, run_id))

    def _mark_done(self, target_id: str, result_json: str, run_id: str | None) -> bool:
        with self.db.guard(f"marking {target_id!r} done"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                where, params = self._claim_filter(conn, target_id, run_id)
                row = self.db.execute(
                    conn,
                    f"UPDATE gf_executions SET state = 'done', finished_at_ms = ?, result_json = ? WHERE {where} "
                    "RETURNING run_id, owner",
                    (at := now_ms(), result_json, *params),
                ).fetchone()
                if row is None:
                    self._note_late_finish(conn, target_id, run_id, result_json, at)
                    return False
                self._record_execution(conn, target_id, str(row[0]), "done", at, str(row[1]), result_json=result_json)
                return True

    def _note_late_finish(self, conn: Any, target_id: str, run_id: str | None, result_json: str, at: int) -> None:
        """A "done" for a claim a person already settled as not run: refused (their word stands in the ledger), but
        put on the audit log as ``finished_after_resolved`` (it did finish, after it was resolved), not lost."""
        if run_id is None:
            return
        owner = owner_of(self.db, conn, run_id)
        rows = self.db.execute(
            conn,
            f"SELECT {AUDIT_COLS} FROM gf_audit WHERE run_id = ? AND sequence = 0 AND kind = 'execution_recorded' "
            "ORDER BY seq",
            (run_id,),
        ).fetchall()
        last = ""
        for rec in (audit_row(r).event().execution_recorded for r in rows):
            if rec.target_id == storable(target_id) and rec.owner == owner:
                last = rec.state
        if last != "resolved_not_run":
            return  # never claimed by this run (or still someone else's): nothing of it to record
        self._record_execution(conn, target_id, run_id, LATE_FINISH, at, owner, result_json=result_json)
        logger.warning(
            "store %s: %r of run %s finished after a person resolved it as not run; on the audit log as %s",
            self.db.url,
            target_id,
            run_id,
            LATE_FINISH,
        )

    def _claim_filter(self, conn: Any, target_id: str, run_id: str | None) -> tuple[str, list[Any]]:
        """The WHERE of the ledger row ``run_id`` claimed for ``target_id`` (None: the call's row of any owner)."""
        if run_id is None:
            return "target_id = ?", [target_id]
        return "owner = ? AND target_id = ? AND run_id = ?", [owner_of(self.db, conn, run_id), target_id, run_id]

    def resolve_execution(self, target_id: str, *, ran: bool, by: str, run_id: str | None = None) -> bool:
        """Settle an in-doubt call on a person's word (with ``run_id``: the one that run claimed)."""
        with self.db.guard(f"resolving execution {target_id!r}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                at = now_ms()
                where, params = self._claim_filter(conn, target_id, run_id)
                if ran:
                    result = canonical_json({"resolved_by": by, "detail": "a person confirmed it ran"})
                    row = self.db.execute(
                        conn,
                        "UPDATE gf_executions SET state = 'done', finished_at_ms = ?, result_json = ? "
                        f"WHERE {where} AND state = 'executing' RETURNING run_id, owner",
                        (at, result, *params),
                    ).fetchone()
                else:
                    result = ""
                    row = self.db.execute(
                        conn,
                        f"DELETE FROM gf_executions WHERE {where} AND state = 'executing' RETURNING run_id, owner",
                        params,
                    ).fetchone()
                if row is None:
                    return False
                state = "resolved_ran" if ran else "resolved_not_run"
                self._record_execution(
                    conn, target_id, str(row[0]), state, at, str(row[1]), result_json=result, resolved_by=by
                )
                return True

    def release_execution(self, target_id: str, *, run_id: str, args_digest: str = "") -> bool:
        """Give back the claim ``run_id`` holds on ``target_id`` whose body it never started (the run was cancelled
        or paused after the APPROVE's ack claimed it): the entry goes, so a later re-ask may run the call, and the
        audit log says ``released_not_run``. Retried through an outage; False: the run holds no such claim (done,
        another run's, or other arguments: nothing is given back)."""
        return self.retrying(
            f"releasing {target_id!r}", lambda: self._release_execution(target_id, run_id, args_digest)
        )

    def _release_execution(self, target_id: str, run_id: str, args_digest: str) -> bool:
        with self.db.guard(f"releasing {target_id!r}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                where, params = self._claim_filter(conn, target_id, run_id)
                row = self.db.execute(
                    conn,
                    f"DELETE FROM gf_executions WHERE {where} AND state = 'executing' AND args_digest = ? "
                    "RETURNING run_id, owner",
                    (*params, args_digest),
                ).fetchone()
                if row is None:
                    return False
                self._record_execution(
                    conn, target_id, str(row[0]), RELEASED, now_ms(), str(row[1]), args_digest=args_digest
                )
                return True

    def _record_execution(
        self,
        conn: Any,
        target_id: str,
        run_id: str,
        state: str,
        at: int,
        owner: str,
        *,
        args_digest: str = "",
        pid: int = 0,
        host: str = "",
        result_json: str = "",
        resolved_by: str = "",
    ) -> None:
        """Put a change of the execution ledger on the audit chain, in the ledger write's own transaction, so
        ``audit verify`` can check every ledger row (outside the run's own numbering: sequence 0)."""
        event = events_pb2.Event(
            event_id=new_id("ev-ledger"),
            run_id=run_id,
            sequence=0,
            execution_recorded=events_pb2.ExecutionRecorded(
                target_id=target_id,
                state=state,
                args_digest=args_digest,
                pid=pid,
                host=host,
                result_digest=result_digest(result_json),
                resolved_by=resolved_by,
                owner=owner,
            ),
        )
        event.emitted_at.FromMilliseconds(at)
        with appending(self.db, conn) as chain:
            chain.append(event)

    def execution(self, target_id: str, *, run_id: str | None = None) -> ExecutionRow | None:
        """The ledger entry for ``target_id`` in ``run_id``'s owner's ledger (retried through an outage).

        None for ``run_id``: the newest entry for the call id of any owner (the command line, a person's look).
        """
        return self.retrying(f"reading execution {target_id!r}", lambda: self._execution(target_id, run_id))

    def _execution(self, target_id: str, run_id: str | None) -> ExecutionRow | None:
        with self.db.guard(f"reading execution {target_id!r}"):
            conn = self.db.conn()
            if run_id is None:
                row = self.db.execute(
                    conn,
                    f"SELECT {EXEC_COLS} FROM gf_executions WHERE target_id = ? ORDER BY started_at_ms DESC LIMIT 1",
                    (target_id,),
                ).fetchone()
            else:
                owner = owner_of(self.db, conn, run_id)
                row = self.db.execute(
                    conn,
                    f"SELECT {EXEC_COLS} FROM gf_executions WHERE owner = ? AND target_id = ?",
                    (owner, target_id),
                ).fetchone()
                if row is None and reads_shared(owner):  # where the app kept its calls before it had a name
                    row = self.db.execute(
                        conn,
                        f"SELECT {EXEC_COLS} FROM gf_executions WHERE owner = '' AND target_id = ?",
                        (target_id,),
                    ).fetchone()
            return execution_row(row) if row is not None else None

    def executions(self, *, state: ExecutionState | None = None) -> list[ExecutionRow]:
        """Ledger entries, newest first."""
        with self.db.guard("listing executions"):
            if state is None:
                cur = self.db.execute(
                    self.db.conn(), f"SELECT {EXEC_COLS} FROM gf_executions ORDER BY started_at_ms DESC"
                )
            else:
                cur = self.db.execute(
                    self.db.conn(),
                    f"SELECT {EXEC_COLS} FROM gf_executions WHERE state = ? ORDER BY started_at_ms DESC",
                    (state.value,),
                )
            return [execution_row(r) for r in cur.fetchall()]
