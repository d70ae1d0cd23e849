"""At-most-once execution of an approved tool call, across restarts.

:func:`run_approved` is what an adapter (or a plain callable agent) calls for a
tool that needs a person's yes, keyed by a call id that stays the same when a
restarted run replays the call (ADK: ``function_call_id``):

1. the ledger says the body already finished → the recorded result, no re-run;
2. the ledger says the body started but never finished (the process died in
   between) → **in doubt**: reported to the person (a HUMAN_INTERVENTION_REQUIRED
   drift) and not re-run;
3. a decision was recorded while the agent was down (``goldfive approve`` on an
   orphaned request) → applied without asking again, if it is for the same
   arguments (same digest);
4. otherwise the person is asked (ApprovalRequested, a bounded wait).

An approval is used once: ``mark_executing`` is recorded before the body runs
and ``mark_done`` with its result after. The ledger keys on the call's owner, the
call id and the args digest: a call id reused with other arguments is a new call,
and owners reusing a call id never see each other's entries. The owner is the
agent user owning the run over HTTP; for a process writing the store it is its
agent identity (``GOLDFIVE_AGENT_ID``, or ``agent=``), which survives a restart:
the restarted process's new run finds its own done and in-doubt calls, and two
agents of other identities reusing a call id each run their body. A process with
no identity whose host names its app (an ADK ``App``'s name, a callable's
``module.qualname`` under ``wrap()``, ``GoldfiveClaude(app_name=)``: the session's
``app_name``) keeps its calls in the app's ledger (``app:<name>``): the same app
restarted finds them, and apps of other names never collide. That ledger also reads
the shared one, where the app kept its calls before this default existed: a call
done or in doubt there is not run again. Processes with neither (a callable with no
stable name, a Claude conversation given no ``app_name``, ``run_approved`` on a
session with none) share one ledger (owner ""): a call id one of them finished is
done for all of them, so nothing runs twice, but their bodies may be skipped.
:class:`StoreLedger` hands these records to the tool-call gate of every adapter.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from .._util import canonical_json, shorten
from ..approvals import Decision, reviewer_claim
from ..argschema import edit_validator
from ..drift import Drift, DriftKind, DriftSeverity
from ..errors import ConfigError, UserError
from ..inflight import InFlight
from ..pb.v1 import events_pb2
from ..session import Session
from ..signing import EXPIRY_KIND, TrustKey, trust_key_from_env
from ..toolcall import ExecutionLedger, Replay, Skip, ToolCall, gate_tool_call
from .base import HOST, ExecutionRow, ExecutionState, StoreError, StoreUnavailableError
from .claims import FoldedClaims
from .keeper import keeper_for
from .roles import CallLedger, LedgerStore, RunOwners, StoreHandle
from .rows import APP_OWNER_PREFIX
from .trust import verify_decision
from .users import check_name

__all__ = [
    "AGENT_ID_ENV",
    "GuardedResult",
    "Replay",
    "StoreLedger",
    "begin_execution",
    "check_replay",
    "app_owner",
    "finish_execution",
    "release_folded",
    "run_approved",
    "store_agent_owner",
]

logger = logging.getLogger(__name__)

GuardedStatus = Literal["ran", "already_done", "in_doubt", "unavailable", "reject", "timeout", "cancelled", "refused"]
"""``unavailable``: the store stayed out of reach past its retry budget, so the body did not run;
``refused``: the gate skipped the call for another reason (no one can answer, a policy, bad arguments)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class GuardedResult:
    """What happened to one guarded call; ``result`` is the body's return value when it ran (or had run)."""

    status: GuardedStatus
    result: Any = None
    detail: str = ""
    decided_by: str = ""
    args: Mapping[str, Any] | None = None

    @property
    def executed(self) -> bool:
        """True when the body ran in this call."""
        return self.status == "ran"


AGENT_ID_ENV = "GOLDFIVE_AGENT_ID"
"""The agent identity of a process writing the store: its runs' calls are kept in the ledger of ``store:<id>``."""

STORE_OWNER_PREFIX = "store:"
"""Ledger owners of store processes; an agent user's name (over HTTP) cannot hold a ``:``, so none is taken."""


