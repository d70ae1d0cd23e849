"""Parked calls in a SQL store: ADK invocations that ended to wait for a person, and the lease to resume them."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..._util import shorten
from .._schema import (
    DETACHED_COLS,
    detached_row,
)
from ..base import (
    DetachedRow,
    DetachedStatus,
    StoreError,
)
from .db import SqlRole

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


class SqlParking(SqlRole):
    """Detached invocations: recorded, listed, claimed under a lease, settled."""

    # -- detached invocations -----------------------------------------------------------------
    def record_detached(
        self,
        target_id: str,
        *,
        run_id: str,
        app_name: str,
        user_id: str,
        session_id: str,
        invocation_id: str,
        detail: str = "",
    ) -> None:
        """Record that an invocation ended waiting for ``target_id`` (WAITING, no lease)."""
        with self.db.guard(f"recording detached invocation {invocation_id!r}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                self.db.execute(
                    conn,
                    f"INSERT INTO gf_detached ({DETACHED_COLS}) "
                    f"VALUES (?, ?, ?, ?, ?, ?, 'waiting', {self.db.now_expr}, '', 0, 0, ?) "
                    "ON CONFLICT (target_id) DO UPDATE SET run_id = excluded.run_id, app_name = excluded.app_name, "
                    "user_id = excluded.user_id, session_id = excluded.session_id, "
                    "invocation_id = excluded.invocation_id, status = 'waiting', "
                    "detached_at_ms = excluded.detached_at_ms, claimed_by = '', lease_until_ms = 0, "
                    "resumed_at_ms = 0, detail = excluded.detail",
                    (target_id, run_id, app_name, user_id, session_id, invocation_id, shorten(detail, 500)),
                )

    def detached(self, target_id: str) -> DetachedRow | None:
        """The detached invocation waiting for ``target_id`` (retried through an outage)."""
        return self.retrying(f"reading detached invocation for {target_id!r}", lambda: self._detached(target_id))

    def _detached(self, target_id: str) -> DetachedRow | None:
        with self.db.guard(f"reading detached invocation for {target_id!r}"):
            row = self.db.execute(
                self.db.conn(), f"SELECT {DETACHED_COLS} FROM gf_detached WHERE target_id = ?", (target_id,)
            ).fetchone()
            return detached_row(row) if row is not None else None

    def detached_runs(
        self, *, status: DetachedStatus | None = DetachedStatus.WAITING, app_name: str | None = None, limit: int = 100
    ) -> list[DetachedRow]:
        """Detached invocations, oldest first."""
        where: list[str] = []
        params: list[Any] = []
        if status is not None:
            where.append("status = ?")
            params.append(status.value)
        if app_name is not None:
            where.append("app_name = ?")
            params.append(app_name)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        with self.db.guard("listing detached invocations"):
            cur = self.db.execute(
                self.db.conn(),
                f"SELECT {DETACHED_COLS} FROM gf_detached {clause}ORDER BY detached_at_ms, target_id LIMIT ?",
                (*params, max(limit, 0)),
            )
            return [detached_row(r) for r in cur.fetchall()]

    def claim_detached(self, target_id: str, *, owner: str, lease_ms: int) -> bool:
        """Take the resume lease; exactly one concurrent caller wins (the lease runs on the store's clock)."""
        if not owner:
            raise StoreError("claim_detached needs a non-empty owner")
        with self.db.guard(f"claiming detached invocation for {target_id!r}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                cur = self.db.execute(
                    conn,
                    "UPDATE gf_detached SET status = 'resuming', claimed_by = ?, "
                    f"lease_until_ms = {self.db.now_expr} + ? "
                    "WHERE target_id = ? AND (status = 'waiting' OR "
                    f"(status = 'resuming' AND lease_until_ms < {self.db.now_expr}))",
                    (owner, max(int(lease_ms), 1), target_id),
                )
                return bool(cur.rowcount == 1)

    def settle_detached(self, target_id: str, *, owner: str, resumed: bool, detail: str = "") -> bool:
        """RESUMED (the call was taken up) or back to WAITING; only the lease holder may."""
        with self.db.guard(f"settling detached invocation for {target_id!r}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                if not resumed:
                    cur = self.db.execute(
                        conn,
                        "UPDATE gf_detached SET status = 'waiting', claimed_by = '', lease_until_ms = 0 "
                        "WHERE target_id = ? AND claimed_by = ? AND status = 'resuming'",
                        (target_id, owner),
                    )
                    return bool(cur.rowcount == 1)
                cur = self.db.execute(
                    conn,
                    f"UPDATE gf_detached SET status = 'resumed', resumed_at_ms = {self.db.now_expr}, detail = ? "
                    "WHERE target_id = ? AND claimed_by = ? AND status = 'resuming'",
                    (shorten(detail, 500), target_id, owner),
                )
                if cur.rowcount != 1:
                    return False
                # The detached run is over: the resumed invocation carries on as a new run.
                self.db.execute(
                    conn,
                    "UPDATE gf_runs SET status = 'finished' WHERE status = 'detached' AND run_id IN "
                    "(SELECT run_id FROM gf_detached WHERE target_id = ?)",
                    (target_id,),
                )
                return True
