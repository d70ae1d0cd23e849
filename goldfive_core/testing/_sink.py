"""An event sink a test can await: handshakes on what a run emitted, instead of sleeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..events import InMemorySink
from ..pb.v1 import events_pb2, types_pb2

__all__ = ["AwaitableSink"]

EventMatch = str | Callable[[events_pb2.Event], bool]
"""A payload name (``"approval_requested"``) or a predicate on the whole event."""


class AwaitableSink(InMemorySink):
    """An :class:`~goldfive_core.InMemorySink` with the waits and views tests need.

    Pass it in ``sinks=[...]`` of ``wrap()``, ``GoldfivePlugin`` or ``GoldfiveClaude``, start the run
    in a task, and order the test by what the run emitted::

        request = await sink.first("approval_requested")
        await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": request.approval_requested.target_id}))

    Every wait is bounded (``timeout`` seconds, ``TimeoutError`` after), so a broken test fails
    instead of hanging. ``wait_for`` (inherited) returns all matching events once there are ``count``.
    """

    async def first(
        self,
        match: EventMatch,
        *,
        timeout: float | None = 30.0,  # noqa: ASYNC109 (a bound on waiting for an event, like wait_for)
    ) -> events_pb2.Event:
        """The first event matching ``match``, already emitted or the next one to come."""
        return await self.nth(match, 1, timeout=timeout)

    async def nth(
        self,
        match: EventMatch,
        n: int,
        *,
        timeout: float | None = 30.0,  # noqa: ASYNC109 (a bound on waiting for an event, like wait_for)
    ) -> events_pb2.Event:
        """The ``n``-th event (from 1) matching ``match``; waits until there are ``n``."""
        if n < 1:
            raise ValueError(f"n must be 1 or more, got {n}")
        if isinstance(match, str):
            found = await self.wait_for(match, count=n, timeout=timeout)
        else:
            found = await self.wait_for(None, count=n, where=match, timeout=timeout)
        return found[n - 1]

    def payloads(self, payload: str) -> list[Any]:
        """The payload messages (e.g. every ``ApprovalRequested``) of the events named ``payload``."""
        return [getattr(event, payload) for event in self.of(payload)]

    def drifts(self) -> list[tuple[str, str, int]]:
        """``(kind, severity, ladder_level)`` of every DriftDetected, in order, enums by name."""
        out: list[tuple[str, str, int]] = []
        for event in self.of("drift_detected"):
            drift = event.drift_detected
            kind = types_pb2.DriftKind.Name(drift.kind)
            out.append((kind, types_pb2.DriftSeverity.Name(drift.severity), drift.ladder_level))
        return out
