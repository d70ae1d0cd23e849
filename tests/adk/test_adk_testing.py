"""goldfive_core.testing with ADK: the scripted model and the scripted reviewer through a real Runner."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.adk.models.llm_request import LlmRequest
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlChannel, SteeringConfig
from goldfive_core.testing import (
    Approve,
    AwaitableSink,
    Call,
    Edit,
    LetTimeOut,
    Reject,
    ReviewRule,
    ScriptedModel,
    ScriptedReviewer,
    SeenRequest,
)
from tests.adk.conftest import Bank
from tests.adk.scripted import Harness, responses


def _user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def _call(name: str, **args: Any) -> types.Content:
    return types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(name=name, args=args))])


def _answer(name: str, **response: Any) -> types.Content:
    part = types.Part(function_response=types.FunctionResponse(name=name, response=response))
    return types.Content(role="user", parts=[part])


def test_a_seen_request_counts_turns_since_the_user_and_skips_goldfive_notes() -> None:
    contents = [
        _user("hello"),
        types.Content(role="model", parts=[types.Part(text="hi")]),
        _user("pay bob"),
        _call("pay", amount=5),
        _answer("pay", ok=True),
        _user("[goldfive] A person overseeing this run says: hurry"),
        _call("pay", amount=6),
        _answer("pay", ok=False),
    ]
    seen = SeenRequest.of(contents)
    assert (seen.step, seen.user_text) == (2, "pay bob")
    assert seen.since_user == ['{"ok": true}', "[goldfive] A person overseeing this run says: hurry", '{"ok": false}']
    assert seen.last_response == {"ok": False}
    assert [fr.response for fr in seen.function_responses] == [{"ok": True}, {"ok": False}]
    assert "hello" in seen.text and "hurry" in seen.text
    assert SeenRequest.of([_user("go")]).step == 0 and SeenRequest.of([]).last_response is None


async def _answer_of(model: ScriptedModel, contents: list[types.Content]) -> list[types.Part]:
    responses = [r async for r in model.generate_content_async(LlmRequest(contents=contents))]
    assert len(responses) == 1 and responses[0].usage_metadata is not None  # no ADK warning about usage
    content = responses[0].content
    assert content is not None and content.parts is not None
    return content.parts


async def test_the_model_plays_text_calls_parallel_calls_and_functions_then_its_fallback() -> None:
    model = ScriptedModel(
        [
            ["Paying.", Call("pay", {"amount": 5}, id="call-1")],
            [("pay", {"amount": 6}), ("pay", {"amount": 7})],
            lambda seen: f"the bank said {seen.last_response}",
        ]
    )
    first = await _answer_of(model, [_user("go")])
    assert first[0].text == "Paying." and first[1].function_call is not None
    assert (first[1].function_call.name, first[1].function_call.args, first[1].function_call.id) == (
        "pay",
        {"amount": 5},
        "call-1",
    )
    second = await _answer_of(model, [_user("go"), _call("pay", amount=5), _answer("pay", ok=1)])
    assert [p.function_call.args for p in second if p.function_call] == [{"amount": 6}, {"amount": 7}]
    history = [_user("go"), _call("pay"), _answer("pay"), _call("pay"), _answer("pay", ok=2)]
    assert (await _answer_of(model, history))[0].text == "the bank said {'ok': 2}"
    assert (await _answer_of(model, [*history, _call("x")]))[0].text == "done after 3 turns"
    assert [r.step for r in model.requests] == [0, 1, 2, 3]
    unrecorded = ScriptedModel(then="same every time", record=False)
    assert (await _answer_of(unrecorded, [_user("go")]))[0].text == "same every time"
    assert unrecorded.requests == []


async def test_a_bad_turn_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="a scripted reply is text, a Call or a"):
        await _answer_of(ScriptedModel([[42]]), [_user("go")])
    with pytest.raises(TypeError, match="a scripted turn is a reply"):
        await _answer_of(ScriptedModel([42]), [_user("go")])
    with pytest.raises(TypeError, match="got turns twice"):
        ScriptedModel(["a"], turns=["b"])


async def test_one_model_serves_concurrent_sessions(bank: Bank) -> None:
    h = Harness(tools=bank.tools(), turns=[[("lookup", {"account": "x"})], "looked"])
    first, second = await h.new_session(), await h.new_session()
    runs = await asyncio.gather(h.run(first), h.run(second))
    for events in runs:
        assert [fr.response for fr in responses(events)] == [{"account": "x", "balance": 100}]
        assert events[-1].content is not None and events[-1].content.parts is not None
        assert events[-1].content.parts[0].text == "looked"
    assert bank.lookups == ["x", "x"] and len(h.model.requests) == 4


async def test_the_reviewer_decides_each_call_of_an_adk_run_by_rule(bank: Bank) -> None:
    channel = ControlChannel()
    sink = AwaitableSink()
    reviewer = ScriptedReviewer(
        channel,
        [
            ReviewRule(tool="transfer_funds", where=lambda r: r.args["to"] == "eve", then=Reject("eve is not a payee")),
            ReviewRule(
                tool="transfer_funds", where=lambda r: r.args["amount"] > 100, then=Edit({"amount": 100, "to": "ann"})
            ),
            ReviewRule(tool="transfer_funds", where=lambda r: r.args["to"] == "nobody", then=LetTimeOut()),
        ],
        default=Approve(decided_by="ana"),
    )
    plugin = GoldfivePlugin(control=channel, sinks=[sink, reviewer], config=SteeringConfig(tool_approval_timeout_ms=50))
    calls = [
        ("transfer_funds", {"amount": 5, "to": "bob"}),
        ("transfer_funds", {"amount": 500, "to": "ann"}),
        ("transfer_funds", {"amount": 1, "to": "eve"}),
        ("transfer_funds", {"amount": 2, "to": "nobody"}),
    ]
    h = Harness(tools=bank.tools(), turns=[calls, "done"], plugin=plugin)
    events = await h.run(await h.new_session())

    assert sorted(bank.transfers, key=lambda t: t["amount"]) == [
        {"amount": 5, "to": "bob"},
        {"amount": 100, "to": "ann"},
    ]
    results = [dict(fr.response or {}) for fr in responses(events)]
    skipped = sorted((r["reason"], r["detail"][:18]) for r in results if r.get("skipped"))
    assert skipped == [("approval_timeout", "no decision within"), ("user_rejected", "eve is not a payee")]
    reviews = await reviewer.wait_reviewed(4)
    assert sorted(type(r.action).__name__ for r in reviews) == ["Approve", "Edit", "LetTimeOut", "Reject"]
    assert {g.approval_granted.decided_by for g in sink.of("approval_granted")} == {"ana", "scripted-reviewer"}
    # The model was told what happened to each call.
    assert "eve is not a payee" in str([fr.response for fr in h.model.requests[-1].function_responses])
