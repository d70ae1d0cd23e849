"""Flow A, task-level approval: an agent that asks a person before it spends money.

Runs offline (a plain async agent, no model, no API key)::

    python examples/approval_gated_agent.py                        # on a terminal: you are asked
    python examples/approval_gated_agent.py --approve --by ana
    python examples/approval_gated_agent.py --reject "too expensive" --by bo
    python examples/approval_gated_agent.py --timeout-ms 50        # nobody answers in time

The agent finds a flight, then calls ``report_awaiting_approval`` before buying it. goldfive
marks the task BLOCKED, emits ApprovalRequested and waits; the person's APPROVE or REJECT
goes through a ControlChannel, and the agent acts on the answer it gets back
(approve / reject / timeout). Every event goldfive emitted is printed, one line each.

Without a terminal and without a decision flag (``make demo`` in CI, a pipe), the example
approves on its own as ``auto (no terminal)`` and says so: pass ``--reject`` or
``--timeout-ms`` to see the other outcomes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import threading
from typing import Any

from goldfive_core import ControlAck, ControlChannel, ControlKind, ControlMessage, SteeringConfig, Task, wrap
from goldfive_core.adapters.callable import AgentTools

from _console import PrintSink

AUTO_NAME = "auto (no terminal)"


@dataclasses.dataclass(frozen=True)
class Flight:
    """A fare the (offline) search found."""

    name: str
    price_eur: int


FLIGHTS = [Flight("TP 1351 Lisbon → Berlin", 189), Flight("LH 1167 Lisbon → Berlin", 243)]


def make_agent(timeout_ms: int | None) -> Any:
    """The agent: search (no approval needed), then buy (only on 'approve')."""

    async def travel_agent(task: Task, tools: AgentTools) -> str:
        await tools.report_task_started("search", title="find the cheapest flight")
        best = min(FLIGHTS, key=lambda f: f.price_eur)
        await tools.report_task_completed(task_id="search", result=f"{best.name} at {best.price_eur} EUR")

        await tools.report_task_started("purchase", title="buy the ticket")
        answer = await tools.report_awaiting_approval(
            prompt=f"Buy {best.name} for {best.price_eur} EUR with the company card?",
            timeout_ms=timeout_ms,
        )
        print(f"agent: the answer is {answer}")
        if answer["decision"] == "approve":
            await tools.report_task_completed(result="ticket bought, booking BK-7Q2X")
            return f"Booked {best.name} (booking BK-7Q2X)."
        # goldfive never moves the task on its own: the agent says how it ends.
        await tools.report_task_completed(result=f"not bought ({answer['decision']})")
        return f"Did not buy the ticket: {answer['decision']}" + (f" ({answer['detail']})" if answer["detail"] else "")

    return travel_agent


def ask_on_terminal(prompt: str) -> asyncio.Future[tuple[bool, str, str]]:
    """Ask on the terminal in a daemon thread (the run may end first, e.g. on a timeout)."""
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[tuple[bool, str, str]] = loop.create_future()

    def ask() -> None:
        try:
            print(f"\nperson: the agent asks: {prompt}")
            yes = input("person: approve? [y/N] ").strip().lower() in ("y", "yes")
            reason = input("person: reason (optional): ").strip()
            name = input("person: your name: ").strip() or "someone at the terminal"
        except EOFError:
            yes, reason, name = False, "no answer (end of input)", "someone at the terminal"

        def deliver() -> None:
            if not answer.done():  # the run may have ended and cancelled the person first
                answer.set_result((yes, reason, name))

        loop.call_soon_threadsafe(deliver)

    threading.Thread(target=ask, name="ask-person", daemon=True).start()
    return answer


async def person(channel: ControlChannel, sink: PrintSink, args: argparse.Namespace) -> ControlAck | None:
    """Wait for the request, decide (terminal or flags), send the decision; returns the ack."""
    request = await sink.requests.get()
    if args.approve or args.reject is not None:
        approved, reason, name = bool(args.approve), args.reject or "", args.by
    elif args.interactive:
        approved, reason, name = await ask_on_terminal(request.prompt)
    elif args.timeout_ms is not None:
        print(f"person: (nobody answers; the agent waits {args.timeout_ms} ms)")
        return None
    else:
        print(f"person: no terminal and no --approve/--reject flag: approving as {AUTO_NAME!r}")
        approved, reason, name = True, "approved automatically by the example", AUTO_NAME
    kind = ControlKind.APPROVE if approved else ControlKind.REJECT
    ack = await channel.send(
        ControlMessage(kind, {"target_id": request.target_id, "detail": reason, "decided_by": name})
    )
    print(f"person: sent {kind.value} for {request.target_id!r} -> {ack.result.value}: {ack.detail}")
    return ack


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="An agent that asks a person before it spends money (offline).")
    decision = parser.add_mutually_exclusive_group()
    decision.add_argument("--approve", action="store_true", help="approve without asking")
    decision.add_argument("--reject", nargs="?", const="", metavar="REASON", help="reject without asking")
    parser.add_argument("--by", default="cli flag", help="who decides (with --approve/--reject)")
    parser.add_argument(
        "--timeout-ms", type=int, default=None, help="how long the agent waits for an answer (default: 10 minutes)"
    )
    args = parser.parse_args(argv)
    args.interactive = sys.stdin.isatty() and not args.approve and args.reject is None
    return args


async def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    channel = ControlChannel()
    sink = PrintSink(prefix="  ")
    runner = wrap(make_agent(args.timeout_ms), control=channel, sinks=[sink], config=SteeringConfig())
    print("goldfive events (one line each):")
    person_task = asyncio.create_task(person(channel, sink, args))
    result = await runner.run("a flight Lisbon → Berlin under 250 EUR", task_id="trip", title="book a trip")
    if not person_task.done():
        person_task.cancel()  # e.g. the wait timed out while the terminal prompt was still open
    print(f"\nrun {result.status.value}: {result.output}")
    return 0 if result.status.value == "COMPLETED" else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
