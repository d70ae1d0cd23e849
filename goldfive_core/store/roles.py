"""The store by role: one small Protocol per job a store does.

A :class:`~goldfive_core.store.Store` is all of them (their union); code that needs one job is typed on
that role, so an object that does only that job serves it: :class:`~goldfive_core.store.StoreSink` writes
through an :class:`EventLog` and :class:`Heartbeats`, :class:`~goldfive_core.store.execution.StoreLedger`
through a :class:`LedgerStore`, and an agent's :class:`~goldfive_core.store.http.RemoteStore` (which carries
those calls over HTTP to ``goldfive serve``) is each of those without being a whole store.

Every method is synchronous and thread-safe; async code calls them through a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..control import ControlAck, ControlMessage
from ..pb.v1 import events_pb2

if TYPE_CHECKING:
    from ..signing import TrustKey
    from .liveness import RunLiveness
    from .rows import (
        ApprovalPage,
        ApprovalRow,
        AuditReport,
        AuditRow,
        DetachedRow,
        DetachedStatus,
        ExecutionClaim,
        ExecutionRow,
        ExecutionState,
        GrantRow,
        InboxRow,
        RunRow,
        StoredDecision,
        UserRow,
        WebSession,
    )

__all__ = [
    "AgentStore",
    "ApprovalRecords",
    "AuditLog",
    "CallLedger",
    "ControlInbox",
    "DecisionSource",
    "EventLog",
    "ExecutionRecords",
    "GrantReader",
    "Heartbeats",
    "InboxWaiter",
    "LedgerStore",
    "ParkedCalls",
    "RunOwners",
    "RunRegistry",
    "RunWriter",
    "StoreHandle",
    "UserDirectory",
]


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


class StoreHandle(Protocol):
    """What every role's object has: where it lives (for messages), how long it retries, and its close."""

    @property
    def url(self) -> str:
        """Where the store lives, for messages (a path, a DSN without its password, a server URL)."""
        ...

    @property
    def retry_budget_s(self) -> float:
        """How long idempotent agent-side calls reconnect and retry through an outage before raising."""
        ...

    def close(self) -> None:
        """Close this thread's connections (others close when their thread ends)."""
        ...


class EventLog(StoreHandle, Protocol):
    """The audit log's write side: what a run's sink appends."""

    def append_events(self, events: Sequence[events_pb2.Event], *, pid: int, host: str) -> None:
        """Append events to the audit chain and update approvals and runs, in one transaction."""
        ...


class AuditLog(EventLog, Protocol):
    """The append-only audit log: the hash chain of every run's events, read and verified."""

    def audit_rows(self, *, after_seq: int = 0, run_id: str | None = None, limit: int = 1000) -> list[AuditRow]:
        """Audit rows with ``seq > after_seq`` in chain order."""
        ...

    def audit_rows_of_kind(
        self,
        kinds: Sequence[str],
        *,
        run_id: str | None = None,
        before_seq: int = 0,
        since_ms: int = 0,
        until_ms: int = 0,
        limit: int = 100,
    ) -> list[AuditRow]:
        """Audit rows of these kinds (of one run), newest first (before ``before_seq``, in ``[since_ms, until_ms)``
        when given)."""
        ...

    def audit_head(self) -> tuple[int, str]:
        """The seq and hash of the last audit row (``(0, GENESIS)`` when empty)."""
        ...

    def verify_audit(self, *, trust_key: TrustKey | None = None) -> AuditReport:
        """Recompute the whole chain and report every break (``trust_key``: verify decision signatures too)."""
        ...

    def count_audit(self, *, run_id: str | None = None) -> int:
        """How many audit rows there are (of one run)."""
        ...

    def pause_of(self, run_id: str) -> events_pb2.RunPaused | None:
        """The run's standing pause (its last ``run_paused`` with no ``run_resumed`` after it), else None."""
        ...


class Heartbeats(StoreHandle, Protocol):
    """The run registry's agent side: a process says its runs are alive, and closes runs whose process died."""

    def heartbeat(self, run_ids: Sequence[str]) -> None:
        """Say that the runs are still alive in this process (stamped with the store's clock)."""
        ...

    def reap_crashed(self) -> list[str]:
        """Mark runs without a fresh heartbeat ``crashed`` with a closing audit event; returns their ids."""
        ...


