"""Shared pieces for the Claude adapter tests: a shop tool, an event sink one can wait on, a conversation driver.

Everything runs the real claude-agent-sdk client against FakeClaudeCLI (no process, no network).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, McpSdkServerConfig, Message, create_sdk_mcp_server, tool

from goldfive_core import ControlAck, ControlChannel, ControlKind, ControlMessage, SteeringConfig
from goldfive_core.adapters.claude import ClaudeRun, FakeClaudeCLI, GoldfiveClaude
from goldfive_core.testing import AwaitableSink

REFUND = "mcp__shop__refund"
LOOKUP = "mcp__shop__lookup"
REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount": {"type": "number", "minimum": 0}},
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


@dataclasses.dataclass
class Shop:
    """A user's own SDK MCP server with a tool whose body records each call."""

    refunds: list[dict[str, Any]]
    lookups: list[dict[str, Any]]
    server: McpSdkServerConfig


def make_shop() -> Shop:
    refunds: list[dict[str, Any]] = []
    lookups: list[dict[str, Any]] = []

    @tool("refund", "Refund an order", REFUND_SCHEMA)
    async def refund(args: dict[str, Any]) -> dict[str, Any]:
        refunds.append(args)
        return {"content": [{"type": "text", "text": f"refunded {args['amount']} on order {args['order_id']}"}]}

    @tool("lookup", "Look an order up", {"order_id": str})
    async def lookup(args: dict[str, Any]) -> dict[str, Any]:
        lookups.append(args)
        return {"content": [{"type": "text", "text": f"order {args['order_id']}: shipped"}]}

    return Shop(refunds, lookups, create_sdk_mcp_server("shop", tools=[refund, lookup]))


@dataclasses.dataclass
class Harness:
    """One GoldfiveClaude with a channel, a sink, a shop and a fake CLI."""

    gf: GoldfiveClaude
    channel: ControlChannel
    sink: AwaitableSink
    shop: Shop
    cli: FakeClaudeCLI

    def options(self, **kwargs: Any) -> ClaudeAgentOptions:
        return ClaudeAgentOptions(mcp_servers={"shop": self.shop.server}, **kwargs)

    def run(self, **kwargs: Any) -> ClaudeRun:
        return self.gf.run(self.options(**kwargs), transport=self.cli, title="shop run")

    async def control(self, kind: ControlKind, **payload: Any) -> ControlAck:
        return await self.channel.send(ControlMessage(kind, payload))


def make_harness(*, config: SteeringConfig | None = None, channel: bool = True, **gf_kwargs: Any) -> Harness:
    ch = ControlChannel()
    sink = AwaitableSink()
    gf_kwargs.setdefault("gate_tools", [REFUND])
    gf_kwargs.setdefault("tool_schemas", {REFUND: REFUND_SCHEMA})
    gf = GoldfiveClaude(
        control=ch if channel else None,
        sinks=[sink],
        config=config or SteeringConfig(approval_default_timeout_ms=5_000),
        **gf_kwargs,
    )
    return Harness(gf, ch, sink, make_shop(), FakeClaudeCLI(session_id="sess-claude-1"))


async def converse(
    run: ClaudeRun, cli: FakeClaudeCLI, prompt: str, script: Callable[[], Awaitable[None]], limit_s: float = 10.0
) -> list[Message]:
    """Send ``prompt`` through the run's client while ``script`` plays the CLI; returns the messages received."""

    async def cli_side() -> None:
        assert await cli.next_prompt() == prompt
        await cli.system_init()
        await script()

    messages: list[Message] = []
    async with asyncio.timeout(limit_s), asyncio.TaskGroup() as tg:
        tg.create_task(cli_side())
        await run.query(prompt)
        async for message in run.receive_response():
            messages.append(message)
    return messages
