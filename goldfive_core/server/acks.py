"""Decisions and controls wait for their agent's ack in the event loop, not on a thread each.

One :class:`AckWatch` per server process sleeps on the store's ack news (one PostgreSQL LISTEN connection,
on one thread of its own, :data:`~.threads.ACK_WATCH`) and, each time it wakes, reads the acks of every
message waited for in one query and hands each to its waiter. A waiter looks once itself when it starts
(the watcher listens before anyone waits, so an ack stored after that look wakes the watcher), so a burst of
hundreds of decisions in flight costs hundreds of futures, not hundreds of threads and connections. The waiters'
own first looks are made together too (:class:`~.batching.Coalesced`): one read per round trip for a burst.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from ..control import ControlAck
from ..retry import Backoff
from ..store import agents as owners
from ..store.base import Store, StoreError
from ..store.liveness import RunLiveness
from .batching import Coalesced
from .threads import ACK_WATCH, ServerThreads

__all__ = ["AckWatch", "Watched"]

logger = logging.getLogger(__name__)

_WATCH_SLICE_S = 1.0
"""Longest the watcher sleeps between looks while someone waits (a safety net for a lost notification)."""

_OUTAGE = Backoff(first_s=0.05, cap_s=2.0)
"""How the watcher waits out a store outage (the waiters' own deadlines keep running)."""


class AckWatch:
    """Waits for acks of many messages at once; :meth:`wait_ack` is the :class:`~goldfive_core.store.sender.AckSource`
    ``goldfive serve`` delivers decisions and controls with."""

    def __init__(self, store: Store, *, threads: ServerThreads) -> None:
        self.store = store
        self.threads = threads
        self._waiting: dict[str, list[asyncio.Future[ControlAck]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._listening = asyncio.Event()
        self._first_looks: Coalesced[str, ControlAck] = Coalesced(self._acks_of, name="goldfive-serve-ack-looks")

        self._liveness: Coalesced[str, RunLiveness] = Coalesced(self._gone_of, name="goldfive-serve-run-looks")

    async def _acks_of(self, control_ids: Sequence[str]) -> dict[str, ControlAck]:
        return await asyncio.to_thread(self.store.get_acks, list(control_ids))

    async def _gone_of(self, run_ids: Sequence[str]) -> dict[str, RunLiveness]:
        return await asyncio.to_thread(owners.gone_runs, self.store, run_ids)

    async def run_gone(self, run_id: str) -> RunLiveness | None:
        """How ``run_id``'s process is gone, or None while it is live: the check a decision waiting for its ack
        makes every quarter second, made together with those of the other decisions waiting (one read)."""
        return await self._liveness.get(run_id)

    @property
    def waiting(self) -> int:
        """How many messages have a waiter now."""
        return len(self._waiting)

    async def wait_ack(self, control_id: str, timeout_s: float) -> ControlAck | None:
        """The ack of ``control_id`` once stored, or None after ``timeout_s`` (never raises for an outage: the
        watcher waits it out, and the caller's deadline decides)."""
        with self.watch(control_id) as watched:
            return await watched.wait(timeout_s)

    def watch(self, control_id: str, *, before_post: bool = False) -> Watched:
        """Wait for ``control_id``'s ack in slices (a delivery checks its run's liveness between them), watched the
        whole time: looked for once, and from then on handed over by the watcher; ``with`` ends the watch.

        ``before_post``: the message is posted only after this call, so no look of its own is needed: its ack is
        stored after the watch began, and the watcher reads it (woken by the ack's news on a connection that
        listened before, or on its first look after it began to listen)."""
        return Watched(self, control_id, looked=before_post)

    def _forget(self, control_id: str, future: asyncio.Future[ControlAck]) -> None:
        futures = self._waiting.get(control_id)
        if futures is not None and future in futures:
            futures.remove(future)
            if not futures:
                del self._waiting[control_id]
        future.cancel()

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="goldfive-serve-ack-watch")
        self._wake.set()

    async def _watch(self) -> None:
        delays = _OUTAGE.delays()
        try:
            while True:
                if not self._waiting:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                try:
                    # The first call only makes sure the thread listens; later ones sleep until ack news. The acks of
                    # every message waited for when the news came are read on the same thread: one hop per wake.
                    timeout = _WATCH_SLICE_S if self._listening.is_set() else 0.0
                    found = await self.threads.run(ACK_WATCH, self._news_and_acks, timeout)
                    self._listening.set()
                    delays.reset()
                except StoreError as exc:
                    self._listening.clear()  # a new LISTEN is made: every waiter is looked at after it
                    delay = delays.next()
                    logger.warning("ack watch: store unavailable, retrying in %.2f s: %s", delay, exc)
                    await asyncio.sleep(delay)
                    continue
                for control_id, ack in found.items():
                    for future in self._waiting.get(control_id, ()):
                        if not future.done():
                            future.set_result(ack)
        finally:
            self._listening.clear()
            with contextlib.suppress(RuntimeError):  # the app's threads are already shut down: nothing to close
                self.threads.pool(ACK_WATCH).submit(self.store.close)  # the watch thread's own (LISTEN) connection

    def _news_and_acks(self, timeout_s: float) -> dict[str, ControlAck]:
        """On the watcher's thread: sleep until ack news (or ``timeout_s``), then read the acks of the messages waited
        for at that moment (the ids are taken after the wake, as the loop would: a waiter that came during the
        sleep is read too; ``list`` of a dict is one step under the GIL)."""
        self.store.wait_ack_news(timeout_s)
        ids = list(self._waiting)
        return self.store.get_acks(ids) if ids else {}

    async def aclose(self) -> None:
        """Stop watching (waiters still waiting end at their own deadline)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._first_looks.aclose()
        await self._liveness.aclose()


class Watched:
    """One message's ack watched over a whole delivery (:meth:`AckWatch.watch`): one waiter, one first look."""

    def __init__(self, watch: AckWatch, control_id: str, *, looked: bool = False) -> None:
        self._watch = watch
        self.control_id = control_id
        self._future: asyncio.Future[ControlAck] = asyncio.get_running_loop().create_future()
        watch._waiting.setdefault(control_id, []).append(self._future)
        self._looked = looked
        """No look of its own is due (watched before its message was posted: see :meth:`AckWatch.watch`)."""
        if not looked:
            watch._start()
        # Else the watcher is woken by the first wait, after the post: while the message is planned and posted, no
        # thread of the watcher's competes with the post's (its LISTEN keeps the ack's news meanwhile).

    def __enter__(self) -> Watched:
        return self

    def __exit__(self, *exc: object) -> None:
        self._watch._forget(self.control_id, self._future)

    async def wait(self, timeout_s: float) -> ControlAck | None:
        """The ack once stored, or None after ``timeout_s`` (the watch goes on: a later wait still gets it)."""
        self._watch._start()
        try:
            async with asyncio.timeout(max(timeout_s, 0.0)):
                if not self._looked:
                    await self._watch._listening.wait()  # from here on an ack stored wakes the watcher: look once
                    await self._first_look()
                    self._looked = True
                return await asyncio.shield(self._future)
        except TimeoutError:
            return None

    async def _first_look(self) -> None:
        if self._future.done():
            return
        try:  # with the first looks of the other messages of a burst: one read for all
            ack = await self._watch._first_looks.get(self.control_id)
        except StoreError as exc:  # the watcher looks again once the store is back
            logger.debug("ack of %s: first look failed: %s", self.control_id, exc)
            ack = None
        if ack is not None and not self._future.done():
            self._future.set_result(ack)
