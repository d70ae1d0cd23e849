"""The agent-facing routes of ``goldfive serve`` (``/api/agent/...``): agents reach goldfive over HTTP.

An agent process holds a URL and a token of role ``agent`` — no database driver, no database
credentials. Through these routes it writes its runs' events (durably: the answer comes after the
commit), heartbeats, receives the control messages addressed to its runs as Server-Sent Events,
acks them, and keeps its execution-ledger records. Nothing else: an agent token reads no inbox and
never decides; its attempts are refused with 403 and put on the audit log (see :func:`audit_refusal`).

Messages are the protobuf messages of ``proto/goldfive/v1`` in their protobuf JSON mapping
(``Event``, ``ControlEvent``, ``ControlAck``); docs/reference/http-api.md ("Agent routes") is the wire
reference. One :class:`InboxHub` per server process waits for the inbox (one PostgreSQL LISTEN
connection however many agents wait), claims new messages for the agents connected to it, and hands
each to its agent's stream; a message claimed for an agent that lost its connection is sent again,
from the database, when the agent reconnects to this or any other server.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format

from .._util import shorten
from ..control import ControlAck
from ..convert import ack_from_proto, message_to_proto
from ..errors import ApiError
from ..events import payload_name
from ..limits import Limits, env_name
from ..pb.v1 import control_pb2, events_pb2
from ..retry import Backoff, Delays
from ..store import agents as owners
from ..store import grants as grants_mod
from ..store.base import ExecutionClaim, ExecutionRow, InboxRow, Store, StoreError
from ..store.witness import Appended, witnessed
from .auth import User
from .heartbeats import HeartbeatBatch, StreamLiveness
from .inputs import BODY_TIMEOUT_S, json_body
from .threads import AGENTS, HUB, ServerThreads

if TYPE_CHECKING:
    from google.protobuf.message import Message
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

__all__ = [
    "AGENT_PING_S",
    "AgentApi",
    "AgentError",
    "InboxHub",
    "agent_routes",
    "audit_refusal",
    "control_frame",
    "event_over_limits",
    "run_namespace_refusal",
]

logger = logging.getLogger(__name__)

AGENT_PING_S = 30.0
"""A comment line on an idle agent stream this often, so proxies and the agent see a live connection (within the
agent's 45 s read timeout). Each ping is a send per waiting agent (on loopback ≈ 0.25 ms of CPU under load: at 15 s,
1,000 idle agents cost a server 2.3 % of a core in pings alone); a vanished agent host is found by TCP keepalive,
not by the ping (see :mod:`.connections`)."""

_QUEUE_MAX = 256
_MAX_RUNS = 256
_MAX_EVENTS = 1000
_ENDPOINT = re.compile(r"^[A-Za-z0-9._:@+-]{1,320}$")
_REAP_EVERY_S = 10.0
"""How often a server with connected agents closes runs whose heartbeat stopped (status crashed)."""

_WAKE_SLICE_S = 5.0
"""Longest wait for the inbox between looks (a safety net; a posted message wakes the hub at once)."""


def run_namespace_refusal(run_id: str, agent: str) -> str | None:
    """Why ``agent`` may not use ``run_id`` (None: it may, if no other agent owns the run).

    A run id ``<name>:<rest>`` is in agent ``name``'s namespace: only that agent user may register or use it,
    so no other agent can take a run id it chose before its run first reaches the server (an agent user's
    name holds no ``:``). Other ids are first come, first owned: goldfive's own (``run-`` and 48 random bits,
    made when the run starts and written at once) cannot be known in advance; an id a person chose can.
    """
    name, colon, _ = run_id.partition(":")
    if colon and name != agent:
        return (
            f"run {shorten(run_id, 80)!r} is in the namespace of agent {shorten(name, 64)!r} (run ids "
            f"'<agent>:...' are that agent's alone); name this agent's runs {agent!r}:..."
        )
    return None


def _dict(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = json_format.MessageToDict(message, preserving_proto_field_name=True)
    return out


def control_frame(row: InboxRow) -> bytes:
    """One SSE message for an agent: ``id`` = inbox id, ``event: control``, ``data`` = the ControlEvent JSON."""
    data = {"inbox_id": row.id, "run_id": row.run_id, "message": _dict(message_to_proto(row.message()))}
    return f"id: {row.id}\nevent: control\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


@dataclasses.dataclass(eq=False)
class _Subscriber:
    agent: str
    endpoint: str
    runs: frozenset[str]
    queue: asyncio.Queue[InboxRow | None]
    sent: dict[int, None] = dataclasses.field(default_factory=dict)
    """The inbox ids queued for this stream (in order, the newest :data:`_SENT_MAX`): a row won again for the same
    endpoint (the stream's own look and the hub's, or a late claim) is queued once."""

    def first_time(self, ident: int) -> bool:
        """Whether ``ident`` is new to this stream (and remember it)."""
        if ident in self.sent:
            return False
        self.sent[ident] = None
        if len(self.sent) > _SENT_MAX:
            del self.sent[next(iter(self.sent))]
        return True


_SENT_MAX = 1024


_OUTAGE = Backoff(first_s=0.05, cap_s=2.0)
"""How the inbox watcher waits out a store outage."""


async def _outage_pause(delays: Delays, exc: StoreError) -> None:
    delay = delays.next()
    logger.warning("agent inbox: store unavailable, retrying in %.2f s: %s", delay, exc)
    await asyncio.sleep(delay)


class InboxHub:
    """Waits for the store's inbox once per process and hands new messages to the agents connected here."""

    def __init__(self, store: Store, *, threads: ServerThreads | None = None) -> None:
        self.store = store
        self.threads = threads if threads is not None else ServerThreads()
        """Its pools (:data:`~.threads.HUB` waits for the inbox, :data:`~.threads.AGENTS` claims); a hub made
        without the app's shuts its own down in :meth:`aclose`."""
        self._own_threads = threads is None
        self._by_run: dict[str, list[_Subscriber]] = {}
        self._newest: dict[str, _Subscriber] = {}
        """Each run's newest subscriber: replaced whole (never changed in place) whenever a stream comes or goes, so
        the hub thread reads a consistent map after its wake."""
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._looking = threading.Lock()
        """One look-and-claim at a time (the watcher's, on an agents thread, and the pump's, on the hub thread): a
        second look starts after the first's claims committed, so it finds them taken, not pending, and claims
        nothing (two looks at once both won each row for its stream, which was then queued twice)."""

    @property
    def subscribers(self) -> int:
        """How many agent streams are connected to this process."""
        return len({id(s) for subs in self._by_run.values() for s in subs})

    def runs(self) -> list[str]:
        """The runs with an agent stream connected to this process."""
        return list(self._by_run)

    def subscribe(self, sub: _Subscriber) -> None:
        """Route messages for ``sub.runs`` to ``sub`` (the newest subscriber of a run wins) from now on.

        What already waits for those runs is the new stream's own look (:meth:`AgentApi.open_stream`, made after
        this call), not a look of every run here: thousands of agents connecting at once (a fleet starting, or
        moving here from a killed server) made one look of all this server's runs each."""
        idle = not self._by_run
        for run in sub.runs:
            self._by_run.setdefault(run, []).append(sub)
        self._renew()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="goldfive-serve-agent-inbox")
        elif idle:  # the watcher sleeps until there is someone to serve
            self._wake.set()

    def unsubscribe(self, sub: _Subscriber) -> None:
        """Stop routing to ``sub``."""
        for run in sub.runs:
            subs = self._by_run.get(run)
            if subs is not None and sub in subs:
                subs.remove(sub)
                if not subs:
                    del self._by_run[run]
        self._renew()

    def _renew(self) -> None:
        self._newest = {run: subs[-1] for run, subs in self._by_run.items() if subs}

    async def aclose(self) -> None:
        """Stop waiting and end every stream."""
        task, self._task = self._task, None
        for subs in list(self._by_run.values()):
            for sub in subs:
                with contextlib.suppress(asyncio.QueueFull):
                    sub.queue.put_nowait(None)
        self._by_run.clear()
        self._renew()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._own_threads:
            self.threads.shutdown()

    async def deliver(self, sub: _Subscriber, rows: Sequence[InboxRow]) -> None:
        """Claim ``rows`` for ``sub`` and queue those it won (a row claimed elsewhere went to another stream)."""
        if not rows:
            return
        won = await self.threads.run(AGENTS, self._claim_rows, [(r.id, sub.endpoint) for r in rows])
        for row in rows:
            if row.id in won:
                self._put(sub, row)

    def _claim_rows(self, claims: list[tuple[int, str]]) -> set[int]:
        with self._looking:
            return owners.claim_for_streams(self.store, claims)

    def _look(self, endpoints: dict[str, str]) -> list[InboxRow]:
        with self._looking:
            return _claim_pending(self.store, endpoints)

    def _put(self, sub: _Subscriber, row: InboxRow) -> None:
        if not sub.first_time(row.id):
            return
        try:
            sub.queue.put_nowait(row)
        except asyncio.QueueFull:  # a stuck stream: end it; the agent reconnects and gets the row from the database
            self.unsubscribe(sub)
            with contextlib.suppress(asyncio.QueueFull, asyncio.QueueEmpty):
                sub.queue.get_nowait()
                sub.queue.put_nowait(None)

    async def _pump(self) -> None:
        """Wait for the inbox and claim what came for the streams connected here, on one thread (one LISTEN
        connection): a decision's message goes from the wake to its stream's queue in one thread hop."""
        delays = _OUTAGE.delays()
        try:
            next_reap = time.monotonic() + _REAP_EVERY_S
            while True:
                try:
                    for sub, row in await self.threads.run(HUB, self._wait_and_claim, _WAKE_SLICE_S):
                        self._put(sub, row)
                    if self._by_run and time.monotonic() >= next_reap:
                        # Agents over HTTP do not close each other's crashed runs (their sinks skip it): we do.
                        await self.threads.run(HUB, self.store.reap_crashed)
                        next_reap = time.monotonic() + _REAP_EVERY_S
                    delays.reset()
                except StoreError as exc:
                    await _outage_pause(delays, exc)
                    self._wake.set()  # the watcher looks again once the store is back
        finally:
            with contextlib.suppress(RuntimeError):  # the app's threads are already shut down: nothing to close
                self.threads.pool(HUB).submit(self.store.close)  # the hub thread's own (LISTEN) connection

    def _wait_and_claim(self, timeout_s: float) -> list[tuple[_Subscriber, InboxRow]]:
        """On the hub's thread: sleep until the inbox may have news (or ``timeout_s``), then claim what waits for the
        streams connected at that moment (the loop replaces ``_newest`` whole, so it is read once, consistent)."""
        self.store.wait_inbox(timeout_s)
        newest = self._newest
        if not newest:
            return []
        rows = self._look({run: sub.endpoint for run, sub in newest.items()})
        return [(newest[row.run_id], row) for row in rows]

    async def _watch(self) -> None:
        pump = asyncio.get_running_loop().create_task(self._pump(), name="goldfive-serve-agent-inbox-pump")
        delays = _OUTAGE.delays()
        try:
            while True:
                self._wake.clear()
                if not self._by_run:  # nobody to serve: wait for a subscriber (or the pump after an outage)
                    await self._wake.wait()
                    continue
                try:
                    newest = self._newest
                    endpoints = {run: sub.endpoint for run, sub in newest.items()}
                    # The look and the claims in one thread hop: a decision's message is on its way to a body.
                    for row in await self.threads.run(AGENTS, self._look, endpoints):
                        self._put(newest[row.run_id], row)
                    delays.reset()
                except StoreError as exc:
                    await _outage_pause(delays, exc)
                    continue
                await self._wake.wait()
        finally:
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)


