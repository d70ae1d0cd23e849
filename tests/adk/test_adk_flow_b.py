"""Flow B through a real ADK App/Runner: a person confirms a require_confirmation tool in-process."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import (
    AckResult,
    ControlChannel,
    ControlKind,
    ControlMessage,
    DriftKind,
    DriftSeverity,
    SteeringConfig,
    args_digest,
)
from goldfive_core.pb.v1 import events_pb2, types_pb2
from goldfive_core.testing import AwaitableSink
from tests.adk.conftest import Bank
from tests.adk.scripted import Harness, call_names, responses

TRANSFER = ("transfer_funds", {"amount": 5, "to": "bob"})


async def _requested(sink: AwaitableSink, count: int = 1) -> list[events_pb2.ApprovalRequested]:
    return [e.approval_requested for e in await sink.wait_for("approval_requested", count=count)]


async def _decide(channel: ControlChannel, kind: ControlKind, wait: float | None = 5.0, **payload: Any) -> Any:
    return await channel.send(ControlMessage(kind, payload), timeout=wait)


async def test_approve_runs_the_body_exactly_once_with_no_native_confirmation(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    h = Harness(tools=bank.tools(), turns=[[TRANSFER], "sent"], plugin=plugin)
    sid = await h.new_session()

    async def approve() -> None:
        (req,) = await _requested(sink)
        ack = await _decide(channel, ControlKind.APPROVE, target_id=req.target_id, decided_by="ana")
        assert ack.ok, ack.detail

    decider = asyncio.create_task(approve())
    events = await h.run(sid)
    await decider

    assert bank.transfers == [{"amount": 5, "to": "bob"}]
    persisted = await h.session_events(sid)
    assert "adk_request_confirmation" not in call_names(persisted)
    assert not any(e.actions.requested_tool_confirmations for e in persisted)
    (fc,) = [fc for e in events for fc in e.get_function_calls()]
    (req,) = await _requested(sink)
    run_started = sink.of("run_started")[0].run_started
    assert req.kind == "tool"
    assert req.target_id == fc.id  # the id the client saw
    assert req.task_id == run_started.root_task_id == events[0].invocation_id
    assert dict(req.metadata)["tool_name"] == "transfer_funds"
    assert json.loads(dict(req.metadata)["args_json"]) == {"amount": 5, "to": "bob"}
    assert dict(req.metadata)["args_json"] == '{"amount":5,"to":"bob"}'  # canonical
    assert req.args_digest == args_digest("transfer_funds", {"amount": 5, "to": "bob"})
    granted = sink.of("approval_granted")[0].approval_granted
    assert (granted.target_id, granted.decided_by) == (fc.id, "ana")
    assert [r.response for r in responses(events)] == [{"ok": True, "amount": 5, "to": "bob"}]
    assert sink.kinds()[-1] == "run_completed"


async def test_a_body_cannot_change_the_confirmation_of_its_approved_call_and_the_next_approved_call_runs(
    plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    ran: list[tuple[int, bool, str]] = []

    def pay(n: int, tool_context: ToolContext) -> dict[str, Any]:
        """Pay n; tries to withdraw the confirmation it was approved with."""
        confirmation = tool_context.tool_confirmation
        assert confirmation is not None
        try:
            confirmation.confirmed = False
            refused = ""
        except Exception as exc:  # the approved call's confirmation cannot be changed
            refused = type(exc).__name__
        ran.append((n, tool_context.tool_confirmation.confirmed, refused))
        return {"paid": n}

    turns = [[("pay", {"n": 1})], [("pay", {"n": 2})], "done"]
    h = Harness(tools=[FunctionTool(pay, require_confirmation=True)], turns=turns, plugin=plugin)
    sid = await h.new_session()

    async def approve_both() -> None:
        for count in (1, 2):
            req = (await _requested(sink, count))[-1]
            assert (await _decide(channel, ControlKind.APPROVE, target_id=req.target_id)).ok

    decider = asyncio.create_task(approve_both())
    await h.run(sid)
    await decider

    assert ran == [(1, True, "ValidationError"), (2, True, "ValidationError")]
    assert [r.response for r in responses(await h.session_events(sid))] == [{"paid": 1}, {"paid": 2}]


async def test_reject_never_runs_the_body_and_tells_the_model(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    h = Harness(tools=bank.tools(), turns=[[TRANSFER], "understood"], plugin=plugin)
    sid = await h.new_session()

    async def reject() -> None:
        (req,) = await _requested(sink)
        ack = await _decide(channel, ControlKind.REJECT, target_id=req.target_id, detail="not to bob")
        assert ack.ok, ack.detail

    decider = asyncio.create_task(reject())
    await h.run(sid)
    await decider

    assert bank.transfers == []
    expected = {"skipped": True, "reason": "user_rejected", "tool_name": "transfer_funds", "detail": "not to bob"}
    (seen,) = h.model.requests[-1].function_responses
    assert seen.response == expected
    assert sink.of("approval_rejected")[0].approval_rejected.detail == "not to bob"
    assert "adk_request_confirmation" not in call_names(await h.session_events(sid))


async def test_callable_predicate_asks_only_when_it_says_so(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    def big(amount: int, to: str) -> bool:
        return amount > 100

    turns = [[("transfer_funds", {"amount": 5, "to": "a"})], [("transfer_funds", {"amount": 500, "to": "b"})], "ok"]
    h = Harness(tools=bank.tools(confirm=big), turns=turns, plugin=plugin)
    sid = await h.new_session()

    async def approve() -> None:
        (req,) = await _requested(sink)
        assert json.loads(dict(req.metadata)["args_json"])["amount"] == 500
        assert (await _decide(channel, ControlKind.APPROVE, target_id=req.target_id)).ok

    decider = asyncio.create_task(approve())
    await h.run(sid)
    await decider
    assert bank.transfers == [{"amount": 5, "to": "a"}, {"amount": 500, "to": "b"}]
    assert len(sink.of("approval_requested")) == 1


async def test_edited_args_run_the_tool_with_them(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    h = Harness(tools=bank.tools(), turns=[[TRANSFER], "sent"], plugin=plugin)
    sid = await h.new_session()

    async def edit() -> None:
        (req,) = await _requested(sink)
        ack = await _decide(
            channel, ControlKind.APPROVE, target_id=req.target_id, edited_args={"amount": 3, "to": "bo"}
        )
        assert ack.ok, ack.detail

    decider = asyncio.create_task(edit())
    events = await h.run(sid)
    await decider
    assert bank.transfers == [{"amount": 3, "to": "bo"}]
    assert [r.response for r in responses(events)] == [{"ok": True, "amount": 3, "to": "bo"}]
    assert json.loads(sink.of("approval_granted")[0].approval_granted.edited_args_json) == {"amount": 3, "to": "bo"}


@pytest.mark.parametrize(
    ("edited", "words"),
    [
        ({"amount": 3, "to": "bo", "memo": "x"}, "unknown parameter(s) 'memo'"),
        ({"amount": 3}, "missing required parameter(s) 'to'"),
        ({"amount": "three", "to": "bo"}, "'amount' must be int"),
    ],
)
async def test_edited_args_that_do_not_fit_get_a_failure_and_the_request_stays_pending(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink, edited: dict[str, Any], words: str
) -> None:
    h = Harness(tools=bank.tools(), turns=[[TRANSFER], "sent"], plugin=plugin)
    sid = await h.new_session()

    async def edit_then_approve() -> None:
        (req,) = await _requested(sink)
        bad = await _decide(channel, ControlKind.APPROVE, target_id=req.target_id, edited_args=edited)
        assert bad.result is AckResult.FAILURE
        assert words in bad.detail and "stays pending" in bad.detail
        assert sink.of("approval_granted") == []
        good = await _decide(channel, ControlKind.APPROVE, target_id=req.target_id)
        assert good.ok, good.detail

    decider = asyncio.create_task(edit_then_approve())
    await h.run(sid)
    await decider
    assert bank.transfers == [{"amount": 5, "to": "bob"}]


async def test_timeout_skips_the_tool_tells_the_model_and_emits_a_warning_drift(
    bank: Bank, channel: ControlChannel, sink: AwaitableSink
) -> None:
    plugin = GoldfivePlugin(control=channel, sinks=[sink], config=SteeringConfig(tool_approval_timeout_ms=30))
    h = Harness(tools=bank.tools(), turns=[[TRANSFER], "gave up"], plugin=plugin)
    sid = await h.new_session()
    await h.run(sid)

    assert bank.transfers == []
    (seen,) = h.model.requests[-1].function_responses
    assert seen.response is not None
    assert seen.response["skipped"] is True and seen.response["reason"] == "approval_timeout"
    assert seen.response["tool_name"] == "transfer_funds"
    (timed_out,) = [e.approval_timed_out for e in sink.of("approval_timed_out")]
    assert timed_out.timeout_ms == 30 and timed_out.still_open is False
    (drift,) = [e.drift_detected for e in sink.of("drift_detected")]
    assert drift.kind == DriftKind.HUMAN_INTERVENTION_REQUIRED and drift.severity == DriftSeverity.WARNING
    assert not channel.bound  # the run is over: nothing is left to approve
    late = await _decide(channel, ControlKind.APPROVE, wait=0.01, target_id=timed_out.target_id)
    assert not late.ok
    assert bank.transfers == []


async def test_without_a_channel_the_native_flow_keeps_the_tool_from_running(bank: Bank, sink: AwaitableSink) -> None:
    plugin = GoldfivePlugin(sinks=[sink])
    h = Harness(tools=bank.tools(), turns=[[TRANSFER], "sent"], plugin=plugin)
    sid = await h.new_session()
    events = await h.run(sid)

    assert bank.transfers == []
    (confirm,) = [fc for e in events for fc in e.get_function_calls() if fc.name == "adk_request_confirmation"]
    # goldfive reports ADK's own request, and the run ends waiting for a person, not COMPLETED.
    assert [r.approval_requested.target_id for r in sink.of("approval_requested")] == [
        confirm.args["originalFunctionCall"]["id"]
    ]
    assert sink.kinds()[-1] == "run_aborted"
    assert sink.of("run_aborted")[0].run_aborted.status == types_pb2.RUN_STATUS_DETACHED

    # The person says yes through ADK's own resume; the plugin stays out of the way and the body runs once.
    answer = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    name="adk_request_confirmation", id=confirm.id, response={"confirmed": True}
                )
            )
        ],
    )
    resumed = [e async for e in h.runner.run_async(user_id="u", session_id=sid, new_message=answer)]
    assert bank.transfers == [{"amount": 5, "to": "bob"}]
    assert len(sink.of("approval_requested")) == 1 and len(sink.of("approval_granted")) == 1
    # The resumed invocation (same invocation id) is a second goldfive run, watched like the first.
    starts = sink.of("run_started")
    assert len(starts) == 2 and starts[1].run_started.root_task_id == resumed[0].invocation_id
    assert starts[0].run_id != starts[1].run_id
    assert sink.kinds()[-1] == "run_completed" and plugin.sessions == []


@pytest.mark.parametrize("order", ["first_then_second", "second_then_first"])
async def test_two_parallel_calls_pending_at_once_decided_in_either_order(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink, order: str
) -> None:
    calls = [("transfer_funds", {"amount": 1, "to": "a"}), ("transfer_funds", {"amount": 2, "to": "b"})]
    h = Harness(tools=bank.tools(), turns=[calls, "both done"], plugin=plugin)
    sid = await h.new_session()

    async def decide() -> None:
        reqs = await _requested(sink, count=2)
        by_to = {json.loads(dict(r.metadata)["args_json"])["to"]: r.target_id for r in reqs}
        assert plugin.sessions[0].approvals.statistics().waiters == 2  # both wait at the same time
        first, second = ("a", "b") if order == "first_then_second" else ("b", "a")
        assert (await _decide(channel, ControlKind.APPROVE, target_id=by_to[first])).ok
        assert (await _decide(channel, ControlKind.REJECT, target_id=by_to[second], detail="no")).ok

    decider = asyncio.create_task(decide())
    events = await h.run(sid)
    await decider
    first_to = "a" if order == "first_then_second" else "b"
    assert bank.transfers == [{"amount": 1 if first_to == "a" else 2, "to": first_to}]
    reasons = sorted(str((r.response or {}).get("reason", "ran")) for r in responses(events))
    assert reasons == ["ran", "user_rejected"]


async def test_a_decision_sent_when_the_client_sees_the_call_is_applied(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    h = Harness(tools=bank.tools(), turns=[[TRANSFER], "sent"], plugin=plugin)
    sid = await h.new_session()
    message = types.Content(role="user", parts=[types.Part(text="go")])
    acks = []
    async for event in h.runner.run_async(user_id="u", session_id=sid, new_message=message):
        for fc in event.get_function_calls():
            assert sink.of("approval_requested") == []  # the plugin has not asked yet
            acks.append(await _decide(channel, ControlKind.APPROVE, target_id=fc.id, decided_by="fast"))
    (ack,) = acks
    assert ack.ok and "kept" in ack.detail
    assert bank.transfers == [{"amount": 5, "to": "bob"}]
    assert sink.of("approval_granted")[0].approval_granted.decided_by == "fast"


async def test_an_early_decision_is_kept_when_a_callable_predicate_says_the_call_needs_it(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    def big(amount: int, to: str) -> bool:
        return amount > 100

    turns = [[("transfer_funds", {"amount": 5, "to": "a"}), ("transfer_funds", {"amount": 500, "to": "b"})], "ok"]
    h = Harness(tools=bank.tools(confirm=big), turns=turns, plugin=plugin)
    sid = await h.new_session()
    message = types.Content(role="user", parts=[types.Part(text="go")])
    acks = {}
    async for event in h.runner.run_async(user_id="u", session_id=sid, new_message=message):
        for fc in event.get_function_calls():
            acks[(fc.args or {})["amount"]] = await _decide(channel, ControlKind.REJECT, target_id=fc.id, detail="no")
    assert acks[500].ok and "kept" in acks[500].detail
    assert not acks[5].ok  # that call needs no confirmation: nothing to decide
    assert bank.transfers == [{"amount": 5, "to": "a"}]


async def test_an_early_decision_is_not_kept_for_a_call_that_needs_no_confirmation(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel
) -> None:
    h = Harness(tools=bank.tools(), turns=[[("lookup", {"account": "x"})], "ok"], plugin=plugin)
    sid = await h.new_session()
    message = types.Content(role="user", parts=[types.Part(text="go")])
    acks = []
    async for event in h.runner.run_async(user_id="u", session_id=sid, new_message=message):
        for fc in event.get_function_calls():
            acks.append(await _decide(channel, ControlKind.APPROVE, target_id=fc.id))
    assert [a.ok for a in acks] == [False]
    assert "unknown target_id" in acks[0].detail
    assert bank.lookups == ["x"]


async def test_abort_signal_while_waiting_closes_the_record_as_cancelled(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    h = Harness(tools=bank.tools(), turns=[[TRANSFER], "sent"], plugin=plugin)
    sid = await h.new_session()
    abort = asyncio.Event()

    async def abort_when_asked() -> None:
        await _requested(sink)
        abort.set()

    aborter = asyncio.create_task(abort_when_asked())
    events = await h.run(sid, abort_signal=abort)
    await aborter

    assert bank.transfers == []
    (cancelled,) = [e.approval_cancelled for e in sink.of("approval_cancelled")]
    assert cancelled.target_id == sink.of("approval_requested")[0].approval_requested.target_id
    assert any(e.error_code == "INVOCATION_ABORTED" for e in events)
    assert plugin.sessions == [] and not channel.bound
    aborted = sink.of("run_aborted")[0].run_aborted
    assert aborted.status == types_pb2.RUN_STATUS_CANCELLED
    later = await _decide(channel, ControlKind.APPROVE, wait=0.01, target_id=cancelled.target_id)
    assert not later.ok


async def test_cancelling_the_consumer_while_waiting_leaves_nothing_registered(
    bank: Bank, plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    h = Harness(tools=bank.tools(), turns=[[TRANSFER], "sent"], plugin=plugin)
    sid = await h.new_session()
    consumer = asyncio.create_task(h.run(sid))
    await _requested(sink)
    session = plugin.sessions[0]
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    await sink.wait_for("run_aborted")

    assert bank.transfers == []
    assert len(sink.of("approval_cancelled")) == 1
    assert session.approvals.statistics().live == 0
    assert plugin.sessions == [] and not channel.bound
    assert sink.of("run_aborted")[0].run_aborted.status == types_pb2.RUN_STATUS_CANCELLED


async def test_a_failing_sink_never_fails_the_run(bank: Bank, channel: ControlChannel, sink: AwaitableSink) -> None:
    class Broken:
        def emit(self, event: events_pb2.Event) -> None:
            raise RuntimeError("disk full")

    plugin = GoldfivePlugin(control=channel, sinks=[Broken(), sink])
    h = Harness(tools=bank.tools(), turns=[[TRANSFER], "sent"], plugin=plugin)
    sid = await h.new_session()

    async def approve() -> None:
        (req,) = await _requested(sink)
        assert (await _decide(channel, ControlKind.APPROVE, target_id=req.target_id)).ok

    decider = asyncio.create_task(approve())
    events = await h.run(sid)
    await decider
    assert bank.transfers == [{"amount": 5, "to": "bob"}]
    assert events[-1].is_final_response() and sink.kinds()[-1] == "run_completed"


async def test_non_function_tools_with_confirmation_are_asked_too(
    plugin: GoldfivePlugin, channel: ControlChannel, sink: AwaitableSink
) -> None:
    from google.adk.tools.base_tool import BaseTool

    ran: list[dict[str, Any]] = []

    class Wipe(BaseTool):
        def __init__(self) -> None:
            super().__init__(name="wipe", description="Wipe a disk.")

        def _get_declaration(self) -> types.FunctionDeclaration:
            return types.FunctionDeclaration(
                name="wipe",
                description="Wipe a disk.",
                parameters_json_schema={
                    "type": "object",
                    "properties": {"disk": {"type": "string"}},
                    "required": ["disk"],
                },
            )

        async def check_require_confirmation(self, args: dict[str, Any], tool_context: ToolContext) -> bool:
            return True

        async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
            ran.append(args)
            return {"wiped": args["disk"]}

    h = Harness(tools=[Wipe()], turns=[[("wipe", {"disk": "sda"})], "ok"], plugin=plugin)
    sid = await h.new_session()

    async def decide() -> None:
        (req,) = await _requested(sink)
        bad = await _decide(channel, ControlKind.APPROVE, target_id=req.target_id, edited_args={"disc": "sdb"})
        assert not bad.ok and "'disc'" in bad.detail
        assert (await _decide(channel, ControlKind.APPROVE, target_id=req.target_id, edited_args={"disk": "sdb"})).ok

    decider = asyncio.create_task(decide())
    await h.run(sid)
    await decider
    assert ran == [{"disk": "sdb"}]
