"""The records a store hands out: approval, run, audit, inbox, ledger, parked-call, user and grant rows.

Plain frozen values with no store behind them, so the roles (:mod:`.roles`), the store interface (:mod:`.base`),
liveness and grants all name them without importing each other. Each stays importable from where it always was
(``goldfive_core.store``, ``store.base``, ``store.liveness``, ``store.grants``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from ..approvals import OPEN_STATUSES as _OPEN
from ..approvals import ApprovalStatus, request_digest
from ..control import ControlMessage
from ..pb.v1 import events_pb2
from ..policy import Grant

__all__ = [
    "APP_OWNER_PREFIX",
    "OPEN_STATUSES",
    "ApprovalPage",
    "ApprovalRow",
    "AuditReport",
    "AuditRow",
    "DetachedRow",
    "DetachedStatus",
    "ExecutionClaim",
    "ExecutionRow",
    "ExecutionState",
    "GrantRow",
    "InboxRow",
    "RunRow",
    "StoredDecision",
    "StoredRunStatus",
    "UserRow",
    "WebSession",
    "reads_shared",
]

OPEN_STATUSES: tuple[ApprovalStatus, ...] = tuple(sorted(_OPEN))
"""Approval statuses that still accept a decision (the core's :data:`~goldfive_core.approvals.OPEN_STATUSES`)."""


class StoredRunStatus(StrEnum):
    """A run's status as the store keeps it (``RunRow.status``; the values are the stored text).

    The core's :data:`~goldfive_core.session.RunState` is where a live run stands inside its process (running,
    paused, ...) and :class:`~goldfive_core.lifecycle.RunStatus` how it ended; this is what the store knows
    of its process: RUNNING while it runs (running or paused alike), FINISHED once its last event
    (RunCompleted / RunAborted) is written, DETACHED when it ended with
    :attr:`~goldfive_core.lifecycle.RunStatus.DETACHED` and a parked call still waits, CRASHED when the
    reaper closed it for want of a heartbeat (no core counterpart: the process could not say it).
    """

    RUNNING = "running"
    FINISHED = "finished"
    CRASHED = "crashed"
    DETACHED = "detached"

    @classmethod
    def stored(cls, value: object) -> StoredRunStatus:
        """The status of a stored value; one this goldfive does not know (an edited row) reads as FINISHED,
        which is how liveness always judged it (not running)."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.FINISHED


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
    expired: bool = False
    """Not a decision: the deciding server's rule expired the request (``decided_by`` says who; ``approved`` is
    False). A replay of the call hears a timeout."""


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


APP_OWNER_PREFIX = "app:"
"""Ledger owners named by the host's app (an ADK ``App``'s name, a wrapped callable's ``module.qualname``, a
``GoldfiveClaude(app_name=)``) for a store process with no agent identity. Such a
ledger also reads the shared one's entries (owner ""), where the app kept its calls before it had a name: a call
done or in doubt there is done or in doubt for the app too (never run a second time after an upgrade)."""


def reads_shared(owner: str) -> bool:
    """Whether ``owner``'s ledger also holds the shared ledger's entries (see :data:`APP_OWNER_PREFIX`)."""
    return owner.startswith(APP_OWNER_PREFIX)


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


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ExecutionClaim:
    """A claim of the right to run an approved call's body ("executing"), as an agent on HTTP folds it into the
    APPROVE's ack: the server records both in one transaction."""

    target_id: str
    run_id: str
    pid: int
    host: str
    args_digest: str


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


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class GrantRow:
    """One standing grant as stored: who granted what, how far, until when, and whether it was revoked."""

    grant_id: str
    rule: str
    tool: str
    granted_by: str
    scope: str
    run_id: str
    session_id: str
    args_constraint: str
    created_at_ms: int
    expires_at_ms: int
    """0 = no expiry of its own."""
    target_id: str
    """The request whose approval made it."""
    description: str
    channel: str
    revoked_at_ms: int
    revoked_by: str
    revoke_reason: str
    run_status: str = ""
    """For a run grant: its run's status in the store (``running``, ``finished``, ``crashed``); "" otherwise."""

    def state(self, at_ms: int) -> str:
        """``active``, ``revoked``, ``expired`` (its time ran out) or ``ended`` (a run grant whose run is over)."""
        if self.revoked_at_ms:
            return "revoked"
        if self.expires_at_ms and at_ms >= self.expires_at_ms:
            return "expired"
        if self.scope == "run" and self.run_status and self.run_status != StoredRunStatus.RUNNING:
            return "ended"
        return "active"

    def as_dict(self, at_ms: int) -> dict[str, Any]:
        """A JSON-able view with its state at ``at_ms``."""
        out = dataclasses.asdict(self)
        out["state"] = self.state(at_ms)
        return out

    def grant(self) -> Grant | None:
        """The policy's :class:`~goldfive_core.policy.Grant` (None when its constraint no longer compiles)."""
        try:
            return Grant(
                grant_id=self.grant_id,
                rule=self.rule,
                tool=self.tool,
                granted_by=self.granted_by,
                scope=self.scope,  # type: ignore[arg-type]
                run_id=self.run_id,
                session_id=self.session_id,
                args_constraint=self.args_constraint,
                created_at_ms=self.created_at_ms,
                expires_at_ms=self.expires_at_ms or None,
                revoked_at_ms=self.revoked_at_ms or None,
                revoked_by=self.revoked_by,
            )
        except ValueError:
            return None
