"""One way in for decisions made outside the agent: :func:`decide`.

The ``goldfive`` command calls it (and so will the HTTP server). It finds the
approval in the store, asks an optional :class:`DecisionAuthority` whether the
decider may decide it, and then either hands the decision to the live run
(through the store's control inbox; the run checks digest and edit and acks)
or — when the run's process is gone — records it in the store, where a
replay of the call picks it up. Every path checks the args digest the decider
saw, and a second decision is always answered with the same "already decided"
words as a live run gives. Callers keep only argument parsing and rendering.

It lives with the store (``from goldfive_core.store import decide``): the store is where a
decision from outside meets the run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Protocol

from .._stored import storable
from .._util import canonical_json
from ..approvals import ApprovalStatus, Principal, already_decided_text
from ..argschema import edit_problem
from ..control import ControlAck, ControlKind, ControlMessage
from ..elicitation import request_answer_problem
from ..errors import AmbiguousApprovalError, ApprovalLookupError, UnknownApprovalError
from ..policy import Ask, PolicyAuthority, Refusal
from ..signing import EXPIRY_KIND, DecisionSigner, SignedDecision
from .base import ApprovalRow, Store
from .grants import audit_refusal
from .liveness import Liveness, RunLiveness
from .sender import DeliveryTimeout, RunGone, StoreSender

__all__ = [
    "DEFAULT_DECIDE_TIMEOUT_S",
    "EXPIRY_DECIDER",
    "AmbiguousApprovalError",
    "ApprovalLookupError",
    "DecideResult",
    "DecideVerdict",
    "DecisionAuthority",
    "Delivery",
    "UnknownApprovalError",
    "decide",
    "expire",
    "find_approval",
    "plan_decision",
    "record_expiry",
    "rule_quorum",
]

DEFAULT_DECIDE_TIMEOUT_S = 30.0
"""How long :func:`decide` waits for a live run's ack by default."""


class DecisionAuthority(Protocol):
    """The seam for "who may decide this": a policy plugs in here.

    Return None to let ``principal`` decide ``approval``, or the sentence that
    tells them why not (it is shown to them; nothing is recorded).
    """

    def may_decide(self, principal: Principal, approval: ApprovalRow, *, approve: bool) -> str | None:
        """None = allowed; else the refusal."""
        ...


class DecideVerdict(StrEnum):
    """What became of a decision."""

    APPLIED = "applied"
    """The live run applied it (its ack is in :attr:`DecideResult.ack`)."""
    RECORDED = "recorded"
    """The run's process is not running: the decision is in the store and applies when the call is replayed."""
    REFUSED = "refused"
    """Nothing changed: already decided, closed, stale digest, not allowed, or the run refused it (FAILURE ack)."""
    NO_ANSWER = "no_answer"
    """No agent answered in time; the message was withdrawn or its ack is still owed."""
    INVALID = "invalid"
    """The edited arguments do not fit the tool's parameters (the request carries its schema), or the reason or
    decider's name holds a NUL; nothing changed. :attr:`DecideResult.field` names the first wrong field."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class DecideResult:
    """The verdict, the words for the decider, and the ack when a live run answered."""

    verdict: DecideVerdict
    detail: str
    target_id: str
    run_id: str
    ack: ControlAck | None = None
    refusal: str = ""
    """Why an audited refusal was made: ``forbidden`` (the decider may not decide this request) or ``expired``
    (past its deadline); "" otherwise. Both are on the audit log as ``DecisionRefused``."""
    field: str | None = None
    """For :attr:`DecideVerdict.INVALID`: the first wrong field of the edit ("" = the edit as a whole), or the
    decision's own text that holds a NUL (``reason``, ``decided_by``, ``grant``)."""

    @property
    def ok(self) -> bool:
        """True when the decision took effect (applied, or recorded for the replay)."""
        return self.verdict in (DecideVerdict.APPLIED, DecideVerdict.RECORDED)


