"""Open event streams end when their access ends.

A stream (``/api/events``, ``/api/agent/stream``) is authenticated once, when it opens, and may then stay
open for hours. Each open stream holds a *lease* here: its user, the credential it was opened with and the
permission its route needs. A lease ends — and its stream with it, before another chunk is sent — when

* this process disables or rotates the user, or logs the session out (:meth:`SessionWatch.end_user`,
  :meth:`SessionWatch.end_session`: at once), or
* a re-check finds the credential no longer valid: a disable, rotate or logout done by another process (the
  ``goldfive users`` command, another ``serve`` over the same store). With ``news`` (the store's users' access
  news: PostgreSQL LISTEN/NOTIFY, SQLite's commit wake-ups) the re-check runs as soon as such a change is
  committed; every ``every_s`` seconds it runs anyway (a safety net for lost news; with news, the bearer tokens
  only every :data:`BEARER_RECHECK_S` while the store's access version stands still). One check per distinct
  credential, not per stream, and all the bearer tokens in one store look-up. A check that errs (the store is
  unreadable) ends the lease: fail closed; the client reconnects and is authenticated afresh.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from .auth import User

__all__ = ["BEARER_RECHECK_S", "SESSION_RECHECK_S", "SessionWatch"]

logger = logging.getLogger(__name__)

SESSION_RECHECK_S = 1.0
"""How often the open streams' credentials are re-checked anyway (``GOLDFIVE_SERVE_SESSION_RECHECK_S``)."""
BEARER_RECHECK_S = 30.0
"""With access news, how often the bearer tokens of open streams are re-checked while the store's access version has
not changed: every goldfive change to a user (disable, rotate, role) changes it in the same transaction, and a
change is re-checked at once; this is the safety net for an edit made outside goldfive. Web sessions (which expire
by time) are re-checked every ``every_s`` still. Re-reading a thousand agents' user rows every second was the
largest part of an idle fleet server's cost after its pings."""
NEWS_SLICE_S = 1.0
"""Longest one wait for access news blocks its thread (so a stopping server is never held up by it)."""


@dataclasses.dataclass(eq=False)
class _Lease:
    user: User
    permission: str
    ended: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    @property
    def credential(self) -> tuple[str, str, str]:
        return (self.user.channel, self.user.credential, self.permission)


class SessionWatch:
    """The leases of this process's open streams, re-checked every ``every_s`` seconds while any is open."""

    def __init__(
        self,
        still_valid: Callable[[User, str], Awaitable[bool]],
        *,
        every_s: float = 1.0,
        still_valid_all: Callable[[list[tuple[User, str]]], Awaitable[list[bool]]] | None = None,
        news: Callable[[str | None, float], Awaitable[str]] | None = None,
    ) -> None:
        self._still_valid = still_valid
        self._still_valid_all = still_valid_all
        """Checks every distinct credential in one call (one store look-up), when given."""
        self._news = news
        """``news(seen, timeout_s)``: the store's access version once it differs from ``seen`` or at the timeout."""
        self.every_s = every_s
        self._leases: set[_Lease] = set()
        self._web: set[_Lease] = set()
        """The leases of web sessions (not bearer tokens): the only ones a round without ``bearer`` looks at, so an
        idle server's re-check each second costs nothing per agent stream (ten thousand agents: a walk over ten
        thousand leases each second, for none of them)."""
        self._task: asyncio.Task[None] | None = None

    @property
    def open_streams(self) -> int:
        """How many streams hold a lease."""
        return len(self._leases)

    def end_user(self, name: str) -> int:
        """End every stream of user ``name`` (disabled or rotated here); how many ended."""
        return self._end(lease for lease in self._leases if lease.user.name == name)

    def end_session(self, session_hash: str) -> int:
        """End the streams of one web session (logged out here); how many ended."""
        return self._end(lease for lease in self._leases if session_hash and lease.user.session_hash == session_hash)

    def _end(self, leases: Iterable[_Lease]) -> int:
        ended = 0
        for lease in list(leases):
            if not lease.ended.is_set():
                lease.ended.set()
                ended += 1
        return ended

    async def recheck(self, *, bearer: bool = True) -> int:
        """Check each distinct credential of the open streams once; end the leases that lost access. ``bearer``
        False: the web sessions' only (no user changed since the bearer tokens were last checked)."""
        groups: dict[tuple[str, str, str], list[_Lease]] = collections.defaultdict(list)
        for lease in self._leases if bearer else self._web:
            if not lease.ended.is_set():
                groups[lease.credential].append(lease)
        ended = 0
        if self._still_valid_all is not None:
            verdicts = await self._still_valid_all([(group[0].user, group[0].permission) for group in groups.values()])
            for leases, ok in zip(groups.values(), verdicts, strict=True):
                if not ok:
                    ended += self._end(leases)
            return ended
        for leases in groups.values():
            if not await self._still_valid(leases[0].user, leases[0].permission):
                ended += self._end(leases)
        return ended

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        seen: str | None = None
        due = loop.time() + self.every_s
        bearer_due = loop.time()  # the first round checks every credential
        while self._leases:
            left = max(due - loop.time(), 0.0)
            changed = heard = False
            if self._news is None:
                await asyncio.sleep(left)
            else:
                try:
                    version = await self._news(seen, min(left, NEWS_SLICE_S))
                    changed, seen, heard = version != seen, version, True
                except Exception as exc:  # no news for now: the periodic re-check still runs
                    logger.warning("open streams: waiting for news of users' access failed: %s", exc)
                    await asyncio.sleep(min(left, NEWS_SLICE_S))
            if not changed and loop.time() < due:
                continue
            due = loop.time() + self.every_s
            # Every credential when a user changed, when the news failed us, or on the safety net's interval.
            bearer = changed or not heard or loop.time() >= bearer_due
            if bearer:
                bearer_due = loop.time() + max(self.every_s, BEARER_RECHECK_S)
            try:
                await self.recheck(bearer=bearer)
            except Exception:  # a watcher that stopped would leave streams open: end them all (fail closed)
                logger.exception("open streams: re-checking their access failed; ending them")
                self._end(self._leases)

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._watch(), name="goldfive-serve-sessions")

    async def aclose(self) -> None:
        """End every lease and stop re-checking."""
        self._end(self._leases)
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def guard(self, user: User, permission: str, body: AsyncIterable[Any]) -> AsyncIterator[Any]:
        """``body``'s chunks while the lease holds; the stream ends (without another chunk) when it ends."""
        lease = _Lease(user, permission)
        self._leases.add(lease)
        if user.channel != "api":
            self._web.add(lease)
        self._start()
        chunks = aiter(body)

        async def next_chunk() -> Any:
            return await anext(chunks)

        ended = asyncio.ensure_future(lease.ended.wait())
        pending: asyncio.Future[Any] | None = None
        try:
            while True:
                pending = asyncio.ensure_future(next_chunk())
                await asyncio.wait((pending, ended), return_when=asyncio.FIRST_COMPLETED)
                if lease.ended.is_set():  # even when a chunk is ready too: nothing more after access ended
                    return
                try:
                    chunk = pending.result()
                except StopAsyncIteration:
                    return
                pending = None
                yield chunk
        finally:
            self._leases.discard(lease)
            self._web.discard(lease)
            futures = [f for f in (ended, pending) if f is not None]
            for future in futures:  # before any await: a stream being cancelled is cancelled again at each one
                if future.done() and not future.cancelled():
                    future.exception()  # retrieved: the chunk that ended the stream is not logged as a lost error
                future.cancel()
            await asyncio.gather(*futures, return_exceptions=True)
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()
