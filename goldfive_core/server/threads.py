"""The thread pools of one ``goldfive serve`` app, defined once and owned by the app's lifetime.

Store calls block, so the server runs them on threads; which pool a call uses decides what it can be queued
behind. A decision waiting for an agent's ack holds no thread (it waits in the event loop, woken by one watcher
thread); the calls that carry or admit that ack (authentication, the agent routes, the agent inbox's LISTEN) still
each have a pool of their own, so a burst of decisions' store calls never queues them.

:class:`ServerThreads` makes a pool the first time it is used (never at import) and shuts every pool it made
down in :meth:`ServerThreads.shutdown`, which the app's lifespan calls when it ends. The one pool installed as
the loop's default belongs to the loop from then on: asyncio shuts it down when the loop closes, so a call
that still runs on the loop after the app stopped is not refused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = [
    "ACCESS_WATCH",
    "ACKS",
    "ACK_WATCH",
    "AGENTS",
    "AUTH",
    "HUB",
    "LIVENESS",
    "SECRETS",
    "SERVE",
    "Pool",
    "ServerThreads",
]

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Pool:
    """One pool: its thread name, how many threads it may have, and whether calls queued at shutdown still run."""

    name: str
    threads: int
    finish_queued: bool = False


SERVE = Pool(name="goldfive-serve", threads=16)
"""The app's default pool (``asyncio.to_thread``): store calls of the routes, each may hold one connection."""
AUTH = Pool(name="goldfive-auth", threads=4)
"""Authentication's store look-ups: the agents' requests that carry acks must get through while decisions wait."""
SECRETS = Pool(name="goldfive-secrets", threads=2)
"""The scrypt check of a token not verified yet in this process (tens of milliseconds of CPU each): a fleet's
agents all reconnecting here after a server died queue their first checks here, never in front of the look-ups
of the agents already verified (:data:`AUTH`)."""
AGENTS = Pool(name="goldfive-agents", threads=8)
"""Store calls of the agent routes, never queued behind people's decisions waiting for those agents' acks."""
LIVENESS = Pool(name="goldfive-liveness", threads=1)
"""The agents' liveness: the batched heartbeat stamps (one write per interval, so one thread) and a heartbeat's
ownership look-up. Never queued behind the agent routes' event writes (:data:`AGENTS`): a fleet registering at once
(hundreds of event writes taking turns on the audit chain) left its beats waiting there until the runs were judged
crashed."""
ACKS = Pool(name="goldfive-ack", threads=32)
"""Kept for callers that wait for an ack on a thread of their own; the app's decisions and controls wait in the
event loop (:class:`~.acks.AckWatch`) and use :data:`ACK_WATCH`."""
ACK_WATCH = Pool(name="goldfive-ack-watch", threads=1, finish_queued=True)
"""The acks' watcher: one thread, so one LISTEN connection, per process, however many decisions wait (closed by a
last queued call)."""
ACCESS_WATCH = Pool(name="goldfive-access-watch", threads=1, finish_queued=True)
"""The open streams' watcher of users' access news: one thread, so one LISTEN connection, per process."""
HUB = Pool(name="goldfive-hub", threads=1, finish_queued=True)
"""The agent inbox's watcher: one thread, so one LISTEN connection, per process (closed by a last queued call)."""


class ServerThreads:
    """The pools of one app: made on first use, shut down together by :meth:`shutdown`."""

    def __init__(self) -> None:
        self._pools: dict[Pool, concurrent.futures.ThreadPoolExecutor] = {}
        self._closed = False

    def pool(self, pool: Pool) -> concurrent.futures.ThreadPoolExecutor:
        """The executor of ``pool`` (made now if this is its first use)."""
        executor = self._pools.get(pool)
        if executor is None and self._closed:
            raise RuntimeError(f"{pool.name}: the server's threads are shut down")
        if executor is None:
            executor = self._pools[pool] = _executor(pool)
        return executor

    async def run(self, pool: Pool, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on a thread of ``pool``."""
        call = functools.partial(fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self.pool(pool), call)

    def install_default(self) -> None:
        """Give the running loop a :data:`SERVE` pool as its default (asyncio's own has only a handful of threads).

        The loop owns it from then on: asyncio shuts it down when the loop closes, not :meth:`shutdown`.
        """
        asyncio.get_running_loop().set_default_executor(_executor(SERVE))

    def shutdown(self) -> None:
        """Stop every pool made so far (but the loop's default); running calls finish, queued ones are cancelled
        (but in a pool that finishes them).

        A pool stays stopped: a call given to it later is refused (RuntimeError), no new threads are made.
        """
        self._closed = True
        for pool, executor in self._pools.items():
            executor.shutdown(wait=False, cancel_futures=not pool.finish_queued)


def _executor(pool: Pool) -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=pool.threads, thread_name_prefix=pool.name)
