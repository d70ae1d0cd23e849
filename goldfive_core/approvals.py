"""The approval record state machine (docs/architecture.md, "Approval records"), one record per ``target_id``.

::

    expect() ─► EXPECTED ──open()──► PENDING ──decide()──► GRANTED | REJECTED
                    │ decide() keeps an early decision      │ wait timed out
                    ▼                                        ▼
              (applied at open)                   TIMED_OUT (keep_open) ─decide()─► GRANTED | REJECTED
                                                  or EXPIRED (closed, Flow B)
    a cancelled wait, a run cancel, the run's end or a re-request (of a timed-out
    target) removes the live record: CANCELLED.

:class:`ApprovalStatus` and :func:`transition` are the one statement of this
machine: :class:`ApprovalBook`, the SQL stores (their ``WHERE status IN``
guards come from :func:`sources`) and the ``goldfive`` command all use them.

A decision resolves a record exactly once. Decided records are remembered
(bounded) so a second decision is answered "already decided". This module
holds state only; :class:`goldfive_core.session.Session` turns its results
into events and acks.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from ._stored import NUL_MARK, storable
from ._util import REVIEWER_PREFIX, args_digest, canonical_json, fact, new_id, now_ms, safe_repr
from .errors import ApprovalError, InvalidTransitionError

if TYPE_CHECKING:
    from .policy import Ask, QuorumTally

__all__ = [
    "ApprovalBook",
    "ApprovalOutcome",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalStatistics",
    "ApprovalStatus",
    "DECIDED_STATUSES",
    "Decision",
    "DecisionResult",
    "DecisionVerdict",
    "MAX_TIMEOUT_MS",
    "OPEN_STATUSES",
    "Principal",
    "REVIEWER_PREFIX",
    "already_decided_text",
    "policy_ask",
    "request_digest",
    "reviewer_claim",
    "sources",
    "transition",
]

ApprovalKind = Literal["task", "tool", "input"]
"""``input``: a person is asked to fill a form (:mod:`goldfive_core.elicitation`), not to allow something."""
OutcomeKind = Literal["approve", "reject", "timeout", "cancelled", "detached"]
EditValidator = Callable[[Mapping[str, Any]], "str | None"]


class ApprovalStatus(StrEnum):
    """Where a record stands."""

    EXPECTED = "expected"
    PENDING = "pending"
    TIMED_OUT = "timed_out"
    GRANTED = "granted"
    REJECTED = "rejected"
    EXPIRED = "expired"
    """The wait timed out and the request closed with it (Flow B): no decision can resolve it any more."""
    CANCELLED = "cancelled"
    """Withdrawn before a decision (the wait was cancelled, or the run stopped or ended)."""


_TRANSITIONS: Mapping[ApprovalStatus, frozenset[ApprovalStatus]] = {
    ApprovalStatus.EXPECTED: frozenset({ApprovalStatus.PENDING, ApprovalStatus.CANCELLED}),
    ApprovalStatus.PENDING: frozenset(
        {
            ApprovalStatus.GRANTED,
            ApprovalStatus.REJECTED,
            ApprovalStatus.TIMED_OUT,
            ApprovalStatus.EXPIRED,
            ApprovalStatus.CANCELLED,
        }
    ),
    ApprovalStatus.TIMED_OUT: frozenset({ApprovalStatus.GRANTED, ApprovalStatus.REJECTED, ApprovalStatus.CANCELLED}),
}
# Every other status is final. A new request for the same target is a new record, not a transition.

OPEN_STATUSES: frozenset[ApprovalStatus] = frozenset({ApprovalStatus.PENDING, ApprovalStatus.TIMED_OUT})
"""Statuses in which a decision still resolves the record."""

DECIDED_STATUSES: frozenset[ApprovalStatus] = frozenset({ApprovalStatus.GRANTED, ApprovalStatus.REJECTED})
"""Statuses that carry a person's decision."""


