"""StoreSink: every event of a run into the store's audit chain, approval table and run table.

``emit`` only puts the event on a queue: a slow or unavailable store never
blocks the agent or a decision. One writer thread per sink appends batches in
one transaction each, retries while the store is unavailable (for as long as the
process lives: nothing is dropped because an outage is long), and refreshes the
heartbeat of the runs it has seen start, so the command line can tell a live run
from one whose process was killed. A run's closing event is written only after
the run's kept "done" records (:mod:`goldfive_core.store.keeper`), so a finished
call is never shown in doubt because of an outage. Closing the sink (and the
process's exit) waits for what is queued, at most ``GOLDFIVE_STORE_DRAIN_S``.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import dataclasses
import logging
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from ..events import payload_name
from ..pb.v1 import events_pb2
from ..policy import Grant
from ..retry import Backoff
from .base import HEARTBEAT_INTERVAL_S, HOST, StoreError, StoreUnavailableError
from .grants import grant_rows
from .keeper import drain_seconds, keeper_for
from .roles import RunWriter

__all__ = ["SinkStatistics", "StoreSink"]

logger = logging.getLogger(__name__)

_REAP_EVERY_BEATS = 2
"""Every this many heartbeats (10 s), a sink also closes runs whose process stopped heartbeating."""
_OUTAGE = Backoff(first_s=0.02, cap_s=2.0)
"""How a batch of events waits out a store outage before it is written again."""

_CLOSING = frozenset({"run_completed", "run_aborted"})


@dataclasses.dataclass(frozen=True, slots=True)
class SinkStatistics:
    """Counts for observability and tests."""

    queued: int
    written: int
    dropped: int
    failed_writes: int
    live_runs: int


class _Flush:
    def __init__(self) -> None:
        self.done = threading.Event()


class _Ride:
    """A write that carries the events queued before it (see :meth:`StoreSink.ride`)."""

    def __init__(self, write: Callable[[Sequence[events_pb2.Event], int], Any]) -> None:
        self.write = write
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()


_STOP = object()


class StoreSink:
    """An :class:`~goldfive_core.events.EventSink` that persists events; non-blocking."""

    def __init__(
        self,
        store: RunWriter,
        *,
        max_queue: int = 100_000,
        batch_size: int = 256,
        heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
        revocations_only: bool = False,
    ) -> None:
        self.store = store
        self.revocations_only = revocations_only
        self._grants_warned = False
        """Read only revocations of grants from the store, never a grant to apply (an agent that applies only
        signed decisions: a grant row is not signed, so a database writer could have written it)."""
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._batch_size = batch_size
        self._heartbeat_interval_s = heartbeat_interval_s
        self._live: set[str] = set()
        self._beats = 0
        self._written = 0
        self._dropped = 0
        self._failed = 0
        self._closed = False
        self.gate = threading.Lock()
        """Held by the writer while it takes a batch off the queue (never while it writes): a caller holding it
        (briefly, on its own thread) knows no batch starts until it lets go, so what it emits and the ride it queues
        meanwhile go together (see :meth:`ride`)."""
        self._give_up_at: float | None = None
        """Set by :meth:`close`: past this, a batch the store cannot take is dropped (and logged)."""
        self._thread = threading.Thread(target=self._run, name="goldfive-store-sink", daemon=True)
        self._thread.start()
        ref = weakref.ref(self)
        atexit.register(_close_at_exit, ref)

    def emit(self, event: events_pb2.Event) -> None:
        """Queue the event for the writer thread (never blocks)."""
        if self._closed:
            raise StoreError("StoreSink is closed")
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self._dropped += 1
            logger.error(
                "store sink queue full (%d events); dropped %s #%d of run %s",
                self._queue.maxsize,
                payload_name(event),
                event.sequence,
                event.run_id,
            )

    def ride(self, write: Callable[[Sequence[events_pb2.Event], int], Any]) -> concurrent.futures.Future[Any] | None:
        """Let ``write`` carry the events emitted before this call and not written yet (an HTTP agent's acks ride
        with its decision's event: one request, the event committed first).

        The writer thread, once every earlier batch is written, calls ``write(events, pid)`` with them (in emit
        order; possibly none) instead of appending them itself, and gives its result or exception to the future
        returned. When ``write`` raises (or the future was cancelled before it ran), the events are appended the
        usual way, retried through outages: nothing emitted is dropped because a ride failed. None: the sink is
        closed or its writer gone (the caller sends on its own)."""
        if self._closed or not self._thread.is_alive():
            return None
        carried = _Ride(write)
        try:
            self._queue.put_nowait(carried)
        except queue.Full:
            return None
        return carried.future

    def flush(self, timeout: float | None = 5.0) -> bool:
        """Wait until every event emitted so far was written (or dropped); False on timeout."""
        if not self._thread.is_alive():
            return self._queue.empty()
        marker = _Flush()
        self._queue.put(marker)
        return marker.done.wait(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Write what is queued (and the store's kept "done" records), then stop the writer thread.

        Waits at most ``timeout`` seconds (None: ``GOLDFIVE_STORE_DRAIN_S``, default 60) through an outage;
        what is still unwritten then is logged at ERROR.
        """
        if self._closed:
            return
        self._closed = True
        wait = drain_seconds() if timeout is None else max(timeout, 0.0)
        deadline = time.monotonic() + wait
        self._give_up_at = deadline
        kept = keeper_for(self.store).pending()
        if kept:
            logger.warning(
                "store %s: closing waits up to %g s (GOLDFIVE_STORE_DRAIN_S) for %d record(s) not written yet: %s",
                self.store.url,
                wait,
                len(kept),
                "; ".join(kept),
            )
        self._queue.put(_STOP)
        self._thread.join(wait + 1.0)
        if self._thread.is_alive():
            logger.error(
                "store %s: gave up after waiting %g s (GOLDFIVE_STORE_DRAIN_S); about %d events NOT written",
                self.store.url,
                wait,
                self._queue.qsize(),
            )
        keeper_for(self.store).drain(max(deadline - time.monotonic(), 0.0))

    async def standing_grants(self, *, rule: str, tool: str) -> list[Grant] | None:
        """The store's grants of ``rule`` for ``tool`` (revoked ones too); None when the store cannot be read.

        Makes this sink the run's :class:`~goldfive_core.policy.GrantRecords`: grants are kept in the
        store it writes, revoked there from outside the run, and read back before one lets a call through.
        """
        try:
            rows = await asyncio.to_thread(grant_rows, self.store, rule=rule, tool=tool, limit=1000)
        except StoreError as exc:
            if not self._grants_warned:  # once per sink: every call it gates would say it again
                self._grants_warned = True
                logger.warning("store %s: cannot read grants (a person is asked instead): %s", self.store.url, exc)
            return None
        grants = [g for g in (row.grant() for row in rows) if g is not None]
        if self.revocations_only:  # grants made in this process (from a signed approval) still apply
            return [g for g in grants if g.revoked_at_ms is not None]
        return grants

    def statistics(self) -> SinkStatistics:
        """A snapshot of the counts."""
        return SinkStatistics(
            queued=self._queue.qsize(),
            written=self._written,
            dropped=self._dropped,
            failed_writes=self._failed,
            live_runs=len(self._live),
        )

    # -- the writer thread --------------------------------------------------------------------
    def _run(self) -> None:
        pid = os.getpid()
        next_beat = time.monotonic() + self._heartbeat_interval_s
        try:
            while True:
                timeout = max(next_beat - time.monotonic(), 0.0)
                try:
                    item = self._queue.get(timeout=timeout)
                except queue.Empty:
                    item = None
                batch: list[events_pb2.Event] = []
                markers: list[_Flush] = []
                stop = False
                carried: _Ride | None = None
                gated = item is not None and self.gate.acquire()  # released once the batch is taken
                while item is not None:
                    if item is _STOP:
                        stop = True
                    elif isinstance(item, _Flush):
                        markers.append(item)
                    elif isinstance(item, events_pb2.Event):
                        batch.append(item)
                    elif isinstance(item, _Ride):
                        carried = item  # it carries the batch so far; what follows goes in the next one
                        break
                    if len(batch) >= self._batch_size:
                        break
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        item = None
                if gated:
                    self.gate.release()
                if carried is not None:
                    self._ride(batch, carried, pid)
                elif batch:
                    self._write(batch, pid)
                for marker in markers:
                    marker.done.set()
                if time.monotonic() >= next_beat:
                    self._beat()
                    next_beat = time.monotonic() + self._heartbeat_interval_s
                if stop:
                    return
        finally:
            self.store.close()

    def _track(self, batch: list[events_pb2.Event]) -> None:
        for event in batch:
            kind = payload_name(event)
            if kind == "run_started":
                self._live.add(event.run_id)
            elif kind in ("run_completed", "run_aborted"):
                self._live.discard(event.run_id)

    def _write(self, batch: list[events_pb2.Event], pid: int) -> None:
        self._after_kept_writes(batch)  # before _track: the closing run heartbeats while it waits
        self._track(batch)
        delays = _OUTAGE.delays()
        while True:
            try:
                self.store.append_events(batch, pid=pid, host=HOST)
                self._written += len(batch)
                return
            except StoreUnavailableError as exc:
                self._failed += 1
                give_up = self._give_up_at
                if give_up is not None and time.monotonic() >= give_up:
                    self._dropped += len(batch)
                    logger.error(
                        "store %s unavailable when the sink closed; gave up (GOLDFIVE_STORE_DRAIN_S) and dropped %d "
                        "events (%s): %s",
                        self.store.url,
                        len(batch),
                        ", ".join(sorted({f"{payload_name(e)} of run {e.run_id}" for e in batch})[:10]),
                        exc,
                    )
                    return
                delay = delays.next()
                logger.warning(
                    "store %s unavailable; retrying %d events in %.2f s: %s", self.store.url, len(batch), delay, exc
                )
                time.sleep(delay)
            except StoreError:
                self._failed += 1
                if len(batch) == 1:
                    self._dropped += 1
                    logger.exception(
                        "store sink could not write %s of run %s; dropped", payload_name(batch[0]), batch[0].run_id
                    )
                    return
                for event in batch:  # isolate the event the store refuses
                    self._write([event], pid)
                return

    def _ride(self, batch: list[events_pb2.Event], carried: _Ride, pid: int) -> None:
        """``carried.write`` takes ``batch`` (every event before it is written already); if it cannot, the usual
        append does."""
        if not carried.future.set_running_or_notify_cancel():  # its sender stopped waiting: the events go alone
            if batch:
                self._write(batch, pid)
            return
        self._after_kept_writes(batch)
        self._track(batch)
        try:
            result = carried.write(batch, pid)
        except Exception as exc:
            carried.future.set_exception(exc)
            if batch:  # not known to be written: appended the usual way (retried), as any batch whose write failed
                self._write(batch, pid)
            return
        self._written += len(batch)
        carried.future.set_result(result)

    def _after_kept_writes(self, batch: list[events_pb2.Event]) -> None:
        """A run's closing event waits for its kept "done" records: a finished call never reads as in doubt."""
        closing = sorted({e.run_id for e in batch if payload_name(e) in _CLOSING})
        keeper = keeper_for(self.store)
        next_beat = time.monotonic() + self._heartbeat_interval_s
        for run_id in closing:
            while keeper.pending(run_id):
                give_up = self._give_up_at
                left = 1.0 if give_up is None else give_up - time.monotonic()
                if left <= 0:
                    return
                keeper.wait_run(run_id, min(left, 1.0))
                if time.monotonic() >= next_beat:  # the run is alive while it waits: not shown in doubt meanwhile
                    self._beat()
                    next_beat = time.monotonic() + self._heartbeat_interval_s

    def _beat(self) -> None:
        if not self._live:
            return
        try:
            self.store.heartbeat(sorted(self._live))
            self._beats += 1
            if self._beats % _REAP_EVERY_BEATS == 0:
                # Live processes close the runs of dead ones (status crashed + a closing audit event).
                self.store.reap_crashed()
        except StoreError as exc:
            logger.warning("store %s: heartbeat failed: %s", self.store.url, exc)


def _close_at_exit(ref: weakref.ref[StoreSink]) -> None:
    sink = ref()
    if sink is not None:
        sink.close()