def store_agent_owner(agent: str | None = None) -> str:
    """The ledger owner of this process's runs on the store: ``store:<agent>`` (default ``GOLDFIVE_AGENT_ID``), ''
    when it has none; :class:`~goldfive_core.errors.ConfigError` for a name that is not 1-64 of
    ``A-Za-z0-9._@+-``."""
    name = os.environ.get(AGENT_ID_ENV, "") if agent is None else agent
    if not name:
        return ""
    try:
        check_name(name)
    except UserError:
        source = AGENT_ID_ENV if agent is None else "agent="
        raise ConfigError(
            f"bad agent identity {name[:80]!r} ({source}): use 1-64 letters, digits and . _ @ + - "
            "(starting with a letter or digit)"
        ) from None
    return STORE_OWNER_PREFIX + name


_APP_NAME_MAX = 128


def app_owner(app_name: str) -> str:
    """The default ledger owner of a run whose process has no agent identity: its host's app (``app:<name>``, from
    :attr:`Session.app_name <goldfive_core.session.Session.app_name>`); '' (the shared ledger) for none, or for a
    name too long or not printable to be a stable key."""
    if not app_name or len(app_name) > _APP_NAME_MAX or not app_name.isprintable():
        return ""
    return APP_OWNER_PREFIX + app_name


_FOLDED_ANSWER_S = 30.0
"""How long an approved call waits for the store to answer the claim its ack carried (then it is not run)."""