def transition(current: ApprovalStatus, new: ApprovalStatus) -> ApprovalStatus:
    """Return ``new`` if the machine allows ``current -> new``; else raise :class:`InvalidTransitionError`."""
    if new not in _TRANSITIONS.get(current, frozenset()):
        allowed = ", ".join(sorted(s.value for s in _TRANSITIONS.get(current, frozenset()))) or "none: it is final"
        raise InvalidTransitionError(
            f"an approval cannot move from {current.value!r} to {new.value!r} (allowed: {allowed})"
        )
    return new


def sources(new: ApprovalStatus) -> tuple[ApprovalStatus, ...]:
    """The statuses from which a record may move to ``new``, in a stable order (for SQL guards)."""
    return tuple(s for s in ApprovalStatus if new in _TRANSITIONS.get(s, frozenset()))


def already_decided_text(target_id: str, *, approved: bool, decided_by: str) -> str:
    """The one wording of "this target was decided before; nothing changed"."""
    verb = "approved" if approved else "rejected"
    who = f" by {decided_by}" if decided_by else ""
    return f"already decided: {target_id!r} was {verb}{who}; this decision was not applied"


MAX_TIMEOUT_MS = 366 * 24 * 3600 * 1000
"""Longest wait a request may ask for (a year): keeps every deadline representable on the wire."""


def request_digest(*, kind: str, target_id: str, task_id: str, prompt: str, args_digest: str) -> str:
    """``sha256:<hex>`` of what a person is shown and approves: the request's kind, target, task, prompt and call.

    The server signs it with the request's id, and the agent checks the signature against its own request,
    so a signed decision cannot be moved onto another request (another prompt, other arguments).
    """
    # Of the text as a store holds it (NUL as ␀): the agent has the NUL, the server reads ␀; both digest the same.
    text = {"kind": kind, "prompt": prompt, "target_id": target_id, "task_id": task_id}
    body = canonical_json({"args_digest": args_digest, **{key: storable(value) for key, value in text.items()}})
    return "sha256:" + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def _new_request_id() -> str:
    return new_id("req")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequest:
    """What the agent (or a tool call) asks a person to approve."""

    target_id: str
    kind: ApprovalKind
    prompt: str = ""
    task_id: str = ""
    metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)
    args_digest: str = ""
    timeout_ms: int
    keep_open_on_timeout: bool = False
    """Flow A: after a timeout a late decision still resolves the record."""
    validate_edit: EditValidator | None = dataclasses.field(default=None, compare=False, repr=False)
    """Checks edited arguments; returns an error message or None. None = edits are refused."""
    request_id: str = dataclasses.field(default_factory=_new_request_id)
    """This request's own identity, unique across re-asks of one target; a decision naming another is refused."""

    @property
    def digest(self) -> str:
        """:func:`request_digest` of this request (what a signature binds a decision to)."""
        return request_digest(
            kind=self.kind,
            target_id=self.target_id,
            task_id=self.task_id,
            prompt=self.prompt,
            args_digest=self.args_digest,
        )

    def __post_init__(self) -> None:
        # Checked here, before anything is registered, so a bad request never leaves a record behind.
        if not isinstance(self.target_id, str) or not self.target_id:
            raise ValueError(f"target_id must be a non-empty string, got {self.target_id!r}")
        if not isinstance(self.request_id, str) or not self.request_id or len(self.request_id) > 200:
            raise ValueError(f"request_id must be a non-empty string of up to 200 characters, got {self.request_id!r}")
        if self.kind not in ("task", "tool", "input"):
            raise ValueError(f"kind must be 'task', 'tool' or 'input', got {self.kind!r}")
        timeout = self.timeout_ms
        if isinstance(timeout, bool) or not isinstance(timeout, int) or not 0 < timeout <= MAX_TIMEOUT_MS:
            raise ValueError(f"timeout_ms must be an integer in 1..{MAX_TIMEOUT_MS}, got {timeout!r}")
        bad = [k for k, v in self.metadata.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad:
            raise ValueError(f"metadata must map strings to strings; bad entries: {bad[:5]!r}")


DeciderChannel = Literal["cli", "web", "api", "agent"]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Principal:
    """Who decides, and through what: the ``goldfive`` command, the web inbox, the HTTP API or the agent's host."""

    name: str
    channel: DeciderChannel = "cli"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"a principal needs a non-empty name, got {self.name!r}")
        if self.channel not in ("cli", "web", "api", "agent"):
            raise ValueError(f"channel must be 'cli', 'web', 'api' or 'agent', got {self.channel!r}")


