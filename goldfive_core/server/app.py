"""The ASGI app of ``goldfive serve``: the JSON API, the event stream, login, and the inbox page.

Every route needs a logged-in user (401 otherwise); deciding needs the ``decide`` permission,
pause/resume/cancel/steer ``control``, and errors are JSON ``{"error": "..."}`` with a 4xx status
that says what is wrong. A refused request changes nothing in the store. Decisions go through
:func:`goldfive_core.decide.decide` (the same function as the ``goldfive`` command), signed by the
server's key, with ``decided_by`` = the logged-in user and the channel (``web`` / ``api``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._util import new_id, shorten
from ..approvals import DECIDED_STATUSES, OPEN_STATUSES, ApprovalStatus, Principal
from ..control import AckVerdict, ControlAck, ControlKind
from ..errors import (
    AmbiguousApprovalError,
    ApiError,
    ApprovalLookupError,
    DeliveryTimeout,
    GrantNotFound,
    RunGone,
    RunNotLiveError,
    StoreError,
    StoreUnavailableError,
    UnknownRunError,
    UnknownUserError,
    UserError,
    UserExistsError,
)
from ..events import event_to_dict
from ..policy import Ask, Policy, PolicyAuthority
from ..signing import DecisionSigner
from ..store import grants as grants_mod
from ..store.base import (
    ApprovalRow,
    DetachedStatus,
    RunRow,
    Store,
)
from ..store.checkpoint import CheckpointWriter
from ..store.context import approval_context
from ..store.decide import DecideResult, DecideVerdict, DecisionAuthority, Delivery, find_approval, plan_decision
from ..store.liveness import DETACHED_LIVENESS, Liveness, RunLiveness, judge_liveness
from ..store.outbox import outbox_rows, outbox_summary
from ..store.sender import StoreSender, asend_control
from ..store.sql import SqlStore
from ..store.views import InboxState, approval_json, approvals_json, execution_fields, in_doubt_json, run_json
from ..store.witness import Appended, witnessed
from .acks import AckWatch
from .agents import AgentApi, agent_routes, audit_refusal
from .auth import COOKIE, SESSION_TTL_MS, Authenticator, User, derive_cookie_key
from .batching import Coalesced
from .expiry import Expirer, expiring
from .history import HistoryApi
from .inputs import BODY_TIMEOUT_S, MAX_SEQ, int_param, json_body, only_fields, seq_param, text_field
from .notify import Notifier, NotifyConfig
from .sessions import SESSION_RECHECK_S, SessionWatch
from .stream import Broadcaster
from .threads import ACCESS_WATCH, ACKS, SERVE, ServerThreads
from .users_api import UsersApi

__all__ = ["MAX_BODY_BYTES", "ApiError", "ServerConfig", "create_app"]

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
"""Largest request body accepted (413 beyond)."""

SERVER_THREADS = SERVE.threads
"""Worker threads for store calls (each may hold one database connection)."""

WAIT_THREADS = ACKS.threads
"""Kept for callers that read it: decisions and controls no longer wait on threads (see :mod:`.acks`)."""

MAX_AGENT_BODY_BYTES = 4 * 1024 * 1024
"""Largest body an agent may send (a batch of events; 413 beyond)."""

MAX_PAGE = 500
_STATUSES_OF: Mapping[str, frozenset[ApprovalStatus]] = {
    InboxState.PENDING: OPEN_STATUSES,  # of the runs a process serves (below)
    InboxState.DECIDED: DECIDED_STATUSES,
    InboxState.EXPIRED: frozenset({ApprovalStatus.EXPIRED}),
    InboxState.CANCELLED: frozenset({ApprovalStatus.CANCELLED}),
    InboxState.ORPHANED: OPEN_STATUSES,  # of the other runs
    "open": OPEN_STATUSES,  # still accepting a decision, whether or not a process waits (`goldfive pending`)
}
"""What ``GET /api/approvals?status=`` filters on: an inbox state (or ``open``) → the records' statuses."""
STATES = tuple(_STATUSES_OF)


