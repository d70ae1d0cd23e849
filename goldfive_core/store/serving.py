"""The agents' side of a control channel: serve an inbox source, dispatch each message, check its signature.

:class:`AgentChannel` implements :class:`~goldfive_core.control.ControlTransport` over an
:class:`InboxSource` — the store's inbox (:class:`~goldfive_core.store.inbox.StoreInbox`: wake sockets,
LISTEN/NOTIFY) or the server's event stream (``goldfive_core.store.http``). The source decides how messages
arrive and how acks go back; the channel decides which messages are this process's, dispatches them through
the bound dispatcher (synchronously, on the loop), refuses decisions the trusted key did not sign, and applies
decisions recorded in the store to open requests (the sweep, which the source runs when it sees fit).

:class:`~goldfive_core.store.StoreChannel` and :class:`~goldfive_core.store.http.HttpChannel` are this
channel with their source, sender and ledger composed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

from .._util import new_id, shorten
from ..control import DEFAULT_SEND_TIMEOUT_S, ChannelStatistics, ControlAck, ControlKind, ControlMessage, Dispatcher
from ..errors import ChannelBusyError
from ..routing import ControlRouter
from ..session import Session
from ..signing import TrustKey, trust_key_from_env
from ..toolcall import ExecutionLedger
from .base import HOST, ApprovalRow, InboxRow
from .keeper import drain_seconds, keeper_for
from .roles import AgentStore
from .sink import StoreSink
from .trust import verify_decision

__all__ = ["AgentChannel", "Forward", "InboxSource", "Served", "new_endpoint", "trust_key_of"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

Forward = Callable[[ControlMessage, "float | None"], Awaitable[ControlAck]]
"""What an agent channel does with a message for a run this process does not serve (send it on, or refuse)."""

Io = Callable[..., Awaitable[Any]]
"""Runs a blocking store call off the loop (the source's own I/O thread, or a thread of asyncio's)."""


class InboxSource(Protocol):
    """Where an agent channel's messages come from and where their acks go."""

    task_name: str
    """The serving task's name prefix (the channel's endpoint follows)."""
    backlog: int
    """Messages seen waiting at the last look (observability)."""

    def start(self, served: Served) -> Coroutine[Any, Any, None]:
        """Called on the loop at bind (it may dispatch what waits, synchronously); returns the serving loop."""
        ...


def new_endpoint() -> str:
    """A fresh name for one channel of this process (host, pid, a unique suffix): the name its claims carry."""
    return f"{HOST}:{os.getpid()}:{new_id('ch')}"


def trust_key_of(value: TrustKey | str | None) -> TrustKey | None:
    """The key decisions must be signed with: ``value`` (parsed when text), else ``GOLDFIVE_TRUST_KEY``, else None."""
    if isinstance(value, str):
        value = TrustKey.parse(value)
    return value if value is not None else trust_key_from_env()


