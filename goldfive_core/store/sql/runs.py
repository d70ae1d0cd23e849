"""The run registry of a SQL store: runs as their sinks record them, heartbeats, and crashed runs closed."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...pb.v1 import events_pb2, types_pb2
from .._schema import (
    RUN_COLS,
    run_row,
)
from ..base import (
    RunRow,
)
from .chain import ChainWriter, appending
from .db import SqlRole

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

_HEARTBEAT_PAGE = 500
"""Runs stamped per statement of a heartbeat (SQLite's bound on parameters is far above it)."""


class SqlRunRegistry(SqlRole):
    """Runs and the liveness of their processes, judged on the store's clock."""

    def heartbeat(self, run_ids: Sequence[str]) -> None:
        """Refresh the heartbeat of live runs (retried through an outage)."""
        if run_ids:
            self.retrying("writing a heartbeat", lambda: self._heartbeat(run_ids))

    def _heartbeat(self, run_ids: Sequence[str]) -> None:
        # every 5 s: an idle agent is not woken by its own. One transaction however many runs (goldfive serve
        # batches the beats of thousands of agents into one call), one statement per page of them.
        # Rows are locked in run id order, as the reaper locks them: two servers' batches (and a reaper) that
        # share runs wait for each other instead of deadlocking (PostgreSQL locks an UPDATE's rows in scan order).
        ids = sorted(set(run_ids))
        with self.db.writing("writing a heartbeat", quiet=True) as conn:
            for start in range(0, len(ids), _HEARTBEAT_PAGE):
                page = ids[start : start + _HEARTBEAT_PAGE]
                marks = ", ".join("?" * len(page))
                if self.db.for_update:
                    self.db.execute(
                        conn,
                        f"SELECT run_id FROM gf_runs WHERE status = 'running' AND run_id IN ({marks}) "
                        f"ORDER BY run_id{self.db.for_update}",
                        tuple(page),
                    ).fetchall()
                self.db.execute(
                    conn,
                    f"UPDATE gf_runs SET heartbeat_at_ms = {self.db.now_expr} "
                    f"WHERE status = 'running' AND run_id IN ({marks})",
                    tuple(page),
                )

    def clock_ms(self) -> int:
        """The store's clock (the database server's, for PostgreSQL), in epoch milliseconds."""
        with self.db.guard("reading the store's clock"):
            return self.db.clock_ms(self.db.conn())

    def _stale_runs(self, conn: Any, limit: int) -> tuple[int, list[Any]]:
        """The store's clock and up to ``limit`` running runs whose heartbeat is older than ``stale_after_ms``."""
        now = self.db.clock_ms(conn)
        rows = self.db.execute(
            conn,
            f"SELECT {RUN_COLS} FROM gf_runs WHERE status = 'running' AND heartbeat_at_ms < ? "
            f"ORDER BY started_at_ms LIMIT {int(limit)}",
            (now - self.stale_after_ms,),
        ).fetchall()
        return now, rows

    def reap_crashed(self) -> list[str]:
        """Close runs whose process stopped heartbeating: status ``crashed`` and a closing RunAborted event.

        Judged by the store's clock against the heartbeat the store's clock wrote, so no two hosts'
        clocks are compared. Their open approvals stay open (listed as orphaned): a decision can still
        be recorded for a replay of the call.
        """
        closed: list[str] = []
        with self.db.guard("closing crashed runs"):
            conn = self.db.conn()
            # Every live agent asks every 10 s: when nothing is stale (nearly always) a read says so, with no
            # write lock taken and no waiter woken by an empty commit.
            if not self._stale_runs(conn, 1)[1]:
                return []
            with self.db.transaction(conn):
                now, rows = self._stale_runs(conn, 100)
                if not rows:
                    return []
                with appending(self.db, conn) as chain:
                    for run in sorted((run_row(r) for r in rows), key=lambda run: run.run_id):  # as heartbeats lock
                        if self._close_crashed(chain, run, now):
                            closed.append(run.run_id)
        for run_id in closed:
            logger.warning("store %s: run %s crashed (no heartbeat); closed it", self.db.url, run_id)
        return closed

    def _close_crashed(self, chain: ChainWriter, run: RunRow, now: int) -> bool:
        """Mark the crashed run ``crashed`` and append its closing RunAborted (in the reaper's transaction); False,
        and nothing written, when it is no longer stale.

        The stale runs were read without a lock: a heartbeat committed since then must keep its run open. The
        UPDATE judges the heartbeat again on the row as it is now (PostgreSQL re-reads a row changed since the
        statement began, and waits for a beat still writing it), and only a run it closed gets its event.
        """
        cur = self.db.execute(
            chain.conn,
            "UPDATE gf_runs SET status = 'crashed', ended_at_ms = ? "
            "WHERE run_id = ? AND status = 'running' AND heartbeat_at_ms < ?",
            (now, run.run_id, now - self.stale_after_ms),
        )
        if cur.rowcount != 1:
            return False
        event = events_pb2.Event(
            event_id=f"ev-crashed-{run.run_id}",
            run_id=run.run_id,
            session_id=run.session_id,
            sequence=chain.next_sequence(run.run_id),
        )
        event.emitted_at.FromMilliseconds(now)
        event.run_aborted.reason = (
            f"crashed: no heartbeat from process {run.pid} on {run.host} for "
            f"{(now - run.heartbeat_at_ms) / 1000:.0f} s (the store's clock)"
        )
        event.run_aborted.status = types_pb2.RUN_STATUS_ABORTED
        chain.append(event)
        return True

    def run(self, run_id: str) -> RunRow | None:
        """The run row, if recorded."""
        with self.db.guard(f"reading run {run_id!r}"):
            row = self.db.execute(
                self.db.conn(), f"SELECT {RUN_COLS} FROM gf_runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            return run_row(row) if row is not None else None

    def runs(self, *, running_only: bool = True, limit: int | None = None, offset: int = 0) -> list[RunRow]:
        """Runs, newest first."""
        clause = "WHERE status = 'running' " if running_only else ""
        page = "LIMIT ? OFFSET ?" if limit is not None else ""
        params = (max(limit, 0), max(offset, 0)) if limit is not None else ()
        with self.db.guard("listing runs"):
            cur = self.db.execute(
                self.db.conn(), f"SELECT {RUN_COLS} FROM gf_runs {clause}ORDER BY started_at_ms DESC {page}", params
            )
            return [run_row(r) for r in cur.fetchall()]

    def count_runs(self, *, running_only: bool = True) -> int:
        """How many runs :meth:`runs` would list without a limit."""
        clause = "WHERE status = 'running'" if running_only else ""
        with self.db.guard("counting runs"):
            return int(self.db.execute(self.db.conn(), f"SELECT COUNT(*) FROM gf_runs {clause}").fetchone()[0])
