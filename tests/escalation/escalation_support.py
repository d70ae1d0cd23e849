"""Helpers for the escalation tests: a looping agent and the drift it should cause."""

from __future__ import annotations

import asyncio
from typing import Any

from goldfive_core import ControlChannel, Runner, RunResult, SteeringConfig, Task, wrap
from goldfive_core.adapters.callable import AgentTools
from goldfive_core.pb.v1 import events_pb2, types_pb2
from goldfive_core.testing import AwaitableSink


def human_needed(event: events_pb2.Event) -> bool:
    """The DriftDetected HUMAN_INTERVENTION_REQUIRED event of an escalation."""
    return (
        event.WhichOneof("payload") == "drift_detected"
        and event.drift_detected.kind == types_pb2.HUMAN_INTERVENTION_REQUIRED
    )


def loop_config(**overrides: Any) -> SteeringConfig:
    """Small thresholds: WARNING at the 2nd identical call, CRITICAL from the 3rd, one re-invocation."""
    values: dict[str, Any] = {"loop_warning_repeats": 2, "loop_critical_repeats": 3, "max_reinvokes": 1}
    values.update(overrides)
    return SteeringConfig(**values)


class LoopingAgent:
    """Calls ``search(q=weather)`` over and over; follows a person's steer; records what it saw and did.

    Ladder nudges are ignored on purpose (a stubborn model), so the ladder climbs.
    ``stop_when_skipped``: return when goldfive skips a call (an agent that listens to "no").
    """

    def __init__(self, *, stop_when_skipped: bool = False) -> None:
        self.stop_when_skipped = stop_when_skipped
        self.invocations = 0
        self.searches = 0
        self.notes_seen: list[tuple[str, str]] = []
        self.skipped = 0

    async def __call__(self, task: Task, tools: AgentTools) -> str:
        self.invocations += 1
        while True:
            notes = tools.guidance_notes()
            self.notes_seen.extend((n.source, n.text) for n in notes)
            steers = [n.text for n in notes if n.source == "steer"]
            if steers and await tools.before_tool("answer", {"from": steers[-1]}):
                return f"followed: {steers[-1]}"
            if await tools.before_tool("search", {"q": "weather"}):
                self.searches += 1  # the tool body ran
            else:
                self.skipped += 1
                if self.stop_when_skipped:
                    return "stopped after a skipped call"


class Run:
    """A wrapped agent started in the background with a channel (or none) and an event log."""

    def __init__(self, agent: Any, *, config: SteeringConfig, channel: bool = True) -> None:
        self.log = AwaitableSink()
        self.channel = ControlChannel() if channel else None
        self.runner: Runner = wrap(agent, control=self.channel, sinks=[self.log], config=config)
        self.task: asyncio.Task[RunResult] = asyncio.create_task(self.runner.run("find the weather"))

    async def result(self) -> RunResult:
        async with asyncio.timeout(5):
            return await self.task
