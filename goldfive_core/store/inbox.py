"""The store's control inbox as an agent channel's source: wake sockets, LISTEN/NOTIFY and the sweep.

While a run is bound, :class:`StoreInbox` waits on the run's event loop for the store's inbox to change
(SQLite: a wake socket every commit pokes, watched by the loop itself, so an idle agent's threads all sleep;
PostgreSQL: LISTEN/NOTIFY), claims the messages addressed to its runs, has the channel dispatch each (on the
loop) and writes the acks back. Store I/O runs on one worker thread so the loop never waits on the database.
Through an outage it retries with backoff and, once the store answers, dispatches what it claimed meanwhile
and sweeps for decisions recorded in the store.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..control import ControlAck
from ..retry import Backoff, retry
from .base import InboxRow, InboxWaiter, Store, StoreError
from .claims import FoldedClaims
from .serving import Served

__all__ = ["StoreInbox"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

Acks = list[tuple[int, ControlAck]]

_ACK_RETRY_S = 30.0
"""How long acks of dispatched messages are retried after the run is gone, while the store is down."""

_QUIET_SWEEP_S = 60.0
"""With a wake socket and no poke since the last sweep, how long until the channel sweeps anyway."""

_WAIT_SLICE_S = 0.5
"""Longest single wait for the inbox in the I/O thread (stores without a wake socket for the loop, such as
PostgreSQL's LISTEN); bounds how long an unbind takes to be noticed."""

_OUTAGE = Backoff(first_s=0.05, cap_s=1.0)
"""Delays between looks at a store that is out of reach."""


class StoreInbox:
    """The inbox of ``store``, served for one agent channel (``endpoint`` is the name its claims carry)."""

    task_name = "goldfive-store"

    def __init__(
        self,
        store: Store,
        *,
        endpoint: str,
        batch_size: int = 100,
        sweep_interval_s: float = 5.0,
        claims: FoldedClaims | None = None,
    ) -> None:
        self.store = store
        self.endpoint = endpoint
        self.batch_size = batch_size
        self.sweep_interval_s = sweep_interval_s
        self.backlog = 0
        """Messages seen waiting at the last look."""
        self.claims = claims
        """An approved call's "executing" claim, acked with its APPROVE in one commit (see :mod:`.claims`)."""

    def start(self, served: Served) -> Coroutine[Any, Any, None]:
        """Dispatch what waited for a run (before its first step: a PAUSE sent first holds it), then serve."""
        early: Acks = []
        try:
            early = self._take(served)
        except StoreError as exc:
            logger.warning("store %s: could not read waiting control messages at bind: %s", self.store.url, exc)
        return self._serve(served, early)

    def _take(self, served: Served) -> Acks:
        """One short synchronous look: claim this channel's waiting messages and dispatch them."""
        rows = self.store.pending_controls(limit=self.batch_size)
        mine = [r for r in rows if served.is_ours(r)]
        if not mine:
            return []
        won = set(self.store.claim_controls([r.id for r in mine], endpoint=self.endpoint))
        return [(r.id, served.dispatch(r)) for r in mine if r.id in won]

    async def _serve(self, served: Served, early: Acks) -> None:
        loop = asyncio.get_running_loop()
        executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="goldfive-store-io")

        async def io(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
            return await loop.run_in_executor(executor, functools.partial(fn, *args, **kwargs))

        async def idle(fn: Callable[..., T], *args: Any) -> T:
            # Only idle waits may be cancelled by unbind: never while a dispatched message lacks its ack.
            with served.cancellable():
                return await io(fn, *args)

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
            try:
                with served.cancellable():
                    await fut
            finally:
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
            return _watchable(loop, await io(self.store.inbox_waiter))

        unacked = early
        delays = _OUTAGE.delays()
        recovering = False
        next_sweep = time.monotonic() + self.sweep_interval_s
        give_up_at: float | None = None
        waiter: InboxWaiter | None = None
        quiet_sweep_at = 0.0
        listening = False
        try:
            while True:
                try:
                    if not listening:  # bound before the first look, and retried like any look if the store is out
                        waiter = _watchable(loop, await io(self.store.inbox_waiter))
                        if waiter is None:
                            await idle(self.store.wait_inbox, 0.0)  # PostgreSQL: LISTEN before the first look
                        listening = True
                    if recovering:
                        # A claim may have committed while its answer was lost: dispatch what we hold.
                        held = await io(self.store.claimed_controls, endpoint=self.endpoint)
                        known = {ident for ident, _ in unacked}
                        unacked += [(r.id, served.dispatch(r)) for r in held if r.id not in known]
                        recovering = False
                    if unacked:  # acks of dispatched messages are written before anything else
                        await self._ack(io, unacked)
                        unacked = []
                    if not served.current:
                        return
                    now = time.monotonic()
                    if now >= next_sweep and (waiter is None or news or now >= quiet_sweep_at):
                        news = False
                        await served.sweep(io)
                        next_sweep = time.monotonic() + self.sweep_interval_s
                        quiet_sweep_at = next_sweep + _QUIET_SWEEP_S
                    # One hop looks and claims the rows addressed to the bound runs; the loop judges the rest
                    # (before anything is dispatched: a dispatch may end the run) and claims those in one more.
                    claimed, rows = await io(self._look, served.addressed_runs())
                    if not claimed and not served.current:
                        return
                    others = [r for r in rows if served.is_ours(r)] if served.current else []
                    if others:
                        won = set(await io(self.store.claim_controls, [r.id for r in others], endpoint=self.endpoint))
                        claimed = sorted([*claimed, *(r for r in others if r.id in won)], key=lambda r: r.id)
                    if claimed:  # claimed: dispatched and acked whatever happens to the binding meanwhile
                        unacked = [(r.id, self._dispatch(served, r)) for r in claimed]
                        await self._ack(io, unacked)
                        unacked = []
                        continue
                    if waiter is not None:
                        waiter = await sleep_on(waiter)
                    else:
                        await idle(self.store.wait_inbox, _WAIT_SLICE_S)
                    delays.reset()
                except StoreError as exc:
                    recovering = True
                    next_sweep = 0.0  # after an outage, look for decisions recorded while we were cut off
                    news = True
                    if not served.current:
                        give_up_at = give_up_at or time.monotonic() + _ACK_RETRY_S
                        if time.monotonic() > give_up_at:
                            logger.error("store %s: gave up writing %d acks: %s", self.store.url, len(unacked), exc)
                            return
                    delay = delays.next()
                    logger.warning(
                        "store %s unavailable to the control channel; retry in %.2f s: %s", self.store.url, delay, exc
                    )
                    if unacked:
                        await io(time.sleep, delay)
                    else:
                        await idle(time.sleep, delay)
        except asyncio.CancelledError:
            if unacked:  # the loop is closing while acks are owed: keep trying on the worker thread
                executor.submit(self._ack_eventually, unacked)
            raise
        finally:
            if waiter is not None:
                waiter.close()
            executor.submit(self.store.close)
            executor.shutdown(wait=False)

    def _look(self, runs: frozenset[str] | None) -> tuple[list[InboxRow], list[InboxRow]]:
        """In the I/O thread: claim the waiting rows addressed to ``runs`` (None: every row is this channel's);
        returns those won and the other waiting rows, for the loop to judge."""
        rows = self.store.pending_controls(limit=self.batch_size)
        self.backlog = len(rows)
        addressed = [r for r in rows if runs is None or (r.run_id and r.run_id in runs)]
        if not addressed:
            return [], rows
        ids = [r.id for r in addressed]
        won = set(self.store.claim_controls(ids, endpoint=self.endpoint))
        return [r for r in addressed if r.id in won], [r for r in rows if r.id not in set(ids)]

    def _dispatch(self, served: Served, row: InboxRow) -> ControlAck:
        ack = served.dispatch(row)
        if self.claims is not None:  # an APPROVE of a call the gate waits on: its ack carries the claim
            self.claims.fold(row.id, row, ack, served.sessions())
        return ack

    async def _ack(self, io: Callable[..., Coroutine[Any, Any, Any]], acks: Acks) -> None:
        """Write ``acks``, each with the claim folded into it, in one commit; then answer the claims' waiters.

        When the store refuses the commit, the waiters are answered "not folded": each ledger then claims in a commit
        of its own, which fails closed with the store's own words (a claim that did commit unseen is the claimer's:
        claiming again says so), and the acks are retried without the claims."""
        folded = self.claims
        owed = {ident: claim for ident, _ in acks if folded is not None and (claim := folded.owed(ident))}
        try:
            won: dict[int, bool] = await io(self.store.ack_controls, acks, claims=owed or None)
        except StoreError:
            if folded is not None and owed:  # rolled back (or in doubt): each ledger claims on its own, as it says
                folded.answered(owed, {})  # and the acks are retried without the claims
            raise
        if folded is not None:
            folded.answered([ident for ident, _ in acks], {str(ident): value for ident, value in won.items()})

    def _ack_eventually(self, acks: Acks) -> None:
        try:
            retry(
                lambda: self.store.ack_controls(acks),
                budget_s=_ACK_RETRY_S,
                on=StoreError,
                what=f"writing {len(acks)} acks to store {self.store.url}",
                policy=_OUTAGE,
                logger=logger,
            )
        except StoreError as exc:
            logger.error("store %s: gave up writing %d acks: %s", self.store.url, len(acks), exc)


def _watchable(loop: asyncio.AbstractEventLoop, waiter: InboxWaiter | None) -> InboxWaiter | None:
    """``waiter`` if this event loop can watch its socket (a proactor loop cannot: the channel waits in its I/O
    thread instead)."""
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