class RunRegistry(Heartbeats, Protocol):
    """Runs as their sinks recorded them, and whether each one's process is alive."""

    @property
    def stale_after_ms(self) -> int:
        """A run whose process has not written a heartbeat for this long is considered gone."""
        ...

    def run(self, run_id: str) -> RunRow | None:
        """The run row, if a sink recorded it."""
        ...

    def runs(self, *, running_only: bool = True, limit: int | None = None, offset: int = 0) -> list[RunRow]:
        """Runs, newest first."""
        ...

    def count_runs(self, *, running_only: bool = True) -> int:
        """How many runs :meth:`runs` would list without a limit."""
        ...

    def clock_ms(self) -> int:
        """The store's clock in epoch milliseconds (PostgreSQL: the server's); liveness is judged on it."""
        ...

    def liveness_of(self, run: RunRow | None) -> RunLiveness:
        """Whether the run's process is alive, judged on the store's clock (never this host's against the agent's)."""
        ...

    def liveness(self, run: RunRow | None) -> str:
        """The words of :meth:`liveness_of` (``"live"``, ``"finished"`` or why not), for people."""
        ...


class RunWriter(EventLog, Heartbeats, Protocol):
    """What a run's sink writes: its events, and the heartbeat of its process."""


class DecisionSource(StoreHandle, Protocol):
    """Decisions a person recorded, as the agent side reads them (the channel's sweep, a replay)."""

    def approvals(
        self,
        *,
        open_only: bool = True,
        run_id: str | None = None,
        limit: int = 500,
        offset: int = 0,
        oldest_first: bool = False,
    ) -> list[ApprovalRow]:
        """Approval records, newest first (only those still accepting a decision by default)."""
        ...

    def find_decision(self, target_id: str, *, run_id: str | None = None) -> StoredDecision | None:
        """The newest decision for ``target_id`` that no execution has used yet (with ``run_id``: among the
        requests of the runs of that run's owner)."""
        ...


class ApprovalRecords(DecisionSource, Protocol):
    """Approval records: listed, counted, paged, and decided while their run is not running."""

    def count_approvals(self, *, open_only: bool = True, run_id: str | None = None) -> int:
        """How many records :meth:`approvals` would list without a limit (for "N more" notices)."""
        ...

    def approvals_for(self, target_id: str) -> list[ApprovalRow]:
        """Every record for ``target_id`` (one per run that asked), newest first."""
        ...

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

        ``run_ids`` keeps only those runs; ``exclude_run_ids`` drops those.
        """
        ...

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
        """Record a decision for an open record whose agent is not running.

        False if it was already decided (or is closed), if ``args_digest`` is given and the record's call
        has another digest, or if ``request_id`` is given and the record is another request of the target
        (asked again since): a stale decision is never recorded. ``channel``
        (web / api / cli) and the server's ``signature`` block are kept with the record, so a
        replay of the call can check who decided.
        """
        ...

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
        """Close a pending record whose agent is not running as expired by the deciding side's rule (its
        ``expires`` passed): kept with who expired it and the ``signature`` block, so a replay of the call hears a
        timeout. False when it is decided or closed, or (with ``request_id``) another request of the target."""
        ...


class CallLedger(StoreHandle, Protocol):
    """The execution ledger's agent side: at most one run of a tool body per approved call."""

    def mark_executing(self, target_id: str, *, run_id: str, pid: int, host: str, args_digest: str = "") -> bool:
        """Claim the right to run the tool body; False when it was claimed before (done or in doubt).

        The entry belongs to the owner of ``run_id`` (the agent user owning it over HTTP; for a process writing
        the store, ``store:<id>`` of its ``GOLDFIVE_AGENT_ID``, "" when it has none): each owner has its own
        ledger, so owners reusing a call id never collide. A
        finished entry for the same call id with another ``args_digest`` is a different call: it is replaced
        and the claim succeeds.
        """
        ...

    def mark_done(self, target_id: str, *, result_json: str, run_id: str | None = None) -> bool:
        """Record that the tool body finished, with its result; False when there is no such claim.

        With ``run_id``, only the entry that run claimed; None: the call id's entry of any owner.
        """
        ...

    def execution(self, target_id: str, *, run_id: str | None = None) -> ExecutionRow | None:
        """The ledger entry for ``target_id`` in the ledger of ``run_id``'s owner (None: the newest of any owner)."""
        ...

    def release_execution(self, target_id: str, *, run_id: str, args_digest: str = "") -> bool:
        """Give back ``run_id``'s claim of ``target_id`` (for ``args_digest``) whose body it never started: the entry
        goes ("released, not run" on the audit log), so a re-ask may run the call. False: no such claim."""
        ...