class AgentChannel:
    """A control channel serving ``source`` for the runs bound to it; see the module docstring.

    A message this process's own run can take (goldfive's escalation PAUSE) is dispatched at once, as in
    memory; any other goes to ``forward``. The store knows when a run ended, so :meth:`run_ended` has
    nothing to remember.
    """

    def __init__(
        self,
        store: AgentStore,
        source: InboxSource,
        *,
        endpoint: str,
        forward: Forward,
        trust_key: TrustKey | None,
        ledger: ExecutionLedger | None,
    ) -> None:
        self.store = store
        self.source = source
        self.endpoint = endpoint
        self.trust_key = trust_key
        """With a key, this channel applies only APPROVE/REJECT that the key signed (see goldfive serve)."""
        self.ledger = ledger
        self._forward = forward
        self._sink: StoreSink | None = None
        self._dispatcher: Dispatcher | None = None
        self._owner: object | None = None
        self._task: asyncio.Task[None] | None = None
        self._generation = 0
        self._dispatched = 0
        self._idle: set[asyncio.Task[Any]] = set()
        self._refused_in_store: set[tuple[str, str, int]] = set()

    @property
    def sink(self) -> StoreSink:
        """The StoreSink writing this channel's runs to the same store (pass it in ``sinks=``)."""
        if self._sink is None:
            # An agent that applies only signed decisions never applies an (unsigned) grant row from the store.
            self._sink = StoreSink(self.store, revocations_only=self.trust_key is not None)
        return self._sink

    # -- sending: this process's own runs at once, anything else forwarded -------------------------------------
    async def send(self, msg: ControlMessage, *, timeout: float | None = DEFAULT_SEND_TIMEOUT_S) -> ControlAck:  # noqa: ASYNC109 (a deadline on the wait for an agent)
        """Dispatch a message for this process's own run, else forward it; every problem is a FAILURE ack."""
        if not isinstance(msg, ControlMessage):
            return ControlAck.failure("", f"expected a ControlMessage, got {type(msg).__name__}")
        if self._dispatcher is not None and _serves(self._owner, msg):
            return self._dispatch_local(self._dispatcher, msg)
        return await self._forward(msg, timeout)

    def send_nowait(self, msg: ControlMessage) -> asyncio.Future[ControlAck]:
        """Start :meth:`send` and return a future of the ack (done at once for this process's own runs)."""
        if isinstance(msg, ControlMessage) and self._dispatcher is not None and _serves(self._owner, msg):
            fut: asyncio.Future[ControlAck] = asyncio.get_running_loop().create_future()
            fut.set_result(self._dispatch_local(self._dispatcher, msg))
            return fut
        return asyncio.ensure_future(self.send(msg))

    def run_ended(self, names: Iterable[str], detail: str) -> None:
        """Nothing to do: the store's run rows say which runs ended."""

    # -- serving -------------------------------------------------------------------------------------------------
    def bind(self, dispatcher: Dispatcher, *, owner: object | None = None) -> None:
        """Start serving the source on the running loop, dispatching through ``dispatcher``."""
        if self._dispatcher is not None:
            # Compare with ==: a bound method (router.dispatch) is a new object on every attribute access.
            if self._dispatcher == dispatcher:
                return
            raise ChannelBusyError(
                f"this {type(self).__name__} is already bound to {self._owner!r}; use one channel per runner"
            )
        loop = asyncio.get_running_loop()
        self._dispatcher = dispatcher
        self._owner = owner
        self._generation += 1
        _warn_without_sink(owner, self.store)
        serving = self.source.start(Served(self, self._generation, dispatcher))
        self._task = loop.create_task(serving, name=f"{self.source.task_name}-{self.endpoint}")

    def unbind(self, dispatcher: Dispatcher) -> None:
        """Stop serving; messages sent from now on wait for the next bind."""
        if self._dispatcher != dispatcher:
            return
        self._dispatcher = None
        self._owner = None
        self._generation += 1
        task, self._task = self._task, None
        if task is not None and task in self._idle:
            task.cancel()

    @property
    def bound(self) -> bool:
        """Whether a run is serving the inbox in this process."""
        return self._dispatcher is not None

    def statistics(self) -> ChannelStatistics:
        """Counts for observability (backlog = messages seen waiting at the last look)."""
        return ChannelStatistics(bound=self.bound, backlog=self.source.backlog, dispatched=self._dispatched)

    async def aclose(self) -> None:
        """Stop serving and flush the sink (if one was made)."""
        task = self._task
        if self._dispatcher is not None:
            self.unbind(self._dispatcher)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self._sink is not None:
            sink = self._sink
            await asyncio.to_thread(sink.close)  # its events, then the store's kept "done" records
        else:
            await asyncio.to_thread(keeper_for(self.store).drain, drain_seconds())

    # -- dispatch --------------------------------------------------------------------------------------------------
    def _dispatch_row(self, dispatcher: Dispatcher, row: InboxRow) -> ControlAck:
        if row.problem:
            # Quarantined: claimed (so nobody else sees it again), answered, logged once, never dispatched.
            detail = (
                f"quarantined: inbox row #{row.id} (control {shorten(row.control_id, 80)!r}, "
                f"kind {shorten(row.kind, 40)!r}) was not dispatched: {row.problem}"
            )
            logger.warning("store %s: %s", self.store.url, detail)
            return ControlAck.failure(row.control_id, detail)
        return self._dispatch_local(dispatcher, row.message())

    def _dispatch_local(self, dispatcher: Dispatcher, msg: ControlMessage) -> ControlAck:
        self._dispatched += 1
        refused = _unverified(self.trust_key, self._owner, msg)
        if refused is not None:
            return refused
        try:
            ack = dispatcher(msg)
        except Exception as exc:  # a dispatcher bug must not lose the ack or stop the channel
            logger.exception("dispatching control message %s failed", msg.id)
            return ControlAck.failure(msg.id, f"internal error while dispatching: {shorten(repr(exc))}")
        if not isinstance(ack, ControlAck):
            return ControlAck.failure(msg.id, f"dispatcher returned {type(ack).__name__}, not a ControlAck")
        return ack

    async def _sweep(self, io: Io, dispatcher: Dispatcher) -> None:
        """Apply decisions recorded in the store (``goldfive approve`` on a run that looked gone) to live requests.

        The command line records a decision in the store when a run's heartbeat is stale; if the run
        was only cut off from the store, this is how it still gets that decision.
        """
        for session in _sessions(self._owner):
            open_targets = set(session.approvals.open_targets())
            if not open_targets:
                continue
            rows: list[ApprovalRow] = await io(self.store.approvals, open_only=False, run_id=session.run_id)
            for row in rows:
                if row.decided_via != "store" or row.target_id not in open_targets:
                    continue
                seen = (row.run_id, row.target_id, row.decided_at_ms)
                if self.trust_key is not None and seen in self._refused_in_store:
                    continue  # refused once (and audited); the request stays pending
                ack = self._dispatch_local(dispatcher, _recorded_message(row))
                if not ack.ok and self.trust_key is not None:
                    self._refused_in_store.add(seen)
                logger.info("applied a decision recorded in the store to %s: %s", row.target_id, ack.detail)