@dataclasses.dataclass(kw_only=True)
class ServerConfig:
    """What the app needs besides the store."""

    signer: DecisionSigner
    authority: DecisionAuthority | None = None
    """Who may decide what beyond the role's ``decide`` permission (default: :attr:`policy`'s rules, with the
    logged-in users' names and roles)."""
    policy: Policy | None = None
    """The deciding side's policy (``goldfive serve --policy`` / ``GOLDFIVE_POLICY``): a request's rule is read
    from here, not from what the agent wrote; without one, the request's own ``policy_*`` fields are used."""
    decide_timeout_s: float = 30.0
    control_timeout_s: float = 30.0
    secure_cookies: bool = False
    poll_interval_s: float = 0.1
    recent_events: int = 50
    notify: NotifyConfig | None = None
    """Where to send notifications (webhook, Slack, email); None or no channels: none are sent."""
    checkpoints: CheckpointWriter | None = None
    """Writes signed checkpoints of the audit chain head (to a file outside the database); None: none."""
    checkpoint_every_s: float = 60.0
    session_recheck_s: float = SESSION_RECHECK_S
    """How often open event streams re-check their credential anyway. A disable, rotate or logout, done here or by
    another process (``goldfive users``, another ``serve`` over the store), ends them at once: the store's access
    news wakes the re-check; this is the safety net for news that was lost."""
    body_timeout_s: float = BODY_TIMEOUT_S
    """Longest a client may take to send a request body (408 beyond; see :data:`~.inputs.BODY_TIMEOUT_S`)."""


# -- helpers --------------------------------------------------------------------------------------------------------
async def _run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(fn, *args, **kwargs)


def _plan_and_post(
    store: Store, target_id: str, run_id: str | None, *, answer: str = "", **plan: Any
) -> tuple[ApprovalRow, DecideResult | Delivery]:
    """Find the approval a decider means, plan the decision and, for a live run, post its message: one thread hop
    where there were three (each costs on a busy host), in the order they always ran. ``answer`` (decline or
    cancel) is only for a request for input."""
    row = find_approval(store, target_id, run_id=run_id)
    if answer and row.kind != "input":
        raise ApiError(400, f"'answer' is for a request for input; {shorten(row.target_id, 80)!r} is a {row.kind}")
    cancel = "cancel" if answer == "cancel" else ""
    planned = plan_decision(store, row.target_id, run_id=row.run_id, approval=row, answer=cancel, **plan)
    if isinstance(planned, Delivery):
        StoreSender(store).post(planned.message, run_id=planned.run_id)
    return row, planned


def _liveness(store: Store, run: RunRow | None, now: int) -> RunLiveness:
    """Liveness judged on the store's clock (``now`` from ``store.clock_ms()``), never the server host's."""
    return judge_liveness(run, stale_after_ms=store.stale_after_ms, now=now)


def _ack_json(ack: ControlAck) -> dict[str, Any]:
    return {"result": ack.result.value, "detail": ack.detail, "control_id": ack.control_id, "data": ack.data}