def _claim_pending(store: Store, endpoints: dict[str, str]) -> list[InboxRow]:
    """The messages waiting for the runs of ``endpoints`` (run id → the endpoint of its newest stream), each claimed
    for its run's endpoint, every stream's claims in one transaction (a burst of decisions to many agents is one
    claim, not one per agent); the rows won, in inbox order (a row claimed elsewhere went to another stream)."""
    runs = list(endpoints)
    rows: list[InboxRow] = []
    for start in range(0, len(runs), 500):
        rows += owners.pending_for_runs(store, runs[start : start + 500])
    if not rows:
        return []
    won = owners.claim_for_streams(store, [(row.id, endpoints[row.run_id]) for row in rows])
    return [row for row in rows if row.id in won]


def _claim_runs(store: Store, runs: Sequence[str], agent: str) -> str | None:
    """Claim each of ``runs`` for ``agent`` (or find it the agent's): the first refusal, None when all are its."""
    for run in runs:
        if (refusal := owners.claim_run(store, run, agent)) is not None:
            return refusal
    return None


def _claim_own(store: Store, run_id: str, agent: str) -> None:
    """Refuse (403) a run id outside ``agent``'s namespace or owned by another agent; claim it for ``agent`` if
    nobody owns it."""
    if (refusal := run_namespace_refusal(run_id, agent)) is not None:
        raise AgentError(403, refusal)
    if (refusal := owners.claim_run(store, run_id, agent)) is not None:
        raise AgentError(403, refusal)


