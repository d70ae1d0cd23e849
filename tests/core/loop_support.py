"""Ordering helpers for asyncio tests: a positive "nothing else can happen now" signal and held timers.

``wait_all_tasks_blocked`` is asyncio's version of ``trio.testing.wait_all_tasks_blocked``: it
returns once no other task on the loop can run without something from outside (a message, a
timer, a thread). A test that asserts that something did *not* happen waits for it first, so
the assertion is about a moment that has passed, not about how many times the loop spun.

``HeldTimers`` takes over the running loop's timers (``loop.call_at``, which ``call_later``,
``asyncio.timeout`` and ``asyncio.sleep`` all go through): a timer fires only when the test says
so, and the test can see which timers are still armed. That makes both sides of a timeout race
deterministic and lets a test assert structurally that a wait left no timer behind.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


async def wait_all_tasks_blocked(*, max_rounds: int = 10_000) -> None:
    """Return once every other task on this loop is blocked (nothing ready, no timer due)."""
    loop = asyncio.get_running_loop()
    # asyncio keeps the callbacks that will run in its next iteration in _ready, and its timers in
    # _scheduled (a heap). Both are implementation details of BaseEventLoop, read only here.
    ready = loop._ready  # type: ignore[attr-defined]
    scheduled = loop._scheduled  # type: ignore[attr-defined]
    quiet = 0
    for _ in range(max_rounds):
        await asyncio.sleep(0)
        due = any(not h.cancelled() and h.when() <= loop.time() for h in scheduled)
        quiet = quiet + 1 if not ready and not due else 0
        if quiet >= 2:  # twice in a row: a callback that ran last round scheduled nothing new
            return
    raise AssertionError(f"the loop never went idle in {max_rounds} rounds")


@dataclasses.dataclass(eq=False)
class HeldTimer:
    """One timer the code under test armed; it runs only through :meth:`fire`."""

    delay: float
    callback: Callable[..., Any]
    args: tuple[Any, ...]
    handle: asyncio.TimerHandle

    @property
    def armed(self) -> bool:
        """Not cancelled and not fired."""
        return not self.handle.cancelled()

    def fire(self) -> None:
        """Run the timer's callback now (as the loop would when it came due)."""
        assert self.armed, "this timer was cancelled or already fired"
        self.handle.cancel()
        self.callback(*self.args)


class HeldTimers:
    """Every timer armed on the loop while active; see the module docstring."""

    def __init__(self) -> None:
        self.timers: list[HeldTimer] = []

    def armed(self) -> list[HeldTimer]:
        """Timers still waiting to fire."""
        return [t for t in self.timers if t.armed]

    def only(self) -> HeldTimer:
        """The one armed timer (fails when there are none or several)."""
        armed = self.armed()
        assert len(armed) == 1, f"expected one armed timer, found {len(armed)}"
        return armed[0]

    @contextmanager
    def hold(self, loop: asyncio.AbstractEventLoop) -> Iterator[HeldTimers]:
        """Hold every timer armed on ``loop`` inside the block (the loop's own call_at is restored after)."""
        real_call_at = loop.call_at

        def call_at(when: float, callback: Callable[..., Any], *args: Any, context: Any = None) -> asyncio.TimerHandle:
            # Armed far in the future: it never fires by itself while held; fire() runs it.
            handle = real_call_at(loop.time() + 86_400, callback, *args, context=context)
            self.timers.append(HeldTimer(max(0.0, when - loop.time()), callback, args, handle))
            return handle

        loop.call_at = call_at  # type: ignore[method-assign]
        try:
            yield self
        finally:
            del loop.call_at  # type: ignore[method-assign]
            assert loop.call_at == real_call_at