# -- the app ---------------------------------------------------------------------------------------------------------
class _Api:
    def __init__(self, store: Store, config: ServerConfig) -> None:
        self.store = store
        self.config = config
        self.threads = ServerThreads()
        """Every pool of the app (made on first use, shut down when its lifespan ends): see :mod:`.threads`."""
        self.auth = Authenticator(
            store,
            cookie_key=derive_cookie_key(config.signer.sign_bytes(b"goldfive-cookie-key")),
            secure_cookies=config.secure_cookies,
            threads=self.threads,
        )
        self.events = Broadcaster(store, poll_interval_s=config.poll_interval_s)
        self.sessions = SessionWatch(
            self.auth.still_valid,
            every_s=config.session_recheck_s,
            still_valid_all=self.auth.still_valid_all,
            news=self._access_news,
        )
        """The open streams' leases: they end when their user's access does (at once, whichever process changed it)."""
        self.users = UsersApi(store, self.sessions, self._body)
        """The admins' user routes."""
        self.agents = AgentApi(
            store,
            max_body_bytes=MAX_AGENT_BODY_BYTES,
            body_timeout_s=config.body_timeout_s,
            threads=self.threads,
            pass_for=self.auth.pass_for,
            vouch_rows=self.vouch_rows,
        )
        self.policy_authority = PolicyAuthority(config.policy, roles=self._roles)
        """Who may decide when the config names no authority of its own: the policy's rules, the users' roles."""
        self.acks = AckWatch(store, threads=self.threads)
        """Where decisions and controls wait for their agent's ack: in the event loop, no thread each."""
        self.vouches: Coalesced[tuple[str, str], None] = Coalesced(self._vouch_many, name="goldfive-serve-vouches")
        """The checkpoint writer's notes of the decisions that took effect, made together: one fsync for those of a
        burst (each decision's answer still waits for its own note)."""
        self.row_vouches: Coalesced[Appended, None] = Coalesced(self._vouch_rows, name="goldfive-serve-row-vouches")
        """The checkpoint writer's notes of the audit rows this server wrote itself (revocations, refusals, ledger
        changes, decisions it records), made together like :attr:`vouches`."""
        self.history = HistoryApi(store, self.policy_authority)
        """The closed requests as a record (``/api/history``)."""
        self.expirer = (
            Expirer(
                store,
                self.policy_authority,
                config.signer,
                vouch_rows=config.checkpoints.vouch_events if config.checkpoints is not None else None,
            )
            if expiring(config.policy)
            else None
        )
        """Ends requests at their server rule's ``expires`` (None when no rule of the server's policy names one)."""

    async def _vouch_many(self, decisions: Sequence[tuple[str, str]]) -> dict[tuple[str, str], None]:
        if self.config.checkpoints is not None:
            await _run(self.config.checkpoints.vouch_many, list(decisions))
        return {}

    async def _vouch_rows(self, rows: Sequence[Appended]) -> dict[Appended, None]:
        if self.config.checkpoints is not None:
            await _run(self.config.checkpoints.vouch_events, list(rows))
        return {}

    async def vouch_rows(self, rows: Sequence[Appended]) -> None:
        """Hold the audit rows this server just wrote to what they say until a checkpoint covers them (before the
        answer goes out: a rewrite of them is then never signed into a checkpoint)."""
        if rows and self.config.checkpoints is not None:
            await asyncio.gather(*(self.row_vouches.get(row) for row in rows))

    async def _written(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn`` (a store write) on a thread; the rows it appended to the audit chain are vouched for."""
        result, rows = await _run(witnessed, fn, *args, **kwargs)
        await self.vouch_rows(rows)
        return result

    async def end_streams(self) -> None:
        """End every open event stream (the inbox's and the agents'): a server that is stopping must not wait
        for browser tabs and agents to hang up. Agents reconnect to another server; a tab says disconnected."""
        await self.events.aclose()
        await self.agents.hub.aclose()
        await self.agents.liveness.aclose()
        await self.agents.heartbeats.aclose()
        await self.acks.aclose()
        await self.vouches.aclose()
        await self.row_vouches.aclose()

    async def _access_news(self, seen: str | None, timeout_s: float) -> str:
        """The store's users' access version once it differs from ``seen`` (on the one thread that LISTENs)."""
        return await self.threads.run(ACCESS_WATCH, self.store.wait_access_news, seen, timeout_s)

    def close_access_news(self) -> None:
        """Close the access watcher thread's own (LISTEN) connection, as its last queued call."""
        with contextlib.suppress(RuntimeError):  # its pool was never made, or is already shut down
            self.threads.pool(ACCESS_WATCH).submit(self.store.close)

    def _roles(self, name: str) -> tuple[str, ...]:
        """A user's roles for a rule's ``role:NAME`` approvers: their permission role and their policy groups
        (read on every decision, so a group change counts at once; runs on a worker thread)."""
        row = self.store.user(name)
        return (row.role, *row.groups) if row is not None and not row.disabled else ()

    # -- plumbing ---------------------------------------------------------------------------------------------
    def route(
        self, handler: Callable[[Request, User], Awaitable[Response]], permission: str = "read"
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` behind authentication, CSRF and ``permission``; refusals go to the app's handler table."""

        async def endpoint(request: Request) -> Response:
            user = await self.auth.authenticate(request)
            self.auth.check_csrf(request, user, write=request.method not in ("GET", "HEAD"))
            if not user.can(permission):
                if user.role == "agent":  # an agent token reaching for the inbox or a decision: on the record
                    await audit_refusal(
                        self.store, user, request, permission, threads=self.threads, vouch_rows=self.vouch_rows
                    )
                raise ApiError(403, f"{user.name!r} has role {user.role!r}, which may not {permission}")
            response = await handler(request, user)
            if isinstance(response, StreamingResponse):  # open for long: it ends when the user's access does
                response.body_iterator = self.sessions.guard(user, permission, response.body_iterator)
            return response

        return endpoint

    async def _body(self, request: Request) -> dict[str, Any]:
        return await json_body(
            request,
            max_bytes=MAX_BODY_BYTES,
            max_depth=self.store.limits.max_json_depth + 1,  # the body's own object wraps the values
            timeout_s=self.config.body_timeout_s,
        )

    # -- session ----------------------------------------------------------------------------------------------
    async def login(self, request: Request) -> Response:
        Authenticator.check_same_origin(request)
        body = await self._body(request)
        only_fields(body, ("name", "token"))
        name = text_field(body, "name", required=True, limit=64)
        token = text_field(body, "token", required=True, limit=200)
        addr = request.client.host if request.client else "?"
        user, cookie = await self.auth.login(name, token, addr=addr)
        response = JSONResponse({"name": user.name, "role": user.role, "csrf": user.csrf})
        secure = self.config.secure_cookies or request.url.scheme == "https"
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=SESSION_TTL_MS // 1000,
            httponly=True,
            samesite="strict",
            secure=secure,
            path="/",
        )
        return response

    async def logout(self, request: Request, user: User) -> Response:
        await self.auth.logout(user)
        self.sessions.end_session(user.session_hash)
        response = JSONResponse({"result": "logged out"})
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    async def me(self, request: Request, user: User) -> Response:
        permissions = sorted(p for p in ("read", "decide", "control", "manage_users") if user.can(p))
        return JSONResponse(
            {
                "name": user.name,
                "role": user.role,
                "channel": user.channel,
                "csrf": user.csrf,
                "permissions": permissions,
            }
        )

    # -- approvals ----------------------------------------------------------------------------------------------
    async def _live_runs(self) -> dict[str, RunLiveness]:
        runs: list[RunRow] = await _run(self.store.runs, running_only=True)
        now: int = await _run(self.store.clock_ms)
        found = {r.run_id: _liveness(self.store, r, now) for r in runs}
        for parked in await _run(self.store.detached_runs, status=DetachedStatus.WAITING, limit=1000):
            found.setdefault(parked.run_id, RunLiveness(state=Liveness.DETACHED, reason=DETACHED_LIVENESS))
        return found

    async def approvals(self, request: Request, user: User) -> Response:
        params = request.query_params
        state = params.get("status", "pending")
        if state not in STATES:
            raise ApiError(400, f"unknown status {shorten(state, 40)!r}: use one of {', '.join(STATES)}")
        limit = int_param(request, "limit", 100, low=1, high=MAX_PAGE)
        offset = int_param(request, "offset", 0, low=0, high=10**9)
        liveness = await self._live_runs()
        live = sorted(run for run, how in liveness.items() if how.waits)
        page = await _run(
            self.store.approval_page,
            statuses=sorted(s.value for s in _STATUSES_OF[state]),
            run_ids=live if state == InboxState.PENDING else None,
            exclude_run_ids=live if state == InboxState.ORPHANED else None,
            run_id=params.get("run") or None,
            agent=params.get("agent") or None,
            tool=params.get("tool") or None,
            limit=limit,
            offset=offset,
        )
        items = await _run(
            approvals_json, self.store, page.rows, known=liveness, rules=self.policy_authority, context=True
        )
        return JSONResponse({"approvals": items, "total": page.total, "limit": limit, "offset": offset})

    async def _find(self, request: Request) -> ApprovalRow:
        target = request.path_params["target_id"]
        row: ApprovalRow = await _run(find_approval, self.store, target, run_id=request.query_params.get("run") or None)
        return row

    async def approval(self, request: Request, user: User) -> Response:
        row = await self._find(request)
        run = await _run(self.store.run, row.run_id)
        data = approval_json(row, liveness=await _run(self.store.liveness_of, run), rules=self.policy_authority)
        data["context"] = await _run(approval_context, self.store, row, rules=self.policy_authority)
        rows = await _run(self.store.audit_rows, run_id=row.run_id, limit=1_000_000)
        data["events"] = [
            {"seq": r.seq, "kind": r.kind, "event": event_to_dict(r.event())}
            for r in rows[-self.config.recent_events :]
        ]
        data.update(await _run(execution_fields, self.store, row.target_id, row.run_id))
        data["run"] = await _run(run_json, self.store, run) if run is not None else None
        return JSONResponse(data)

    async def _decide(self, request: Request, user: User, *, approve: bool) -> Response:
        body = await self._body(request)
        if approve:
            only_fields(body, ("reason", "edited_args", "args_digest", "grant", "request_id"))
        else:
            only_fields(body, ("reason", "args_digest", "request_id", "answer"))
        answer = text_field(body, "answer", limit=20)
        if answer not in ("", "decline", "cancel"):
            raise ApiError(400, f"'answer' must be 'decline' or 'cancel', got {shorten(answer, 40)!r}")
        # An answer to a request for input (decline or cancel) needs no reason; a rejection of a call does.
        reason = text_field(body, "reason", required=not approve and not answer)
        grant = text_field(body, "grant", limit=40) or None
        digest = text_field(body, "args_digest", limit=200) or None
        asked = text_field(body, "request_id", limit=200) or None  # the request the page showed
        edited = body.get("edited_args")
        if edited is not None and not isinstance(edited, dict):
            raise ApiError(400, f"'edited_args' must be a JSON object, got {type(edited).__name__}")
        # Its ack is watched for before the message is posted: the delivery needs no look of its own (one thread
        # hop and one read fewer), and the watch ends with the request.
        control_id = new_id("ctl")
        with self.acks.watch(control_id, before_post=True) as watched:
            row, planned = await self._written(
                _plan_and_post,
                self.store,
                request.path_params["target_id"],
                request.query_params.get("run") or None,
                approve=approve,
                principal=Principal(name=user.name, channel="web" if user.channel == "web" else "api"),
                reason=reason,
                edited_args=edited,
                args_digest=digest,
                authority=self.config.authority or self.policy_authority,
                signer=self.config.signer,
                grant=grant,
                request_id=asked,
                answer=answer,
                control_id=control_id,
            )
            result = planned if isinstance(planned, DecideResult) else await self._deliver(planned, watched.wait)
        data: dict[str, Any] = {
            "result": "SUCCESS" if result.ok else "FAILURE",
            "detail": result.detail,
            "verdict": result.verdict.value,
            "target_id": result.target_id,
            "run_id": result.run_id,
            "decided_by": user.name,
        }
        if result.ack is not None:
            data["control_id"] = result.ack.control_id
            vote = result.ack.data or {}
            if result.ack.verdict is AckVerdict.COUNTED:  # one vote of a quorum: the request is still pending
                data["counted"] = True
                data["quorum_progress"] = str(vote.get("quorum_progress") or "")
                if vote.get("repeated") is True:  # this person had voted already: nothing changed
                    data["repeated"] = True
                if isinstance(vote.get("args_digest"), str):  # an edit restarted the count: vote on these now
                    data["args_digest"] = vote["args_digest"]
        if result.ok:
            if self.config.checkpoints is not None and not data.get("counted"):
                # Signed here: no checkpoint is signed while its record lacks the signature (a relabel).
                await self.vouches.get((result.run_id, result.target_id))
            return JSONResponse(data)
        if result.verdict is DecideVerdict.NO_ANSWER:
            return JSONResponse({**data, "error": result.detail}, status_code=504)
        if result.refusal == "forbidden":  # not among the rule's approvers, or barred: audited, nothing changed
            return JSONResponse({**data, "error": result.detail}, status_code=403)
        if result.verdict is DecideVerdict.INVALID:  # the edit does not fit the tool's schema: the client's mistake
            return JSONResponse({**data, "error": result.detail, "field": result.field}, status_code=422)
        now = await _run(find_approval, self.store, row.target_id, run_id=row.run_id)
        data["approval"] = approval_json(now, liveness="live" if now.open else "-", rules=self.policy_authority)
        return JSONResponse({**data, "error": result.detail}, status_code=409)

    async def _deliver(
        self, planned: Delivery, watched: Callable[[float], Awaitable[ControlAck | None]]
    ) -> DecideResult:
        """Hand a decision to its live run; the wait for the ack holds no thread (see :mod:`.acks`)."""
        try:
            ack = await StoreSender(self.store).adeliver(
                planned.message,
                acks=self.acks,
                offload=_run,
                timeout_s=self.config.decide_timeout_s,
                run_id=planned.run_id,
                posted=True,  # by _plan_and_post
                watched=watched,  # watched since before the post
            )
        except DeliveryTimeout as exc:  # RunGone too: undelivered() records it for a run that ended meanwhile
            result: DecideResult = await self._written(planned.undelivered, exc)
            return result
        return planned.delivered(ack)

    async def approve(self, request: Request, user: User) -> Response:
        return await self._decide(request, user, approve=True)

    async def reject(self, request: Request, user: User) -> Response:
        return await self._decide(request, user, approve=False)

    # -- grants -----------------------------------------------------------------------------------------------
    async def grants(self, request: Request, user: User) -> Response:
        limit = int_param(request, "limit", 100, low=1, high=MAX_PAGE)
        everything = request.query_params.get("all") in ("1", "true")
        now = await _run(self.store.clock_ms)
        rows = await _run(grants_mod.grant_rows, self.store, active_only=not everything, at_ms=now, limit=limit)
        return JSONResponse({"grants": [r.as_dict(now) for r in rows], "total": len(rows)})

    async def revoke_grant(self, request: Request, user: User) -> Response:
        body = await self._body(request)
        only_fields(body, ("reason",))
        reason = text_field(body, "reason", limit=1000)
        grant_id = request.path_params["grant_id"]
        row = await _run(grants_mod.grant_row, self.store, grant_id)
        if row is None:
            raise ApiError(404, f"unknown grant {shorten(grant_id, 80)!r}: no such grant")
        why = await self._may_revoke(user, row)
        if why:
            raise ApiError(403, why)
        revoked = await self._written(
            grants_mod.revoke_grant, self.store, row.grant_id, by=user.name, reason=reason, channel=user.channel
        )
        return JSONResponse({"result": "REVOKED", "grant": revoked.as_dict(await _run(self.store.clock_ms))})

    async def _may_revoke(self, user: User, row: grants_mod.GrantRow) -> str:
        """Who may revoke: an admin, else whoever the rule lets decide its requests (with the server's policy).

        The rule is found by the name the grant was kept under (the one its request named, which the server signed
        it with), not judged again: revoking only takes a permission away, so a name the server's file gives another
        meaning, or none (anyone who may decide), errs on the safe side."""
        if user.can("manage_users") or self.config.policy is None:
            return ""
        rule = next((r for r in self.config.policy.rules if r.name == row.rule), None)
        if rule is None or not isinstance(rule.action, Ask):
            return ""
        why = rule.action.refusal(user=user.name, roles=await _run(self._roles, user.name), escalated=True)
        return f"{user.name!r} may not revoke grant {row.grant_id!r} of rule {row.rule!r}: {why}" if why else ""

    # -- runs -------------------------------------------------------------------------------------------------
    async def runs(self, request: Request, user: User) -> Response:
        limit = int_param(request, "limit", 100, low=1, high=MAX_PAGE)
        offset = int_param(request, "offset", 0, low=0, high=10**9)
        escalated = request.query_params.get("escalated") in ("1", "true")  # live runs waiting at ladder level 4
        live_only = escalated or request.query_params.get("live") in ("1", "true")
        rows: list[RunRow] = await _run(self.store.runs, running_only=live_only)
        now: int = await _run(self.store.clock_ms)
        items = [run_json(self.store, r, now=now) for r in rows]
        if live_only:
            items = [i for i in items if i["live"]]
        if escalated:
            items = [i for i in items if i["paused"] and i["paused"]["escalated"]]
        return JSONResponse(
            {"runs": items[offset : offset + limit], "total": len(items), "limit": limit, "offset": offset}
        )

    async def _run_row(self, request: Request) -> RunRow:
        run_id = request.path_params["run_id"]
        run: RunRow | None = await _run(self.store.run, run_id)
        if run is None:
            raise ApiError(404, f"unknown run {shorten(run_id, 80)!r}")
        return run

    async def run_events(self, request: Request, user: User) -> Response:
        run = await self._run_row(request)
        after = int_param(request, "after", 0, low=0, high=MAX_SEQ)
        limit = int_param(request, "limit", 1000, low=1, high=5000)
        rows = await _run(self.store.audit_rows, after_seq=after, run_id=run.run_id, limit=limit)
        events = [{"seq": r.seq, "hash": r.hash, "kind": r.kind, "event": event_to_dict(r.event())} for r in rows]
        shown = await _run(run_json, self.store, run)
        return JSONResponse({"run": shown, "events": events, "next_after": rows[-1].seq if rows else after})

    async def _control(self, request: Request, user: User, kind: ControlKind) -> Response:
        body = await self._body(request)
        payload: dict[str, Any] = {}
        if kind is ControlKind.STEER:
            only_fields(body, ("text",))
            payload["text"] = text_field(body, "text", required=True)
        elif kind is ControlKind.RESUME:
            only_fields(body, ())
        else:
            only_fields(body, ("reason",))
            reason = text_field(body, "reason")
            if reason:
                payload["reason"] = reason
        run = await self._run_row(request)
        payload.update(decided_by=user.name, channel=user.channel)
        ack = await asend_control(
            self.store,
            kind,
            payload,
            acks=self.acks,
            offload=_run,
            run=run.run_id,
            timeout_s=self.config.control_timeout_s,
        )
        data = _ack_json(ack)
        return JSONResponse(data if ack.ok else {**data, "error": ack.detail}, status_code=200 if ack.ok else 409)

    def control(self, kind: ControlKind) -> Callable[[Request, User], Awaitable[Response]]:
        async def handler(request: Request, user: User) -> Response:
            return await self._control(request, user, kind)

        return handler

    # -- audit and the stream ---------------------------------------------------------------------------------------
    async def audit_verify(self, request: Request, user: User) -> Response:
        """The whole chain, every decision signature checked with this server's key, and the checkpoint writer's
        word: a chain it refused to sign is not ok, whatever the database says now."""
        report = await _run(self.store.verify_audit, trust_key=self.config.signer.trust_key)
        problems = list(report.problems)
        refused = self.config.checkpoints.refused if self.config.checkpoints is not None else ""
        if refused:
            problems.insert(0, f"goldfive serve refused to sign a checkpoint of this chain: {refused}")
        return JSONResponse(
            {
                "ok": report.ok and not refused,
                "rows": report.rows,
                "head_hash": report.head_hash,
                "problems": problems,
                "first_bad_seq": report.first_bad_seq,
            }
        )

    async def notifications(self, request: Request, user: User) -> Response:
        """Delivery status per channel and the latest failures (the inbox shows them)."""
        if not isinstance(self.store, SqlStore):
            return JSONResponse({"channels": {}, "failures": []})
        summary = await _run(outbox_summary, self.store)
        failed = await _run(outbox_rows, self.store, status="failed", limit=20)
        failures = [row.failure() for row in failed]
        return JSONResponse({"channels": summary, "failures": failures})

    async def audit_events(self, request: Request, user: User) -> Response:
        head_seq, head_hash = await _run(self.store.audit_head)
        limit = int_param(request, "limit", 200, low=1, high=5000)
        run_id = request.query_params.get("run") or None
        if "after" in request.query_params:
            after = int_param(request, "after", 0, low=0, high=MAX_SEQ)
            rows = await _run(self.store.audit_rows, after_seq=after, run_id=run_id, limit=limit)
        elif run_id:  # the run's own last `limit` events (its seqs are spread among other runs')
            rows = (await _run(self.store.audit_rows, run_id=run_id, limit=1_000_000))[-limit:]
        else:  # seqs grow by one per row: the last `limit` events
            rows = await _run(self.store.audit_rows, after_seq=max(0, head_seq - limit), limit=limit)
        total = await _run(self.store.count_audit, run_id=run_id)
        events = [{"seq": r.seq, "hash": r.hash, "kind": r.kind, "event": event_to_dict(r.event())} for r in rows]
        return JSONResponse({"events": events, "head_seq": head_seq, "head_hash": head_hash, "total": total})

    async def in_doubt(self, request: Request, user: User) -> Response:
        """Approved calls whose process stopped while the body ran: a person settles them (`goldfive resolve`)."""
        return JSONResponse({"in_doubt": await _run(in_doubt_json, self.store)})

    async def stream(self, request: Request, user: User) -> Response:
        after = seq_param(request)
        run_id = request.query_params.get("run") or None

        async def body() -> AsyncIterator[bytes]:
            async for chunk in self.events.stream(after=after, run_id=run_id):
                if await request.is_disconnected():
                    return
                yield chunk

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(body(), media_type="text/event-stream", headers=headers)

    # -- the page ---------------------------------------------------------------------------------------------
    async def index(self, request: Request) -> Response:
        page = resources.files("goldfive_core.server").joinpath("static", "index.html")
        if not page.is_file():
            return JSONResponse({"error": "the inbox page is not installed; the API is under /api"}, status_code=404)
        return Response(page.read_bytes(), media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)


_PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class _NoSniff:
    """``X-Content-Type-Options: nosniff`` on every response (API, static files, streams, errors): a browser
    never reads a JSON body or an uploaded text as script or style."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).setdefault("X-Content-Type-Options", "nosniff")
            await send(message)

        await self.app(scope, receive, send_with_header)


async def _server_error(request: Request, exc: Exception) -> Response:
    """An unexpected error: a JSON 500 without the cause's text (it is in the server's log, not the client's)."""
    return JSONResponse(
        {"error": "internal error: the server could not answer this request"},
        status_code=500,
        headers={"X-Content-Type-Options": "nosniff"},
    )


def _refused(status: int, message: str, *, headers: Mapping[str, str] | None = None, **extra: Any) -> Response:
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s else {}
    if exc.status == 401 and request.url.path != "/api/login":  # a failed login is not a missing credential
        headers["WWW-Authenticate"] = 'Bearer realm="goldfive"'
    return _refused(exc.status, exc.message, headers=headers, **exc.extra)


def _status(status: int, suffix: str = "") -> Callable[[Request, Exception], Awaitable[Response]]:
    """The answer to a refusal a route lets through: ``status`` and the error's own words (then ``suffix``)."""

    async def answer(request: Request, exc: Exception) -> Response:
        return _refused(status, f"{exc}{suffix}")

    return answer


async def _no_delivery(request: Request, exc: Exception) -> Response:
    """No agent took (or acked) a control in time: it was withdrawn, and the answer is a FAILURE as an ack's."""
    return JSONResponse({"result": "FAILURE", "detail": str(exc), "error": str(exc)}, status_code=504)


async def _store_unavailable(request: Request, exc: Exception) -> Response:
    logger.warning("store unavailable: %s", exc)
    return _refused(503, f"the store is unavailable: {shorten(str(exc))}")


async def _store_error(request: Request, exc: Exception) -> Response:
    logger.warning("store error: %s", exc)
    return _refused(500, f"store error: {shorten(str(exc))}")


async def _client_gone(request: Request, exc: Exception) -> Response:
    # The client hung up before its body was in: nobody reads this answer; it is here so nothing logs a traceback.
    logger.info("client disconnected before its request body arrived: %s %s", request.method, request.url.path)
    return _refused(400, "the client disconnected before the request body arrived")


async def _not_found(request: Request, exc: Exception) -> Response:
    return JSONResponse({"error": f"no such route: {request.method} {shorten(request.url.path, 120)}"}, status_code=404)


async def _bad_method(request: Request, exc: Exception) -> Response:
    return JSONResponse(
        {"error": f"{request.method} is not allowed on {shorten(request.url.path, 120)}"}, status_code=405
    )


_HANDLERS: Mapping[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    ApiError: _api_error,  # AuthError and AgentError are its other names
    # Starlette picks the nearest class in the exception's MRO: a leaf's entry wins over its base's.
    AmbiguousApprovalError: _status(409, " (add ?run=RUN_ID)"),
    ApprovalLookupError: _status(404),
    UnknownUserError: _status(404),
    UserExistsError: _status(409),
    UserError: _status(400),
    GrantNotFound: _status(409),  # a grant revoked since it was read
    UnknownRunError: _status(404),  # a run control's run removed since it was read
    RunNotLiveError: _status(409),
    RunGone: _status(409),  # before DeliveryTimeout, its base
    DeliveryTimeout: _no_delivery,
    StoreUnavailableError: _store_unavailable,
    StoreError: _store_error,
    ClientDisconnect: _client_gone,
    404: _not_found,
    405: _bad_method,
    Exception: _server_error,  # anything else: a bug; a JSON 500 without its cause (that goes to the log)
}
"""Every refusal of every route, mapped to its answer in one place (routes raise, never build error responses)."""


def create_app(store: Store, config: ServerConfig) -> Starlette:
    """The ``goldfive serve`` ASGI app over ``store``."""
    api = _Api(store, config)
    r = api.route

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        notifier: asyncio.Task[None] | None = None
        # Store calls get a pool larger than asyncio's default handful; decisions and controls wait for their
        # agent's ack in the loop (api.acks), so a burst of them never holds up the requests that answer them.
        api.threads.install_default()
        if config.notify is not None and config.notify.targets:
            # With --policy its notices name the server's rule and go to who may decide under it.
            notifying = Notifier(store, config.notify, rules=api.policy_authority)
            notifier = asyncio.create_task(notifying.run(), name="goldfive-notifier")
        checkpointer: asyncio.Task[None] | None = None
        if config.checkpoints is not None and config.checkpoint_every_s > 0:
            checkpointer = asyncio.create_task(
                config.checkpoints.run(config.checkpoint_every_s), name="goldfive-checkpoints"
            )
        expirer: asyncio.Task[None] | None = None
        if api.expirer is not None:
            expirer = asyncio.create_task(api.expirer.run(), name="goldfive-expiry")
        try:
            yield
        finally:
            if expirer is not None:
                expirer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await expirer
            if checkpointer is not None:
                checkpointer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await checkpointer
            if notifier is not None:
                notifier.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await notifier
            await api.sessions.aclose()
            api.close_access_news()
            await api.end_streams()
            api.threads.shutdown()

    routes: list[BaseRoute] = [
        Route("/", api.index, methods=["GET"]),
        Route("/api/login", api.login, methods=["POST"]),
        Route("/api/logout", r(api.logout), methods=["POST"]),
        Route("/api/me", r(api.me), methods=["GET"]),
        Route("/api/approvals", r(api.approvals), methods=["GET"]),
        Route("/api/history", r(api.history.history), methods=["GET"]),
        Route("/api/review/stats", r(api.history.review_stats), methods=["GET"]),
        Route("/api/approvals/{target_id}", r(api.approval), methods=["GET"]),
        Route("/api/approvals/{target_id}/approve", r(api.approve, "decide"), methods=["POST"]),
        Route("/api/approvals/{target_id}/reject", r(api.reject, "decide"), methods=["POST"]),
        Route("/api/grants", r(api.grants), methods=["GET"]),
        Route("/api/grants/{grant_id}/revoke", r(api.revoke_grant, "decide"), methods=["POST"]),
        Route("/api/runs", r(api.runs), methods=["GET"]),
        Route("/api/runs/{run_id}/events", r(api.run_events), methods=["GET"]),
        Route("/api/runs/{run_id}/pause", r(api.control(ControlKind.PAUSE), "control"), methods=["POST"]),
        Route("/api/runs/{run_id}/resume", r(api.control(ControlKind.RESUME), "control"), methods=["POST"]),
        Route("/api/runs/{run_id}/cancel", r(api.control(ControlKind.CANCEL), "control"), methods=["POST"]),
        Route("/api/runs/{run_id}/steer", r(api.control(ControlKind.STEER), "control"), methods=["POST"]),
        Route("/api/audit/verify", r(api.audit_verify), methods=["GET"]),
        Route("/api/notifications", r(api.notifications), methods=["GET"]),
        Route("/api/audit/events", r(api.audit_events), methods=["GET"]),
        Route("/api/in-doubt", r(api.in_doubt), methods=["GET"]),
        Route("/api/users", r(api.users.list, "manage_users"), methods=["GET"]),
        Route("/api/users", r(api.users.add, "manage_users"), methods=["POST"]),
        Route("/api/users/{name}/{action}", r(api.users.act, "manage_users"), methods=["POST"]),
        Route("/api/events", r(api.stream), methods=["GET"]),
        *agent_routes(api.agents, r),
    ]
    static = resources.files("goldfive_core.server").joinpath("static")
    if static.is_dir():
        routes.append(Mount("/static", app=StaticFiles(directory=str(static)), name="static"))
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(_NoSniff)],
        exception_handlers=_HANDLERS,
    )
    app.state.api = api
    return app