def find_approval(store: Store, target_id: str, *, run_id: str | None = None) -> ApprovalRow:
    """The approval a decider means: the open record for ``target_id`` (in ``run_id``), else its newest record.

    Raises :class:`UnknownApprovalError` or :class:`AmbiguousApprovalError`.
    """
    rows = [r for r in store.approvals_for(target_id) if run_id is None or r.run_id == storable(run_id)]
    if not rows:
        pending = ", ".join(repr(r.target_id) for r in store.approvals(limit=5)) or "none"
        raise UnknownApprovalError(f"unknown approval id {target_id!r}: no such request (pending: {pending})")
    open_rows = [r for r in rows if r.open]
    if len(open_rows) > 1:
        runs = ", ".join(r.run_id for r in open_rows)
        raise AmbiguousApprovalError(f"{target_id!r} is open in several runs ({runs}); name one with --run")
    return open_rows[0] if open_rows else rows[0]


def decide(
    store: Store,
    target_id: str,
    *,
    approve: bool,
    principal: Principal,
    reason: str = "",
    edited_args: Mapping[str, Any] | None = None,
    args_digest: str | None = None,
    run_id: str | None = None,
    timeout_s: float = DEFAULT_DECIDE_TIMEOUT_S,
    authority: DecisionAuthority | None = None,
    signer: DecisionSigner | None = None,
    grant: str | None = None,
    approval: ApprovalRow | None = None,
    request_id: str | None = None,
    answer: str = "",
) -> DecideResult:
    """Decide one approval from outside the agent; never raises for a refusal (see :class:`DecideVerdict`).

    ``args_digest`` is the digest of the call the decider saw (default: the one in the store now);
    a decision is applied or recorded only for a call with that digest. With ``signer`` (goldfive
    serve's key) the decision carries a signature that agents given the public key verify; the
    principal's channel travels and is recorded with it. Raises
    :class:`ApprovalLookupError` when ``target_id`` names no (or no single) approval, and
    :class:`~goldfive_core.store.StoreError` when the store fails.

    ``grant`` (``run``, ``session`` or a duration the request's rule offers) asks the live run to
    also allow the rule's later matching calls within that scope: a standing grant, kept in the store
    (``goldfive grants``). Never with edited arguments or a rejection.

    ``approval`` is the record the caller just found with :func:`find_approval` for ``target_id`` (goldfive
    serve looks it up to answer 404/409 first), so it is not looked up twice.

    ``request_id`` is the request the decider was shown (the inbox's card): when the target was asked again
    since (a new request, even with the same arguments), the decision is refused and nothing changes.

    ``answer="cancel"`` (with ``approve=False``, for an ``input`` request only): the person dismissed the form
    rather than declined it; signed with the rest, so the agent answers its asker "cancel", not "decline".
    """
    planned = plan_decision(
        store,
        target_id,
        approve=approve,
        principal=principal,
        reason=reason,
        edited_args=edited_args,
        args_digest=args_digest,
        run_id=run_id,
        authority=authority,
        signer=signer,
        grant=grant,
        approval=approval,
        request_id=request_id,
        answer=answer,
    )
    if isinstance(planned, DecideResult):
        return planned
    try:
        ack = StoreSender(store).deliver(planned.message, timeout_s=timeout_s, run_id=planned.run_id)
    except (RunGone, DeliveryTimeout) as exc:
        return planned.undelivered(exc)
    return planned.delivered(ack)