def _admit_events(store: Store, agent: str, events: Sequence[events_pb2.Event]) -> None:
    """Refuse (403) events ``agent`` may not write: a run that is not its own (each run claimed for it first), a
    decision, grant or vote that no person's decision delivered to the run. One thread, one hop; nothing written."""
    for run_id in sorted({e.run_id for e in events}):
        _claim_own(store, run_id, agent)
    for event in events:
        kind = payload_name(event)
        if kind in ("approval_granted", "approval_rejected"):
            granted = kind == "approval_granted"
            target = (event.approval_granted if granted else event.approval_rejected).target_id
            if not owners.decision_delivered(store, event.run_id, target, approved=granted):
                raise AgentError(
                    403,
                    f"event {event.sequence} of run {event.run_id}: no person's decision for {target!r} reached "
                    "this run; an agent reports decisions, it cannot make them",
                )
        elif kind in ("grant_created", "approval_voted"):
            target = (event.grant_created if kind == "grant_created" else event.approval_voted).target_id
            if kind == "grant_created":
                ok = owners.grant_delivered(store, event.run_id, target)
            else:
                ok = owners.decision_delivered(
                    store, event.run_id, target, approved=event.approval_voted.decision != "reject"
                )
            if not ok:
                raise AgentError(
                    403,
                    f"event {event.sequence} of run {event.run_id} ({kind}): no person's approval for "
                    f"{target!r} reached this run; an agent reports grants and votes, it cannot make them",
                )


@dataclasses.dataclass(frozen=True)
class _Events:
    """An agent's events as posted (``events``, ``pid``, ``host`` of a body), parsed and bounded."""

    events: list[events_pb2.Event]
    pid: int
    host: str


def _events_of(body: dict[str, Any], limits: Limits, *, required: bool) -> _Events:
    """The ``events`` of an agent's body (400 for anything that is not a list of bounded Events; 403 for the server's
    own run id); ``required``: at least one (``POST /api/agent/events``), else an empty or missing list is none."""
    raw = body.get("events")
    if raw is None and not required:
        raw = []
    if not isinstance(raw, list) or (required and not raw):
        what = "a non-empty list" if required else "a list"
        raise AgentError(400, f"'events' must be {what} of Event objects (protobuf JSON)")
    if len(raw) > _MAX_EVENTS:
        raise AgentError(400, f"'events' has {len(raw)} items; the limit is {_MAX_EVENTS} per request")
    pid, host = body.get("pid", 0), body.get("host", "")
    if not _is_pid(pid) or not isinstance(host, str) or len(host) > 255:
        raise AgentError(400, "'pid' must be an integer (0-2^31) and 'host' a string of at most 255 characters")
    events: list[events_pb2.Event] = []
    for index, item in enumerate(raw):
        event = events_pb2.Event()
        try:
            json_format.ParseDict(item, event)
        except (json_format.ParseError, TypeError, ValueError) as exc:
            raise AgentError(400, f"events[{index}] is not an Event: {shorten(str(exc), 200)}") from None
        if event.run_id == owners.SERVER_AUDIT_RUN:
            raise AgentError(403, f"run id {owners.SERVER_AUDIT_RUN!r} is the server's own")
        if too_big := event_over_limits(event, limits):
            raise AgentError(400, f"events[{index}]: {too_big}; nothing was written")
        events.append(event)
    return _Events(events, pid, host)


def _write_events(store: Store, agent: str, batch: _Events) -> None:
    """Admit ``batch`` for ``agent`` (403 before anything is written: see :func:`_admit_events`), then append it to
    the audit chain (committed when this returns). One thread, one hop."""
    _admit_events(store, agent, batch.events)
    store.append_events(batch.events, pid=batch.pid, host=batch.host)