def reviewer_claim(decided_by: object, channel: object = "") -> str:
    """Why a decision from outside the agent may not be applied because it claims a reviewer made it ("" if not).

    A reviewer's verdict is only ever taken in the agent's own gate (``goldfive_core.review``): one that arrives
    by a channel, or sits in a store as a recorded decision, was not made there, whoever signed it.
    """
    by = decided_by if isinstance(decided_by, str) else ""
    if by.startswith(REVIEWER_PREFIX) or channel == "reviewer":
        return (
            f"a decision attributed to a reviewer ({safe_repr(by, 80)}) is only taken in the agent's own gate, "
            "never from outside it; nothing was decided"
        )
    return ""


@fact(kw_only=True)
class Decision:
    """A person's answer to one request."""

    approved: bool
    detail: str = ""
    decided_by: str = ""
    edited_args: Mapping[str, Any] | None = None
    args_digest: str = ""
    decided_at_ms: int = dataclasses.field(default_factory=now_ms)
    channel: str = ""
    """How the decision came (``web``, ``api``, ``cli``), for the audit; "" when unknown."""
    request_id: str = ""
    """The request decided (its ``request_id``); "" = whichever is open (accepted only without a trust key)."""
    quorum: int = 0
    """How many distinct approvers the deciding server's rule requires (0 = not stated): when stated, this
    decision is one vote and the request is decided only when that many distinct approvers agree."""
    quorum_reject: str = ""
    """With a stated quorum, the deciding server's ``reject`` mode: ``"counts"`` (a rejection is one vote, the
    others may still reach the quorum) or ``""`` (a rejection ends the request), whatever the agent's rule says."""
    answer: str = ""
    """On a rejection of an ``input`` request: ``"cancel"`` when the person dismissed the form rather than
    declined it (``""``: a plain rejection, a decline). Signed with the rest."""


@fact(kw_only=True)
class ApprovalOutcome:
    """How a wait ended: ``decision`` is approve, reject, timeout, cancelled or detached.

    ``detached``: the host stopped waiting before the request's timeout (``wait_s`` shorter than it); the
    request stays pending in the store and the host resumes the call when a person decides.
    """

    target_id: str
    decision: OutcomeKind
    detail: str = ""
    decided_by: str = ""
    edited_args: Mapping[str, Any] | None = None
    answer: str = ""
    """The decision's :attr:`Decision.answer` (``"cancel"`` for a dismissed ``input`` request)."""

    @property
    def approved(self) -> bool:
        """True only for an approval."""
        return self.decision == "approve"

    @classmethod
    def of(cls, target_id: str, decision: Decision) -> ApprovalOutcome:
        """The outcome a person's ``decision`` on ``target_id`` gives the waiting agent."""
        return cls(
            target_id=target_id,
            decision="approve" if decision.approved else "reject",
            detail=decision.detail,
            decided_by=decision.decided_by,
            edited_args=decision.edited_args,
            answer=decision.answer,
        )


@dataclasses.dataclass(slots=True, eq=False)
class ApprovalRecord:
    """The live state of one target."""

    target_id: str
    status: ApprovalStatus
    request: ApprovalRequest | None = None
    requested_at_ms: int = 0
    decision: Decision | None = None
    waiter: asyncio.Future[ApprovalOutcome] | None = None
    closed_reason: str = ""
    """Why :meth:`ApprovalBook.close` withdrew the record ("" if it did not)."""
    quorum: QuorumTally | None = None
    """The votes so far when the request needs several distinct approvers (its rule's ``quorum``)."""
    quorum_args: Mapping[str, Any] | None = None
    """Edited arguments on the table of a quorum (None = the call's own)."""


