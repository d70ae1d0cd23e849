"""Tool approvals through the real SDK client and the fake CLI: approve, edit, reject, timeout, many, cancel."""

from __future__ import annotations

import asyncio

from claude_agent_sdk import ResultMessage

from goldfive_core import ControlKind, DriftKind, DriftSeverity, SteeringConfig, args_digest, canonical_json
from goldfive_core.adapters.claude import FakeToolUse
from tests.claude.claude_support import REFUND, REFUND_SCHEMA, Harness, converse, make_harness

ARGS = {"order_id": "42", "amount": 30}


async def test_approve_runs_the_tool_and_events_match_the_adk_shape(h: Harness) -> None:
    uses: list[FakeToolUse] = []

    async def script() -> None:
        task = asyncio.create_task(h.cli.use_tool("toolu_A", REFUND, ARGS))
        (requested,) = await h.sink.wait_for("approval_requested")
        req = requested.approval_requested
        assert (req.target_id, req.kind) == ("toolu_A", "tool")
        assert dict(req.metadata) == {
            "tool_name": REFUND,
            "args_json": canonical_json(ARGS),
            "args_schema": canonical_json(REFUND_SCHEMA),  # so a decider outside can check an edit
        }
        assert req.args_digest == args_digest(REFUND, ARGS)
        assert h.shop.refunds == []  # the body waits for the person
        ack = await h.control(ControlKind.APPROVE, target_id="toolu_A", decided_by="ana", args_digest=req.args_digest)
        assert ack.ok, ack.detail
        uses.append(await task)
        await h.cli.result("refunded")

    async with h.run() as run:
        messages = await converse(run, h.cli, "refund order 42", script)

    assert uses[0].allowed and uses[0].ran_with == ARGS
    assert h.shop.refunds == [ARGS]
    assert "refunded 30 on order 42" in h.cli.model_context
    granted = h.sink.of("approval_granted")[0]
    assert (granted.approval_granted.target_id, granted.approval_granted.decided_by) == ("toolu_A", "ana")
    assert isinstance(messages[-1], ResultMessage)
    assert run.result is not None and run.result.status == "COMPLETED" and run.result.output == "refunded"
    assert h.sink.kinds()[0] == "run_started" and h.sink.kinds()[-1] == "run_completed"
    assert h.sink.events[-1].session_id == "sess-claude-1"  # the SDK session id, once known
    assert h.gf.router.sessions == []  # detached at the end


async def test_approve_with_edits_changes_the_tool_input_and_bad_edits_are_refused(h: Harness) -> None:
    edited = {"order_id": "42", "amount": 5}

    async def script() -> None:
        task = asyncio.create_task(h.cli.use_tool("toolu_E", REFUND, ARGS))
        await h.sink.wait_for("approval_requested")
        bad = await h.control(ControlKind.APPROVE, target_id="toolu_E", edited_args={"order_id": "42", "amount": -1})
        assert not bad.ok and "input schema" in bad.detail and "stays pending" in bad.detail
        ack = await h.control(ControlKind.APPROVE, target_id="toolu_E", edited_args=edited)
        assert ack.ok, ack.detail
        use = await task
        assert use.permission == {"behavior": "allow", "updatedInput": edited}
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)
    assert h.shop.refunds == [edited]
    assert h.sink.of("approval_granted")[0].approval_granted.edited_args_json == canonical_json(edited)


async def test_reject_denies_with_the_reason_the_model_sees(h: Harness) -> None:
    async def script() -> None:
        task = asyncio.create_task(h.cli.use_tool("toolu_R", REFUND, ARGS))
        await h.sink.wait_for("approval_requested")
        ack = await h.control(ControlKind.REJECT, target_id="toolu_R", reason="over the refund limit", decided_by="bo")
        assert ack.ok, ack.detail
        use = await task
        assert use.permission is not None and use.permission["behavior"] == "deny"
        assert "interrupt" not in use.permission
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)
    assert h.shop.refunds == []
    assert any("over the refund limit" in text and "(bo)" in text for text in h.cli.model_context)
    assert h.sink.of("approval_rejected")[0].approval_rejected.detail == "over the refund limit"
    assert run.result is not None and run.result.status == "COMPLETED"


