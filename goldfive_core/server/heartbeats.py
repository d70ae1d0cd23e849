"""Agents' heartbeats, written together: many agents' beats in one interval become one transaction.

Each agent over HTTP heartbeats its runs every few seconds; ten thousand of them would be thousands of
transactions a second if each beat were its own. :class:`HeartbeatBatch` gathers the runs of every beat that
arrives while a write is due and stamps them all in one :meth:`~goldfive_core.store.roles.RunRegistry.heartbeat`
call (one transaction, the store's clock), at most once per :data:`BATCH_INTERVAL_S`. A beat is answered after
the write that carries it committed, as before, so what the agent is told is what the store holds; a failed
write fails every beat it carried (the agent retries, as it would have).

An agent's open stream carries its runs' liveness too (:class:`StreamLiveness`): while an agent's
``/api/agent/stream`` is open here, this server stamps the stream's runs itself, every
:data:`STREAM_BEAT_S`, all open streams' runs in one batched write, and says so in the stream's
:data:`~goldfive_core.store.agents.LIVENESS_HEADER`; the agent then sends no heartbeat requests for them. A
stream whose agent process ended is closed by its kernel at once (and the stamps stop); one whose host
vanished is ended by the connection's TCP keepalive and user timeout (see :mod:`.connections`).

Which runs an agent owns never changes once claimed (``gf_run_owners`` rows are never updated or deleted), so
the answer "agent A owns run R" is kept (a bounded cache) and the store is asked only about runs not seen yet —
the runs of all the beats that arrive while one such look-up runs in the next one (:class:`~.batching.Coalesced`):
thousands of agents failing over from a killed server beat here before their streams open, and their look-ups, one
each on the liveness thread, used to hold up the stamp every new stream waits for (tens of seconds).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Collection, Sequence

from ..store import agents as owners
from ..store.base import HEARTBEAT_INTERVAL_S, Store
from .batching import Coalesced, stop_task
from .threads import LIVENESS, ServerThreads

__all__ = ["BATCH_INTERVAL_S", "STREAM_BEAT_S", "HeartbeatBatch", "StreamLiveness"]

logger = logging.getLogger(__name__)

BATCH_INTERVAL_S = 0.1
"""Longest a beat waits for the write that carries it (and the least time between two writes)."""

STREAM_BEAT_S = HEARTBEAT_INTERVAL_S
"""How often the runs of open agent streams are stamped alive (as often as an agent would heartbeat them)."""

_OWNED_MAX = 200_000
"""How many (agent, run) pairs the ownership cache keeps (the oldest are forgotten, then asked again)."""


class HeartbeatBatch:
    """Stamps the runs of the beats that arrive within an interval in one store write."""

    def __init__(self, store: Store, *, threads: ServerThreads, interval_s: float = BATCH_INTERVAL_S) -> None:
        self.store = store
        self.threads = threads
        self.interval_s = interval_s
        self._due: set[str] = set()
        self._written: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._owned: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()
        self._owners: Coalesced[str, str] = Coalesced(self._owners_of, name="goldfive-serve-run-owners")
        """Who owns each run asked about, the runs of the beats that arrived meanwhile looked up together."""
        self.writes = 0
        """How many store writes carried beats so far (one transaction each)."""

    async def owned(self, agent: str, run_ids: Sequence[str]) -> set[str]:
        """Which of ``run_ids`` ``agent`` owns (the store is asked only about pairs not known yet)."""
        unknown = [run for run in run_ids if (agent, run) not in self._owned]
        found = {run for run in run_ids if (agent, run) in self._owned}
        if unknown:
            found_owners = await asyncio.gather(*(self._owners.get(run) for run in unknown))
            mine = {run for run, owner in zip(unknown, found_owners, strict=True) if owner == agent}
            for run in mine:
                self._owned[(agent, run)] = None
            while len(self._owned) > _OWNED_MAX:
                self._owned.popitem(last=False)
            found |= mine
        return found

    async def _owners_of(self, run_ids: Sequence[str]) -> dict[str, str]:
        return await self.threads.run(LIVENESS, owners.owners_of, self.store, run_ids)

    async def beat(self, run_ids: Sequence[str]) -> None:
        """Stamp ``run_ids`` alive in the next write; returns once it committed (raises what the write raised)."""
        if not run_ids:
            return
        self._due.update(run_ids)
        if self._written is None:
            self._written = asyncio.get_running_loop().create_future()
        written = self._written
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush(), name="goldfive-serve-heartbeats")
        await asyncio.shield(written)

    async def _flush(self) -> None:
        """Write what is due, one interval after the last write began, until nothing is due."""
        while self._due:
            await asyncio.sleep(self.interval_s)
            runs, self._due = sorted(self._due), set()
            written, self._written = self._written, None
            try:
                await self.threads.run(LIVENESS, self.store.heartbeat, runs)
            except asyncio.CancelledError:
                if written is not None:
                    written.cancel()
                raise
            except Exception as exc:  # every beat this write carried fails with its cause (their agents retry)
                logger.warning("could not write the heartbeats of %d runs: %s", len(runs), exc)
                if written is not None and not written.done():
                    written.set_exception(exc)
                    written.exception()  # retrieved here: a beat whose request went away leaves no warning
                continue
            self.writes += 1
            if written is not None and not written.done():
                written.set_result(None)

    async def aclose(self) -> None:
        """Stop writing (beats still waiting get CancelledError: their requests are ending with the server)."""
        task, self._task = self._task, None
        await stop_task(task)
        await self._owners.aclose()
        if self._written is not None and not self._written.done():
            self._written.cancel()


class StreamLiveness:
    """Keeps the runs of this server's open agent streams alive: one batched stamp of all of them per interval.

    ``runs()`` says which runs have an open stream now (the hub's subscriptions). The stamping task runs while
    any stream is open and stops with the last one; :meth:`start` (called as a stream opens) restarts it.
    """

    def __init__(
        self, batch: HeartbeatBatch, runs: Callable[[], Collection[str]], *, every_s: float = STREAM_BEAT_S
    ) -> None:
        self.batch = batch
        self.runs = runs
        self.every_s = every_s
        self._task: asyncio.Task[None] | None = None
        self.stamps = 0
        """How many stamps of the open streams' runs were written so far."""

    def start(self) -> None:
        """Stamp the open streams' runs from now on (a no-op while already stamping)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._keep(), name="goldfive-serve-stream-liveness")

    async def _keep(self) -> None:
        while self.runs():
            await asyncio.sleep(self.every_s)
            runs = sorted(self.runs())
            try:
                await self.batch.beat(runs)
            except Exception:  # logged by the batch; the next interval tries again
                continue
            self.stamps += 1

    async def aclose(self) -> None:
        """Stop stamping."""
        task, self._task = self._task, None
        await stop_task(task)
