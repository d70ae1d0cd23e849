"""Flow C, escalation: an agent loops, goldfive pauses it, and a person steers it back.

Runs offline (a plain async agent, no model, no API key)::

    python examples/escalation.py                 # you decide at the prompt: resume, steer or cancel
    python examples/escalation.py --steer "use the cached forecast"
    python examples/escalation.py --resume        # the agent loops again: a repeat escalation aborts the run
    python examples/escalation.py --cancel
    python examples/escalation.py --deadline 0.5 --no-answer   # nobody answers: the run aborts at the deadline
    python examples/escalation.py --db goldfive.db --wait      # the pause waits on the store for a person:
                                                               # the inbox shows it; answer there or with
                                                               # goldfive resume / steer TEXT / cancel

The exit status is 0 when the run completed and 1 when it did not (aborted or cancelled).

The agent keeps searching for the same thing. goldfive's loop detector climbs the ladder
(docs/flows/escalation.md): a nudge at the 2nd identical call, a cancel-and-re-invoke at the 3rd, and at
the 4th it pauses the run and asks a person (GOLDFIVE_PAUSE_ESCALATE). Every event is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from goldfive_core import (
    ControlChannel,
    ControlKind,
    ControlMessage,
    RunStatus,
    SteeringConfig,
    Task,
    wrap,
)
from goldfive_core.adapters.callable import AgentTools
from goldfive_core.store import StoreChannel, open_store

from _console import PrintSink


class Researcher:
    """A stubborn agent: it ignores goldfive's hints, but it does what a person tells it."""

    def __init__(self) -> None:
        self.starts = 0

    async def __call__(self, task: Task, tools: AgentTools) -> str:
        self.starts += 1
        print("agent: starting" + (" again (goldfive re-invoked me)" if self.starts > 1 else ""))
        while True:
            for note in tools.guidance_notes():
                if note.source == "steer":
                    print(f"agent: a person says {note.text!r}; doing that")
                    if await tools.before_tool("read_cache", {"key": "lisbon"}):
                        return f"Lisbon: sunny, 24 °C (from the cache, as asked: {note.text!r})"
                else:
                    print(f"agent: ignoring goldfive's hint: {note.text[:90]}…")
            if await tools.before_tool("search", {"q": "weather in Lisbon"}):
                await asyncio.sleep(0.05)  # the search itself
                print("agent: search('weather in Lisbon') -> no results; trying again")
            else:
                print("agent: goldfive skipped my search")


async def person(args: argparse.Namespace, channel: ControlChannel, sink: PrintSink) -> None:
    """Waits for the escalation, shows the paused run, and answers (from the flags or the terminal)."""
    await sink.needs_person.wait()
    if args.no_answer:
        print("person: (not answering)")
        return
    if args.wait:
        cli = f".venv/bin/goldfive --db {args.db}"
        print(f"\n>>> the run waits for a person (up to {args.deadline:g} s). Answer from a second terminal:")
        print(f">>>   {cli} steer 'read the cached forecast'    (or: {cli} resume / {cli} cancel)")
        print(f">>>   or in a browser: {cli} serve   (then open http://127.0.0.1:8765/)\n")
        return
    status = await channel.send(ControlMessage(ControlKind.STATUS_QUERY, {}))
    data = status.data or {}
    drift = data.get("pending_drift") or {}
    print(f"\nperson: the run is {data.get('state')}; goldfive asks about {drift.get('drift_kind')}:")
    print(f"        {drift.get('reason')}")
    if args.steer:
        choice, text = "s", args.steer
    elif args.resume:
        choice, text = "r", ""
    elif args.cancel:
        choice, text = "c", ""
    elif sys.stdin.isatty():
        line = await asyncio.to_thread(input, "person: [r]esume, [s]teer TEXT or [c]ancel? ")
        choice, _, text = line.strip().partition(" ")
        choice = choice[:1].lower() or "s"
    else:
        choice, text = "s", ""
    if choice == "r":
        msg = ControlMessage(ControlKind.RESUME, {})
    elif choice == "c":
        msg = ControlMessage(ControlKind.CANCEL, {"reason": "a person cancelled the looping run"})
    else:
        msg = ControlMessage(ControlKind.STEER, {"text": text or "stop searching; read the cached forecast"})
    ack = await channel.send(msg)
    print(f"person: sent {msg.kind} -> {ack.result}: {ack.detail}\n")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    answer = parser.add_mutually_exclusive_group()
    answer.add_argument("--steer", metavar="TEXT", help="steer the paused agent with TEXT")
    answer.add_argument("--resume", action="store_true", help="resume the paused agent as it is")
    answer.add_argument("--cancel", action="store_true", help="cancel the paused run")
    answer.add_argument("--no-answer", action="store_true", help="do not answer (use with --deadline)")
    answer.add_argument("--wait", action="store_true", help="with --db: wait for a person's answer from outside")
    parser.add_argument("--deadline", type=float, default=None, help="seconds a pause waits for a person")
    parser.add_argument("--db", help="put the run on this SQLite store, so the inbox and the CLI can answer it")
    args = parser.parse_args()
    if args.wait and not args.db:
        parser.error("--wait needs --db: an answer from outside reaches the run through a store")
    if args.wait and args.deadline is None:
        args.deadline = 600.0  # a wait for a person is bounded unless you choose otherwise

    sink = PrintSink(prefix="  event ")
    channel = StoreChannel(open_store(args.db)) if args.db else ControlChannel()
    sinks = [channel.sink, sink] if isinstance(channel, StoreChannel) else [sink]
    config = SteeringConfig(
        loop_warning_repeats=2, loop_critical_repeats=3, max_reinvokes=1, pause_escalate_deadline_s=args.deadline
    )
    runner = wrap(Researcher(), control=channel, sinks=sinks, config=config)
    answering = asyncio.create_task(person(args, channel, sink))
    try:
        result = await runner.run("find the weather in Lisbon")
    finally:
        answering.cancel()
        if isinstance(channel, StoreChannel):
            await channel.aclose()
    print(f"\nrun ended: {result.status.value}")
    print(f"output: {result.output!r}" if result.output is not None else f"reason: {result.reason}")
    return 0 if result.status is RunStatus.COMPLETED else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
