"""The store interface: approval records, the audit log, the control inbox and the execution ledger.

A store is the rendezvous between an agent process and whoever decides from
elsewhere (the ``goldfive`` command, another process, another host). Every
method is synchronous and thread-safe (one connection per thread); async code
calls them through a worker thread. Backends: :class:`~goldfive_core.store.sqlite.SqliteStore`
(embedded default) and :class:`~goldfive_core.store.postgres.PostgresStore`.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from ..approvals import OPEN_STATUSES as _OPEN
from ..approvals import ApprovalStatus, request_digest
from ..control import AckResult, ControlAck, ControlMessage
from ..errors import SchemaVersionError, StoreError, StoreUnavailableError
from ..limits import Limits
from ..pb.v1 import events_pb2
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
    ParkedCalls,
    RunRegistry,
    UserDirectory,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_STALE_AFTER_MS",
    "DETACHED_LIVENESS",
    "HOST",
    "ApprovalRow",
    "AuditReport",
    "AuditRow",
    "DetachedRow",
    "DetachedStatus",
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


OPEN_STATUSES: tuple[ApprovalStatus, ...] = tuple(sorted(_OPEN))
"""Approval statuses that still accept a decision (the core's :data:`~goldfive_core.approvals.OPEN_STATUSES`)."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRow:
    """One approval record as stored (the latest request for ``(run_id, target_id)``)."""

    id: int
    run_id: str
    session_id: str
    target_id: str
    kind: str
    prompt: str
    task_id: str
    tool_name: str
    args_json: str
    args_digest: str
    metadata: Mapping[str, str]
    status: ApprovalStatus
    requested_at_ms: int
    expires_at_ms: int
    timeout_ms: int
    decided_at_ms: int
    decided_by: str
    decision: str
    detail: str
    edited_args_json: str
    decided_via: str
    """"run" (the live agent applied it) or "store" (recorded while the agent was not running)."""
    decided_channel: str = ""
    """How the decision came: ``web``, ``api`` (goldfive serve) or ``cli``; "" when unknown."""
    decision_sig: str = ""
    """The server's signature block of the decision (JSON), "" when unsigned."""
    quorum_progress: str = ""
    """For a request that needs several approvers: the tally after the last vote ("1 of 2: ana"), else ""."""
    original_args_json: str = ""
    """When an approver of a quorum edited the arguments: the call's own (``args_json`` then holds the edited
    ones on the table, which the next approver reads and votes on); "" otherwise."""
    original_args_digest: str = ""
    """The digest of :attr:`original_args_json` ("" when the arguments were not edited); votes on it are stale."""
    request_id: str = ""
    """The request's own identity (a re-ask of the target is a new request); "" for records made before it existed."""

    @property
    def request_digest(self) -> str:
        """:func:`~goldfive_core.approvals.request_digest` of the request as stored (the call's own arguments)."""
        return request_digest(
            kind=self.kind,
            target_id=self.target_id,
            task_id=self.task_id,
            prompt=self.prompt,
            args_digest=self.original_args_digest or self.args_digest,
        )

    @property
    def open(self) -> bool:
        """True while a decision would still resolve this record."""
        return self.status in OPEN_STATUSES

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able view."""
        out = dataclasses.asdict(self)
        out["metadata"] = dict(self.metadata)
        return out


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class RunRow:
    """A run seen by a store sink, with the process that hosts it."""

    run_id: str
    session_id: str
    adapter: str
    pid: int
    host: str
    status: StoredRunStatus
    started_at_ms: int
    heartbeat_at_ms: int
    ended_at_ms: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", StoredRunStatus.stored(self.status))


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class AuditRow:
    """One audit log entry: an event and its place in the hash chain."""

    seq: int
    run_id: str
    sequence: int
    kind: str
    event_id: str
    emitted_at_ms: int
    body: bytes
    prev_hash: str
    hash: str

    def event(self) -> events_pb2.Event:
        """The stored event."""
        event = events_pb2.Event()
        event.ParseFromString(self.body)
        return event


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class AuditReport:
    """The result of checking the audit chain."""

    ok: bool
    rows: int
    head_hash: str
    problems: tuple[str, ...] = ()
    first_bad_seq: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class InboxRow:
    """A control message waiting in (or answered through) the store's inbox."""

    id: int
    control_id: str
    kind: str
    payload: Mapping[str, Any]
    run_id: str
    issued_at_ms: int
    status: str
    problem: str = ""
    """Why the row cannot be dispatched (a payload that is not a JSON object, ...); "" when it is sound."""

    def message(self) -> ControlMessage:
        """The control message (an unknown kind stays a string; dispatch answers it)."""
        return ControlMessage(self.kind, dict(self.payload), id=self.control_id, issued_at_ms=self.issued_at_ms)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class StoredDecision:
    """A decision found in the store for a target (e.g. recorded while its agent was down)."""

    approval_id: int
    run_id: str
    target_id: str
    approved: bool
    detail: str
    decided_by: str
    args_digest: str
    edited_args: Mapping[str, Any] | None
    decided_at_ms: int
    decided_via: str
    decided_channel: str = ""
    signature: str = ""
    """The signature block (JSON) :func:`goldfive_core.signing.check_decision` verifies; "" if unsigned."""
    request_id: str = ""
    """The request decided (its record's ``request_id``)."""
    request_digest: str = ""
    """:func:`~goldfive_core.approvals.request_digest` of that record, recomputed from its stored columns."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class UserRow:
    """A person (or program) who logs in to ``goldfive serve``; the token is stored only as a slow hash."""

    name: str
    role: str
    token_id: str
    token_hash: str
    disabled: bool
    created_at_ms: int
    updated_at_ms: int
    failed_logins: int
    locked_until_ms: int
    groups: tuple[str, ...] = ()
    """Policy groups (``goldfive users add NAME --group finance``): a rule's ``role:finance`` names them too."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class WebSession:
    """A logged-in browser: the cookie holds a random id; the store keeps its hash."""

    id_hash: str
    user_name: str
    csrf: str
    created_at_ms: int
    expires_at_ms: int


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalPage:
    """One page of approval records and how many match in all."""

    rows: list[ApprovalRow]
    total: int


class ExecutionState(StrEnum):
    """Where the tool body of an approved call stands (the at-most-once ledger)."""

    NONE = "none"
    EXECUTING = "executing"
    DONE = "done"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionRow:
    """One entry of the execution ledger."""

    target_id: str
    run_id: str
    state: ExecutionState
    started_at_ms: int
    finished_at_ms: int
    result_json: str
    pid: int
    host: str
    args_digest: str = ""
    """The digest of the arguments the body ran with ("" in rows written before schema 3)."""
    owner: str = ""
    """Whose call it is: the agent user owning the claiming run over HTTP, "" for a process writing the store."""


class DetachedStatus(StrEnum):
    """Where an ADK invocation that ended to wait for a person stands."""

    WAITING = "waiting"
    """Ended; resumes when its approval is decided."""
    RESUMING = "resuming"
    """A process holds the lease and is resuming it now."""
    RESUMED = "resumed"
    """The call was taken up in a resumed invocation (its outcome is in the ledger or the decision)."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DetachedRow:
    """An ADK invocation that ended while a person decides ``target_id`` (the function call id)."""

    target_id: str
    run_id: str
    app_name: str
    user_id: str
    session_id: str
    """The ADK session id."""
    invocation_id: str
    status: DetachedStatus
    detached_at_ms: int
    claimed_by: str
    lease_until_ms: int
    resumed_at_ms: int
    detail: str


def ack_from_columns(control_id: str, result: str, detail: str, data: Mapping[str, Any] | None, at: int) -> ControlAck:
    """Rebuild a ControlAck from stored columns (an unknown result reads as FAILURE)."""
    try:
        parsed = AckResult(result)
    except ValueError:
        parsed = AckResult.FAILURE
    return ControlAck(control_id, parsed, detail, acked_at_ms=at, data=data)


class InboxWaiter(Protocol):
    """A readable socket that turns ready when the inbox may have changed (see :meth:`Store.inbox_waiter`)."""

    fallback_s: float
    """Look anyway after sleeping this long (what a lost wake-up costs at most)."""

    def fileno(self) -> int:
        """The socket's file descriptor, to register with an event loop."""
        ...

    def drain(self) -> bool:
        """Consume the pending wake-ups without blocking; whether there were any."""
        ...

    def wait(self, timeout_s: float) -> bool:
        """Block until woken (True) or ``timeout_s`` passed (False); for loops that cannot watch a descriptor."""
        ...

    def gone(self) -> bool:
        """Whether writers can no longer reach it (its socket was removed): the holder binds a new one."""
        ...

    def close(self) -> None:
        """Unbind; wake-ups stop."""
        ...


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