class DecisionVerdict(StrEnum):
    """What :meth:`ApprovalBook.decide` did with a decision."""

    APPLIED = "applied"
    APPLIED_LATE = "applied_late"
    KEPT_EARLY = "kept_early"
    ALREADY_DECIDED = "already_decided"
    UNKNOWN_TARGET = "unknown_target"
    DIGEST_MISMATCH = "digest_mismatch"
    EDIT_REFUSED = "edit_refused"
    COUNTED = "counted"
    """A vote towards a quorum: recorded, the request stays pending until enough distinct approvers agree."""
    NOT_COUNTED = "not_counted"
    """A vote a quorum cannot count (no name, already decided); nothing changed."""
    WRONG_REQUEST = "wrong_request"
    """The decision names another request of the target (an earlier ask, or one never made); nothing changed."""


@fact()
class DecisionResult:
    """The verdict, the record concerned (if any) and words for the ack."""

    verdict: DecisionVerdict
    detail: str
    record: ApprovalRecord | None = None
    repeated: bool = False
    """A quorum vote this person had already cast: counted once, nothing changed (the verdict says COUNTED)."""
    announced_at_ms: int = 0
    """When an applied decision's ApprovalGranted/Rejected was emitted (its record's ``decided_at_ms``); else 0."""


@dataclasses.dataclass(frozen=True, slots=True)
class ApprovalStatistics:
    """Counts for observability and leak tests."""

    live: int
    pending: int
    expected: int
    timed_out: int
    waiters: int
    decided_remembered: int


