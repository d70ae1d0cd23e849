"""The one retry policy: exponential backoff within a time budget.

Every loop in goldfive that waits out an outage (a store that went away, a server that does not answer)
takes its delays from a :class:`Backoff` and, where it retries one call, goes through :func:`retry` or
:func:`aretry`. A loop that serves for as long as it runs (a hub, a stream) keeps a :class:`Delays` and
calls ``reset()`` after each success.

The budget is a deadline on the clock the caller passes (``time.monotonic`` by default): the last sleep is
cut to what is left, and once nothing is left the last error is raised. A budget of 0 tries once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Backoff", "Delays", "aretry", "retry"]

T = TypeVar("T")

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Backoff:
    """Delays that start at ``first_s`` and grow by ``factor`` up to ``cap_s``."""

    first_s: float = 0.05
    cap_s: float = 2.0
    factor: float = 2.0

    def __post_init__(self) -> None:
        if not (self.first_s > 0 and self.cap_s >= self.first_s and self.factor >= 1):
            raise ValueError(f"backoff needs 0 < first_s <= cap_s and factor >= 1, got {self}")

    def delays(self) -> Delays:
        """A fresh, mutable sequence of delays for one loop."""
        return Delays(self)


class Delays:
    """The delays of one loop: ``next()`` gives the one to sleep now; ``reset()`` after a success."""

    __slots__ = ("_current", "policy")

    def __init__(self, policy: Backoff) -> None:
        self.policy = policy
        self._current = policy.first_s

    def peek(self) -> float:
        """The delay ``next()`` would give, without taking it."""
        return self._current

    def next(self) -> float:
        delay = self._current
        self._current = min(delay * self.policy.factor, self.policy.cap_s)
        return delay

    def reset(self) -> None:
        self._current = self.policy.first_s


def retry(
    fn: Callable[[], T],
    *,
    budget_s: float,
    on: type[BaseException] | tuple[type[BaseException], ...],
    what: str,
    policy: Backoff = Backoff(),
    logger: logging.Logger = _log,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """Call ``fn`` until it returns; on an ``on`` error sleep the next delay, within ``budget_s``.

    Only for calls that are safe to repeat. The last error is raised once the budget is spent; any other
    error is raised at once.
    """
    deadline = clock() + max(budget_s, 0.0)
    delays = policy.delays()
    while True:
        try:
            return fn()
        except on as exc:
            left = deadline - clock()
            if left <= 0:
                raise
            delay = min(delays.next(), left)
            logger.warning("%s failed; retrying in %.2f s: %s", what, delay, exc)
            sleep(delay)


async def aretry(
    fn: Callable[[], Awaitable[T]],
    *,
    budget_s: float,
    on: type[BaseException] | tuple[type[BaseException], ...],
    what: str,
    policy: Backoff = Backoff(),
    logger: logging.Logger = _log,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """The async form of :func:`retry`: awaits ``fn()`` and sleeps without blocking the loop."""
    deadline = clock() + max(budget_s, 0.0)
    delays = policy.delays()
    while True:
        try:
            return await fn()
        except on as exc:
            left = deadline - clock()
            if left <= 0:
                raise
            delay = min(delays.next(), left)
            logger.warning("%s failed; retrying in %.2f s: %s", what, delay, exc)
            await sleep(delay)
