"""``GET /api/events``: every new audit event as Server-Sent Events, resumable with ``Last-Event-ID``.

One poller per process reads the audit log after the last seq it saw and hands each new row to
every connected client (each has a bounded queue; a client that falls behind is disconnected and
resumes from its last id). The SSE ``id`` is the audit ``seq``, so a reconnect — to this process or
another ``serve`` over the same store — continues exactly after the last event the client saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator

from ..events import event_to_dict
from ..retry import Backoff
from ..store.base import AuditRow, Store, StoreError

__all__ = ["Broadcaster", "sse_frame"]

logger = logging.getLogger(__name__)

_QUEUE_MAX = 2000
_BACKLOG_PAGE = 500


def sse_frame(row: AuditRow) -> bytes:
    """One SSE message: ``id`` = audit seq, ``event`` = payload kind, ``data`` = the event as protobuf JSON."""
    data = {"seq": row.seq, "hash": row.hash, "event": event_to_dict(row.event())}
    return f"id: {row.seq}\nevent: {row.kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class Broadcaster:
    """Polls the store's audit log and fans new rows out to subscribers."""

    def __init__(self, store: Store, *, poll_interval_s: float = 0.1) -> None:
        self.store = store
        self.poll_interval_s = poll_interval_s
        self._subscribers: set[asyncio.Queue[AuditRow | None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._last_seq = 0

    @property
    def subscribers(self) -> int:
        """How many clients are connected."""
        return len(self._subscribers)

    async def _poll(self) -> None:
        # An outage is waited out from one poll interval up, doubling, to at most 5 s between looks.
        first = max(self.poll_interval_s, 0.001)
        delays = Backoff(first_s=first, cap_s=max(first, 5.0)).delays()
        while self._subscribers:  # an idle server (no stream open) reads nothing
            try:
                rows = await asyncio.to_thread(self.store.audit_rows, after_seq=self._last_seq, limit=_BACKLOG_PAGE)
                delays.reset()
            except StoreError as exc:
                delay = delays.next()
                logger.warning("event stream: store unavailable, retrying in %.1f s: %s", delay, exc)
                await asyncio.sleep(delay)
                continue
            for row in rows:
                self._last_seq = row.seq
                for queue in list(self._subscribers):
                    try:
                        queue.put_nowait(row)
                    except asyncio.QueueFull:  # too slow: drop it; it reconnects with Last-Event-ID
                        self._subscribers.discard(queue)
                        with contextlib.suppress(asyncio.QueueFull):
                            queue.put_nowait(None)
            if len(rows) < _BACKLOG_PAGE:
                await asyncio.sleep(self.poll_interval_s)

    async def _subscribe(self, queue: asyncio.Queue[AuditRow | None]) -> int:
        """Register ``queue``; returns the seq after which every row reaches it through the poller."""
        async with self._lock:
            self._subscribers.add(queue)
            if self._task is None or self._task.done():
                # Start from the head as it is now, before the poller runs: no row can fall between.
                self._last_seq = (await asyncio.to_thread(self.store.audit_head))[0]
                self._task = asyncio.get_running_loop().create_task(self._poll(), name="goldfive-serve-events")
            return self._last_seq

    async def aclose(self) -> None:
        """Stop polling and disconnect every client."""
        task, self._task = self._task, None
        for queue in list(self._subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                queue.put_nowait(None)
        self._subscribers.clear()
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def stream(
        self, *, after: int | None, run_id: str | None = None, ping_s: float = 15.0
    ) -> AsyncIterator[bytes]:
        """SSE bytes: the backlog after ``after`` (None = only new events), then live events, with pings."""
        queue: asyncio.Queue[AuditRow | None] = asyncio.Queue(maxsize=_QUEUE_MAX)
        try:
            position = await self._subscribe(queue)
            yield b"retry: 1000\n: connected\n\n"
            last = position if after is None else after
            while after is not None:  # the backlog, from the store (another process may have served the rest)
                page = await asyncio.to_thread(
                    self.store.audit_rows, after_seq=last, run_id=run_id, limit=_BACKLOG_PAGE
                )
                for row in page:
                    yield sse_frame(row)
                    last = row.seq
                if len(page) < _BACKLOG_PAGE:
                    break
            while True:
                try:
                    new = await asyncio.wait_for(queue.get(), timeout=ping_s)
                except TimeoutError:
                    yield b": ping\n\n"
                    continue
                if new is None:
                    return
                if new.seq <= last or (run_id and new.run_id != run_id):
                    continue
                last = new.seq
                yield sse_frame(new)
        finally:
            self._subscribers.discard(queue)