class ApprovalBook:
    """Every approval record of one run."""

    def __init__(self, *, history: int = 4096) -> None:
        self._live: dict[str, ApprovalRecord] = {}
        self.live: Mapping[str, ApprovalRecord] = MappingProxyType(self._live)
        """The live records (expected, pending, timed out) by target id: a read-only view, for cheap checks."""
        self._decided: collections.OrderedDict[str, ApprovalRecord] = collections.OrderedDict()
        self._asked: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._history = history

    # -- queries -----------------------------------------------------------
    def knows(self, target_id: str) -> bool:
        """True if a decision for ``target_id`` would be answered by this book (not "unknown")."""
        target_id = self._as_asked(target_id)
        return target_id in self._live or target_id in self._decided

    def _as_asked(self, target_id: str) -> str:
        """The id the run asked with, for a decision that names it as a store holds it (a NUL stored as ␀)."""
        if NUL_MARK not in target_id or target_id in self._live or target_id in self._decided:
            return target_id
        return next((t for t in (*self._live, *self._decided) if storable(t) == target_id), target_id)

    def is_open(self, target_id: str) -> bool:
        """True if ``target_id`` is live here: pending, timed out (still open) or expected."""
        return target_id in self._live

    def get(self, target_id: str) -> ApprovalRecord | None:
        """The live record for ``target_id``, else the remembered decided one, else None."""
        target_id = self._as_asked(target_id)
        return self._live.get(target_id) or self._decided.get(target_id)

    def open_targets(self) -> list[str]:
        """Targets waiting for (or still accepting) a decision: pending and timed out."""
        return [t for t, r in self._live.items() if r.status is not ApprovalStatus.EXPECTED]

    def asked_targets(self) -> list[str]:
        """Every target this book opened a request for (the latest ``history`` of them), oldest first."""
        return list(self._asked)

    def open_records(self) -> list[ApprovalRecord]:
        """Records waiting for (or still accepting) a decision."""
        return [r for r in self._live.values() if r.status is not ApprovalStatus.EXPECTED]

    def statistics(self) -> ApprovalStatistics:
        """A snapshot of the counts."""
        by_status = collections.Counter(r.status for r in self._live.values())
        return ApprovalStatistics(
            live=len(self._live),
            pending=by_status[ApprovalStatus.PENDING],
            expected=by_status[ApprovalStatus.EXPECTED],
            timed_out=by_status[ApprovalStatus.TIMED_OUT],
            waiters=sum(1 for r in self._live.values() if r.waiter is not None and not r.waiter.done()),
            decided_remembered=len(self._decided),
        )

    # -- transitions ---------------------------------------------------------
    def expect(self, target_id: str) -> None:
        """Announce that ``target_id`` will be requested soon, so an early decision is kept."""
        if target_id not in self._live:
            self._live[target_id] = ApprovalRecord(target_id, ApprovalStatus.EXPECTED)

    def forget_expected(self, target_id: str) -> None:
        """Drop an announcement that will never be requested (and any early decision on it)."""
        record = self._live.get(target_id)
        if record is not None and record.status is ApprovalStatus.EXPECTED:
            del self._live[target_id]

    def open(self, request: ApprovalRequest) -> tuple[ApprovalRecord, ApprovalRecord | None]:
        """Open a request; returns ``(record, superseded)``.

        A kept early decision whose digest still matches is applied at once
        (the record comes back decided). A timed-out record for the same
        target is superseded and returned so the caller can announce it.
        Raises ApprovalError while a request for the target is pending.
        """
        superseded = None
        early: Decision | None = None
        existing = self._live.get(request.target_id)
        if existing is not None:
            if existing.status is ApprovalStatus.PENDING:
                raise ApprovalError(f"target_id {request.target_id!r} already has a pending approval request")
            if existing.status is ApprovalStatus.TIMED_OUT:
                superseded = existing
                _move(superseded, ApprovalStatus.CANCELLED)
                superseded.closed_reason = "superseded by a new request"
            else:
                early = existing.decision
            del self._live[request.target_id]
        record = ApprovalRecord(request.target_id, ApprovalStatus.PENDING, request, now_ms())
        record.quorum = _tally_for(request)
        self._live[request.target_id] = record
        self._asked[request.target_id] = None
        if len(self._asked) > self._history:
            self._asked.popitem(last=False)
        if early is not None and early.request_id and early.request_id != request.request_id:
            early = None  # kept for another request of this target: never applied to this one
        if early is not None:
            if _count_votes(record, early):
                self._vote(record, early)
            elif self._check(record, early) is None:
                self._resolve(record, early)
        return record, superseded

    def decide(self, target_id: str, decision: Decision) -> DecisionResult:
        """Apply a decision; never raises. See :class:`DecisionVerdict` for the outcomes."""
        if NUL_MARK in target_id:  # named as a store holds it: the id the run asked with
            target_id = self._as_asked(target_id)
        record = self._live.get(target_id)
        if record is None:
            decided = self._decided.get(target_id)
            if decided is not None and decided.decision is not None:
                return DecisionResult(DecisionVerdict.ALREADY_DECIDED, _already(decided), decided)
            pending = ", ".join(repr(t) for t in self.open_targets()[:5]) or "none"
            return DecisionResult(
                DecisionVerdict.UNKNOWN_TARGET,
                f"unknown target_id {safe_repr(target_id)}: no pending approval (pending: {pending})",
            )
        if record.status is ApprovalStatus.EXPECTED:
            if record.decision is not None:
                return DecisionResult(DecisionVerdict.ALREADY_DECIDED, _already(record), record)
            record.decision = decision
            verb = "approval" if decision.approved else "rejection"
            return DecisionResult(
                DecisionVerdict.KEPT_EARLY,
                f"{verb} kept for {target_id!r}: the request is not open yet; it applies when the run asks",
                record,
            )
        # A decision that names no request, states no quorum, on a request no rule asks several to approve (the
        # common case) makes neither call: each says None / False then.
        wrong = _wrong_request(record, decision) if decision.request_id else None
        if wrong is not None:
            return wrong
        if (decision.quorum > 1 or record.quorum is not None) and _count_votes(record, decision):
            return self._vote(record, decision)
        answers = record.request is not None and record.request.kind == "input"  # a form: its content is checked
        if decision.args_digest or decision.edited_args is not None or answers or decision.answer:
            problem = self._check(record, decision)
            if problem is not None:
                return problem
        late = record.status is ApprovalStatus.TIMED_OUT
        self._resolve(record, decision)
        verb = "approved" if decision.approved else "rejected"
        if late:
            return DecisionResult(
                DecisionVerdict.APPLIED_LATE,
                f"{verb} {target_id!r} after its wait timed out; the record is resolved, the agent was told 'timeout'",
                record,
            )
        return DecisionResult(DecisionVerdict.APPLIED, f"{verb} {target_id!r}", record)

    async def wait(self, record: ApprovalRecord, timeout_s: float | None) -> ApprovalOutcome:
        """Wait for the record's decision; ``timeout_s=None`` waits without a deadline.

        On timeout the record becomes TIMED_OUT (``keep_open_on_timeout``) or
        is closed. If the waiting task is cancelled the record is removed and
        the cancellation propagates.
        """
        if record.decision is not None:
            return ApprovalOutcome.of(record.target_id, record.decision)
        if record.status is not ApprovalStatus.PENDING or self._live.get(record.target_id) is not record:
            raise ApprovalError(f"record {record.target_id!r} is {record.status.value}, not pending")
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[ApprovalOutcome] = loop.create_future()
        record.waiter = waiter
        # A plain timer that resolves the waiter, not asyncio.timeout(): half the cost and memory per wait,
        # and running out of time never looks like a cancellation to the waiting task.
        timer = None if timeout_s is None else loop.call_later(timeout_s, _expire, waiter, record.target_id)
        try:
            outcome = await waiter
        except asyncio.CancelledError:
            if self._live.get(record.target_id) is record:
                del self._live[record.target_id]
                _move(record, ApprovalStatus.CANCELLED)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            record.waiter = None
        if outcome.decision != "timeout":
            return outcome
        if record.decision is not None:  # decided after the timer fired but before this task resumed
            return ApprovalOutcome.of(record.target_id, record.decision)
        keep_open = record.request is not None and record.request.keep_open_on_timeout
        if keep_open:
            _move(record, ApprovalStatus.TIMED_OUT)
        elif self._live.get(record.target_id) is record:
            del self._live[record.target_id]
            _move(record, ApprovalStatus.EXPIRED)
        return outcome

    def expire(self, target_id: str, detail: str) -> bool:
        """End the wait of a pending request now, as its timeout would (the deciding side's rule says it expired).

        Returns False when ``target_id`` has no pending request being waited for (nothing changes).
        """
        record = self._live.get(target_id)
        if record is None or record.status is not ApprovalStatus.PENDING or record.decision is not None:
            return False
        waiter = record.waiter
        if waiter is None or waiter.done():
            return False
        waiter.set_result(ApprovalOutcome(target_id=target_id, decision="timeout", detail=detail))
        return True

    def close(self, target_id: str, reason: str) -> ApprovalRecord | None:
        """Withdraw a live request (run cancelled or ended); its waiter returns ``cancelled``."""
        record = self._live.pop(target_id, None)
        if record is None:
            return None
        record.closed_reason = reason or "withdrawn"
        if record.status is not ApprovalStatus.EXPECTED:
            _move(record, ApprovalStatus.CANCELLED)
        if record.waiter is not None and not record.waiter.done():
            record.waiter.set_result(ApprovalOutcome(target_id=target_id, decision="cancelled", detail=reason))
        return record

    def close_all(self, reason: str) -> list[ApprovalRecord]:
        """Withdraw every live request and announcement; returns the open ones that were closed."""
        closed = []
        for target_id in list(self._live):
            record = self.close(target_id, reason)
            if record is not None and record.status is not ApprovalStatus.EXPECTED:
                closed.append(record)
        return closed

    # -- internals -------------------------------------------------------------
    def _check(self, record: ApprovalRecord, decision: Decision) -> DecisionResult | None:
        request = record.request
        assert request is not None
        if decision.args_digest and request.args_digest and decision.args_digest != request.args_digest:
            return DecisionResult(
                DecisionVerdict.DIGEST_MISMATCH,
                f"refused: args_digest {decision.args_digest!r} does not match the call awaiting approval for "
                f"{record.target_id!r} ({request.args_digest!r}); the request stays pending",
                record,
            )
        if decision.answer and (decision.approved or request.kind != "input"):
            return DecisionResult(
                DecisionVerdict.EDIT_REFUSED,
                "refused: answer 'cancel' only goes with a rejection of an input request",
                record,
            )
        if request.kind == "input" and decision.approved and decision.edited_args is None:
            decision = dataclasses.replace(decision, edited_args={})  # an accept with no content: checked as {}
        if decision.edited_args is not None:
            if not decision.approved:
                return DecisionResult(DecisionVerdict.EDIT_REFUSED, "refused: edited_args only go with APPROVE", record)
            if request.validate_edit is None:
                return DecisionResult(
                    DecisionVerdict.EDIT_REFUSED,
                    f"refused: {record.target_id!r} is a {request.kind} approval and takes no edited_args; "
                    "the request stays pending",
                    record,
                )
            error = request.validate_edit(decision.edited_args)
            if error is not None:
                return DecisionResult(
                    DecisionVerdict.EDIT_REFUSED,
                    f"refused: edited_args for {record.target_id!r} do not fit: {error}; the request stays pending",
                    record,
                )
        return None

    def _vote(self, record: ApprovalRecord, decision: Decision) -> DecisionResult:
        """Count one vote of a quorum; the record resolves on the last approval (or a reject that ends it)."""
        tally, request = record.quorum, record.request
        assert tally is not None and request is not None
        # Edits are checked as for any request; the digest is checked against the arguments on the table.
        problem = self._check(record, dataclasses.replace(decision, args_digest=""))
        if problem is not None:
            return problem
        target = record.target_id
        if decision.approved and decision.edited_args is not None:
            try:
                digest = args_digest(request.metadata.get("tool_name", ""), decision.edited_args)
            except (TypeError, ValueError) as exc:
                return DecisionResult(
                    DecisionVerdict.EDIT_REFUSED, f"refused: edited_args are not JSON ({exc})", record
                )
            step = tally.approve(decision.decided_by, args_digest=digest, edited=True)
            if step.kind in ("restarted", "complete"):
                record.quorum_args = dict(decision.edited_args)
        elif decision.approved:
            seen = decision.args_digest
            if not seen and tally.args_digest != request.args_digest:
                return DecisionResult(
                    DecisionVerdict.DIGEST_MISMATCH,
                    f"refused: the arguments of {target!r} were edited ({tally.progress()}); approve with the new "
                    f"args_digest {tally.args_digest!r} after reading them; the request stays pending",
                    record,
                )
            step = tally.approve(decision.decided_by, args_digest=seen or tally.args_digest)
        else:
            step = tally.reject(decision.decided_by, reason=decision.detail)
        if step.kind == "refused":
            verdict = DecisionVerdict.DIGEST_MISMATCH if step.stale else DecisionVerdict.NOT_COUNTED
            return DecisionResult(verdict, f"{step.detail} ({step.progress}); the request stays pending", record)
        if not step.final:
            return DecisionResult(
                DecisionVerdict.COUNTED,
                f"counted for {target!r}: {step.detail} ({step.progress}); the request stays pending",
                record,
                repeated=step.kind == "duplicate",
            )
        late = record.status is ApprovalStatus.TIMED_OUT
        if step.kind == "complete":
            decision = Decision(
                approved=True,
                detail=decision.detail or step.detail,
                decided_by=", ".join(tally.approvers),
                edited_args=record.quorum_args,
                args_digest=tally.args_digest,
                channel=decision.channel,  # the last vote's way in, as the store records it
                request_id=decision.request_id,
            )
        self._resolve(record, decision)
        verb = "approved" if decision.approved else "rejected"
        return DecisionResult(
            DecisionVerdict.APPLIED_LATE if late else DecisionVerdict.APPLIED,
            f"{verb} {target!r} ({step.progress})",
            record,
        )

    def _resolve(self, record: ApprovalRecord, decision: Decision) -> None:
        record.status = transition(
            record.status, ApprovalStatus.GRANTED if decision.approved else ApprovalStatus.REJECTED
        )
        record.decision = decision
        self._live.pop(record.target_id, None)
        if record.target_id in self._decided:  # decided before (a re-ask): it moves to the end, as a new one goes
            self._decided.move_to_end(record.target_id)
        self._decided[record.target_id] = record
        while len(self._decided) > self._history:
            self._decided.popitem(last=False)
        if record.waiter is not None and not record.waiter.done():
            record.waiter.set_result(ApprovalOutcome.of(record.target_id, decision))


