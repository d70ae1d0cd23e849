"""``goldfive mcp --http --url``: the HTTP gateway as an agent of a ``goldfive serve`` (no database of its own).

The MCP client reaches the gateway over streamable HTTP; the gateway reaches the server with bot's agent token;
a person (ana) approves through the server's API, as the inbox does.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mcp_http_support import http_gateway
from mcp_support import ELICIT_UPSTREAM, text
from test_mcp_serve import Site, served

__all__ = ["served"]  # the fixture: a goldfive serve with ana (approver) and bot (agent)


async def test_an_http_gateway_call_waits_in_the_servers_inbox_and_runs_once(served: Site, tmp_path: Path) -> None:
    control = ["--url", served.url, "--token", served.tokens["bot"]]
    async with http_gateway(tmp_path, "--gate", "transfer_funds", control=control) as gw, gw.connect() as client:
        call = asyncio.create_task(client.call_tool("transfer_funds", {"amount": 120, "to": "ACME"}))
        card = await served.pending()
        assert card["tool_name"] == "transfer_funds" and not call.done()
        answer = await served.decide(card["target_id"], "approve", {"edited_args": {"amount": 80, "to": "ACME"}})
        assert answer.status_code == 200, answer.text
        result = await asyncio.wait_for(call, 60)
    assert not result.is_error, text(result)
    assert gw.upstream_calls() == [{"tool": "transfer_funds", "args": {"amount": 80, "to": "ACME", "currency": "EUR"}}]


async def test_an_http_gateways_elicitation_is_answered_through_the_servers_inbox(served: Site, tmp_path: Path) -> None:
    """The upstream's question is a ``kind="input"`` request on the server; ana submits its form through the inbox's
    route (the approve endpoint, the form's values as ``edited_args``); the upstream gets exactly those values."""
    control = ["--url", served.url, "--token", served.tokens["bot"]]
    bookings = f"bookings={sys.executable} {ELICIT_UPSTREAM} --calls {{calls}}"
    flags = ("--default", "allow", "--elicit", "person")
    async with (
        http_gateway(tmp_path, *flags, control=control, upstreams=(), upstream_specs=[bookings]) as gw,
        gw.connect() as client,
    ):
        call = asyncio.create_task(client.call_tool("book_table", {"restaurant": "Chez Ana"}))
        card = await served.pending()
        assert card["kind"] == "input" and card["form"]["required"] == ["name", "guests"]
        answer = {"name": "Ana", "guests": 5, "seating": "terrace", "vegetarian": True}
        decided = await served.decide(card["target_id"], "approve", {"edited_args": answer})
        assert decided.status_code == 200, decided.text
        result = await asyncio.wait_for(call, 60)
    assert not result.is_error and "booked Chez Ana for Ana (5)" in text(result)
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "accept", "data": answer}]