class Served:
    """One binding of an :class:`AgentChannel`, as its source sees it: what is this process's, how to
    dispatch it, and whether the binding still holds."""

    def __init__(self, channel: AgentChannel, generation: int, dispatcher: Dispatcher) -> None:
        self._channel = channel
        self._generation = generation
        self._dispatcher = dispatcher

    @property
    def current(self) -> bool:
        """False once the channel was unbound (or bound again) since this binding began."""
        return self._channel._generation == self._generation

    def is_ours(self, row: InboxRow) -> bool:
        """Whether this process should claim ``row``: it serves the run the row names, or the call it decides."""
        return _is_ours(self._channel._owner, row)

    def addressed_runs(self) -> frozenset[str] | None:
        """The runs bound now, whose addressed rows :meth:`is_ours` takes (None: it takes every row)."""
        owner = self._channel._owner
        return frozenset(s.run_id for s in owner.sessions) if isinstance(owner, ControlRouter) else None

    def dispatch(self, row: InboxRow) -> ControlAck:
        """Dispatch one inbox row (a quarantined one is answered, never dispatched); never raises."""
        return self._channel._dispatch_row(self._dispatcher, row)

    def runs(self) -> list[str]:
        """The runs bound now, sorted."""
        return sorted(s.run_id for s in _sessions(self._channel._owner))

    def sessions(self) -> list[Session]:
        """The sessions of the runs bound now."""
        return _sessions(self._channel._owner)

    async def sweep(self, io: Io | None = None) -> None:
        """Apply decisions recorded in the store to open requests (store calls through ``io``)."""
        await self._channel._sweep(io or asyncio.to_thread, self._dispatcher)

    @contextlib.contextmanager
    def cancellable(self) -> Iterator[None]:
        """Within it, an unbind may cancel the serving task (only while no ack is owed)."""
        task = asyncio.current_task()
        assert task is not None
        self._channel._idle.add(task)
        try:
            yield
        finally:
            self._channel._idle.discard(task)

    async def idle(self, awaitable: Awaitable[T]) -> T:
        """Await something that an unbind may cancel."""
        with self.cancellable():
            return await awaitable


