"""The store interface: approval records, the audit log, the control inbox and the execution ledger.

A store is the rendezvous between an agent process and whoever decides from
elsewhere (the ``goldfive`` command, another process, another host). Every
method is synchronous and thread-safe (one connection per thread); async code
calls them through a worker thread. Backends: :class:`~goldfive_core.store.sqlite.SqliteStore`
(embedded default) and :class:`~goldfive_core.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..control import AckResult, ControlAck
from ..errors import SchemaVersionError, StoreError, StoreUnavailableError
from ..limits import Limits
from .liveness import (
    DEFAULT_STALE_AFTER_MS,
    DETACHED_LIVENESS,
    HOST,
    RunLiveness,
    StoredRunStatus,
    judge_liveness,
    run_liveness,
)
from .roles import (
    ApprovalRecords,
    AuditLog,
    ControlInbox,
    ExecutionRecords,
    InboxWaiter,
    ParkedCalls,
    RunRegistry,
    UserDirectory,
)
from .rows import (
    OPEN_STATUSES,
    ApprovalPage,
    ApprovalRow,
    AuditReport,
    AuditRow,
    DetachedRow,
    DetachedStatus,
    ExecutionClaim,
    ExecutionRow,
    ExecutionState,
    InboxRow,
    RunRow,
    StoredDecision,
    UserRow,
    WebSession,
)

__all__ = [
    "DEFAULT_STALE_AFTER_MS",
    "OPEN_STATUSES",
    "DETACHED_LIVENESS",
    "HOST",
    "ApprovalRow",
    "AuditReport",
    "AuditRow",
    "DetachedRow",
    "DetachedStatus",
    "ExecutionClaim",
    "ExecutionRow",
    "ExecutionState",
    "InboxRow",
    "InboxWaiter",
    "RunRow",
    "SchemaVersionError",
    "Store",
    "StoreError",
    "StoreUnavailableError",
    "StoredDecision",
    "UserRow",
    "WebSession",
    "ApprovalPage",
    "run_liveness",
]

HEARTBEAT_INTERVAL_S = 5.0
"""How often a process with live runs refreshes their heartbeat: three chances within DEFAULT_STALE_AFTER_MS
(a lease renewed at a third of its length), and an idle agent's thread wakes seldom."""


def ack_from_columns(control_id: str, result: str, detail: str, data: Mapping[str, Any] | None, at: int) -> ControlAck:
    """Rebuild a ControlAck from stored columns (an unknown result reads as FAILURE)."""
    try:
        parsed = AckResult(result)
    except ValueError:
        parsed = AckResult.FAILURE
    return ControlAck(control_id, parsed, detail, acked_at_ms=at, data=data)


class Store(
    AuditLog, ApprovalRecords, RunRegistry, ExecutionRecords, ParkedCalls, ControlInbox, UserDirectory, abc.ABC
):
    """What every backend provides: every role of :mod:`goldfive_core.store.roles` (their union).

    Thread-safe; every call is short and bounded. Code that needs one job is typed on its role.
    """

    url: str = ""
    """Where the store lives, for messages (a path or a DSN without its password); each backend sets it (a plain
    attribute here: the roles' read-only ``url`` property is not inherited)."""

    stale_after_ms: int = DEFAULT_STALE_AFTER_MS

    retry_budget_s: float = 0.0
    """How long idempotent agent-side calls reconnect and retry through an outage before raising
    (SQL backends read ``GOLDFIVE_STORE_RETRY_S``, default 10 s; the CLI uses 0: a person is told at once)."""

    limits: Limits = Limits()
    """Size limits enforced on what is written (backends read ``GOLDFIVE_LIMIT_*`` at construction)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close this thread's connections (others close when their thread ends)."""

    @abc.abstractmethod
    def schema_version(self) -> int:
        """The schema version of the database."""

    def liveness_of(self, run: RunRow | None) -> RunLiveness:
        """:func:`~goldfive_core.store.liveness.judge_liveness` on the store's clock (never this host's against
        the agent's)."""
        if run is None or run.status is not StoredRunStatus.RUNNING:
            return judge_liveness(run, stale_after_ms=self.stale_after_ms)
        return judge_liveness(run, stale_after_ms=self.stale_after_ms, now=self.clock_ms())

    def liveness(self, run: RunRow | None) -> str:
        """The words of :meth:`liveness_of` (``"live"``, ``"finished"`` or why the process is gone), for people."""
        return self.liveness_of(run).reason

    def inbox_waiter(self) -> InboxWaiter | None:
        """A socket an event loop can sleep on until the inbox may have changed, or None (use :meth:`wait_inbox`)."""
        return None

    # -- approvals, paged (goldfive serve) ------------------------------------------------------
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
        """Records with one of ``statuses``, soonest expiry first (none last), and the total that match.

        ``run_ids`` keeps only those runs; ``exclude_run_ids`` drops those. ``decided_by`` keeps the records
        that person decided (alone or as one of a quorum); ``since_ms`` / ``until_ms`` bound the time each
        record was decided (or asked, for one nobody decided); ``newest_first`` orders by that time, newest
        first (the history), instead of by expiry.
        """
        raise StoreError(f"{type(self).__name__} does not page approvals")

    # -- users and web sessions (goldfive serve) -------------------------------------------------
    def add_user(self, user: UserRow) -> bool:
        """Create a user; False when the name is taken."""
        raise StoreError(f"{type(self).__name__} keeps no users")

    def user(self, name: str) -> UserRow | None:
        """The user called ``name``."""
        raise StoreError(f"{type(self).__name__} keeps no users")

    def user_by_token_id(self, token_id: str) -> UserRow | None:
        """The user whose current token has this id."""
        raise StoreError(f"{type(self).__name__} keeps no users")

    def users_by_token_ids(self, token_ids: Sequence[str]) -> dict[str, UserRow]:
        """The users whose current tokens have these ids, by token id."""
        raise StoreError(f"{type(self).__name__} keeps no users")

    def users(self) -> list[UserRow]:
        """Every user, by name."""
        raise StoreError(f"{type(self).__name__} keeps no users")

    def update_user(
        self,
        name: str,
        *,
        disabled: bool | None = None,
        token_id: str | None = None,
        token_hash: str | None = None,
        role: str | None = None,
        groups: tuple[str, ...] | None = None,
    ) -> bool:
        """Change a user (a new token or disabling also ends their web sessions); False if unknown."""
        raise StoreError(f"{type(self).__name__} keeps no users")

    def change_user_groups(
        self, name: str, change: Callable[[tuple[str, ...]], tuple[str, ...]]
    ) -> tuple[str, ...] | None:
        """Replace a user's policy groups by ``change(current)`` in one transaction (two admins changing groups at
        once both take effect); the groups after, or None for an unknown user. An error from ``change`` changes
        nothing."""
        raise StoreError(f"{type(self).__name__} keeps no users")

    def note_login(self, name: str, *, ok: bool, lock_until_ms: int = 0) -> int:
        """Count a failed login (returns the count) or reset the count after a good one."""
        raise StoreError(f"{type(self).__name__} keeps no users")

    def add_web_session(self, session: WebSession) -> None:
        """Store a new web session."""
        raise StoreError(f"{type(self).__name__} keeps no web sessions")

    def web_session(self, id_hash: str) -> WebSession | None:
        """A web session that has not expired."""
        raise StoreError(f"{type(self).__name__} keeps no web sessions")

    def end_web_session(self, id_hash: str) -> None:
        """Log a web session out."""
        raise StoreError(f"{type(self).__name__} keeps no web sessions")
