"""Terminal helpers the examples share: print events as they happen, read answers without blocking."""

from __future__ import annotations

import asyncio

from goldfive_core.events import format_event, payload_name
from goldfive_core.pb.v1 import events_pb2, types_pb2


class PrintSink:
    """Prints each goldfive event on one line; queues approval requests and notices escalations."""

    def __init__(self, prefix: str = "  goldfive ") -> None:
        self.prefix = prefix
        self.requests: asyncio.Queue[events_pb2.ApprovalRequested] = asyncio.Queue()
        self.needs_person = asyncio.Event()

    def emit(self, event: events_pb2.Event) -> None:
        """Print the event; hand approval requests and escalations to whoever answers."""
        print(self.prefix + format_event(event))
        name = payload_name(event)
        if name == "approval_requested":
            self.requests.put_nowait(event.approval_requested)
        elif name == "drift_detected" and event.drift_detected.kind == types_pb2.HUMAN_INTERVENTION_REQUIRED:
            self.needs_person.set()


async def ask(prompt: str) -> str:
    """Read one line from the terminal without blocking the event loop ("" at end of input)."""
    try:
        return (await asyncio.to_thread(input, prompt)).strip()
    except EOFError:
        return ""
