"""Terminal helpers the examples share: print events as they happen, read answers without blocking."""

from __future__ import annotations

import asyncio
import threading

from goldfive_core.events import format_event, payload_name
from goldfive_core.pb.v1 import events_pb2, types_pb2


class PrintSink:
    """Prints each goldfive event on one line; queues approval requests and notices escalations."""

    def __init__(self, prefix: str = "  goldfive ") -> None:
        self.prefix = prefix
        self.requests: asyncio.Queue[events_pb2.ApprovalRequested] = asyncio.Queue()
        self.needs_person = asyncio.Event()
        self.decided = asyncio.Event()

    def emit(self, event: events_pb2.Event) -> None:
        """Print the event; hand approval requests and escalations to whoever answers."""
        print(self.prefix + format_event(event))
        name = payload_name(event)
        if name == "approval_requested":
            self.requests.put_nowait(event.approval_requested)
        elif name == "drift_detected" and event.drift_detected.kind == types_pb2.HUMAN_INTERVENTION_REQUIRED:
            self.needs_person.set()
        elif name in ("approval_granted", "approval_rejected", "approval_timed_out", "approval_cancelled"):
            self.decided.set()


async def ask(prompt: str) -> str:
    """Read one line from the terminal without blocking the event loop ("" at end of input).

    The read runs in a daemon thread, so a prompt nobody answers (the decision came from another
    terminal) does not keep the program from exiting.
    """
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str] = loop.create_future()

    def deliver(line: str) -> None:
        if not answer.done():
            answer.set_result(line.strip())

    def read() -> None:
        try:
            line = input(prompt)
        except EOFError:
            line = ""
        if not loop.is_closed():
            loop.call_soon_threadsafe(deliver, line)

    threading.Thread(target=read, name="goldfive-example-prompt", daemon=True).start()
    return await answer