def policy_ask(metadata: Mapping[str, str]) -> Ask | None:
    """The policy rule's ask a request carries (approvers, quorum, escalation, grants), or None.

    Only requests a rule asked carry ``policy_*`` metadata; for the others the policy package is not
    even imported (it is not needed to run without policies).
    """
    if not any(key.startswith("policy_") for key in metadata):
        return None
    from .policy import Ask

    return Ask.from_metadata(metadata)


def _tally_for(request: ApprovalRequest) -> QuorumTally | None:
    """A tally when the request's policy rule asks for more than one approver."""
    ask = policy_ask(request.metadata)
    if ask is None or ask.quorum <= 1:
        return None
    from .policy import QuorumTally

    return QuorumTally(quorum=ask.quorum, args_digest=request.args_digest, reject_ends=ask.reject_ends)


def _wrong_request(record: ApprovalRecord, decision: Decision) -> DecisionResult | None:
    """A refusal when ``decision`` names a request other than the one open for its target."""
    request = record.request
    if not decision.request_id or request is None or decision.request_id == request.request_id:
        return None
    return DecisionResult(
        DecisionVerdict.WRONG_REQUEST,
        f"refused: the decision is for request {safe_repr(decision.request_id)} of {record.target_id!r}, but the "
        f"request awaiting a decision is {request.request_id!r} (asked again since); nothing was changed",
        record,
    )