def plan_decision(
    store: Store,
    target_id: str,
    *,
    approve: bool,
    principal: Principal,
    reason: str = "",
    edited_args: Mapping[str, Any] | None = None,
    args_digest: str | None = None,
    run_id: str | None = None,
    authority: DecisionAuthority | None = None,
    signer: DecisionSigner | None = None,
    grant: str | None = None,
    approval: ApprovalRow | None = None,
    request_id: str | None = None,
    answer: str = "",
    control_id: str | None = None,
) -> DecideResult | Delivery:
    """:func:`decide` up to the delivery: its result when none is needed (refused, invalid, recorded for a run
    that is not running), else the :class:`Delivery` to hand the live run (``goldfive serve`` waits for its ack
    in the event loop; :func:`decide` on its thread). ``control_id``: the id its message gets (``goldfive serve``
    watches for the ack before the message is posted), else a new one."""
    row = approval if approval is not None else find_approval(store, target_id, run_id=run_id)
    nul = _nul_field(reason=reason, decided_by=principal.name, grant=grant or "")
    if nul is not None:  # refused, never altered: the decision would be signed and recorded as something else
        return DecideResult(
            verdict=DecideVerdict.INVALID,
            detail=f"refused: {nul} holds a NUL character (\\u0000), which a decision's text may not hold; "
            "nothing was decided",
            target_id=row.target_id,
            run_id=row.run_id,
            field=nul,
        )
    if request_id is not None:
        reasked = _reasked_since(row, request_id)
        if reasked is not None:
            return reasked
    if edited_args is not None and not approve:
        return _refused(row, "refused: edited_args only go with an approval")
    if answer and (answer != "cancel" or approve or row.kind != "input"):
        return _refused(row, "refused: answer 'cancel' only goes with a rejection of an input request")
    if grant is not None and (not approve or edited_args is not None):
        why = "only an approval can allow matching calls" if not approve else "an edited approval never creates a grant"
        return _refused(row, f"refused: {why}; nothing was decided")
    if not row.open:
        closed = _closed(row)
        if row.status is ApprovalStatus.EXPIRED:  # a decision after the request's deadline: refused, audited
            return _audited(store, row, principal, approve, dataclasses.replace(closed, refusal="expired"))
        return closed
    # Who may decide is enforced here, for every channel: without an authority of the caller's, the
    # request's own policy fields (approvers, barred principals, expiry) decide.
    refusal = (authority if authority is not None else PolicyAuthority()).may_decide(principal, row, approve=approve)
    if refusal is not None:
        kind = refusal.kind if isinstance(refusal, Refusal) else "forbidden"
        return _audited(store, row, principal, approve, dataclasses.replace(_refused(row, refusal), refusal=kind))
    judged = _rules(authority).judge(row)
    ask = judged.ask
    quorum = ask.quorum if ask is not None else 1
    # A standing grant only as the governing rule offers it (with serve --policy: the server's own rule, never the
    # scopes the agent's file wrote), signed with that rule's name so the run keeps it under no other.
    grant_rule = judged.rule if grant is not None else ""
    if grant is not None and (why := judged.grant_refusal(grant)):
        return _refused(row, f"refused: {why}. Nothing was decided")
    if row.kind == "input" and not approve and not reason:  # the record says how the form was turned down
        reason = "cancelled" if answer else "declined"
    if row.kind == "input" and approve and edited_args is None:
        edited_args = {}  # an accept with no content: what the form's schema says of an empty answer
    if edited_args is not None:
        if row.kind == "input":
            problem = request_answer_problem(row.metadata, edited_args)
        else:
            problem = edit_problem(row.kind, row.metadata, edited_args, tool=row.tool_name)
        if problem is not None:
            return DecideResult(
                verdict=DecideVerdict.INVALID,
                detail=f"refused: {'the answer does' if row.kind == 'input' else 'edited_args do'} not fit: "
                f"{problem.message}; nothing was changed",
                target_id=row.target_id,
                run_id=row.run_id,
                field=problem.field,
            )
    # The digest the decider saw; the live run checks it against its call, record() against the store's.
    digest = args_digest or row.args_digest
    counts = ask is not None and not ask.reject_ends
    attempt = _Attempt(
        store,
        row,
        approve,
        principal,
        reason,
        edited_args,
        digest,
        signer,
        grant or "",
        quorum,
        reject_counts=counts,
        answer=answer,
        grant_rule=grant_rule,
    )
    live = store.liveness_of(store.run(row.run_id))
    if not live.live:
        if grant is not None:
            return _refused(
                row,
                f"refused: a grant is made by the run itself and run {row.run_id} is not running ({live.reason}); "
                "approve without a grant. Nothing was recorded",
            )
        return attempt.record(
            f"run {row.run_id} is not running ({live.reason})", detached=live.state is Liveness.DETACHED
        )
    kind = ControlKind.APPROVE if approve else ControlKind.REJECT
    message = ControlMessage(kind, attempt.payload())
    return Delivery(attempt=attempt, message=dataclasses.replace(message, id=control_id) if control_id else message)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """A decision for a live run: the message to deliver, and what its ack (or its absence) makes of it."""

    attempt: _Attempt
    message: ControlMessage

    @property
    def run_id(self) -> str:
        """The run the message goes to."""
        return self.attempt.row.run_id

    def delivered(self, ack: ControlAck) -> DecideResult:
        """The run answered: applied, or refused in its own words."""
        row = self.attempt.row
        verdict = DecideVerdict.APPLIED if ack.ok else DecideVerdict.REFUSED
        return DecideResult(verdict=verdict, detail=ack.detail, target_id=row.target_id, run_id=row.run_id, ack=ack)

    def undelivered(self, exc: DeliveryTimeout) -> DecideResult:
        """No ack: a run that ended or died while we waited gets the decision recorded under the same checks
        (a store call); one that did not answer in time is told so."""
        row = self.attempt.row
        if isinstance(exc, RunGone):
            detached = isinstance(exc.liveness, RunLiveness) and exc.liveness.state is Liveness.DETACHED
            return self.attempt.record(str(exc), detached=detached)
        detail = f"no answer: {exc}"
        return DecideResult(verdict=DecideVerdict.NO_ANSWER, detail=detail, target_id=row.target_id, run_id=row.run_id)