def _sessions(owner: object | None) -> list[Session]:
    return list(owner.sessions) if isinstance(owner, ControlRouter) else []


def _warn_without_sink(owner: object | None, store: AgentStore) -> None:
    for session in _sessions(owner):
        if not any(isinstance(s, StoreSink) and s.store is store for s in session.events.sinks):
            logger.warning(
                "run %s uses a StoreChannel but no StoreSink on the same store: the goldfive command line "
                "cannot see its approvals; pass sinks=[channel.sink]",
                session.run_id,
            )


def _is_ours(owner: object | None, row: InboxRow) -> bool:
    if not isinstance(owner, ControlRouter):
        return True
    if row.run_id:
        return owner.find(row.run_id) is not None
    if not row.problem and row.kind in (ControlKind.APPROVE, ControlKind.REJECT):
        # An unaddressed decision goes only to a process whose run requested or announced that call.
        target = row.payload.get("target_id")
        return isinstance(target, str) and any(s.approvals.knows(target) for s in owner.sessions)
    return True


def _serves(owner: object | None, msg: ControlMessage) -> bool:
    """True when the bound router ``owner`` serves the run (or approval) ``msg`` names."""
    if not isinstance(owner, ControlRouter):
        return False
    run_id = msg.payload.get("run_id") if isinstance(msg.payload, Mapping) else None
    if isinstance(run_id, str) and run_id:
        return owner.find(run_id) is not None
    target = msg.payload.get("target_id") if isinstance(msg.payload, Mapping) else None
    if msg.kind in (ControlKind.APPROVE, ControlKind.REJECT) and isinstance(target, str) and target:
        return any(s.approvals.knows(target) for s in owner.sessions)
    return False


def _session_of(owner: object | None, msg: ControlMessage) -> Session | None:
    if not isinstance(msg.payload, Mapping):
        return None
    target = msg.payload.get("target_id")
    return next((s for s in _sessions(owner) if isinstance(target, str) and s.approvals.knows(target)), None)


def _unverified(trust_key: TrustKey | None, owner: object | None, msg: ControlMessage) -> ControlAck | None:
    """A FAILURE ack for a decision the trusted key did not sign (the request stays pending)."""
    if trust_key is None or msg.kind not in (ControlKind.APPROVE, ControlKind.REJECT):
        return None
    if not isinstance(msg.payload, Mapping):
        return None  # dispatch refuses a malformed payload in its own words
    session = _session_of(owner, msg)
    run_id = msg.payload.get("run_id")
    request = None
    if session is not None:
        run_id = session.run_id
        record = session.approvals.get(str(msg.payload.get("target_id")))
        request = record.request if record is not None else None
    # Checked against the run's own open request (its id and digest), never the payload's claims: without
    # one there is nothing a signature could be bound to, so the check fails (the request stays as it is).
    problem = verify_decision(
        trust_key,
        msg.payload,
        approved=msg.kind is ControlKind.APPROVE,
        run_id=run_id if isinstance(run_id, str) else "",
        request_id=request.request_id if request is not None else "",
        request_digest=request.digest if request is not None else "",
        session=session,
    )
    if problem is None:
        return None
    return ControlAck.failure(msg.id, f"refused: {problem}; the request stays pending")


def _recorded_message(row: ApprovalRow) -> ControlMessage:
    """The APPROVE/REJECT a decision recorded in the store stands for."""
    payload: dict[str, Any] = {
        "target_id": row.target_id,
        "run_id": row.run_id,
        "decided_by": row.decided_by,
        "detail": row.detail,
        "args_digest": row.args_digest,
    }
    if row.edited_args_json:
        payload["edited_args"] = json.loads(row.edited_args_json)
    if row.decided_channel:
        payload["channel"] = row.decided_channel
    if row.decision_sig:
        payload["signature"] = row.decision_sig
    kind = ControlKind.APPROVE if row.decision == "approve" else ControlKind.REJECT
    return ControlMessage(kind, payload)
