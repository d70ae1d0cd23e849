"""StoreChannel: a control channel whose rendezvous is a store, so decisions can come from other processes.

It implements :class:`~goldfive_core.control.ControlTransport`, as the in-memory
:class:`~goldfive_core.control.ControlChannel` does, so
``wrap(agent, control=StoreChannel(store), sinks=[channel.sink])`` works unchanged.

Agent side: while bound, a task on the run's event loop waits for the store's
inbox to change (SQLite: a wake socket every commit pokes, watched by the loop
itself, so an idle agent's threads all sleep; PostgreSQL: LISTEN/NOTIFY),
claims the messages addressed to its runs, dispatches each through the bound
dispatcher (synchronously, on the loop) and writes the ack back. Store I/O
runs on one worker thread so the loop never waits on the database.

Decider side (the command line, another process): ``send`` inserts the message
into the inbox and waits, bounded, for its ack. A message nobody took in time
is withdrawn, never dispatched later, and answered with a FAILURE ack.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .._util import new_id, shorten
from ..control import DEFAULT_SEND_TIMEOUT_S, ChannelStatistics, ControlAck, ControlKind, ControlMessage, Dispatcher
from ..errors import AmbiguousRunError, ChannelBusyError, DeliveryTimeout, RunGone
from ..routing import ControlRouter
from ..session import Session
from ..signing import TrustKey, trust_key_from_env
from ..toolcall import ExecutionLedger
from .base import HOST, InboxRow, InboxWaiter, Store, StoreError, StoreUnavailableError
from .execution import StoreLedger
from .keeper import drain_seconds, keeper_for
from .sink import StoreSink
from .trust import verify_decision

__all__ = ["RUN_LEVEL_KINDS", "AmbiguousRunError", "DeliveryTimeout", "RunGone", "StoreChannel"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_LIVENESS_SLICE_S = 0.25
"""While waiting for an ack, how often the sender checks that the addressed run is still alive."""

_ACK_RETRY_S = 30.0
"""How long acks of dispatched messages are retried after the run is gone, while the store is down."""

_QUIET_SWEEP_S = 60.0
"""With a wake socket and no poke since the last sweep, how long until the channel sweeps anyway."""

_WAIT_SLICE_S = 0.5
"""Longest single wait for the inbox in the I/O thread (stores without a wake socket for the loop, such as
PostgreSQL's LISTEN); bounds how long an unbind takes to be noticed."""


RUN_LEVEL_KINDS = frozenset(
    {
        ControlKind.PAUSE,
        ControlKind.RESUME,
        ControlKind.CANCEL,
        ControlKind.STEER,
        ControlKind.GOLDFIVE_STEER,
        ControlKind.INJECT_MESSAGE,
        ControlKind.STATUS_QUERY,
    }
)
"""Kinds that act on a whole run. Unaddressed, they go to the only live run on the store, or wait for
the next run to start when none is live; with several live runs they are refused (name one)."""


class StoreChannel:
    """A control channel backed by a :class:`~goldfive_core.store.base.Store`; implements
    :class:`~goldfive_core.control.ControlTransport`, as the in-memory channel does.

    A message this process's own run can take (goldfive's escalation PAUSE) is
    dispatched at once, as in memory; everything else goes through the store.
    The store knows when a run ended, so a message for an ended run fails at once
    (``RunGone``); :meth:`run_ended` has nothing to remember.
    """

    def __init__(
        self,
        store: Store | str | Path,
        *,
        ack_timeout_s: float = 30.0,
        batch_size: int = 100,
        name: str | None = None,
        sweep_interval_s: float = 5.0,
        trust_key: TrustKey | str | None = None,
    ) -> None:
        if isinstance(store, str | Path):
            from ._open import open_store

            store = open_store(store)
        if ack_timeout_s <= 0:
            raise ValueError(f"ack_timeout_s must be > 0, got {ack_timeout_s}")
        self.store = store
        self.ack_timeout_s = ack_timeout_s
        self.endpoint = name or f"{HOST}:{os.getpid()}:{new_id('ch')}"
        self._batch_size = batch_size
        self._sweep_interval_s = sweep_interval_s
        self._sink: StoreSink | None = None
        self._dispatcher: Dispatcher | None = None
        self._owner: object | None = None
        self._task: asyncio.Task[None] | None = None
        self._generation = 0
        self._dispatched = 0
        self._seen_waiting = 0
        self._idle: set[asyncio.Task[None]] = set()
        self._refused_in_store: set[tuple[str, str, int]] = set()
        if isinstance(trust_key, str):
            trust_key = TrustKey.parse(trust_key)
        self.trust_key: TrustKey | None = trust_key if trust_key is not None else trust_key_from_env()
        self.ledger: ExecutionLedger | None = StoreLedger(store, trust=self.trust_key)
        """With a key, this channel applies only APPROVE/REJECT that the key signed (see goldfive serve)."""

    @property
    def sink(self) -> StoreSink:
        """The StoreSink writing this channel's runs to the same store (pass it in ``sinks=``)."""
        if self._sink is None:
            # An agent that applies only signed decisions never applies an (unsigned) grant row from the store.
            self._sink = StoreSink(self.store, revocations_only=self.trust_key is not None)
        return self._sink

    # -- decider side ------------------------------------------------------------------------------
    def address(self, msg: ControlMessage) -> str:
        """The run a message goes to: ``payload["run_id"]``, else the run holding its open approval, else any."""
        payload = msg.payload
        if not isinstance(payload, Mapping):
            return ""  # posting refuses it with a clear error
        for key in ("run_id", "session_id", "target"):
            value = payload.get(key)
            if isinstance(value, str) and value and (key == "run_id" or self.store.run(value) is not None):
                return value
        if msg.kind in (ControlKind.APPROVE, ControlKind.REJECT):
            target = payload.get("target_id")
            if isinstance(target, str) and target:
                holders = {row.run_id for row in self.store.approvals_for(target) if row.open}
                if len(holders) == 1:
                    return holders.pop()
            # Not requested yet (an early decision): it stays unaddressed, and only the process whose run
            # announced that call takes it (see _is_ours); it waits for that run, never goes to another.
            return ""
        if msg.kind in RUN_LEVEL_KINDS:
            live = self._live_runs()
            if len(live) > 1:
                shown = ", ".join(live[:10]) + (f" and {len(live) - 10} more" if len(live) > 10 else "")
                raise AmbiguousRunError(
                    f"{msg.kind} names no run and {len(live)} runs are live on this store ({shown}); "
                    "name one with payload['run_id']"
                )
            if live:
                return live[0]
        return ""

    def _live_runs(self) -> list[str]:
        return [r.run_id for r in self.store.runs(limit=1000) if self.store.liveness(r) == "live"]

    def deliver(self, msg: ControlMessage, *, timeout_s: float | None = None, run_id: str | None = None) -> ControlAck:
        """Post ``msg`` and block until its ack (thread-safe; the command line calls this).

        Raises :class:`DeliveryTimeout` when no agent took it in time (it is
        withdrawn), StoreUnavailableError when the store cannot be reached.
        """
        timeout_s = self.ack_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        address = self.address(msg) if run_id is None else run_id
        self.store.post_control(msg, run_id=address)
        while True:
            ack = self._await_ack(msg.id, min(deadline, time.monotonic() + _LIVENESS_SLICE_S))
            if ack is not None:
                return ack
            gone = self._gone(address)
            if gone and self.store.withdraw_control(msg.id):
                raise RunGone(f"run {address} is not running ({gone}); control message {msg.id} was withdrawn")
            if time.monotonic() >= deadline:
                break
        if self.store.withdraw_control(msg.id):
            raise DeliveryTimeout(f"no agent took control message {msg.id} within {timeout_s:g}s; it was withdrawn")
        # Claimed at the last moment: the dispatch is under way, its ack follows within moments.
        ack = self._await_ack(msg.id, time.monotonic() + 5.0)
        if ack is None:
            raise DeliveryTimeout(f"control message {msg.id} was taken by an agent but not acked within {timeout_s:g}s")
        return ack

    def _gone(self, run_id: str) -> str:
        if not run_id:
            return ""
        liveness = self.store.liveness(self.store.run(run_id))
        return "" if liveness == "live" else liveness

    def _await_ack(self, control_id: str, deadline: float) -> ControlAck | None:
        delay = 0.05
        while True:
            left = deadline - time.monotonic()
            try:
                return self.store.wait_ack(control_id, max(left, 0.0))
            except StoreUnavailableError as exc:
                # The message is durable in the inbox; keep waiting while the store comes back.
                if time.monotonic() + delay >= deadline:
                    raise
                logger.warning("store unavailable while waiting for %s; retrying: %s", control_id, exc)
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def run_ended(self, names: Iterable[str], detail: str) -> None:
        """Nothing to do: the store's run rows say which runs ended."""

    async def send(self, msg: ControlMessage, *, timeout: float | None = DEFAULT_SEND_TIMEOUT_S) -> ControlAck:  # noqa: ASYNC109 (a deadline on the wait for an agent)
        """Post ``msg`` and return its ack; every problem comes back as a FAILURE ack."""
        control_id = msg.id if isinstance(msg, ControlMessage) else ""
        if not isinstance(msg, ControlMessage):
            return ControlAck.failure(control_id, f"expected a ControlMessage, got {type(msg).__name__}")
        if self._dispatcher is not None and self._local_target(msg):
            return self._dispatch_local(self._dispatcher, msg)
        try:
            return await asyncio.to_thread(self.deliver, msg, timeout_s=timeout)
        except DeliveryTimeout as exc:
            return ControlAck.failure(control_id, f"not dispatched: {exc}")
        except StoreError as exc:
            return ControlAck.failure(control_id, f"not delivered: {shorten(str(exc))}")

    def send_nowait(self, msg: ControlMessage) -> asyncio.Future[ControlAck]:
        """Start :meth:`send` and return a future of the ack (done at once for this process's own runs)."""
        if isinstance(msg, ControlMessage) and self._dispatcher is not None and self._local_target(msg):
            fut: asyncio.Future[ControlAck] = asyncio.get_running_loop().create_future()
            fut.set_result(self._dispatch_local(self._dispatcher, msg))
            return fut
        return asyncio.ensure_future(self.send(msg))

    # -- agent side ---------------------------------------------------------------------------------
    def bind(self, dispatcher: Dispatcher, *, owner: object | None = None) -> None:
        """Start serving the inbox on the running loop, dispatching through ``dispatcher``."""
        if self._dispatcher is not None:
            # Compare with ==: a bound method (router.dispatch) is a new object on every attribute access.
            if self._dispatcher == dispatcher:
                return
            raise ChannelBusyError(f"this StoreChannel is already bound to {self._owner!r}; use one channel per runner")
        loop = asyncio.get_running_loop()
        self._dispatcher = dispatcher
        self._owner = owner
        self._generation += 1
        self._warn_without_sink(owner)
        # Like the in-memory channel, messages that waited for a run are dispatched at bind, before the
        # agent takes its first step (a PAUSE sent first holds the run). One short synchronous look.
        early: list[tuple[int, ControlAck]] = []
        try:
            early = self._take_and_dispatch(dispatcher)
        except StoreError as exc:
            logger.warning("store %s: could not read waiting control messages at bind: %s", self.store.url, exc)
        self._task = loop.create_task(
            self._serve(self._generation, dispatcher, early), name=f"goldfive-store-{self.endpoint}"
        )

    def unbind(self, dispatcher: Dispatcher) -> None:
        """Stop serving; messages sent from now on wait in the store for the next bind."""
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
        return ChannelStatistics(bound=self.bound, backlog=self._seen_waiting, dispatched=self._dispatched)

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

    # -- internals ----------------------------------------------------------------------------------
    def _warn_without_sink(self, owner: object | None) -> None:
        if not isinstance(owner, ControlRouter):
            return
        for session in owner.sessions:
            if not any(isinstance(s, StoreSink) and s.store is self.store for s in session.events.sinks):
                logger.warning(
                    "run %s uses a StoreChannel but no StoreSink on the same store: the goldfive command line "
                    "cannot see its approvals; pass sinks=[channel.sink]",
                    session.run_id,
                )

    def _is_ours(self, row: InboxRow) -> bool:
        """Whether this process should claim ``row``: it serves the run the row names, or the call it decides."""
        owner = self._owner
        if not isinstance(owner, ControlRouter):
            return True
        if row.run_id:
            return owner.find(row.run_id) is not None
        if not row.problem and row.kind in (ControlKind.APPROVE, ControlKind.REJECT):
            # An unaddressed decision goes only to a process whose run requested or announced that call.
            target = row.payload.get("target_id")
            return isinstance(target, str) and any(s.approvals.knows(target) for s in owner.sessions)
        return True

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

    def _session_of(self, msg: ControlMessage) -> Session | None:
        owner = self._owner
        if not isinstance(owner, ControlRouter) or not isinstance(msg.payload, Mapping):
            return None
        target = msg.payload.get("target_id")
        return next((s for s in owner.sessions if isinstance(target, str) and s.approvals.knows(target)), None)

    def _unverified(self, msg: ControlMessage) -> ControlAck | None:
        """A FAILURE ack for a decision the trusted key did not sign (the request stays pending)."""
        if self.trust_key is None or msg.kind not in (ControlKind.APPROVE, ControlKind.REJECT):
            return None
        if not isinstance(msg.payload, Mapping):
            return None  # dispatch refuses a malformed payload in its own words
        session = self._session_of(msg)
        run_id = msg.payload.get("run_id")
        request = None
        if session is not None:
            run_id = session.run_id
            record = session.approvals.get(str(msg.payload.get("target_id")))
            request = record.request if record is not None else None
        # Checked against the run's own open request (its id and digest), never the payload's claims: without
        # one there is nothing a signature could be bound to, so the check fails (the request stays as it is).
        problem = verify_decision(
            self.trust_key,
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

    def _dispatch_local(self, dispatcher: Dispatcher, msg: ControlMessage) -> ControlAck:
        self._dispatched += 1
        refused = self._unverified(msg)
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

    def _local_target(self, msg: ControlMessage) -> bool:
        """True when this process's bound router serves the run (or approval) ``msg`` names."""
        owner = self._owner
        if self._dispatcher is None or not isinstance(owner, ControlRouter):
            return False
        run_id = msg.payload.get("run_id") if isinstance(msg.payload, Mapping) else None
        if isinstance(run_id, str) and run_id:
            return owner.find(run_id) is not None
        target = msg.payload.get("target_id") if isinstance(msg.payload, Mapping) else None
        if msg.kind in (ControlKind.APPROVE, ControlKind.REJECT) and isinstance(target, str) and target:
            return any(s.approvals.knows(target) for s in owner.sessions)
        return False

    def _take_and_dispatch(self, dispatcher: Dispatcher) -> list[tuple[int, ControlAck]]:
        rows = self.store.pending_controls(limit=self._batch_size)
        mine = [r for r in rows if self._is_ours(r)]
        if not mine:
            return []
        won = set(self.store.claim_controls([r.id for r in mine], endpoint=self.endpoint))
        return [(r.id, self._dispatch_row(dispatcher, r)) for r in mine if r.id in won]

    async def _serve(self, generation: int, dispatcher: Dispatcher, early: list[tuple[int, ControlAck]]) -> None:
        loop = asyncio.get_running_loop()
        executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="goldfive-store-io")
        task = asyncio.current_task()
        assert task is not None

        async def io(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
            return await loop.run_in_executor(executor, functools.partial(fn, *args, **kwargs))

        async def idle(fn: Callable[..., T], *args: Any) -> T:
            # Only idle waits may be cancelled by unbind: never while a dispatched message lacks its ack.
            self._idle.add(task)
            try:
                return await io(fn, *args)
            finally:
                self._idle.discard(task)

        # With a wake socket, a decision recorded in the store pokes it: the sweep then runs only after a poke
        # (or an outage), and otherwise once a minute, so an idle agent makes one look per wake-up, not two.
        news = True

        async def sleep_on(waiter: InboxWaiter) -> InboxWaiter | None:
            # Idle in the event loop itself: no thread wakes until the store pokes the socket (or the fallback).
            # Returns the waiter to sleep on next: a new one when this one's socket was removed meanwhile.
            nonlocal news
            fut = loop.create_future()

            def wake() -> None:
                if not fut.done():
                    fut.set_result(None)

            fd = waiter.fileno()
            loop.add_reader(fd, wake)
            timer = loop.call_later(waiter.fallback_s, wake)
            self._idle.add(task)
            try:
                await fut
            finally:
                self._idle.discard(task)
                timer.cancel()
                loop.remove_reader(fd)
            if waiter.drain():
                news = True
                return waiter
            if not waiter.gone():
                return waiter
            logger.info("store %s: the channel's wake socket was removed; binding a new one", self.store.url)
            news = True  # pokes were lost meanwhile: sweep too
            waiter.close()
            return self._watchable(loop, await io(self.store.inbox_waiter))

        unacked = early
        delay = 0.05
        recovering = False
        next_sweep = time.monotonic() + self._sweep_interval_s
        give_up_at: float | None = None
        waiter: InboxWaiter | None = None
        quiet_sweep_at = 0.0
        try:
            waiter = self._watchable(loop, await io(self.store.inbox_waiter))  # bound before the first look
            if waiter is None:
                await idle(self.store.wait_inbox, 0.0)  # PostgreSQL: LISTEN before the first look
            while True:
                try:
                    if recovering:
                        # A claim may have committed while its answer was lost: dispatch what we hold.
                        held = await io(self.store.claimed_controls, endpoint=self.endpoint)
                        known = {ident for ident, _ in unacked}
                        unacked += [(r.id, self._dispatch_row(dispatcher, r)) for r in held if r.id not in known]
                        recovering = False
                    if unacked:  # acks of dispatched messages are written before anything else
                        await io(self.store.ack_controls, unacked)
                        unacked = []
                    if self._generation != generation:
                        return
                    now = time.monotonic()
                    if now >= next_sweep and (waiter is None or news or now >= quiet_sweep_at):
                        news = False
                        await self._sweep(io, dispatcher)
                        next_sweep = time.monotonic() + self._sweep_interval_s
                        quiet_sweep_at = next_sweep + _QUIET_SWEEP_S
                    rows = await io(self.store.pending_controls, limit=self._batch_size)
                    self._seen_waiting = len(rows)
                    if self._generation != generation:
                        return
                    mine = [r for r in rows if self._is_ours(r)]
                    if mine:
                        won = set(await io(self.store.claim_controls, [r.id for r in mine], endpoint=self.endpoint))
                        unacked = [(r.id, self._dispatch_row(dispatcher, r)) for r in mine if r.id in won]
                        await io(self.store.ack_controls, unacked)
                        unacked = []
                        continue
                    if waiter is not None:
                        waiter = await sleep_on(waiter)
                    else:
                        await idle(self.store.wait_inbox, _WAIT_SLICE_S)
                    delay = 0.05
                except StoreError as exc:
                    recovering = True
                    next_sweep = 0.0  # after an outage, look for decisions recorded while we were cut off
                    news = True
                    if self._generation != generation:
                        give_up_at = give_up_at or time.monotonic() + _ACK_RETRY_S
                        if time.monotonic() > give_up_at:
                            logger.error("store %s: gave up writing %d acks: %s", self.store.url, len(unacked), exc)
                            return
                    logger.warning(
                        "store %s unavailable to the control channel; retry in %.2f s: %s", self.store.url, delay, exc
                    )
                    if unacked:
                        await io(time.sleep, delay)
                    else:
                        await idle(time.sleep, delay)
                    delay = min(delay * 2, 1.0)
        except asyncio.CancelledError:
            if unacked:  # the loop is closing while acks are owed: keep trying on the worker thread
                executor.submit(self._ack_eventually, unacked)
            raise
        finally:
            if waiter is not None:
                waiter.close()
            executor.submit(self.store.close)
            executor.shutdown(wait=False)

    @staticmethod
    def _watchable(loop: asyncio.AbstractEventLoop, waiter: InboxWaiter | None) -> InboxWaiter | None:
        """``waiter`` if this event loop can watch its socket (a proactor loop cannot: the channel waits in
        its I/O thread instead)."""
        if waiter is None:
            return None
        try:
            loop.add_reader(waiter.fileno(), lambda: None)
            loop.remove_reader(waiter.fileno())
        except (NotImplementedError, OSError, ValueError) as exc:
            logger.debug("this event loop cannot watch the store's wake socket (%s); waiting in a thread", exc)
            waiter.close()
            return None
        return waiter

    async def _sweep(self, io: Callable[..., Any], dispatcher: Dispatcher) -> None:
        """Apply decisions recorded in the store (``goldfive approve`` on a run that looked gone) to live requests.

        The command line records a decision in the store when a run's heartbeat is stale; if the run
        was only cut off from the store, this is how it still gets that decision.
        """
        owner = self._owner
        if not isinstance(owner, ControlRouter):
            return
        for session in owner.sessions:
            open_targets = set(session.approvals.open_targets())
            if not open_targets:
                continue
            rows = await io(self.store.approvals, open_only=False, run_id=session.run_id)
            for row in rows:
                if row.decided_via != "store" or row.target_id not in open_targets:
                    continue
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
                seen = (row.run_id, row.target_id, row.decided_at_ms)
                if self.trust_key is not None and seen in self._refused_in_store:
                    continue  # refused once (and audited); the request stays pending
                kind = ControlKind.APPROVE if row.decision == "approve" else ControlKind.REJECT
                ack = self._dispatch_local(dispatcher, ControlMessage(kind, payload))
                if not ack.ok and self.trust_key is not None:
                    self._refused_in_store.add(seen)
                logger.info("applied a decision recorded in the store to %s: %s", row.target_id, ack.detail)

    def _ack_eventually(self, acks: list[tuple[int, ControlAck]]) -> None:
        deadline = time.monotonic() + _ACK_RETRY_S
        delay = 0.05
        while True:
            try:
                self.store.ack_controls(acks)
                return
            except StoreError as exc:
                if time.monotonic() > deadline:
                    logger.error("store %s: gave up writing %d acks: %s", self.store.url, len(acks), exc)
                    return
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