def _owed_and_pending(store: Store, endpoint: str, runs: Sequence[str]) -> tuple[list[InboxRow], list[InboxRow]]:
    """What a new stream sends first: the rows claimed for its endpoint and never acked (its connection broke), and
    those waiting for its runs; one thread hop.

    Pending first, then claimed: a claim another server commits between the two reads (it was killed with the claim
    on its way) is in one of them; the pending ones are claimed again for this endpoint."""
    pending = owners.pending_for_runs(store, runs)
    return owners.claimed_for(store, endpoint), pending


# -- request parsing ---------------------------------------------------------------------------------------------
AgentError = ApiError
"""A refused agent request: the server's one refusal type under the name the agent routes raise it by."""


_NAME_FIELDS = frozenset({"tool_name", "tool", "agent", "rule"})
"""Text fields bounded like ids (``max_id_chars``): names, never prose."""


def _limit_of(name: str, limits: Limits) -> tuple[int, str]:
    """The limit on a text field of an event, by its name: the agent's own limits (goldfive_core.limits)."""
    if name.endswith("_json"):
        return limits.max_args_chars, "max_args_chars"
    if name == "id" or name.endswith("_id") or name in _NAME_FIELDS:
        return limits.max_id_chars, "max_id_chars"
    return limits.max_prompt_chars, "max_prompt_chars"


def event_over_limits(event: Message, limits: Limits) -> str:
    """What in an agent-written event is bigger than the agent itself may send ("" = nothing): every text
    field and metadata entry against ``limits``, and every integer within 64 bits (what a store column holds)."""
    stack: list[tuple[Message, str]] = [(event, "")]
    while stack:
        message, where = stack.pop()
        for field, value in message.ListFields():
            path = f"{where}{field.name}"
            if field.message_type is not None and field.message_type.GetOptions().map_entry:
                for key, item in value.items():  # metadata: keys are names; a value is bounded by its key's name
                    problem = _text_over(f"a key of {path}", key, "key_id", limits)
                    if problem or (problem := _text_over(f"{path}[{key[:40]!r}]", str(item), key, limits)):
                        return problem
            elif field.type == field.TYPE_MESSAGE:
                items = value if field.is_repeated else [value]
                stack.extend((item, f"{path}.") for item in items)
            elif field.type == field.TYPE_STRING:
                for text in value if field.is_repeated else [value]:
                    if problem := _text_over(path, text, field.name, limits):
                        return problem
            elif field.type in (field.TYPE_UINT64, field.TYPE_FIXED64):
                for number in value if field.is_repeated else [value]:
                    if number > _MAX_INT64:
                        return f"{path} is {number}; the limit is {_MAX_INT64}"
    return ""


def _text_over(what: str, text: str, name: str, limits: Limits) -> str:
    limit, field = _limit_of(name, limits)
    if len(text) > limit:
        return f"{what} is {len(text)} characters; the limit is {limit} ({env_name(field)})"
    return ""


_MAX_INT64 = 2**63 - 1


def _list_of_str(value: Any, what: str, *, limit: int) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and 0 < len(v) <= 200 for v in value):
        raise AgentError(400, f"{what!r} must be a list of non-empty strings (at most 200 characters each)")
    if len(value) > limit:
        raise AgentError(400, f"{what!r} has {len(value)} items; the limit is {limit}")
    return list(value)


