"""A Claude Agent SDK agent that wants to refund an order; a person approves, edits or rejects the call.

Runs offline by default: goldfive's FakeClaudeCLI plays Claude Code (no process, no network,
no API key) while the real ``ClaudeSDKClient`` talks to it::

    python examples/claude_agent.py                          # asks in the terminal
    python examples/claude_agent.py --decision reject --reason "order already refunded"
    python examples/claude_agent.py --decision edit --amount 120

With no terminal and no ``--decision`` it approves, and says so. With ``ANTHROPIC_API_KEY``
set it runs the real Claude through the SDK's bundled CLI instead (``--offline`` forces the fake).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ResultMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    create_sdk_mcp_server,
    tool,
)

from goldfive_core import ControlChannel, SteeringConfig
from goldfive_core.adapters.claude import FakeClaudeCLI, GoldfiveClaude

from _console import PrintSink, decide_tool_call

REFUND_TOOL = "mcp__shop__refund"
REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "integer", "minimum": 1}},
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}
PROMPT = "Order #1042 arrived broken. Refund the customer the full 250 EUR with the refund tool."
LEDGER: list[dict[str, Any]] = []


@tool("refund", "Refund `amount` euros on order `order_id`.", REFUND_SCHEMA)
async def refund(args: dict[str, Any]) -> dict[str, Any]:
    """The risky tool: it moves money."""
    LEDGER.append(dict(args))
    return {"content": [{"type": "text", "text": f"refunded {args['amount']} EUR on order {args['order_id']}"}]}


async def play_claude(cli: FakeClaudeCLI) -> None:
    """What Claude would do, played offline: call refund, then say how it went."""
    await cli.next_prompt()
    await cli.system_init(tools=[REFUND_TOOL])
    await cli.say("Refunding order #1042.")
    use = await cli.use_tool(
        "toolu_demo_1042", REFUND_TOOL, {"order_id": "1042", "amount": 250}, permission_limit_s=600
    )
    await cli.say(f"Done: {use.output}." if use.ran else f"I did not refund. ({use.output})")
    await cli.stop()  # the Stop hook hands the model any note a person left
    await cli.result("refund handled")


def show(message: object) -> None:
    """Print what Claude says and does."""
    if isinstance(message, AssistantMessage):
        for block in message.content:
            if isinstance(block, TextBlock):
                print(f"[claude] {block.text}")
            elif isinstance(block, ToolUseBlock):
                print(f"[claude] calls {block.name}({block.input})")
    elif isinstance(message, UserMessage) and isinstance(message.content, list):
        for item in message.content:
            if isinstance(item, ToolResultBlock):
                print(f"[tool]   {'error: ' if item.is_error else ''}{item.content}")
    elif isinstance(message, ResultMessage):
        print(f"[claude] turn over: {message.subtype}")


async def main(args: argparse.Namespace) -> int:
    """Run one conversation with goldfive watching; return the exit status."""
    real = bool(os.environ.get("ANTHROPIC_API_KEY")) and not args.offline
    channel = ControlChannel()
    sink = PrintSink()
    gf = GoldfiveClaude(
        control=channel,
        sinks=[sink],
        config=SteeringConfig(tool_approval_timeout_ms=120_000),
        gate_tools=[REFUND_TOOL],
        tool_schemas={REFUND_TOOL: REFUND_SCHEMA},
    )
    options = ClaudeAgentOptions(
        mcp_servers={"shop": create_sdk_mcp_server("shop", tools=[refund])},
        tools=[],  # no built-in tools: only the shop and goldfive's reporting tools
        system_prompt="You are a support agent. Use the shop tools; never claim a refund you did not make.",
        max_turns=4,
    )
    cli = None if real else FakeClaudeCLI(session_id="demo-session")
    print(f"(running {'the real Claude' if real else 'offline: FakeClaudeCLI plays Claude'})")

    async def person() -> None:
        while True:
            request = await sink.requests.get()
            message = await decide_tool_call(
                request, decision=args.decision, edits={"amount": args.amount}, reason=args.reason, who="Claude"
            )
            ack = await channel.send(message)
            print(f">>> {message.kind.value}: {ack.result.value} — {ack.detail}\n")

    async with gf.run(options, transport=cli, title="refund order 1042") as run:
        helpers = [asyncio.create_task(person())]
        if cli is not None:
            helpers.append(asyncio.create_task(play_claude(cli)))
        try:
            await run.query(PROMPT)
            async for message in run.receive_response():
                show(message)
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
    assert run.result is not None
    print(f"\nrun: {run.result.status.value}; ledger: {LEDGER}")
    return 0 if run.result.status == "COMPLETED" else 1


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags (used when there is no terminal, or to skip the prompt)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--decision", choices=["approve", "edit", "reject"], help="answer without a prompt")
    parser.add_argument("--amount", type=int, help="with --decision edit: the amount to refund instead")
    parser.add_argument("--reason", default="rejected in the demo", help="with --decision reject: why")
    parser.add_argument("--offline", action="store_true", help="use the fake CLI even if ANTHROPIC_API_KEY is set")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse())))