@dataclasses.dataclass(frozen=True, slots=True)
class _Attempt:
    store: Store
    row: ApprovalRow
    approve: bool
    principal: Principal
    reason: str
    edited_args: Mapping[str, Any] | None
    digest: str
    signer: DecisionSigner | None
    grant: str = ""
    quorum: int = 1
    """How many distinct approvers the deciding side's rule requires (stated, and signed, when more than one)."""
    reject_counts: bool = False
    """The deciding side's rule says ``reject = "counts"`` (stated, and signed, with its quorum; never otherwise,
    so a default-mode vote signs the same bytes as before the field existed)."""
    answer: str = ""
    """``"cancel"``: a rejection of an input request that dismissed its form (signed; omitted when empty)."""
    recorded_expiry: bool = False
    """The expiry is recorded for a parked call: signed as an expiry (``expiry = "rule"``), never as a rejection."""
    grant_rule: str = ""
    """With a grant: the rule it was allowed under (signed with it: the run keeps the grant under that rule only)."""

    def _stated_quorum(self) -> int:
        return self.quorum if self.quorum > 1 else 0

    def _stated_reject(self) -> str:
        return "counts" if self.reject_counts and self._stated_quorum() else ""

    def _edited_json(self) -> str:
        return canonical_json(dict(self.edited_args)) if self.edited_args is not None else ""

    def signature(self) -> dict[str, Any] | None:
        """The signer's signature of exactly this decision (None without a signer)."""
        if self.signer is None:
            return None
        facts = SignedDecision(
            target_id=self.row.target_id,
            run_id=self.row.run_id,
            decision="approve" if self.approve else "reject",
            edited_args_json=self._edited_json(),
            args_digest=self.digest,
            decided_by=self.principal.name,
            detail=self.reason,
            channel=self.principal.channel,
            grant=self.grant,
            grant_rule=self.grant_rule if self.grant else "",
            request_id=self.row.request_id,
            request_digest=self.row.request_digest if self.row.request_id else "",
            quorum=self._stated_quorum(),
            quorum_reject=self._stated_reject(),
            answer=self.answer,
            expiry=EXPIRY_KIND if self.recorded_expiry else "",
        )
        return self.signer.sign(facts)

    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "target_id": self.row.target_id,
            "run_id": self.row.run_id,
            "decided_by": self.principal.name,
            "channel": self.principal.channel,
        }
        if self.row.request_id:  # the request the person saw: the run refuses it for any other (a re-ask)
            payload["request_id"] = self.row.request_id
        signature = self.signature()
        if signature is not None:
            payload["signature"] = signature
        if self.reason:
            payload["detail"] = self.reason
        if self.digest:
            payload["args_digest"] = self.digest
        if self.edited_args is not None:
            payload["edited_args"] = dict(self.edited_args)
        if self.grant:
            payload["grant"] = self.grant
            payload["grant_rule"] = self.grant_rule  # the rule the grant was allowed under: the run keeps it there
        if self._stated_quorum():  # the deciding side's rule: the run counts this as one vote towards it
            payload["quorum"] = self._stated_quorum()
        if self._stated_reject():  # and its reject mode, when a rejection is one vote rather than the end
            payload["quorum_reject"] = self._stated_reject()
        if self.answer:  # an input request dismissed, not declined
            payload["answer"] = self.answer
        return payload

    def record(self, why: str, *, detached: bool = False) -> DecideResult:
        """Record the decision in the store for a run that is not running; the digest is checked again there."""
        now = _reread(self.store, self.row)
        if not now.open:
            return _closed(now)
        if now.kind == "input":  # the asker waits for the answer in its run: nothing replays a form later
            return _refused(
                now,
                f"refused: {now.target_id!r} asks for input and its run is not running ({why}); nothing was recorded",
            )
        own = Ask.from_metadata(now.metadata)
        needed = max(self.quorum, own.quorum if own is not None else 1)
        if needed > 1:
            # The votes of a quorum are counted by the live run; one recorded decision must never stand for N
            # (N by the deciding side's rule, or by the request's own when it asks for more).
            return _refused(
                now,
                f"refused: {now.target_id!r} needs {needed} distinct approvers and its run is not running "
                f"({why}); decide it while the run is live. Nothing was recorded",
            )
        stale = _stale(now, self.digest) or _reasked(now, self.row)
        if stale is not None:
            return stale
        recorded = self.store.decide_in_store(
            now.id,
            approved=self.approve,
            detail=self.reason,
            decided_by=self.principal.name,
            edited_args_json=self._edited_json(),
            args_digest=self.digest,
            channel=self.principal.channel,
            signature=canonical_json(sig) if (sig := self.signature()) is not None else "",
            request_id=self.row.request_id,
        )
        if not recorded:  # someone decided, or the call was re-asked, since we read it
            after = _reread(self.store, now)
            return _stale(after, self.digest) or _reasked(after, self.row) or _closed(after)
        verb = "approved" if self.approve else "rejected"
        return DecideResult(
            verdict=DecideVerdict.RECORDED,
            detail=f"recorded: {verb} {now.target_id!r} in the store; {why}."
            + ("" if detached else " It applies when the call is replayed."),
            target_id=now.target_id,
            run_id=now.run_id,
        )