async def test_timeout_denies_with_approval_timeout_and_a_warning_drift() -> None:
    h = make_harness(config=SteeringConfig(tool_approval_timeout_ms=30))

    async def script() -> None:
        use = await h.cli.use_tool("toolu_T", REFUND, ARGS)
        assert use.permission is not None and use.permission["behavior"] == "deny"
        assert use.permission["message"].startswith("approval_timeout")
        late = await h.control(ControlKind.APPROVE, target_id="toolu_T")
        assert not late.ok  # the call was denied; a late yes runs nothing
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)
    assert h.shop.refunds == []
    timed_out = h.sink.of("approval_timed_out")[0].approval_timed_out
    assert (timed_out.target_id, timed_out.timeout_ms) == ("toolu_T", 30)
    drift = h.sink.of("drift_detected")[0].drift_detected
    assert (drift.kind, drift.severity) == (DriftKind.HUMAN_INTERVENTION_REQUIRED, DriftSeverity.WARNING)


async def test_several_pending_at_once_decided_out_of_order(h: Harness) -> None:
    ids = ["toolu_1", "toolu_2", "toolu_3"]
    results: dict[str, FakeToolUse] = {}

    async def script() -> None:
        tasks = {
            tid: asyncio.create_task(h.cli.use_tool(tid, REFUND, {"order_id": tid, "amount": n}))
            for n, tid in enumerate(ids, 1)
        }
        await h.sink.wait_for("approval_requested", count=3)
        assert sorted(h.gf.router.sessions[0].approvals.open_targets()) == ids
        assert (await h.control(ControlKind.APPROVE, target_id="toolu_3")).ok
        results["toolu_3"] = await tasks["toolu_3"]
        assert (await h.control(ControlKind.REJECT, target_id="toolu_1", reason="no")).ok
        results["toolu_1"] = await tasks["toolu_1"]
        again = await h.control(ControlKind.APPROVE, target_id="toolu_1")
        assert not again.ok and "already decided" in again.detail
        assert (await h.control(ControlKind.APPROVE, target_id="toolu_2")).ok
        results["toolu_2"] = await tasks["toolu_2"]
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund three", script)
    assert [results[t].allowed for t in ids] == [False, True, True]
    assert h.shop.refunds == [{"order_id": "toolu_3", "amount": 3}, {"order_id": "toolu_2", "amount": 2}]


async def test_cli_cancel_request_withdraws_the_approval(h: Harness) -> None:
    async def script() -> None:
        task = asyncio.create_task(h.cli.use_tool("toolu_C", REFUND, ARGS))
        await h.sink.wait_for("approval_requested")
        await h.cli.cancel("perm-toolu_C")
        await h.sink.wait_for("approval_cancelled")
        late = await h.control(ControlKind.APPROVE, target_id="toolu_C")
        assert not late.ok and "unknown target_id" in late.detail
        use = await task
        assert use.permission is None and not use.ran
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)
    assert h.shop.refunds == []
    assert h.gf.router.sessions == []
    assert run.session.approvals.statistics().live == 0


async def test_an_early_decision_between_the_hook_and_can_use_tool_is_kept(h: Harness) -> None:
    async def script() -> None:
        hook_input = {"tool_name": REFUND, "tool_input": ARGS, "tool_use_id": "toolu_X"}
        await h.cli.run_hooks("PreToolUse", hook_input, tool_use_id="toolu_X")
        early = await h.control(ControlKind.APPROVE, target_id="toolu_X")
        assert early.ok and "kept" in early.detail
        answer = await h.cli.request(
            "can_use_tool", tool_name=REFUND, input=ARGS, permission_suggestions=[], tool_use_id="toolu_X"
        )
        assert answer == {"behavior": "allow", "updatedInput": ARGS}
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)
    assert [k for k in h.sink.kinds() if k.startswith("approval")] == ["approval_requested", "approval_granted"]


async def test_ungated_tools_are_allowed_without_asking(h: Harness) -> None:
    async def script() -> None:
        use = await h.cli.use_tool("toolu_L", "mcp__shop__lookup", {"order_id": "7"})
        assert use.allowed and use.ran
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "look up 7", script)
    assert h.shop.lookups == [{"order_id": "7"}]
    assert h.sink.of("approval_requested") == []
