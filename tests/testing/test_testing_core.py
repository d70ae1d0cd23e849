"""goldfive_core.testing without ADK: the awaitable sink and the scripted reviewer on a callable agent."""

from __future__ import annotations

import asyncio

import pytest

from goldfive_core import ControlChannel, ControlKind, ControlMessage, Drift, DriftKind, DriftSeverity, wrap
from goldfive_core.events import EventEmitter
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.testing import (
    Approve,
    AwaitableSink,
    LetTimeOut,
    Reject,
    Review,
    ReviewRequest,
    ReviewRule,
    ScriptedReviewer,
)


def _requested(target: str) -> events_pb2.ApprovalRequested:
    return events_pb2.ApprovalRequested(target_id=target, kind="task", prompt=f"ok {target}?")


async def test_awaitable_sink_waits_by_name_predicate_and_count() -> None:
    sink = AwaitableSink()
    emitter = EventEmitter("run-1", [sink])
    emitter.emit(_requested("a"))
    assert (await sink.first("approval_requested")).approval_requested.target_id == "a"  # already there
    second = asyncio.create_task(sink.nth("approval_requested", 2))
    by_rule = asyncio.create_task(sink.first(lambda e: e.approval_requested.target_id == "c"))
    await asyncio.sleep(0)
    assert not second.done() and not by_rule.done()
    emitter.emit(_requested("b"))
    assert (await second).approval_requested.target_id == "b"
    assert not by_rule.done()
    emitter.emit(_requested("c"))
    assert (await by_rule).sequence == 2
    assert [p.target_id for p in sink.payloads("approval_requested")] == ["a", "b", "c"]
    with pytest.raises(TimeoutError):
        await sink.first("run_completed", timeout=0.01)
    with pytest.raises(ValueError, match="n must be 1 or more"):
        await sink.nth("run_completed", 0)


async def test_awaitable_sink_lists_drifts_by_name() -> None:
    sink = AwaitableSink()

    async def agent(task, tools):
        await runner.steerer.handle_drift(Drift(DriftKind.TASK_TIMEOUT, DriftSeverity.WARNING, "slow"))

    runner = wrap(agent, sinks=[sink])
    await runner.run()
    assert sink.drifts() == [("TASK_TIMEOUT", "WARNING", 0)]


def _asking_agent(*prompts: str, timeout_ms: int = 60_000):
    async def agent(task, tools):
        answers = []
        for prompt in prompts:
            answers.append(await tools.report_awaiting_approval(prompt, timeout_ms=timeout_ms))
        return answers

    return agent


async def test_the_reviewer_answers_each_request_by_the_first_matching_rule() -> None:
    channel = ControlChannel()
    reviewer = ScriptedReviewer(
        channel,
        [
            ReviewRule(kind="task", where=lambda r: "EUR" in r.prompt, then=Reject("too expensive")),
            ReviewRule(where=lambda r: r.prompt.startswith("maybe"), times=1, then=Reject("not the first time")),
            ReviewRule(kind="tool", then=Reject("never a tool")),
        ],
        default=Approve("fine", decided_by="ana"),
    )
    sink = AwaitableSink()
    runner = wrap(
        _asking_agent("spend 5 EUR", "maybe?", "maybe again?", "read a file"), control=channel, sinks=[sink, reviewer]
    )
    result = await runner.run()

    assert [(a["decision"], a["detail"]) for a in result.output] == [
        ("reject", "too expensive"),
        ("reject", "not the first time"),
        ("approve", "fine"),  # the second rule was used up
        ("approve", "fine"),
    ]
    assert result.output[2]["decided_by"] == "ana"
    assert [r.prompt for r in reviewer.seen] == ["spend 5 EUR", "maybe?", "maybe again?", "read a file"]
    reviews = await reviewer.wait_reviewed(4)
    assert all(r.ack is not None and r.ack.ok for r in reviews)
    assert reviews[0].message is not None and reviews[0].message.kind is ControlKind.REJECT
    assert [g.approval_rejected.decided_by for g in sink.of("approval_rejected")] == ["scripted-reviewer"] * 2


async def test_let_time_out_leaves_the_request_to_its_timeout() -> None:
    channel = ControlChannel()
    reviewer = ScriptedReviewer(channel, default=LetTimeOut())
    runner = wrap(_asking_agent("anyone?", timeout_ms=20), control=channel, sinks=[reviewer])
    result = await runner.run()
    assert result.output[0]["decision"] == "timeout"
    (review,) = await reviewer.wait_reviewed(1)
    assert isinstance(review.action, LetTimeOut) and review.message is None and review.ack is None


async def test_a_decision_the_run_refuses_is_recorded_with_its_ack() -> None:
    channel = ControlChannel()
    # A rule may compute its action from the request.
    first = ScriptedReviewer(channel, [ReviewRule(then=lambda r: Approve(f"seen {r.prompt}"))], name="ana")
    second = ScriptedReviewer(channel, default=Reject("no"), name="bo")
    result = await wrap(_asking_agent("go?"), control=channel, sinks=[first, second]).run()
    assert result.output[0]["decision"] == "approve" and result.output[0]["detail"] == "seen go?"
    (won,) = await first.wait_reviewed(1)
    (lost,) = await second.wait_reviewed(1)
    assert won.ack is not None and won.ack.ok
    assert lost.ack is not None and not lost.ack.ok and "already decided" in lost.ack.detail


class _Broken:
    async def send(self, msg: ControlMessage) -> object:
        raise ConnectionError("the line is down")


async def test_a_failing_transport_is_recorded_not_raised() -> None:
    reviewer = ScriptedReviewer(_Broken())  # type: ignore[arg-type]
    sink = AwaitableSink()
    emitter = EventEmitter("run-1", [reviewer, sink])
    emitter.emit(_requested("x"))
    (review,) = await reviewer.wait_reviewed(1)
    assert isinstance(review, Review) and review.ack is None
    assert review.error == "ConnectionError: the line is down"


async def test_aclose_stops_answers_still_in_flight() -> None:
    class Slow:
        async def send(self, msg: ControlMessage) -> object:
            await asyncio.Event().wait()  # never answers

    reviewer = ScriptedReviewer(Slow())  # type: ignore[arg-type]
    EventEmitter("run-1", [reviewer]).emit(_requested("x"))
    await asyncio.sleep(0)
    await reviewer.aclose()
    assert reviewer.reviews == []


def _event_with(payload: events_pb2.ApprovalRequested) -> events_pb2.Event:
    event = events_pb2.Event(run_id="run-1", session_id="s-1")
    event.approval_requested.CopyFrom(payload)
    return event


def test_a_review_request_reads_the_tool_call_and_refuses_other_events() -> None:
    payload = events_pb2.ApprovalRequested(
        target_id="adk-1",
        kind="tool",
        args_digest="sha256:x",
        timeout_ms=5,
        metadata={"tool_name": "pay", "args_json": '{"amount":5}'},
    )
    request = ReviewRequest.from_event(_event_with(payload))
    assert (request.tool_name, dict(request.args), request.run_id, request.session_id) == (
        "pay",
        {"amount": 5},
        "run-1",
        "s-1",
    )
    assert ReviewRule(tool="pa*", kind="tool", then=Approve()).matches(request)
    assert not ReviewRule(tool="pay", kind="task", then=Approve()).matches(request)
    payload.metadata["args_json"] = "not json"
    assert ReviewRequest.from_event(_event_with(payload)).args == {}
    with pytest.raises(ValueError, match="not an approval_requested event"):
        ReviewRequest.from_event(events_pb2.Event(run_id="r"))
