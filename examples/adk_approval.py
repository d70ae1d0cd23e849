"""An ADK agent that wants to move money; a person approves, edits or rejects the call.

Runs offline (a scripted model stands in for Gemini; no API key)::

    python examples/adk_approval.py                       # asks in the terminal (or answer from a second one)
    python examples/adk_approval.py --decision reject --reason "wrong payee"
    python examples/adk_approval.py --decision edit --amount 120 --to "ACME Ltd"
    python examples/adk_approval.py --wait                # only a second terminal decides: goldfive approve ID
    python examples/adk_approval.py --policy examples/payments_policy.toml --invoice 80   # a rule allows it
    python examples/adk_approval.py --policy examples/payments_policy.toml --payee "Mallory Ltd"  # a rule denies it

The control channel is the embedded SQLite store (``./goldfive.db``, or ``--db PATH``; ``--in-memory``
for a plain in-process channel), so the person may answer here or from another terminal with the
``goldfive`` command line; whichever answers first wins, the other is told it was already decided.
Every event also lands in the store's audit log (``goldfive events``, ``goldfive audit verify``).

With no terminal and no ``--decision`` / ``--wait`` it approves, and says so. With ``--policy FILE`` (or
``GOLDFIVE_POLICY``) its rules decide first: small payments run without a person (the rule's name is on
the audit log), blocked payees are refused with the reason the model reads, the rest ask.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlChannel, SteeringConfig
from goldfive_core.policy import load_policy
from goldfive_core.store import StoreChannel, open_store
from goldfive_core.testing import Call, ScriptedModel, SeenRequest

from _console import PrintSink, decide_tool_call

LEDGER: list[dict[str, Any]] = []


def transfer_funds(amount: int, to: str) -> dict[str, Any]:
    """Send ``amount`` euros to the account ``to``."""
    LEDGER.append({"amount": amount, "to": to})
    return {"status": "sent", "amount": amount, "to": to}


def scripted_treasurer(amount: int = 250, payee: str = "ACME Corp") -> ScriptedModel:
    """Stands in for a real model: asks to pay an invoice, then reports what happened."""

    def report(seen: SeenRequest) -> str:
        result = seen.last_response or {}
        if result.get("status") == "sent":
            return f"Done: sent {result['amount']} EUR to {result['to']}."
        return f"I did not pay: {result.get('reason')} ({result.get('detail')})."

    pay = Call("transfer_funds", {"amount": amount, "to": payee})
    return ScriptedModel([["Paying invoice #1042.", pay], report], model="scripted-treasurer")


async def main(args: argparse.Namespace) -> int:
    """Run the agent once with goldfive watching; return the exit status."""
    sink = PrintSink()
    channel: ControlChannel
    if args.in_memory:
        channel, sinks = ControlChannel(), [sink]
    else:
        channel = StoreChannel(open_store(args.db))
        sinks = [channel.sink, sink]
    config = SteeringConfig(tool_approval_timeout_ms=args.timeout_ms)
    policy = load_policy(args.policy) if args.policy else None  # None: GOLDFIVE_POLICY, if set
    plugin = GoldfivePlugin(control=channel, sinks=sinks, config=config, policy=policy)
    agent = LlmAgent(
        name="treasurer",
        model=scripted_treasurer(amount=args.invoice, payee=args.payee),
        instruction="Pay the invoices you are given.",
        tools=[FunctionTool(transfer_funds, require_confirmation=True)],
    )
    app = App(name="adk_approval_demo", root_agent=agent, plugins=[plugin])
    runner = Runner(app=app, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name=app.name, user_id="demo")

    async def person() -> None:
        request = await sink.requests.get()
        if not args.in_memory:
            cli = f".venv/bin/goldfive --db {args.db}"
            print(f"\n>>> answer from a second terminal:  {cli} approve {request.target_id} --by <you>")
            print(f">>>                             or:  {cli} reject {request.target_id} --reason '...'")
            print(f">>>           or in a browser:  {cli} serve   (then open http://127.0.0.1:8765/)")
        if args.wait:
            print(f">>> waiting up to {args.timeout_ms / 1000:g} s for that decision")
            return
        while True:
            choice = asyncio.ensure_future(
                decide_tool_call(
                    request,
                    decision=args.decision,
                    edits={"amount": args.amount, "to": args.to},
                    reason=args.reason,
                    who="The agent",
                )
            )
            decided = asyncio.ensure_future(sink.decided.wait())
            done, _ = await asyncio.wait({choice, decided}, return_when=asyncio.FIRST_COMPLETED)
            decided.cancel()
            if choice not in done:
                choice.cancel()
                print("\n>>> decided from another terminal (see the event above)")
                return
            message = choice.result()
            ack = await channel.send(message)
            print(f">>> {message.kind.value}: {ack.result.value} — {ack.detail}\n")
            if ack.ok or args.decision is not None or not sys.stdin.isatty() or sink.decided.is_set():
                return

    decider = asyncio.create_task(person())
    message = types.Content(role="user", parts=[types.Part(text=f"Pay invoice #1042 from {args.payee}.")])
    try:
        async for event in runner.run_async(user_id="demo", session_id=session.id, new_message=message):
            for part in event.content.parts if event.content and event.content.parts else []:
                if part.text:
                    print(f"[{event.author}] {part.text}")
                if part.function_call:
                    print(f"[{event.author}] calls {part.function_call.name}({part.function_call.args})")
                if part.function_response:
                    print(f"[{event.author}] {part.function_response.name} -> {part.function_response.response}")
    finally:
        if not decider.done():
            decider.cancel()
        await runner.close()
        if isinstance(channel, StoreChannel):
            await channel.aclose()
    print(f"\nledger: {LEDGER}")
    return 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags (used when there is no terminal, or to skip the prompt)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--decision", choices=["approve", "edit", "reject"], help="answer without a prompt")
    parser.add_argument("--amount", type=int, help="with --decision edit: the amount to send instead")
    parser.add_argument("--to", help="with --decision edit: the payee to pay instead")
    parser.add_argument("--reason", default="rejected in the demo", help="with --decision reject: why")
    parser.add_argument("--db", default=os.environ.get("GOLDFIVE_DB", "goldfive.db"), help="SQLite store file")
    parser.add_argument("--in-memory", action="store_true", help="use an in-process channel instead of the store")
    parser.add_argument("--wait", action="store_true", help="do not ask here; wait for a decision from the CLI")
    parser.add_argument("--timeout-ms", type=int, default=120_000, help="how long the tool waits for a decision")
    parser.add_argument("--policy", help="a policy file (TOML) whose rules decide first (env GOLDFIVE_POLICY)")
    parser.add_argument("--invoice", type=int, default=250, help="the amount the agent will ask to pay")
    parser.add_argument("--payee", default="ACME Corp", help="whom the agent will ask to pay")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