EXPIRY_DECIDER = "policy"
"""Who an expiry notice names as its sender (it carries no person's decision)."""


def expire(
    store: Store, row: ApprovalRow, *, why: str, signer: DecisionSigner | None, timeout_s: float = 10.0
) -> DecideResult:
    """Tell ``row``'s live run that the request expired (the deciding side's rule): its wait ends as a timeout.

    The notice is a REJECT payload marked ``expired`` (signed like any decision, so an agent that applies only
    signed decisions takes it); the run records ``approval_timed_out`` and never runs the call. Never raises
    for a run that is gone or does not answer (see :class:`DecideVerdict`).
    """
    attempt = _expiry(store, row, why, signer)
    msg = ControlMessage(ControlKind.REJECT, {**attempt.payload(), "expired": True})
    try:
        ack = StoreSender(store).deliver(msg, timeout_s=timeout_s, run_id=row.run_id)
    except (RunGone, DeliveryTimeout) as exc:
        no_answer = DecideVerdict.NO_ANSWER
        return DecideResult(verdict=no_answer, detail=str(exc), target_id=row.target_id, run_id=row.run_id)
    verdict = DecideVerdict.APPLIED if ack.ok else DecideVerdict.REFUSED
    return DecideResult(verdict=verdict, detail=ack.detail, target_id=row.target_id, run_id=row.run_id, ack=ack)


def record_expiry(
    store: Store, row: ApprovalRow, *, why: str, signer: DecisionSigner | None, expires_ms: int = 0
) -> DecideResult:
    """Record ``row``'s expiry for a run that is parked (not running): the record closes as expired (not
    decided), by :data:`EXPIRY_DECIDER`, with ``why`` and the signer's signature of the expiry (bound to this
    request, stating ``expiry = "rule"``).

    The parked call is resumed by it (the Resumer sees it) and replayed as a timeout (``approval_timed_out``,
    the HUMAN_INTERVENTION_REQUIRED drift): it never runs, and a trusting agent takes the expiry only with the
    signer's signature of exactly it. Verdict RECORDED, or why nothing was recorded (decided or re-asked since).
    """
    attempt = _expiry(store, row, why, signer, recorded=True)
    now = _reread(store, row)
    if not now.open:
        return _closed(now)
    reasked = _reasked(now, row)
    if reasked is not None:
        return reasked
    signature = attempt.signature()
    if not store.expire_in_store(
        now.id,
        detail=why,
        expired_by=EXPIRY_DECIDER,
        timeout_ms=expires_ms,
        channel=attempt.principal.channel,
        signature=canonical_json(signature) if signature is not None else "",
        request_id=row.request_id,
    ):  # decided, or asked again, since we read it
        after = _reread(store, now)
        return _reasked(after, row) or _closed(after)
    return DecideResult(
        verdict=DecideVerdict.RECORDED,
        detail=f"recorded: {now.target_id!r} expired in the store; run {now.run_id} is parked.",
        target_id=now.target_id,
        run_id=now.run_id,
    )