def _count_votes(record: ApprovalRecord, decision: Decision) -> bool:
    """True when ``decision`` is a vote of a quorum: the request's rule, or the decision, asks for several approvers.

    A quorum the decision states (the deciding server's rule, signed) is the one counted to, with the server's
    ``reject`` mode, whatever the request's own rule said: the server, not the agent's file, says how many must
    agree and whether one rejection ends the request.
    """
    request = record.request
    if decision.quorum > 1 and request is not None:
        ends = decision.quorum_reject != "counts"  # the server's reject mode too, not the agent's file's
        if record.quorum is None:
            from .policy import QuorumTally

            record.quorum = QuorumTally(quorum=decision.quorum, args_digest=request.args_digest, reject_ends=ends)
        else:
            record.quorum.quorum, record.quorum.reject_ends = decision.quorum, ends
    return record.quorum is not None


def _expire(waiter: asyncio.Future[ApprovalOutcome], target_id: str) -> None:
    if not waiter.done():
        waiter.set_result(ApprovalOutcome(target_id=target_id, decision="timeout"))


def _move(record: ApprovalRecord, new: ApprovalStatus) -> None:
    record.status = transition(record.status, new)


def _already(record: ApprovalRecord) -> str:
    decision = record.decision
    assert decision is not None
    return already_decided_text(record.target_id, approved=decision.approved, decided_by=decision.decided_by)