class StoreLedger:
    """The store's execution ledger as the gate's :class:`~goldfive_core.toolcall.ExecutionLedger`.

    Keyed by owner, call id and args digest: a call id the store saw with other arguments is a new call.
    ``agent`` (default ``GOLDFIVE_AGENT_ID``) is the identity of a process writing the store: each run's calls
    go to the ledger of ``store:<agent>`` (registered before the run's first look-up), so a restart under the
    same identity finds its calls and another identity never does. With neither, a run's calls go to its host
    app's ledger (:func:`app_owner` of ``session.app_name``), or to the shared one when the host names none.
    ``agent=""`` names no ledger at all (every run in the shared one); an agent over HTTP passes it: the server
    keys its ledger by its token's user.
    """

    def __init__(
        self,
        store: LedgerStore,
        *,
        trust: TrustKey | None = None,
        agent: str | None = None,
        claims: FoldedClaims | None = None,
    ) -> None:
        self.store = store
        self.trust = trust
        """The key a decision recorded in the store must be signed with (None: any is used)."""
        self.owner = store_agent_owner(agent)
        """The ledger this process's runs keep their calls in (``store:<agent>``; "": each run's app's, if any)."""
        self._by_app = agent is None and not self.owner
        """Whether a run's host app names its ledger (no identity given; False for ``agent=""`` and over HTTP)."""
        self._owned: set[str] = set()
        """Runs registered in their owner's ledger (once per run)."""
        self._claims: dict[tuple[str, str], str] = {}
        """(call id, digest) → the run that claimed it here, for its "done" (an owner claims a call id once)."""
        self.folded = claims
        """Claims the channel's inbox folds into APPROVE acks (StoreChannel's; None: each claim is its own commit)."""

    def owner_of(self, session: Session) -> str:
        """The ledger ``session``'s run keeps its calls in: :attr:`owner`, else its app's, else "" (the shared one)."""
        return self.owner or (app_owner(session.app_name) if self._by_app else "")

    async def _own(self, session: Session) -> None:
        """Put the run's calls in its owner's ledger before it looks anything up (StoreError: it cannot)."""
        run_id = session.run_id
        owner = self.owner_of(session)
        if not owner or run_id in self._owned:
            return
        if not isinstance(self.store, RunOwners):
            if not self.owner:
                return  # a store that keys no ledgers by owner keeps one of its own: an app's name changes nothing
            raise StoreError(f"{self.store.url} keeps no ledger per store agent; an agent identity needs a store")
        await asyncio.to_thread(self.store.own_run, run_id, owner)
        self._owned.add(run_id)

    async def lookup(self, session: Session, call: ToolCall, digest: str) -> Replay:
        """What the store knows about the call (see :func:`check_replay`); ``unavailable`` through an outage
        that outlasts the store's retry budget (the gate then skips the call: fail closed)."""
        try:
            replay = await self.check(session, call, digest)
        except StoreError as exc:
            return _unavailable(self.store, call.tool_name, "could not look up whether it already ran", exc)
        if replay.kind == "none" and self.folded is not None:  # a person will be asked: the ack may carry the claim
            self.folded.expect(session.run_id, call.call_id, digest)
        return replay

    async def check(self, session: Session, call: ToolCall, digest: str) -> Replay:
        """:meth:`lookup` that raises StoreError (a ledger composed over this one retries it its own way)."""
        await self._own(session)
        return await check_replay(
            session, self.store, call_id=call.call_id, tool_name=call.tool_name, digest=digest, trust=self.trust
        )

    async def begin(self, session: Session, call: ToolCall, digest: str) -> Replay | None:
        """Record "executing" (see :func:`begin_execution`); ``unavailable`` when the store stays out of reach.

        When the approval's ack carried the claim (:mod:`goldfive_core.store.claims`), the ack's commit was the claim
        and the decision together: only a claim the store says was won lets the body run without a claim of its own.
        """
        if self.folded is not None:
            try:
                won = await self.folded.wait(session.run_id, call.call_id, within_s=_FOLDED_ANSWER_S)
            except TimeoutError:
                why = StoreUnavailableError(f"no answer to the ack that claimed it in {_FOLDED_ANSWER_S:g} s")
                return _unavailable(self.store, call.tool_name, "could not record that it starts", why)
            if won is True:
                self.adopt(session, call, digest)
                return None
            # Not folded, or not won (claimed before: done or in doubt): claim on its own, which says why not.
        try:
            return await self.claim(session, call, digest)
        except StoreError as exc:
            return _unavailable(self.store, call.tool_name, "could not record that it starts", exc)

    async def claim(self, session: Session, call: ToolCall, digest: str) -> Replay | None:
        """:meth:`begin` that raises StoreError (a ledger composed over this one retries it its own way)."""
        await self._own(session)
        refused = await begin_execution(
            session, self.store, call_id=call.call_id, tool_name=call.tool_name, digest=digest
        )
        if refused is None:
            self._claims[(call.call_id, digest)] = session.run_id
        return refused

    async def release(self, session: Session, call: ToolCall, digest: str) -> None:
        """The gate will not start the body of an approved call (the run was cancelled, or paused, after the
        APPROVE's ack claimed it), or its host never began it after ``begin`` (:meth:`Proceed.release
        <goldfive_core.toolcall.Proceed.release>`): give the claim back, "released, not run", so a re-ask may run
        the call.

        Only a claim the store said was won is given back; fail closed: when that answer or the release cannot be
        had within the store's retry budget, the entry stays "executing" (in doubt, for a person), never released by
        guess. Never raises."""
        if await self.give_back(session, call, digest):
            return
        if self.folded is None:
            return  # each claim is its own commit, made only when the body starts: nothing is held before
        await release_folded(
            self.folded,
            session,
            call,
            within_s=_FOLDED_ANSWER_S,
            write=lambda: self.release_claim(session, call, digest),
            where=self.store.url,
        )

    async def give_back(
        self,
        session: Session,
        call: ToolCall,
        digest: str,
        *,
        write: Callable[[], Awaitable[None]] | None = None,
    ) -> bool:
        """Give back the claim ``begin`` made here for ``call`` (its body did not start after all); False: this
        ledger holds no such claim (none was made, or its "done" was recorded). ``write``: how the release is written
        (default :meth:`release_claim`). A release that cannot be written leaves the call in doubt, said in the log.
        Never raises."""
        if self._claims.get((call.call_id, digest)) != session.run_id:
            return False
        try:
            await (write() if write is not None else self.release_claim(session, call, digest))
        except StoreError as exc:
            logger.error(
                "%s: %r was not run, but giving back its claim failed, so it stays in doubt for a person: %s",
                self.store.url,
                shorten(call.call_id, 80),
                shorten(str(exc), 300),
            )
        return True

    async def release_claim(self, session: Session, call: ToolCall, digest: str) -> None:
        """Write the release of the claim ``session``'s run won (StoreError: it could not be written)."""
        self._claims.pop((call.call_id, digest), None)
        if not await asyncio.to_thread(
            self.store.release_execution, call.call_id, run_id=session.run_id, args_digest=digest
        ):
            raise StoreError(f"run {session.run_id} holds no claim of {call.call_id!r} to give back")

    def adopt(self, session: Session, call: ToolCall, digest: str) -> None:
        """Take a claim recorded for ``session``'s run elsewhere (folded into the APPROVE's ack) as made here."""
        self._claims[(call.call_id, digest)] = session.run_id

    async def finish(
        self, call_id: str, digest: str, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        """Record "done" (see :func:`finish_execution`); never raises: through an outage the store's
        :class:`~goldfive_core.store.keeper.WriteKeeper` keeps it until the store answers, so a body that ran
        is not left in doubt while its process lives."""
        run_id = self._claims.pop((call_id, digest), None)
        result_json = _result_json(result, error)

        def write() -> None:
            if not self.store.mark_done(call_id, result_json=result_json, run_id=run_id):
                raise StoreError(f"no claim of {call_id!r} by run {run_id} is in the ledger")

        try:
            await asyncio.to_thread(write)
        except StoreUnavailableError as exc:
            logger.warning(
                "store %s: %r ran but 'done' could not be recorded yet; kept and retried until the store answers: %s",
                self.store.url,
                call_id,
                exc,
            )
            keeper_for(self.store).keep(f"'done' of {shorten(call_id, 80)!r}", run_id or "", write)
        except StoreError as exc:
            logger.error("store %s: %r ran but its 'done' was refused: %s", self.store.url, call_id, exc)


async def release_folded(
    claims: FoldedClaims,
    session: Session,
    call: ToolCall,
    *,
    within_s: float,
    write: Callable[[], Awaitable[None]],
    where: str,
) -> None:
    """Give back the claim folded into ``call``'s APPROVE ack when it was won (``write`` records it); the gate will
    not start the body. Fail closed: no answer within ``within_s``, or a release that cannot be written, leaves the
    entry "executing" (in doubt) and says so in the log. Never raises."""
    name = shorten(call.call_id, 80)
    try:
        won = await claims.wait(session.run_id, call.call_id, within_s=within_s)
    except TimeoutError:
        logger.error(
            "%s: %r was not run; no answer to the claim its approval carried, so it stays in doubt", where, name
        )
        return
    if won is not True:
        return  # not folded, or not won: this run holds nothing
    try:
        await write()
    except StoreError as exc:
        logger.error(
            "%s: %r was not run, but giving back its claim failed, so it stays in doubt for a person: %s",
            where,
            name,
            shorten(str(exc), 300),
        )


def _unavailable(store: StoreHandle, tool_name: str, doing: str, exc: StoreError) -> Replay:
    """Fail closed: the store is out of reach after its retry budget, so the body is not run."""
    detail = (
        f"did not run: {tool_name} was not started because the goldfive store {store.url} is unreachable "
        f"({doing}, retried for {store.retry_budget_s:g} s): {shorten(str(exc), 300)}"
    )
    logger.error("%s", detail)
    return Replay(kind="unavailable", detail=detail)


def _result_json(result: Any, error: BaseException | None) -> str:
    if error is not None:
        return canonical_json({"error": shorten(repr(error), 500)})
    try:
        return canonical_json(result)
    except (TypeError, ValueError):
        return canonical_json({"repr": shorten(repr(result), 2000)})


async def check_replay(
    session: Session, store: LedgerStore, *, call_id: str, tool_name: str, digest: str, trust: TrustKey | None = None
) -> Replay:
    """Look up ``call_id`` (with ``digest``) in the ledger and the decisions; announce what applies to the run.

    ``done``: the body finished before (its result is in ``result``); ``in_doubt``: it started and
    never finished (a CRITICAL HUMAN_INTERVENTION_REQUIRED drift is emitted; do not run it);
    ``decided``: a decision was recorded while the agent was down (ApprovalGranted/Rejected is
    emitted for this run; a decision for other arguments is ignored); ``expired``: the deciding server's rule
    ended the request while the call was parked (``approval_timed_out`` is emitted for this run; the gate
    answers it as a timeout); ``none``: ask a person.
    """
    settled = await _settled(session, store, call_id, tool_name, digest)
    if settled is not None:
        return settled
    stored = await asyncio.to_thread(store.find_decision, call_id, run_id=session.run_id)
    if stored is None:
        return Replay(kind="none")
    if stored.args_digest and digest and stored.args_digest != digest:
        logger.warning("decision stored for %s was for other arguments (%s); asking again", call_id, stored.args_digest)
        return Replay(kind="none")
    if trust is not None or reviewer_claim(stored.decided_by, stored.decided_channel):
        claimed: dict[str, Any] = {
            "target_id": stored.target_id,
            "decided_by": stored.decided_by,
            "detail": stored.detail,
            "args_digest": stored.args_digest,
            "edited_args": stored.edited_args,
            "signature": stored.signature,
            "channel": stored.decided_channel,
            # An expiry is signed as one: a rejection's signature never passes for it, nor its for a rejection.
            "expiry": EXPIRY_KIND if stored.expired else "",
        }
        # The request is the stored record's: its id, and a digest recomputed from its columns (never a stored
        # digest), whose target and arguments were just checked against this call.
        if verify_decision(
            trust,
            claimed,
            approved=stored.approved,
            run_id=stored.run_id,
            request_id=stored.request_id,
            request_digest=stored.request_digest,
            session=session,
        ):
            return Replay(kind="none")  # not signed by the trusted key: ask a person (refusal audited)
    if stored.expired:
        session.events.emit(
            events_pb2.ApprovalTimedOut(
                target_id=call_id,
                still_open=False,
                detail=stored.detail,
                expired_by=stored.decided_by,
                channel=stored.decided_channel,
                request_id=stored.request_id,
            )
        )
        return Replay(kind="expired", detail=stored.detail or "the request expired")
    note = f"decision recorded in the store (run {stored.run_id}, via {stored.decided_via}) applied to the replay"
    edited = stored.edited_args
    if stored.approved:
        session.events.emit(
            events_pb2.ApprovalGranted(
                target_id=call_id,
                detail=note,
                decided_by=stored.decided_by,
                edited_args_json=canonical_json(edited) if edited is not None else "",
            )
        )
    else:
        session.events.emit(events_pb2.ApprovalRejected(target_id=call_id, detail=note, decided_by=stored.decided_by))
    decision = Decision(
        approved=stored.approved,
        detail=stored.detail,
        decided_by=stored.decided_by,
        edited_args=edited,
        args_digest=stored.args_digest,
        decided_at_ms=stored.decided_at_ms,
    )
    return Replay(kind="decided", detail=stored.detail, decision=decision)


async def begin_execution(
    session: Session, store: CallLedger, *, call_id: str, tool_name: str, digest: str = ""
) -> Replay | None:
    """Record "executing" before an approved body runs; None = go ahead, else why not (done / in doubt)."""
    claimed = await asyncio.to_thread(
        store.mark_executing, call_id, run_id=session.run_id, pid=os.getpid(), host=HOST, args_digest=digest
    )
    if claimed:
        return None
    # Another process claimed it between the look and now.
    settled = await _settled(session, store, call_id, tool_name, "")
    return settled if settled is not None else Replay(kind="in_doubt", detail=f"{call_id!r} could not be claimed")


async def finish_execution(
    store: CallLedger,
    *,
    call_id: str,
    result: Any = None,
    error: BaseException | None = None,
    run_id: str | None = None,
) -> None:
    """Record that the body finished, with its result (or the error it raised); ``run_id``: the claiming run."""
    await asyncio.to_thread(store.mark_done, call_id, result_json=_result_json(result, error), run_id=run_id)


_STATUS_OF: dict[str, GuardedStatus] = {
    "already_done": "already_done",
    "in_doubt": "in_doubt",
    "store_unavailable": "unavailable",
    "user_rejected": "reject",
    "approval_timeout": "timeout",
    "run_cancelled": "cancelled",
}


async def run_approved(
    session: Session,
    store: LedgerStore,
    *,
    call_id: str,
    tool_name: str,
    args: Mapping[str, Any],
    body: Callable[[Mapping[str, Any]], Awaitable[Any]],
    prompt: str = "",
    task_id: str = "",
    timeout_ms: int | None = None,
    trust: TrustKey | None = None,
    ledger: ExecutionLedger | None = None,
    args_schema: Mapping[str, Any] | None = None,
    agent: str | None = None,
) -> GuardedResult:
    """Ask (or find the recorded decision), then run ``body(args)`` at most once for ``call_id``.

    With ``trust`` (the public key of ``goldfive serve``; default ``GOLDFIVE_TRUST_KEY``, as for
    :class:`~goldfive_core.store.StoreChannel`), a decision recorded in the store is used only if that
    key signed it. ``args_schema`` (JSON Schema of ``args``) is carried on the
    request, so ``goldfive serve`` refuses an edit that does not fit, and checked here too; without
    it any JSON object is accepted as an edit. The call goes through
    :func:`~goldfive_core.toolcall.gate_tool_call` like any adapter's. ``ledger`` replaces the store's
    own records (an HttpChannel's ``channel.ledger``, which fails closed when the server cannot be reached).
    ``agent`` (default ``GOLDFIVE_AGENT_ID``) names this process's ledger in the store (see :class:`StoreLedger`);
    a bad name refuses the call (the body does not run).
    """
    call = ToolCall(
        call_id=call_id,
        tool_name=tool_name,
        args=args,
        prompt=prompt or f"run {tool_name}?",
        task_id=task_id,
        args_schema=args_schema,
    )
    if ledger is None:
        # As StoreChannel does: GOLDFIVE_TRUST_KEY, when set, also binds what a replay may apply from the store.
        try:
            ledger = StoreLedger(store, trust=trust if trust is not None else trust_key_from_env(), agent=agent)
        except ConfigError as exc:
            logger.error("%s was not run: %s", tool_name, exc)
            return GuardedResult(status="refused", detail=f"did not run: {exc}")
    outcome = await gate_tool_call(
        session,
        call,
        needs_person=True,
        validate_edit=edit_validator(args_schema, tool=tool_name),
        ledger=ledger,
        timeout_ms=timeout_ms,
    )
    if isinstance(outcome, Skip):
        status = _STATUS_OF.get(outcome.reason, "refused")
        return GuardedResult(status=status, result=outcome.result, detail=outcome.detail, decided_by=outcome.decided_by)
    call_args = dict(outcome.args)
    result = await InFlight().run(outcome, body)
    decision = outcome.decision
    return GuardedResult(
        status="ran",
        result=result,
        detail=decision.detail if decision is not None else "",
        decided_by=decision.decided_by if decision is not None else "",
        args=call_args,
    )


async def _settled(session: Session, store: CallLedger, call_id: str, tool_name: str, digest: str) -> Replay | None:
    row: ExecutionRow | None = await asyncio.to_thread(store.execution, call_id, run_id=session.run_id)
    if row is None:
        return None
    if digest and row.args_digest and row.args_digest != digest:
        return None  # the call id was reused with other arguments: a new call
    if row.state is ExecutionState.DONE:
        return Replay(
            kind="done",
            result=json.loads(row.result_json) if row.result_json else None,
            detail=f"{tool_name} already ran for {call_id!r} (run {row.run_id}); its recorded result is returned",
        )
    detail = (
        f"in doubt: {tool_name} for {call_id!r} was started by run {row.run_id} (process {row.pid} on {row.host}) "
        "and never recorded a result; it may or may not have run, so it is not run again — a person must check"
    )
    session.emit_drift(Drift(DriftKind.HUMAN_INTERVENTION_REQUIRED, DriftSeverity.CRITICAL, detail))
    return Replay(kind="in_doubt", detail=detail)
