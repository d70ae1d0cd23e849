"""Shared helpers for the core tests: a run you can drive step by step, with a sink you can await."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from goldfive_core import ControlChannel, Runner, RunResult, SteeringConfig, Task, wrap
from goldfive_core.adapters.callable import AgentTools
from goldfive_core.testing import AwaitableSink

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
