"""An upstream MCP server whose tool asks its client for input (``ctx.elicit``), for the gateway's tests.

``book_table`` asks for the booking's details in a form and records what it got back (one JSON line per call in
the file named by ``--calls``): the action (accept / decline / cancel) and, on accept, the values. ``ask_raw``
asks with a message of ``message_chars`` characters and a form of ``fields`` string fields (a hostile asker's
sizes), and records the same. ``refund`` asks in the 2026-07-28 way: it answers ``input_required`` with a form
and a ``requestState``, and on the retry records the answer and the state it got back; ``ask_sampling`` asks for
something a gateway cannot answer, and ``ask_forever`` asks again on every round.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Literal

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field


class Booking(BaseModel):
    name: str = Field(description="Who the table is for", min_length=1, max_length=40)
    guests: int = Field(description="How many people", ge=1, le=12)
    seating: Literal["inside", "terrace"] = "inside"
    vegetarian: bool = False


def _append(path: str, record: dict[str, object]) -> None:
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(json.dumps(record, sort_keys=True) + "\n")


def build(calls: str) -> MCPServer:
    server = MCPServer("goldfive-test-bookings", version="1.0")

    @server.tool(description="Book a table; asks the person for the details.")
    async def book_table(restaurant: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Booking at {restaurant}: who is it for, and how many?", Booking)
        record: dict[str, object] = {"tool": "book_table", "action": answer.action}
        if answer.action == "accept":
            record["data"] = answer.data.model_dump()
        if calls:
            _append(calls, record)
        if answer.action == "accept":
            return f"booked {restaurant} for {answer.data.name} ({answer.data.guests})"
        return f"not booked: {answer.action}"

    @server.tool(description="Ask a form of a given size (for the gateway's bounds).")
    async def ask_raw(message_chars: int, fields: int, ctx: Context) -> str:
        schema = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(fields)}}
        answer = await ctx.session.elicit_form("q" * message_chars, schema, ctx.request_context.request_id)
        record: dict[str, object] = {"tool": "ask_raw", "action": answer.action}
        if answer.action == "accept":
            record["data"] = answer.content
        if calls:
            _append(calls, record)
        return f"answered: {answer.action}"

    reason = {"type": "object", "properties": {"reason": {"type": "string", "maxLength": 200}}, "required": ["reason"]}

    def question(message: str) -> types.ElicitRequest:
        return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=reason))

    @server.tool(description="Refund an order; asks why (input_required).")
    async def refund(order: str, ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        answers = ctx.input_responses or {}
        if "why" not in answers:
            if calls:
                _append(calls, {"tool": "refund", "round": 1})
            return types.InputRequiredResult(
                input_requests={"why": question(f"Why refund {order}?")}, request_state=f"sealed:{order}:1"
            )
        answer = answers["why"]
        assert isinstance(answer, types.ElicitResult)
        record: dict[str, object] = {"tool": "refund", "action": answer.action, "state": ctx.request_state}
        if answer.action == "accept":
            record["data"] = answer.content
        if calls:
            _append(calls, record)
        return types.CallToolResult(content=[types.TextContent(text=f"refund {order}: {answer.action}")])

    @server.tool(description="Asks its client to sample a model (input_required).")
    async def ask_sampling(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        if calls:
            _append(calls, {"tool": "ask_sampling", "responses": bool(ctx.input_responses)})
        sample = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(
                messages=[types.SamplingMessage(role="user", content=types.TextContent(text="hi"))], max_tokens=5
            )
        )
        return types.InputRequiredResult(input_requests={"s": sample}, request_state="s")

    @server.tool(description="Asks with a requestState of a given size (input_required).")
    async def ask_big_state(chars: int, ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        if calls:
            _append(calls, {"tool": "ask_big_state", "state": len(ctx.request_state or "")})
        return types.InputRequiredResult(input_requests={"why": question("Why?")}, request_state="s" * chars)

    @server.tool(description="Asks again on every round (input_required).")
    async def ask_forever(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        if calls:
            _append(calls, {"tool": "ask_forever"})
        return types.InputRequiredResult(input_requests={"why": question("Why?")}, request_state="again")

    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", default="")
    build(parser.parse_args().calls).run("stdio")
