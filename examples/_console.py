"""Terminal helpers the examples share: print events as they happen, read answers without blocking."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Mapping
from typing import Any

from goldfive_core import ControlKind, ControlMessage
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


async def ask_value(prompt: str, proposed: Any) -> Any:
    """Ask for a replacement value; empty keeps ``proposed``, non-strings are read as JSON (``120``)."""
    while True:
        answer = await ask(prompt)
        if not answer:
            return proposed
        if isinstance(proposed, str):
            return answer
        try:
            return json.loads(answer)
        except json.JSONDecodeError:
            print(f"    {answer!r} is not a JSON value (e.g. 120)")


async def decide_tool_call(
    request: events_pb2.ApprovalRequested,
    *,
    decision: str | None,
    edits: Mapping[str, Any],
    reason: str,
    who: str = "The agent",
    decided_by: str = "demo-user",
) -> ControlMessage:
    """The person's answer to a tool approval: from flags, or asked on the terminal.

    ``decision`` is approve / edit / reject (from ``--decision``) or None to ask; ``edits`` are the
    argument replacements given as flags (None values ignored). With neither a terminal nor a
    decision, approve and say so.
    """
    proposed = json.loads(request.metadata["args_json"])
    changes = {key: value for key, value in edits.items() if value is not None}
    if decision is None and sys.stdin.isatty():
        print(f"\n>>> {who} wants to call {request.metadata['tool_name']}({proposed})")
        while decision is None:
            answer = (await ask("    [a]pprove, [e]dit, [r]eject? ")).lower()[:1]
            decision = {"a": "approve", "e": "edit", "r": "reject"}.get(answer)
        if decision == "edit":
            changes = {key: await ask_value(f"    {key} [{value}]: ", value) for key, value in proposed.items()}
        elif decision == "reject":
            reason = await ask("    reason: ") or reason
    elif decision is None:
        print("\n>>> no terminal and no --decision: approving by default (pass --decision to choose)")
        decision = "approve"
    payload: dict[str, Any] = {"target_id": request.target_id, "decided_by": decided_by}
    if decision == "reject":
        payload["detail"] = reason
        return ControlMessage(ControlKind.REJECT, payload)
    if decision == "edit":
        payload["edited_args"] = {**proposed, **changes}
    return ControlMessage(ControlKind.APPROVE, payload)