@runtime_checkable
class RunOwners(Protocol):
    """Whose ledger a run of a process writing the store keeps its calls in (its agent identity)."""

    def own_run(self, run_id: str, owner: str) -> None:
        """Keep ``run_id``'s calls in ``owner``'s ledger from now on; StoreError when another owner has the run."""
        ...


class ExecutionRecords(CallLedger, RunOwners, Protocol):
    """The execution ledger, listed, with a person settling the calls in doubt."""

    def resolve_execution(self, target_id: str, *, ran: bool, by: str, run_id: str | None = None) -> bool:
        """A person settles an in-doubt call: it ran (mark done) or it did not (forget it, so a replay may run it).

        False when ``target_id`` is not in doubt (no entry, or already done). With ``run_id``, only the entry
        that run claimed.
        """
        ...

    def executions(self, *, state: ExecutionState | None = None) -> list[ExecutionRow]:
        """Ledger entries, newest first."""
        ...


class LedgerStore(CallLedger, DecisionSource, Protocol):
    """What the tool-call gate's ledger needs: the call ledger and the decisions recorded for a replay."""


class AgentStore(RunWriter, LedgerStore, Protocol):
    """What an agent's control channel needs of its store: its runs' events and heartbeats, the ledger, and
    its runs' approval records (decisions recorded there while the run looked gone)."""


class ParkedCalls(Protocol):
    """Parking: ADK invocations that ended to wait for a person, resumed under a lease when decided."""

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
        """Record (or re-record) that an invocation ended waiting for ``target_id``; it is WAITING again."""
        ...

    def detached(self, target_id: str) -> DetachedRow | None:
        """The detached invocation waiting for ``target_id``, if any."""
        ...

    def detached_runs(
        self, *, status: DetachedStatus | None = ..., app_name: str | None = None, limit: int = 100
    ) -> list[DetachedRow]:
        """Detached invocations, oldest first (only the waiting ones by default)."""
        ...

    def claim_detached(self, target_id: str, *, owner: str, lease_ms: int) -> bool:
        """Take the lease to resume ``target_id`` (WAITING, or RESUMING with a lapsed lease); True for one caller.

        The lease is judged by the store's clock, like liveness.
        """
        ...

    def settle_detached(self, target_id: str, *, owner: str, resumed: bool, detail: str = "") -> bool:
        """The lease holder says the call was taken up (RESUMED) or gives the lease back (WAITING)."""
        ...


