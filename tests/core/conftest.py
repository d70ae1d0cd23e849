"""Shared helpers for the core tests: a sink you can await, and a run you can drive step by step."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from goldfive_core import ControlChannel, InMemorySink, Runner, RunResult, SteeringConfig, Task, wrap
from goldfive_core.adapters.callable import AgentTools
from goldfive_core.pb.v1 import events_pb2


class AwaitableSink(InMemorySink):
    """An InMemorySink whose events can be awaited (handshakes instead of sleeps)."""

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[tuple[str, int, asyncio.Future[events_pb2.Event]]] = []

    def emit(self, event: events_pb2.Event) -> None:
        super().emit(event)
        for item in list(self._waiters):
            payload, count, fut = item
            matches = self.of(payload)
            if len(matches) >= count and not fut.done():
                fut.set_result(matches[count - 1])
                self._waiters.remove(item)

    async def wait_for(self, payload: str, count: int = 1) -> events_pb2.Event:
        """The ``count``-th event with ``payload``; waits for it (bounded, for a hung test)."""
        matches = self.of(payload)
        if len(matches) >= count:
            return matches[count - 1]
        fut: asyncio.Future[events_pb2.Event] = asyncio.get_running_loop().create_future()
        self._waiters.append((payload, count, fut))
        async with asyncio.timeout(5):  # bounded only so a broken test fails instead of hanging
            return await fut


AgentFn = Callable[[Task, AgentTools], Awaitable[Any]]


class Harness:
    """A runner with a channel and an awaitable sink; ``start`` runs the agent in the background."""

    def __init__(self, agent: AgentFn, *, channel: bool = True, config: SteeringConfig | None = None) -> None:
        self.sink = AwaitableSink()
        self.channel = ControlChannel() if channel else None
        self.runner: Runner = wrap(agent, control=self.channel, sinks=[self.sink], config=config or SteeringConfig())
        self.task: asyncio.Task[RunResult] | None = None

    def start(self, input: object = None, **kwargs: Any) -> asyncio.Task[RunResult]:
        self.task = asyncio.create_task(self.runner.run(input, **kwargs))
        return self.task

    async def result(self) -> RunResult:
        assert self.task is not None
        async with asyncio.timeout(5):
            return await self.task


@pytest.fixture
def harness() -> Callable[..., Harness]:
    return Harness


@pytest.fixture
def sink() -> AwaitableSink:
    return AwaitableSink()