def _expiry(
    store: Store, row: ApprovalRow, why: str, signer: DecisionSigner | None, *, recorded: bool = False
) -> _Attempt:
    sender = Principal(name=EXPIRY_DECIDER, channel="api")
    return _Attempt(store, row, False, sender, why, None, row.args_digest, signer, recorded_expiry=recorded)


def rule_quorum(authority: DecisionAuthority | None, row: ApprovalRow) -> int:
    """How many distinct approvers the deciding side's rule requires for ``row`` (1 when no rule asks for more)."""
    ask = rule_ask(authority, row)
    return ask.quorum if ask is not None else 1


def rule_ask(authority: DecisionAuthority | None, row: ApprovalRow) -> Ask | None:
    """The deciding side's rule's ask for ``row`` (its quorum and ``reject`` mode), or None when no rule asks.

    A :class:`PolicyAuthority` answers from the rule its policy (``serve --policy``) judges the call by (never the
    one the request names), else from the request's own fields; any other authority says only who may decide, so
    the request's own fields say how many.
    """
    ask, _ = _rules(authority).ask_for(row)
    return ask


def _rules(authority: DecisionAuthority | None) -> PolicyAuthority:
    """The rules that govern a request: a :class:`PolicyAuthority`'s (its policy, or the request's own fields); any
    other authority says only who may decide, so the request's own fields say the rest."""
    return authority if isinstance(authority, PolicyAuthority) else PolicyAuthority()


def _audited(store: Store, row: ApprovalRow, principal: Principal, approve: bool, result: DecideResult) -> DecideResult:
    """Put a refusal on the audit log (who tried, why it was refused); nothing else changes."""
    audit_refusal(
        store,
        target_id=row.target_id,
        run_id=row.run_id,
        approve=approve,
        decided_by=principal.name,
        reason=result.detail,
        channel=principal.channel,
    )
    return result


def _nul_field(**texts: str) -> str | None:
    """The name of the first text that holds a NUL (which the store would keep as ␀), else None."""
    return next((name for name, text in texts.items() if "\x00" in text), None)


def _reread(store: Store, row: ApprovalRow) -> ApprovalRow:
    return next((r for r in store.approvals_for(row.target_id) if r.id == row.id), row)


def _refused(row: ApprovalRow, detail: str) -> DecideResult:
    return DecideResult(verdict=DecideVerdict.REFUSED, detail=detail, target_id=row.target_id, run_id=row.run_id)


def _stale(row: ApprovalRow, digest: str) -> DecideResult | None:
    if digest and row.args_digest and digest != row.args_digest:
        return _refused(
            row,
            f"refused: args_digest {digest!r} does not match the call awaiting approval for {row.target_id!r} "
            f"({row.args_digest!r}); nothing was changed",
        )
    return None


def _reasked(row: ApprovalRow, seen: ApprovalRow) -> DecideResult | None:
    """A refusal when the record now holds another request of the target than the one the decider saw."""
    return _reasked_since(row, seen.request_id) if seen.request_id else None


def _reasked_since(row: ApprovalRow, seen_request_id: str) -> DecideResult | None:
    """A refusal when ``row`` holds another request than ``seen_request_id`` (the one the decider was shown)."""
    if row.request_id != seen_request_id:
        return _refused(
            row,
            f"refused: {row.target_id!r} was asked again since you looked (request {seen_request_id!r} is now "
            f"{row.request_id!r}); read the new request and decide it. Nothing was changed",
        )
    return None


def _closed(row: ApprovalRow) -> DecideResult:
    if row.decision:
        text = already_decided_text(row.target_id, approved=row.decision == "approve", decided_by=row.decided_by)
        return _refused(row, text)
    return _refused(row, f"{row.target_id!r} is {row.status} ({row.detail or 'no detail'}); nothing to decide")