class ControlInbox(Protocol):
    """The control inbox: messages for an agent, claimed, acked, and waited for."""

    def post_control(self, msg: ControlMessage, *, run_id: str = "") -> int:
        """Insert a message for the agent that owns ``run_id`` ("" = any); returns its inbox id."""
        ...

    def pending_controls(self, *, limit: int = 100) -> list[InboxRow]:
        """Messages nobody has claimed yet, oldest first."""
        ...

    def claimed_controls(self, *, endpoint: str) -> list[InboxRow]:
        """Messages ``endpoint`` claimed and has not acked (recovery after a lost answer)."""
        ...

    def claim_controls(self, ids: Sequence[int], *, endpoint: str) -> list[int]:
        """Claim messages for dispatch; returns the ids this caller won."""
        ...

    def ack_controls(
        self, acks: Sequence[tuple[int, ControlAck]], *, claims: Mapping[int, ExecutionClaim] | None = None
    ) -> dict[int, bool]:
        """Store the acks of claimed messages (and wake whoever waits for them).

        ``claims``: by inbox id, the "executing" claim an ack carries (an APPROVE acked by an agent on HTTP),
        made in the same transaction as the ack (see ``mark_executing``); returns whether each was won.
        """
        ...

    def get_ack(self, control_id: str) -> ControlAck | None:
        """The ack of a message, once there is one."""
        ...

    def get_acks(self, control_ids: Sequence[str]) -> dict[str, ControlAck]:
        """The acks stored so far of several messages, by control id (one look for many waiters)."""
        ...

    def withdraw_control(self, control_id: str) -> bool:
        """Withdraw an unclaimed message so it is never dispatched; False if it was already claimed."""
        ...

    def wait_ack_news(self, timeout_s: float) -> None:
        """Block until some message may have been acked or ``timeout_s`` passed (one waiter for many acks;
        news since this thread's previous call returns at once)."""
        ...

    def wait_inbox(self, timeout_s: float) -> None:
        """Block until the inbox may have changed or ``timeout_s`` passed."""
        ...

    def wait_ack(self, control_id: str, timeout_s: float) -> ControlAck | None:
        """Block until the message is acked (its ack) or ``timeout_s`` passed (None)."""
        ...

    def inbox_waiter(self) -> InboxWaiter | None:
        """A socket an event loop can sleep on until the inbox may have changed, or None (use :meth:`wait_inbox`).

        An idle :class:`~goldfive_core.store.StoreChannel` waits on it in its event loop (no thread
        wakes while nothing happens); it is bound until closed, so news committed between two looks
        is never missed. SQLite with wake-ups returns one; stores without one return None.
        """
        ...


class UserDirectory(Protocol):
    """Users of ``goldfive serve`` and their web sessions."""

    def add_user(self, user: UserRow) -> bool:
        """Create a user; False when the name is taken."""
        ...

    def user(self, name: str) -> UserRow | None:
        """The user called ``name``."""
        ...

    def user_by_token_id(self, token_id: str) -> UserRow | None:
        """The user whose current token has this id."""
        ...

    def users_by_token_ids(self, token_ids: Sequence[str]) -> dict[str, UserRow]:
        """The users whose current tokens have these ids, by token id (one look for many)."""
        ...

    def users(self) -> list[UserRow]:
        """Every user, by name."""
        ...

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
        ...

    def change_user_groups(
        self, name: str, change: Callable[[tuple[str, ...]], tuple[str, ...]]
    ) -> tuple[str, ...] | None:
        """Replace a user's policy groups by ``change(current)`` in one transaction (two admins changing groups at
        once both take effect); the groups after, or None for an unknown user. An error from ``change`` changes
        nothing."""
        ...

    def note_login(self, name: str, *, ok: bool, lock_until_ms: int = 0) -> int:
        """Count a failed login (returns the count) or reset the count after a good one."""
        ...

    def add_web_session(self, session: WebSession) -> None:
        """Store a new web session."""
        ...

    def web_session(self, id_hash: str) -> WebSession | None:
        """A web session that has not expired."""
        ...

    def end_web_session(self, id_hash: str) -> None:
        """Log a web session out."""
        ...

    def access_version(self) -> str:
        """A value that changes whenever a user's access may have narrowed (an update of a user, a logout)."""
        ...

    def wait_access_news(self, seen: str | None, timeout_s: float) -> str:
        """Block until :meth:`access_version` differs from ``seen`` (a change by any process over this store) or
        ``timeout_s`` passed; returns it. PostgreSQL sleeps in LISTEN, SQLite on its commit wake-ups."""
        ...


@runtime_checkable
class GrantReader(Protocol):
    """Standing grants read by an object that is not a SQL store (an agent's RemoteStore asks the server).

    A SQL store's grants are read by :func:`goldfive_core.store.grants.grant_rows` itself.
    """

    def grant_rows(
        self,
        *,
        active_only: bool = False,
        rule: str | None = None,
        tool: str | None = None,
        at_ms: int | None = None,
        limit: int = 1000,
    ) -> list[GrantRow]:
        """Grants, newest first (``active_only``: neither revoked, expired at ``at_ms``, nor ended)."""
        ...
