"""Look-ups of many keys made together: the requests that arrive while one look-up runs share the next one.

A server answering thousands of agents asks the store the same kind of question for each of them (whose token
is this, is there an ack for this message). :class:`Coalesced` turns the questions asked while a look-up is
under way into one look-up for all of them, started as soon as the previous one ends: an idle server asks at
once (no added wait), a busy one asks once per round trip however many requests came in. Every answer comes
from a look-up that *began after* its question was asked, so it is as fresh as asking alone would be (a token
disabled before a request arrived is refused, as before).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Generic, TypeVar

__all__ = ["Coalesced", "stop_task"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


async def stop_task(task: asyncio.Task[None] | None) -> None:
    """Cancel a background task of the server and wait until it ended (its cancellation is not an error)."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Coalesced(Generic[K, V]):
    """``await get(key)``: the value ``fetch`` finds for ``key`` (None when absent), keys asked together fetched
    together. ``fetch`` gets the distinct keys of a round and returns what it found for them; what it raises is
    raised to every question of that round."""

    def __init__(self, fetch: Callable[[Sequence[K]], Awaitable[Mapping[K, V]]], *, name: str) -> None:
        self.fetch = fetch
        self.name = name
        self.rounds = 0
        """How many look-ups ran so far (observability and tests)."""
        self._asked: dict[K, asyncio.Future[V | None]] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def waiting(self) -> int:
        """How many keys wait for the next look-up (observability and tests)."""
        return len(self._asked)

    async def get(self, key: K) -> V | None:
        """What the next look-up finds for ``key``."""
        future = self._asked.get(key)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._asked[key] = future
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._rounds(), name=self.name)
        return await asyncio.shield(future)

    async def _rounds(self) -> None:
        while self._asked:
            asked, self._asked = self._asked, {}
            try:
                found = await self.fetch(list(asked))
            except asyncio.CancelledError:
                for future in asked.values():
                    future.cancel()
                raise
            except Exception as exc:
                for future in asked.values():
                    if not future.done():
                        future.set_exception(exc)
                        future.exception()  # retrieved: a question whose request went away leaves no warning
                continue
            self.rounds += 1
            for key, future in asked.items():
                if not future.done():
                    future.set_result(found.get(key))

    async def aclose(self) -> None:
        """Stop looking up (questions still waiting are cancelled)."""
        task, self._task = self._task, None
        await stop_task(task)
        for future in self._asked.values():
            future.cancel()
        self._asked.clear()