def _is_pid(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def _endpoint(agent: str, raw: Any) -> str:
    if not isinstance(raw, str) or not _ENDPOINT.match(raw):
        raise AgentError(400, "'endpoint' must be 1-320 characters of letters, digits and . _ : @ + -")
    return f"{owners.AGENT_ENDPOINT_PREFIX}{agent}:{raw}"


def _execution_json(row: ExecutionRow) -> dict[str, Any]:
    return {
        "target_id": row.target_id,
        "run_id": row.run_id,
        "state": row.state.value,
        "started_at_ms": row.started_at_ms,
        "finished_at_ms": row.finished_at_ms,
        "result_json": row.result_json,
        "pid": row.pid,
        "host": row.host,
        "args_digest": row.args_digest,
        "owner": row.owner,
    }


async def audit_refusal(
    store: Store,
    user: User,
    request: Request,
    permission: str,
    *,
    threads: ServerThreads,
    vouch_rows: Callable[[Sequence[Appended]], Awaitable[None]] | None = None,
) -> None:
    """Put an agent token's refused attempt (to decide, control, read the inbox...) on the audit log (its row
    vouched for with ``vouch_rows``)."""
    target = request.path_params.get("target_id") or request.path_params.get("run_id") or ""
    event = events_pb2.Event(event_id=f"ev-refused-{user.name}-{id(request):x}", run_id=owners.SERVER_AUDIT_RUN)
    event.decision_refused.target_id = shorten(str(target), 200)
    event.decision_refused.decision = shorten(request.url.path.rsplit("/", 1)[-1], 40)
    event.decision_refused.decided_by = user.name
    event.decision_refused.reason = (
        f"agent token {user.name!r} may not {permission} ({request.method} {shorten(request.url.path, 200)}): refused"
    )
    event.decision_refused.channel = "agent"
    logger.warning("refused agent %r: %s %s", user.name, request.method, shorten(request.url.path, 200))
    try:
        _, rows = await threads.run(AGENTS, witnessed, owners.append_server_event, store, event)
    except StoreError as exc:  # the refusal stands; only its record is missing (logged above)
        logger.error("could not audit the refused request of agent %r: %s", user.name, exc)
        return
    if vouch_rows is not None:
        await vouch_rows(rows)


def _claim(raw: Any, index: int) -> ExecutionClaim:
    """The "executing" claim an APPROVE's ack carries (what ``POST .../executing`` takes), as sent; whether its run
    is the agent's is checked by :func:`_ack`."""
    ok = isinstance(raw, dict) and isinstance(raw.get("call_id"), str) and 0 < len(raw["call_id"]) <= 500
    digest = raw.get("args_digest", "") if isinstance(raw, dict) else None
    ok = ok and isinstance(digest, str) and len(digest) <= 200 and _is_pid(raw.get("pid", 0))
    if not ok or not isinstance(raw.get("host", ""), str):
        raise AgentError(
            400, f"acks[{index}].claim must be {{'call_id', 'run_id', 'args_digest', 'pid' (0-2^31), 'host'}}"
        )
    run_id = raw.get("run_id")
    if not isinstance(run_id, str) or not 0 < len(run_id) <= 200:
        raise AgentError(400, f"acks[{index}].claim.run_id must name the asking run: a string of 1-200 characters")
    return ExecutionClaim(
        target_id=raw["call_id"],
        run_id=run_id,
        pid=int(raw.get("pid", 0)),
        host=str(raw.get("host", ""))[:255],
        args_digest=str(digest),
    )


def _claims_owned(
    store: Store, agent: str, claims: dict[int, tuple[int, ExecutionClaim]], admitted: frozenset[str] = frozenset()
) -> None:
    """Refuse (403) a claim folded into an ack that names a run not ``agent``'s. ``admitted``: runs known to be the
    agent's already (its events in this request were admitted for them, each claimed for it), not read again."""
    # The run streamed this agent the message it acks, so it is the agent's already: a read, not a claim.
    named = {claim.run_id for _, claim in claims.values()}
    owned = owners.owned_runs(store, agent, sorted(named - admitted)) | (admitted & named)
    for index, claim in claims.values():
        if claim.run_id not in owned:
            raise AgentError(
                403, f"acks[{index}].claim names run {shorten(claim.run_id, 80)!r}, not one of this agent's"
            )


def _record_acks(
    store: Store, endpoint: str, acks: list[tuple[int, ControlAck]], claims: dict[int, tuple[int, ExecutionClaim]]
) -> dict[str, Any]:
    """Commit ``endpoint``'s acks and the claims folded into them (owned: :func:`_claims_owned`); the answer."""
    claimed = {row.id for row in owners.claimed_for(store, endpoint)}
    mine = [(ident, ack) for ident, ack in acks if ident in claimed]
    folded = {ident: claims[ident][1] for ident, _ in mine if ident in claims}
    won = store.ack_controls(mine, claims=folded)
    for ident, (_, claim) in claims.items():
        if ident not in folded:  # acked before (its answer was lost): the claim alone, idempotent for its claimer
            won[ident] = store.mark_executing(
                claim.target_id, run_id=claim.run_id, pid=claim.pid, host=claim.host, args_digest=claim.args_digest
            )
    # An id not claimed by this endpoint was acked before (a retry after a lost answer) or is not this agent's.
    return {
        "acked": [ident for ident, _ in mine],
        "ignored": [ident for ident, _ in acks if ident not in claimed],
        "claims": {str(ident): bool(won.get(ident, False)) for ident in claims},
    }


def _ack(
    store: Store,
    agent: str,
    endpoint: str,
    acks: list[tuple[int, ControlAck]],
    claims: dict[int, tuple[int, ExecutionClaim]],
) -> dict[str, Any]:
    """Record ``endpoint``'s acks (and the claims folded into them) for agent ``agent``: the answer of
    ``POST /api/agent/acks``. One thread, one hop: the ownership check, the look-up and the commit."""
    _claims_owned(store, agent, claims)
    return _record_acks(store, endpoint, acks, claims)


def _events_then_ack(
    store: Store,
    agent: str,
    batch: _Events,
    endpoint: str,
    acks: list[tuple[int, ControlAck]],
    claims: dict[int, tuple[int, ExecutionClaim]],
) -> dict[str, Any]:
    """``POST /api/agent/acks`` carrying events, in one thread hop: every check first (the events' runs and reported
    decisions, the claims' runs: a refusal is a 403 and nothing is written), then the events committed to the audit
    chain (a decision's event is on the record before its ack is), then the acks recorded as :func:`_ack` does."""
    _admit_events(store, agent, batch.events)
    _claims_owned(store, agent, claims, admitted=frozenset(event.run_id for event in batch.events))
    if batch.events:
        store.append_events(batch.events, pid=batch.pid, host=batch.host)  # committed before the acks
    answer = _record_acks(store, endpoint, acks, claims)
    answer["written"] = len(batch.events)
    return answer


class AgentApi:
    """The handlers of ``/api/agent/...``; every one needs the ``agent`` permission (app.py wraps them)."""

    def __init__(
        self,
        store: Store,
        *,
        max_body_bytes: int,
        body_timeout_s: float = BODY_TIMEOUT_S,
        threads: ServerThreads | None = None,
        pass_for: Callable[[User], str] | None = None,
        vouch_rows: Callable[[Sequence[Appended]], Awaitable[None]] | None = None,
    ) -> None:
        self.store = store
        self.pass_for = pass_for if pass_for is not None else (lambda user: "")
        self.vouch_rows = vouch_rows
        """Holds the audit rows this server writes for an agent's ledger to what they say until a checkpoint covers
        them (see :meth:`~goldfive_core.store.checkpoint.CheckpointWriter.vouch_events`); None: nobody does."""
        """The pass a stream's answer carries for its agent's token (see :data:`~..store.agents.PASS_HEADER`)."""
        self.hub = InboxHub(store, threads=threads)
        self.threads = self.hub.threads
        """Where its store calls run (:data:`~.threads.AGENTS`): never queued behind people's decisions."""
        self.heartbeats = HeartbeatBatch(store, threads=self.threads)
        """The agents' beats of each interval, written in one transaction (see :mod:`.heartbeats`)."""
        self.liveness = StreamLiveness(self.heartbeats, self.hub.runs)
        """The runs of open streams, stamped alive by this server: their agents send no heartbeats for them."""
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    async def _body(self, request: Request) -> dict[str, Any]:
        # Events nest a few levels above the values the agent's limits bound (body > events > event > payload).
        return await json_body(
            request,
            max_bytes=self.max_body_bytes,
            max_depth=self.store.limits.max_json_depth + 4,
            timeout_s=self.body_timeout_s,
        )

    async def _own(self, user: User, run_id: str) -> None:
        await self.threads.run(AGENTS, _claim_own, self.store, run_id, user.name)

    async def _written(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``fn`` (a store write) on an :data:`~.threads.AGENTS` thread; the audit rows it appended (the ledger's
        records) are vouched for before the agent is answered."""
        result, rows = await self.threads.run(AGENTS, witnessed, fn, *args, **kwargs)
        if rows and self.vouch_rows is not None:
            await self.vouch_rows(rows)
        return result

    # -- events, heartbeats ----------------------------------------------------------------------------------
    async def events(self, request: Request, user: User) -> dict[str, Any]:
        """``POST /api/agent/events``: append events (protobuf JSON) to the audit chain; answered after the commit."""
        body = await self._body(request)
        batch = _events_of(body, self.store.limits, required=True)
        # The runs' ownership, every reported decision and the append in one thread hop (were one per run and event,
        # then two: the checks, the append).
        await self.threads.run(AGENTS, _write_events, self.store, user.name, batch)
        return {"written": len(batch.events)}

    async def heartbeat(self, request: Request, user: User) -> dict[str, Any]:
        """``POST /api/agent/heartbeat``: ``{"run_ids": [...]}`` are alive (stamped with the store's clock)."""
        body = await self._body(request)
        runs = _list_of_str(body.get("run_ids", []), "run_ids", limit=_MAX_RUNS)
        mine = await self.heartbeats.owned(user.name, runs)
        if set(runs) - mine:
            raise AgentError(403, "heartbeat for runs this agent does not own")
        await self.heartbeats.beat(sorted(mine))  # with the other agents' beats of this interval: one transaction
        return {"runs": len(mine)}

    # -- control messages ----------------------------------------------------------------------------------------
    async def open_stream(self, request: Request, user: User) -> AsyncIterator[bytes]:
        """``GET /api/agent/stream?run=R&endpoint=E``: the control messages of the agent's runs, as SSE."""
        params = request.query_params
        runs = _list_of_str(params.getlist("run"), "run", limit=_MAX_RUNS)
        if not runs:
            raise AgentError(400, "name at least one run: /api/agent/stream?run=RUN_ID&endpoint=E")
        endpoint = _endpoint(user.name, params.get("endpoint"))
        for run in runs:
            if (refusal := run_namespace_refusal(run, user.name)) is not None:
                raise AgentError(403, refusal)
        # Every run claimed (or found the agent's) in one thread hop: agents failing over to this server in the middle
        # of a burst queue behind its acks and claims for each hop, while their runs age.
        refusal = await self.threads.run(AGENTS, _claim_runs, self.store, runs, user.name)
        if refusal is not None:
            raise AgentError(403, refusal)
        sub = _Subscriber(user.name, endpoint, frozenset(runs), asyncio.Queue(maxsize=_QUEUE_MAX))
        self.hub.subscribe(sub)  # before the look at the database: nothing posted from now on falls between
        try:
            # From this answer on the agent stops heartbeating these runs (LIVENESS_HEADER): stamped now, then
            # with every open stream's runs each STREAM_BEAT_S, so no run goes stale between its beats and ours.
            # The stamp and the look (one hop) go together; both are done before the answer.
            look = self.threads.run(AGENTS, _owed_and_pending, self.store, endpoint, runs)
            stamped, looked = await asyncio.gather(self.heartbeats.beat(runs), look, return_exceptions=True)
            if isinstance(stamped, BaseException):
                raise stamped
            if isinstance(looked, BaseException):
                raise looked
            self.liveness.start()
            owed, pending = looked
        except BaseException:
            self.hub.unsubscribe(sub)
            raise
        return self._stream(request, sub, owed, pending)

    async def _stream(
        self, request: Request, sub: _Subscriber, owed: list[InboxRow], pending: list[InboxRow]
    ) -> AsyncIterator[bytes]:
        try:
            yield b"retry: 1000\n: connected\n\n"
            # Claimed for this endpoint and never acked (its connection broke): sent again, the agent skips repeats.
            for row in owed:
                if (frame := await self._frame(row)) is not None:
                    yield frame
            await self.hub.deliver(sub, pending)
            while True:
                try:
                    item = await asyncio.wait_for(sub.queue.get(), timeout=AGENT_PING_S)
                except TimeoutError:
                    if await request.is_disconnected():
                        return
                    yield b": ping\n\n"
                    continue
                if item is None:
                    return
                if (frame := await self._frame(item)) is not None:
                    yield frame
        finally:
            self.hub.unsubscribe(sub)

    async def _frame(self, row: InboxRow) -> bytes | None:
        """The row's SSE frame; a row the wire cannot carry is answered here (FAILURE ack) and not sent."""
        problem = row.problem
        if not problem:
            try:
                return control_frame(row)
            except ValueError as exc:
                problem = f"its payload cannot travel as a ControlEvent: {shorten(str(exc), 200)}"
        detail = (
            f"quarantined: inbox row #{row.id} (control {shorten(row.control_id, 80)!r}) was not delivered: {problem}"
        )
        logger.warning("agent stream: %s", detail)
        try:
            await self.threads.run(
                AGENTS, self.store.ack_controls, [(row.id, ControlAck.failure(row.control_id, detail))]
            )
        except StoreError as exc:  # it stays claimed and unacked; the sender's wait ends with its timeout
            logger.error("agent stream: could not answer inbox row #%d: %s", row.id, exc)
        return None

    async def acks(self, request: Request, user: User) -> dict[str, Any]:
        """``POST /api/agent/acks``: ``{"endpoint": E, "acks": [{"inbox_id": N, "ack": ControlAck}]}``, optionally
        with the agent's events (``"events"``, ``"pid"``, ``"host"`` as ``POST /api/agent/events`` takes them):
        those are committed to the audit chain before the acks are recorded (this server says it takes them:
        :data:`~..store.agents.ACKS_HEADER` on the stream's answer)."""
        body = await self._body(request)
        batch = _events_of(body, self.store.limits, required=False) if "events" in body else None
        endpoint = _endpoint(user.name, body.get("endpoint"))
        raw = body.get("acks")
        if not isinstance(raw, list) or not raw or len(raw) > 500:
            raise AgentError(400, "'acks' must be a list of 1-500 {inbox_id, ack} objects")
        acks: list[tuple[int, ControlAck]] = []
        claims: dict[int, tuple[int, ExecutionClaim]] = {}
        for index, item in enumerate(raw):
            if not isinstance(item, dict) or not isinstance(item.get("inbox_id"), int):
                raise AgentError(400, f"acks[{index}] must be {{'inbox_id': int, 'ack': ControlAck}}")
            proto = control_pb2.ControlAck()
            try:
                json_format.ParseDict(item.get("ack") or {}, proto)
                ack = ack_from_proto(proto)
            except (json_format.ParseError, TypeError, ValueError) as exc:
                raise AgentError(400, f"acks[{index}].ack is not a ControlAck: {shorten(str(exc), 200)}") from None
            acks.append((int(item["inbox_id"]), ack))
            if item.get("claim") is not None:
                claims[int(item["inbox_id"])] = (index, _claim(item["claim"], index))
        # One thread hop for the checks and the commit: an APPROVE's ack with its claim is on the way to its body.
        if batch is not None:  # the decision's event first, committed; then the ack: still one hop
            events_first: dict[str, Any] = await self._written(
                _events_then_ack, self.store, user.name, batch, endpoint, acks, claims
            )
            return events_first
        answer: dict[str, Any] = await self._written(_ack, self.store, user.name, endpoint, acks, claims)
        return answer

    async def decisions(self, request: Request, user: User) -> dict[str, Any]:
        """``GET /api/agent/runs/{run_id}/decisions``: decisions recorded in the store for the run's requests."""
        run_id = request.path_params["run_id"]
        await self._own(user, run_id)
        rows = await self.threads.run(AGENTS, self.store.approvals, open_only=False, run_id=run_id)
        return {
            "decisions": [
                {
                    "target_id": r.target_id,
                    "run_id": r.run_id,
                    "decision": r.decision,
                    "decided_by": r.decided_by,
                    "detail": r.detail,
                    "args_digest": r.args_digest,
                    "edited_args_json": r.edited_args_json,
                    "decided_at_ms": r.decided_at_ms,
                    "decided_via": r.decided_via,
                    "decided_channel": r.decided_channel,
                    "decision_sig": r.decision_sig,
                }
                for r in rows
                if r.decision
            ]
        }

    async def grants(self, request: Request, user: User) -> dict[str, Any]:
        """``GET /api/agent/grants?rule=R&tool=T[&run=RUN...]``: standing grants made in this agent's runs.

        Revoked and expired ones included (the agent applies a revocation at once). Only grants made in runs
        the agent token owns; naming a run of another agent is refused (403).
        """
        params = request.query_params
        runs = _list_of_str(params.getlist("run"), "run", limit=_MAX_RUNS)
        if runs:
            mine = await self.threads.run(AGENTS, owners.owned_runs, self.store, user.name, runs)
            if set(runs) - mine:
                raise AgentError(403, "grants of runs this agent does not own")
        rule, tool = params.get("rule"), params.get("tool")
        for name, value in (("rule", rule), ("tool", tool)):
            if value is not None and not 0 < len(value) <= 200:
                raise AgentError(400, f"{name!r} must be 1-200 characters")
        rows = await self.threads.run(
            AGENTS,
            grants_mod.grant_rows,
            self.store,
            rule=rule,
            tool=tool,
            limit=1000,
            agent=user.name,
            made_in=runs or None,
        )
        now = await self.threads.run(AGENTS, self.store.clock_ms)
        return {"grants": [r.as_dict(now) for r in rows]}

    # -- the execution ledger ------------------------------------------------------------------------------------
    # Each agent user has a ledger of its own: a call is claimed, finished and looked up in the ledger of the
    # agent that owns the named run (another agent's run: 403), so an agent never reaches another's calls and
    # two agents reusing a call id never collide.
    async def _ledger_run(self, user: User, run_id: Any) -> str:
        if not isinstance(run_id, str) or not 0 < len(run_id) <= 200:
            raise AgentError(400, "'run_id' (or ?run=) must name the asking run: a string of 1-200 characters")
        await self._own(user, run_id)
        return run_id

    async def ledger(self, request: Request, user: User) -> dict[str, Any]:
        """``GET /api/agent/ledger/{call_id}?run=R``: run R's agent's entry for the call and any decision recorded
        for it (in that agent's runs) while the agent was down."""
        call_id = request.path_params["call_id"]
        run_id = await self._ledger_run(user, request.query_params.get("run"))
        row = await self.threads.run(AGENTS, self.store.execution, call_id, run_id=run_id)
        stored = await self.threads.run(AGENTS, self.store.find_decision, call_id, run_id=run_id)
        decision: dict[str, Any] | None = None
        if stored is not None:
            decision = {
                "approval_id": stored.approval_id,
                "run_id": stored.run_id,
                "target_id": stored.target_id,
                "approved": stored.approved,
                "detail": stored.detail,
                "decided_by": stored.decided_by,
                "args_digest": stored.args_digest,
                "edited_args": dict(stored.edited_args) if stored.edited_args is not None else None,
                "decided_at_ms": stored.decided_at_ms,
                "decided_via": stored.decided_via,
                "decided_channel": stored.decided_channel,
                "signature": stored.signature,
                "expired": stored.expired,
            }
        return {"execution": _execution_json(row) if row is not None else None, "decision": decision}

    async def executing(self, request: Request, user: User) -> dict[str, Any]:
        """``POST /api/agent/ledger/{call_id}/executing``: claim the right to run the body (at most once)."""
        call_id = request.path_params["call_id"]
        body = await self._body(request)
        digest, pid, host = body.get("args_digest", ""), body.get("pid", 0), body.get("host", "")
        if not isinstance(digest, str) or not _is_pid(pid):
            raise AgentError(400, "'args_digest' must be a string, 'pid' an integer (0-2^31)")
        if not isinstance(host, str):
            raise AgentError(400, "'host' must be a string")
        run_id = await self._ledger_run(user, body.get("run_id"))
        claimed = await self._written(
            self.store.mark_executing, call_id, run_id=run_id, pid=pid, host=host[:255], args_digest=digest
        )
        return {"claimed": bool(claimed)}

    async def done(self, request: Request, user: User) -> dict[str, Any]:
        """``POST /api/agent/ledger/{call_id}/done``: ``{"run_id": R, "result_json": "..."}`` — the body R claimed
        finished."""
        call_id = request.path_params["call_id"]
        body = await self._body(request)
        result_json = body.get("result_json")
        if not isinstance(result_json, str):
            raise AgentError(400, "'result_json' must be a string (canonical JSON of the result)")
        run_id = await self._ledger_run(user, body.get("run_id"))
        if not await self._written(self.store.mark_done, call_id, result_json=result_json, run_id=run_id):
            raise AgentError(404, f"run {shorten(run_id, 80)!r} started no execution of {shorten(call_id, 80)!r}")
        return {"done": True}

    async def released(self, request: Request, user: User) -> dict[str, Any]:
        """``POST /api/agent/ledger/{call_id}/released``: ``{"run_id": R, "args_digest": D}`` — R gives back its
        claim of the call without having started the body (cancelled or paused after the APPROVE's ack claimed
        it), so a re-ask may run it; another agent's run: 403."""
        call_id = request.path_params["call_id"]
        body = await self._body(request)
        digest = body.get("args_digest", "")
        if not isinstance(digest, str):
            raise AgentError(400, "'args_digest' must be a string")
        run_id = await self._ledger_run(user, body.get("run_id"))  # another agent's run: 403
        released = await self._written(self.store.release_execution, call_id, run_id=run_id, args_digest=digest)
        return {"released": bool(released)}


def agent_routes(
    api: AgentApi, guard: Callable[[Callable[[Request, User], Awaitable[Response]], str], Any]
) -> list[Route]:
    """The ``/api/agent/...`` routes; ``guard(handler, permission)`` authenticates (app.py's ``route``)."""
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    def json_route(handler: Callable[[Request, User], Awaitable[dict[str, Any]]]) -> Any:
        async def endpoint(request: Request, user: User) -> Response:
            return JSONResponse(await handler(request, user))

        return guard(endpoint, "agent")

    async def stream(request: Request, user: User) -> Response:
        body = await api.open_stream(request, user)
        headers = {
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
            owners.LIVENESS_HEADER: owners.LIVENESS_ON_STREAM,  # this server keeps the stream's runs alive
            owners.ACKS_HEADER: owners.ACKS_WITH_EVENTS,  # and takes events with acks (committed before them)
        }
        if proof := api.pass_for(user):  # the agent's token, checked: no other server need scrypt it again
            headers[owners.PASS_HEADER] = proof
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    return [
        Route("/api/agent/events", json_route(api.events), methods=["POST"]),
        Route("/api/agent/heartbeat", json_route(api.heartbeat), methods=["POST"]),
        Route("/api/agent/stream", guard(stream, "agent"), methods=["GET"]),
        Route("/api/agent/acks", json_route(api.acks), methods=["POST"]),
        Route("/api/agent/runs/{run_id}/decisions", json_route(api.decisions), methods=["GET"]),
        Route("/api/agent/grants", json_route(api.grants), methods=["GET"]),
        Route("/api/agent/ledger/{call_id}", json_route(api.ledger), methods=["GET"]),
        Route("/api/agent/ledger/{call_id}/executing", json_route(api.executing), methods=["POST"]),
        Route("/api/agent/ledger/{call_id}/done", json_route(api.done), methods=["POST"]),
        Route("/api/agent/ledger/{call_id}/released", json_route(api.released), methods=["POST"]),
    ]
