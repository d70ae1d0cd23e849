"""Agents over HTTP: the held flows against a real ``goldfive serve`` subprocess, with no database on the agent side."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from http_support import AGENT_WAIT_MS, site
from store_support import Backend, await_until

from goldfive_core import AgentTools, InMemorySink, Task, wrap
from goldfive_core.store.execution import GuardedResult, run_approved
from goldfive_core.store.http import HttpChannel


async def test_flow_a_callable_is_approved_over_http(backend: Backend, tmp_path: Path) -> None:
    with site(backend, tmp_path) as s:
        # Trusting the server's key: the decision's signature survives the wire (ControlEvent params_json).
        channel = HttpChannel(s.url, token=s.tokens["bot"], trust_key=s.servers[0].trust_key)
        sink = InMemorySink()

        async def agent(task: Task, tools: AgentTools) -> Any:
            await tools.report_task_started("pay-1")
            return await tools.report_awaiting_approval("pay 10 to bob?", task_id="pay-1", timeout_ms=AGENT_WAIT_MS)

        run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink, sink]).run("go"))
        try:
            card = await s.pending("pay-1")
            assert card["prompt"] == "pay 10 to bob?" and card["state"] == "pending"
            answer = await s.decide("pay-1", body={"reason": "fine"})
            assert answer.status_code == 200, answer.text
            assert answer.json()["verdict"] == "applied"
            result = await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
        assert result.output["decision"] == "approve"
        assert "fine" in result.output["detail"]
        assert not [e for e in sink.events if e.WhichOneof("payload") == "decision_refused"]


async def test_a_tool_call_runs_once_with_the_edit_and_its_replay_returns_the_recorded_result(
    backend: Backend, tmp_path: Path
) -> None:
    with site(backend, tmp_path) as s:
        ran: list[dict[str, Any]] = []

        async def body(call_args: Any) -> dict[str, Any]:
            ran.append(dict(call_args))
            return {"sent": call_args["amount"]}

        def start(channel: HttpChannel) -> asyncio.Task[Any]:
            async def agent(task: Task, tools: AgentTools) -> GuardedResult:
                return await run_approved(
                    tools.session,
                    channel.store,
                    call_id="call-7",
                    tool_name="send_money",
                    args={"to": "bob", "amount": 10},
                    body=body,
                    timeout_ms=AGENT_WAIT_MS,
                    ledger=channel.ledger,
                )

            return asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("go"))

        first = HttpChannel(s.url, token=s.tokens["bot"])
        run = start(first)
        try:
            card = await s.pending("call-7")
            assert card["tool_name"] == "send_money" and ran == []
            answer = await s.decide("call-7", body={"edited_args": {"to": "bob", "amount": 7}})
            assert answer.status_code == 200, answer.text
            result = await asyncio.wait_for(run, 30)
        finally:
            await first.aclose()
        assert result.output.status == "ran" and ran == [{"to": "bob", "amount": 7}]
        store = s.backend.open()
        row = store.execution("call-7")
        assert row is not None and row.state.value == "done" and row.result_json == '{"sent":7}'

        again = HttpChannel(s.url, token=s.tokens["bot"])  # a restarted agent replays the same call
        try:
            replay = await asyncio.wait_for(start(again), 30)
        finally:
            await again.aclose()
        assert replay.output.status == "already_done" and replay.output.result == {"sent": 7}
        assert ran == [{"to": "bob", "amount": 7}]  # at most once


async def test_adk_tool_confirmation_over_http(backend: Backend, tmp_path: Path) -> None:
    pytest.importorskip("google.adk")
    from google.adk.agents.llm_agent import LlmAgent
    from google.adk.apps import App
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.adk.tools.function_tool import FunctionTool
    from google.genai import types

    from goldfive_adk import GoldfivePlugin
    from goldfive_core.testing import Call, ScriptedModel

    ran: list[int] = []

    def transfer(amount: int) -> dict[str, Any]:
        """Move money."""
        ran.append(amount)
        return {"moved": amount}

    with site(backend, tmp_path) as s:
        channel = HttpChannel(s.url, token=s.tokens["bot"])
        plugin = GoldfivePlugin(control=channel, sinks=[channel.sink])
        agent = LlmAgent(
            name="ops",
            model=ScriptedModel([Call("transfer", {"amount": 10}), lambda seen: f"tool said {seen.last_response}"]),
            tools=[FunctionTool(transfer, require_confirmation=True)],
        )
        app = App(name="http_adk", root_agent=agent, plugins=[plugin])
        runner = Runner(app=app, session_service=InMemorySessionService())
        session = await runner.session_service.create_session(app_name=app.name, user_id="u")

        async def invoke() -> list[Any]:
            message = types.Content(role="user", parts=[types.Part(text="pay bob")])
            return [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=message)]

        run = asyncio.create_task(invoke())
        try:
            store = s.backend.open()
            rows = await await_until(lambda: store.approvals(), what="the tool confirmation in the store")
            assert rows[0].tool_name == "transfer" and ran == []
            answer = await s.decide(rows[0].target_id, body={"edited_args": {"amount": 7}})
            assert answer.status_code == 200, answer.text
            events = await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
        assert ran == [7]
        texts = [p.text for e in events for p in (e.content.parts if e.content else []) if p.text]
        assert texts[-1] == "tool said {'moved': 7}"
        decided = store.approvals_for(rows[0].target_id)[0]
        assert (decided.status, decided.decided_by, decided.decided_channel) == ("granted", "ana", "api")
        ledger = store.execution(rows[0].target_id)
        assert ledger is not None and ledger.state.value == "done" and ledger.result_json == '{"moved":7}'


async def test_claude_tool_use_is_rejected_over_http_and_the_model_reads_the_reason(
    backend: Backend, tmp_path: Path
) -> None:
    pytest.importorskip("claude_agent_sdk")
    from goldfive_core.adapters.claude import FakeClaudeCLI, GoldfiveClaude
    from goldfive_core.testing import AwaitableSink
    from tests.claude.claude_support import REFUND, REFUND_SCHEMA, Harness, converse, make_shop

    args = {"order_id": "42", "amount": 30}
    with site(backend, tmp_path) as s:
        channel = HttpChannel(s.url, token=s.tokens["bot"])
        sink = AwaitableSink()
        gf = GoldfiveClaude(
            control=channel, sinks=[channel.sink, sink], gate_tools=[REFUND], tool_schemas={REFUND: REFUND_SCHEMA}
        )
        h = Harness(gf, channel, sink, make_shop(), FakeClaudeCLI(session_id="sess-http"))  # type: ignore[arg-type]

        async def script() -> None:
            use = asyncio.create_task(h.cli.use_tool("toolu_H", REFUND, args))
            await h.sink.wait_for("approval_requested")
            await s.pending("toolu_H")
            answer = await s.decide("toolu_H", approve=False, body={"reason": "refunds over 20 need a manager"})
            assert answer.status_code == 200, answer.text
            done = await use
            assert not done.allowed
            await h.cli.result("not refunded")

        try:
            async with h.run() as run:
                await converse(run, h.cli, "refund order 42", script, limit_s=60)
        finally:
            await channel.aclose()
        assert h.shop.refunds == []
        assert any("ana) rejected" in c and "refunds over 20 need a manager" in c for c in h.cli.model_context)
        rejected = h.sink.of("approval_rejected")[0].approval_rejected
        assert (rejected.target_id, rejected.decided_by) == ("toolu_H", "ana")


async def test_an_agent_trusting_another_key_refuses_the_servers_decision(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    from goldfive_core.signing import load_or_create_signing_key

    stranger, _ = load_or_create_signing_key(tmp_path / "other" / "key.pem")
    with site(sqlite_backend, tmp_path) as s:
        channel = HttpChannel(s.url, token=s.tokens["bot"], trust_key=stranger.trust_key)
        sink = InMemorySink()

        async def agent(task: Task, tools: AgentTools) -> Any:
            await tools.report_task_started("pay-2")
            return await tools.report_awaiting_approval("pay?", task_id="pay-2", timeout_ms=AGENT_WAIT_MS)

        run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink, sink]).run("go"))
        try:
            await s.pending("pay-2")
            answer = await s.decide("pay-2")
            assert answer.status_code == 409 and "the request stays pending" in answer.json()["error"], answer.text
            assert not run.done()
            assert (await s.pending("pay-2"))["state"] == "pending"
        finally:
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
            await channel.aclose()
        assert [
            e.decision_refused.decided_by for e in sink.events if e.WhichOneof("payload") == "decision_refused"
        ] == ["ana"]


async def test_a_message_the_wire_cannot_carry_is_answered_and_the_stream_goes_on(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    from goldfive_core import ControlKind, ControlMessage

    with site(sqlite_backend, tmp_path) as s:
        channel = HttpChannel(s.url, token=s.tokens["bot"])

        async def agent(task: Task, tools: AgentTools) -> Any:
            await tools.report_task_started("pay-3")
            return await tools.report_awaiting_approval("pay?", task_id="pay-3", timeout_ms=AGENT_WAIT_MS)

        run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("go"))
        try:
            card = await s.pending("pay-3")
            store = s.backend.open()
            bad = ControlMessage(ControlKind.APPROVE, {"target_id": "pay-3", "detail": 5})  # detail must be a string
            store.post_control(bad, run_id=card["run_id"])
            ack = await await_until(lambda: store.get_ack(bad.id), what="the server's answer to the bad message")
            assert not ack.ok and "quarantined" in ack.detail and "cannot travel" in ack.detail
            assert not run.done()
            answer = await s.decide("pay-3")
            assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
            result = await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
        assert result.output["decision"] == "approve"
