"""An upstream's ``elicitation/create`` answered by a person through ``goldfive mcp`` (no mocks of MCP).

The upstream is a real MCP SDK server whose tool calls ``ctx.elicit`` (tests/mcp/elicit_upstream.py); the client
is the real MCP SDK client on the gateway's stdio; the person answers from another process with ``goldfive
answer`` on the same store. What is checked is what the upstream got back (its own record), what the model reads
and what the audit log says.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from mcp_support import Gateway, elicit_gateway, text


async def _asked(gw: Gateway) -> tuple[asyncio.Task[Any], dict[str, Any]]:
    call = asyncio.create_task(gw.client.call_tool("book_table", {"restaurant": "Chez Ana"}))
    return call, await gw.wait_pending()


async def test_an_elicitation_is_a_form_answered_from_the_cli(tmp_path: Path) -> None:
    async with elicit_gateway(tmp_path) as gw:
        call, request = await _asked(gw)
        assert request["kind"] == "input"
        assert request["prompt"] == "Booking at Chez Ana: who is it for, and how many?"
        assert request["metadata"]["mcp_upstream"] == "bookings"
        assert request["metadata"]["mcp_tool"] == "book_table"
        assert request["metadata"]["mcp_session"].startswith("mcp-session-")
        form = json.loads(request["metadata"]["input_schema"])
        assert form["required"] == ["name", "guests"] and form["properties"]["guests"]["maximum"] == 12
        shown = await gw.goldfive("show", request["target_id"])
        assert "guests (integer, required, 1..12)" in shown.stdout, shown.stdout
        listed = await gw.goldfive("pending")
        assert "fields: name*, guests*, seating, vegetarian" in listed.stdout, listed.stdout
        answered = await gw.goldfive(
            "answer", request["target_id"], "name=Ana", "guests=4", "seating=terrace", "vegetarian=yes", "--by", "ana"
        )
        assert answered.returncode == 0, answered.stderr
        result = await asyncio.wait_for(call, 30)
        shown = await gw.goldfive("show", request["target_id"])  # the answer as recorded
        recorded = '{"guests":4,"name":"Ana","seating":"terrace","vegetarian":true}'
        assert f"answer     {recorded}" in shown.stdout, shown.stdout
    assert not result.is_error and "booked Chez Ana for Ana (4)" in text(result)
    data = {"name": "Ana", "guests": 4, "seating": "terrace", "vegetarian": True}
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "accept", "data": data}]
    granted = [e["approval_granted"] for e in await gw.events() if "approval_granted" in e]
    assert [(g["decided_by"], g["channel"], json.loads(g["edited_args_json"])) for g in granted] == [
        ("ana", "cli", data)
    ]


async def test_an_answer_that_does_not_fit_is_refused_naming_the_field(tmp_path: Path) -> None:
    async with elicit_gateway(tmp_path) as gw:
        call, request = await _asked(gw)
        too_many = await gw.goldfive("answer", request["target_id"], "name=Ana", "guests=40")
        assert too_many.returncode == 2 and "'guests' must be at most 12" in too_many.stderr
        missing = await gw.goldfive("answer", request["target_id"], "guests=2")
        assert missing.returncode == 2 and "'name' is required and missing" in missing.stderr
        unknown = await gw.goldfive("answer", request["target_id"], "name=Ana", "guests=2", "card=4111")
        assert unknown.returncode == 2 and "'card' is not a field of this form" in unknown.stderr
        assert (await gw.pending())[0]["target_id"] == request["target_id"]  # still asked
        fine = await gw.goldfive("answer", request["target_id"], "name=Bo", "guests=2")
        assert fine.returncode == 0, fine.stderr
        await asyncio.wait_for(call, 30)
    assert gw.upstream_calls()[0]["data"]["name"] == "Bo"


async def test_decline_and_cancel_reach_the_upstream_distinctly(tmp_path: Path) -> None:
    async with elicit_gateway(tmp_path) as gw:
        call, request = await _asked(gw)
        declined = await gw.goldfive("answer", request["target_id"], "--decline", "--by", "ana")
        assert declined.returncode == 0, declined.stderr
        assert "not booked: decline" in text(await asyncio.wait_for(call, 30))
        call, request = await _asked(gw)
        cancelled = await gw.goldfive("answer", request["target_id"], "--cancel", "--by", "bo")
        assert cancelled.returncode == 0, cancelled.stderr
        assert "not booked: cancel" in text(await asyncio.wait_for(call, 30))
        shown = await gw.goldfive("show", request["target_id"])  # the record says how the form was turned down
        assert "by bo" in shown.stdout and "detail     cancelled" in shown.stdout, shown.stdout
    assert [c["action"] for c in gw.upstream_calls()] == ["decline", "cancel"]
    rejected = [e["approval_rejected"] for e in await gw.events() if "approval_rejected" in e]
    assert [(r["decided_by"], r.get("answer", "")) for r in rejected] == [("ana", ""), ("bo", "cancel")]


async def test_no_answer_in_time_is_a_cancel(tmp_path: Path) -> None:
    async with elicit_gateway(tmp_path, "--approval-timeout", "0.3") as gw:
        result = await gw.client.call_tool("book_table", {"restaurant": "Chez Ana"})
        assert "not booked: cancel" in text(result)
        assert await gw.pending() == []
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "cancel"}]
    timed_out = [e for e in await gw.events() if "approval_timed_out" in e]
    assert len(timed_out) == 1
