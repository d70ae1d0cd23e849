"""``goldfive mcp --elicit client``: an upstream's question passed on to the MCP client that made the call.

The upstream is a real MCP SDK server whose tools call ``ctx.elicit`` (tests/mcp/elicit_upstream.py); the client is
the real MCP SDK client on the gateway's stdio, answering with its ``elicitation_callback`` (a client that passes
none declares no elicitation capability). What is checked is what the client was asked, what the upstream got
back (its own record), and whether a person was asked (``goldfive pending`` and the audit log).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp_http_support import elicit_http_session
from mcp_support import Gateway, elicit_gateway, text

from goldfive_core.adapters.mcp_gateway import Upstream
from goldfive_core.adapters.mcp_gateway.input_required import MAX_STATE_CHARS
from goldfive_core.elicitation import MAX_MESSAGE_CHARS
from goldfive_core.errors import ConfigError

BOOKING = {"restaurant": "Chez Ana"}
ANA = {"name": "Ana", "guests": 4, "seating": "terrace", "vegetarian": True}


class Answers:
    """An ``elicitation_callback`` that answers with ``result`` and keeps what it was asked."""

    def __init__(self, result: types.ElicitResult | types.ErrorData | None = None) -> None:
        self.result = result
        self.asked: list[types.ElicitRequestFormParams] = []
        self.never = asyncio.Event()  # with no result: the client never answers

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        if self.result is None:
            await self.never.wait()
            return types.ElicitResult(action="cancel")
        return self.result


def accept(content: dict[str, Any]) -> Answers:
    return Answers(types.ElicitResult(action="accept", content=content))


async def no_input_requests(gw: Gateway) -> bool:
    """Whether nobody was ever asked for input (no ``kind="input"`` request on the audit log)."""
    events = await gw.events()
    asked = [e["approval_requested"] for e in events if "approval_requested" in e]
    return all(a.get("kind") != "input" for a in asked)


async def test_a_client_that_can_answer_is_asked_and_the_upstream_gets_its_answer(tmp_path: Path) -> None:
    answers = accept(ANA)
    async with elicit_gateway(tmp_path, "--elicit", "client", elicitation_callback=answers) as gw:
        assert gw.client is not None
        result = await gw.client.call_tool("book_table", BOOKING)
        assert await gw.pending() == []
    assert not result.is_error and "booked Chez Ana for Ana (4)" in text(result)
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "accept", "data": ANA}]
    [asked] = answers.asked
    assert asked.message == "Booking at Chez Ana: who is it for, and how many?"
    assert asked.requested_schema["required"] == ["name", "guests"]
    assert asked.requested_schema["properties"]["guests"]["maximum"] == 12
    assert await no_input_requests(gw)


async def test_the_clients_decline_and_cancel_reach_the_upstream_distinctly(tmp_path: Path) -> None:
    answers = Answers(types.ElicitResult(action="decline"))
    async with elicit_gateway(tmp_path, "--elicit", "client", elicitation_callback=answers) as gw:
        assert gw.client is not None
        assert "not booked: decline" in text(await gw.client.call_tool("book_table", BOOKING))
        answers.result = types.ElicitResult(action="cancel")
        assert "not booked: cancel" in text(await gw.client.call_tool("book_table", BOOKING))
    assert [c["action"] for c in gw.upstream_calls()] == ["decline", "cancel"]
    assert await no_input_requests(gw)


async def test_a_client_without_the_capability_falls_back_to_a_person(tmp_path: Path) -> None:
    async with elicit_gateway(tmp_path, "--elicit", "client") as gw:  # no callback: no elicitation capability
        assert gw.client is not None
        call = asyncio.create_task(gw.client.call_tool("book_table", BOOKING))
        request = await gw.wait_pending()
        assert request["kind"] == "input" and request["metadata"]["mcp_tool"] == "book_table"
        answered = await gw.goldfive("answer", request["target_id"], "name=Bo", "guests=2", "--by", "ana")
        assert answered.returncode == 0, answered.stderr
        assert "booked Chez Ana for Bo (2)" in text(await asyncio.wait_for(call, 30))
    assert gw.upstream_calls()[0]["data"]["name"] == "Bo"


async def test_a_client_without_the_capability_is_declined_with_client_or_decline(tmp_path: Path) -> None:
    async with elicit_gateway(tmp_path, "--elicit", "client-or-decline") as gw:
        assert gw.client is not None
        result = await gw.client.call_tool("book_table", BOOKING)
        assert await gw.pending() == []
    assert "not booked: decline" in text(result)
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "decline"}]
    assert await no_input_requests(gw)


async def test_by_default_a_person_answers_even_a_client_that_could(tmp_path: Path) -> None:
    answers = accept(ANA)
    async with elicit_gateway(tmp_path, elicitation_callback=answers) as gw:
        assert gw.client is not None
        call = asyncio.create_task(gw.client.call_tool("book_table", BOOKING))
        request = await gw.wait_pending()
        assert request["kind"] == "input"
        declined = await gw.goldfive("answer", request["target_id"], "--decline")
        assert declined.returncode == 0, declined.stderr
        assert "not booked: decline" in text(await asyncio.wait_for(call, 30))
    assert answers.asked == []


async def test_an_elicitation_never_approves_the_gated_call(tmp_path: Path) -> None:
    """A gated call waits for a person whatever the client would answer; a rejection means nobody is asked."""
    answers = accept(ANA)
    flags = ("--elicit", "client", "--gate", "book_table")
    async with elicit_gateway(tmp_path, *flags, elicitation_callback=answers) as gw:
        assert gw.client is not None
        call = asyncio.create_task(gw.client.call_tool("book_table", BOOKING))
        request = await gw.wait_pending()
        assert request["kind"] == "tool" and request["tool_name"] == "book_table"
        assert answers.asked == [] and gw.upstream_calls() == []
        rejected = await gw.goldfive("reject", request["target_id"], "--reason", "not tonight")
        assert rejected.returncode == 0, rejected.stderr
        result = await asyncio.wait_for(call, 30)
        assert result.is_error and "not tonight" in text(result)
        call = asyncio.create_task(gw.client.call_tool("book_table", BOOKING))  # approved: then the client answers
        request = await gw.wait_pending()
        approved = await gw.goldfive("approve", request["target_id"])
        assert approved.returncode == 0, approved.stderr
        assert "booked Chez Ana for Ana (4)" in text(await asyncio.wait_for(call, 30))
    assert len(answers.asked) == 1
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "accept", "data": ANA}]
    granted = [e["approval_granted"] for e in await gw.events() if "approval_granted" in e]
    assert len(granted) == 1 and not granted[0].get("edited_args_json")  # the approval is the person's, unedited


async def test_a_clients_answer_that_does_not_fit_the_form_is_a_cancel(tmp_path: Path) -> None:
    answers = accept({"name": "Ana", "guests": 40})
    async with elicit_gateway(tmp_path, "--elicit", "client", elicitation_callback=answers) as gw:
        assert gw.client is not None
        assert "not booked: cancel" in text(await gw.client.call_tool("book_table", BOOKING))
        answers.result = types.ElicitResult(action="accept", content={**ANA, "card": "4111 1111 1111 1111"})
        assert "not booked: cancel" in text(await gw.client.call_tool("book_table", BOOKING))
        answers.result = types.ErrorData(code=types.INTERNAL_ERROR, message="the client broke")
        assert "not booked: cancel" in text(await gw.client.call_tool("book_table", BOOKING))
    assert [c["action"] for c in gw.upstream_calls()] == ["cancel", "cancel", "cancel"]


async def test_hostile_sizes_from_the_upstream_are_bounded(tmp_path: Path) -> None:
    answers = accept({"f0": "ok"})
    async with elicit_gateway(tmp_path, "--elicit", "client", elicitation_callback=answers) as gw:
        assert gw.client is not None
        long = await gw.client.call_tool("ask_raw", {"message_chars": 200_000, "fields": 1})
        assert "answered: accept" in text(long)
        wide = await gw.client.call_tool("ask_raw", {"message_chars": 10, "fields": 500})
        assert "answered: cancel" in text(wide)  # no small flat form: the client is never asked
    [asked] = answers.asked
    assert len(asked.message) <= MAX_MESSAGE_CHARS and asked.message.startswith("qqq")
    assert [c["action"] for c in gw.upstream_calls()] == ["accept", "cancel"]


async def test_a_client_that_never_answers_is_a_cancel_within_the_timeout(tmp_path: Path) -> None:
    answers = Answers()  # never answers
    flags = ("--elicit", "client", "--approval-timeout", "0.3")
    async with elicit_gateway(tmp_path, *flags, elicitation_callback=answers) as gw:
        assert gw.client is not None
        result = await asyncio.wait_for(gw.client.call_tool("book_table", BOOKING), 60)
        answers.never.set()
    assert "not booked: cancel" in text(result)
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "cancel"}]


async def test_over_http_the_question_reaches_the_client_on_its_calls_stream(tmp_path: Path) -> None:
    answers = accept(ANA)
    async with elicit_http_session(tmp_path, "--elicit", "client", elicitation_callback=answers) as (gw, client):
        result = await client.call_tool("book_table", BOOKING)
        assert await gw.pending() == []
    assert "booked Chez Ana for Ana (4)" in text(result)
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "accept", "data": ANA}]
    assert len(answers.asked) == 1


# -- input_required results (MCP 2026-07-28) ------------------------------------------------------------------
MODERN = "2026-07-28"  # the upstream is spoken to in the per-request envelope, where it asks with input_required


async def test_an_input_required_result_is_answered_by_the_client_and_the_call_continues(tmp_path: Path) -> None:
    answers = accept({"reason": "damaged"})
    flags = ("--elicit", "client")
    async with elicit_gateway(tmp_path, *flags, elicitation_callback=answers, protocol=MODERN) as gw:
        assert gw.client is not None
        result = await gw.client.call_tool("refund", {"order": "A-7"})
    assert not result.is_error and "refund A-7: accept" in text(result)
    [asked] = answers.asked
    assert asked.message == "Why refund A-7?" and asked.requested_schema["required"] == ["reason"]
    assert gw.upstream_calls() == [
        {"tool": "refund", "round": 1},
        {"tool": "refund", "action": "accept", "data": {"reason": "damaged"}, "state": "sealed:A-7:1"},
    ]


async def test_an_input_required_result_is_answered_by_a_person(tmp_path: Path) -> None:
    async with elicit_gateway(tmp_path, protocol=MODERN) as gw:
        assert gw.client is not None
        call = asyncio.create_task(gw.client.call_tool("refund", {"order": "B-2"}))
        request = await gw.wait_pending()
        assert request["kind"] == "input" and request["prompt"] == "Why refund B-2?"
        assert request["metadata"]["mcp_tool"] == "refund"
        answered = await gw.goldfive("answer", request["target_id"], "reason=late", "--by", "ana")
        assert answered.returncode == 0, answered.stderr
        assert "refund B-2: accept" in text(await asyncio.wait_for(call, 30))
    assert gw.upstream_calls()[-1] == {
        "tool": "refund",
        "action": "accept",
        "data": {"reason": "late"},
        "state": "sealed:B-2:1",
    }


async def test_an_input_required_result_the_gateway_cannot_answer_is_a_clear_error(tmp_path: Path) -> None:
    answers = accept({"reason": "again"})
    flags = ("--elicit", "client")
    async with elicit_gateway(tmp_path, *flags, elicitation_callback=answers, protocol=MODERN) as gw:
        assert gw.client is not None
        sampling = await gw.client.call_tool("ask_sampling", {})
        forever = await gw.client.call_tool("ask_forever", {})
    assert sampling.is_error and "'sampling/createMessage', which the gateway does not answer" in text(sampling)
    assert forever.is_error and "still asked for input after 10 rounds" in text(forever)
    made = [c["tool"] for c in gw.upstream_calls()]
    assert made.count("ask_sampling") == 1 and made.count("ask_forever") == 11  # bounded: 1 call + 10 retries


async def test_a_request_state_over_the_bound_is_never_echoed(tmp_path: Path) -> None:
    answers = accept({"reason": "ok"})
    flags = ("--elicit", "client")
    async with elicit_gateway(tmp_path, *flags, elicitation_callback=answers, protocol=MODERN) as gw:
        assert gw.client is not None
        fits = await gw.client.call_tool("ask_big_state", {"chars": 1000})  # echoed: the upstream asks again
        huge = await gw.client.call_tool("ask_big_state", {"chars": MAX_STATE_CHARS + 1})
    assert fits.is_error and "after 10 rounds" in text(fits)
    assert huge.is_error and "requestState that is not a string of at most" in text(huge)
    states = [c["state"] for c in gw.upstream_calls()]
    assert states == [0, *[1000] * 10, 0]  # the huge one was asked once, nobody was asked, nothing echoed
    assert len(answers.asked) == 10


def test_an_upstreams_protocol_is_a_known_modern_revision_on_stdio() -> None:
    assert Upstream(name="shop", command="python", protocol=MODERN).protocol == MODERN
    with pytest.raises(ConfigError, match="protocol must be one of 2026-07-28"):
        Upstream(name="shop", command="python", protocol="2099-01-01")
    with pytest.raises(ConfigError, match="is for a stdio upstream"):
        Upstream(name="shop", url="http://127.0.0.1:9/mcp", protocol=MODERN)
