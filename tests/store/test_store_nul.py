"""Text the store cannot hold is never a loss: NUL from a model or an agent is stored as ␀ on SQLite and PostgreSQL.

PostgreSQL TEXT refuses NUL (the whole statement fails); before, a prompt with NUL dropped the request on
PostgreSQL (nobody was asked, the run's sequence had a gap, ``audit verify`` said TAMPERED for good) and a
reason with NUL lost its ack and the run's later events. Each test runs on both backends and asserts the
same stored text on each.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from store_support import Backend, await_until, make_event
from test_store_cli import cli

from goldfive_core import AgentTools, ControlKind, ControlMessage, InMemorySink, Principal, Task, wrap
from goldfive_core._util import args_digest
from goldfive_core.control import ControlAck
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import StoreChannel, decide
from goldfive_core.store.decide import DecideVerdict, find_approval
from goldfive_core.store.execution import GuardedResult, run_approved

MARK = "\u2400"  # ␀, what a NUL is stored (and shown) as


async def test_a_prompt_and_task_with_nul_ask_a_person_and_a_reason_with_nul_is_acked(backend: Backend) -> None:
    channel = StoreChannel(backend.open(), sweep_interval_s=0.2)
    seen = InMemorySink()

    async def agent(task: Task, tools: AgentTools) -> Any:
        await tools.report_task_started("t-nul", title="pay\x00now")
        answer = await tools.report_awaiting_approval("wire 5\x00 EUR?", task_id="t-nul", timeout_ms=60_000)
        await tools.report_task_completed(task_id="t-nul", result=f"told {answer['decision']}\x00")
        return answer

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink, seen]).run("go"))
    store = backend.open()
    rows = await await_until(lambda: store.approvals(), what="the request in the store (not dropped)")
    assert (rows[0].target_id, rows[0].prompt, rows[0].status.value) == ("t-nul", f"wire 5{MARK} EUR?", "pending")

    # A decision from the inbox (written by anyone who can write the store) with a NUL in its reason.
    decider = StoreChannel(backend.open())
    ack = await decider.send(
        ControlMessage(ControlKind.REJECT, {"target_id": "t-nul", "detail": "no\x00way", "decided_by": "ana"}),
        timeout=20,
    )
    assert ack.ok, ack
    result = await asyncio.wait_for(run, 20)
    assert result.output["decision"] == "reject" and result.output["detail"] == "no\x00way"  # what the agent got
    await asyncio.to_thread(channel.sink.flush)

    row = store.approvals_for("t-nul")[0]
    assert (row.status.value, row.detail, row.decided_by) == ("rejected", f"no{MARK}way", "ana")
    kinds = [r.kind for r in store.audit_rows(run_id=result.run_id)]
    assert kinds.index("approval_rejected") < kinds.index("task_completed") and kinds[-1] == "run_completed"
    sequences = [r.sequence for r in store.audit_rows(run_id=result.run_id)]
    assert sequences == list(range(len(sequences)))  # no gap
    events = [r.event() for r in store.audit_rows(run_id=result.run_id)]
    assert {e.task_started.title for e in events if e.HasField("task_started")} >= {f"pay{MARK}now"}
    assert {e.task_completed.result for e in events if e.HasField("task_completed")} >= {f"told reject{MARK}"}
    assert store.get_ack(ack.control_id) is not None
    assert channel.sink.statistics().dropped == 0
    report = store.verify_audit()
    assert report.ok, report.problems
    await channel.aclose()


async def test_tool_name_and_arguments_with_nul_keep_their_digest_and_run_as_sent(backend: Backend) -> None:
    args = {"memo": "a\x00b", "to\x00": "bob"}
    tool = "pay\x00out"
    channel = StoreChannel(backend.open(), sweep_interval_s=0.2)
    ran: list[Mapping[str, Any]] = []

    async def body(call_args: Mapping[str, Any]) -> str:
        ran.append(dict(call_args))
        return "paid\x00"

    async def agent(task: Task, tools: AgentTools) -> GuardedResult:
        return await run_approved(
            tools.session, channel.store, call_id="c-nul", tool_name=tool, args=args, body=body, timeout_ms=60_000
        )

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("go"))
    store = backend.open()
    rows = await await_until(lambda: store.approvals(), what="the tool call in the store")
    # JSON writes NUL as \u0000: the arguments are kept exactly, and their digest is the agent's.
    assert rows[0].args_json == '{"memo":"a\\u0000b","to\\u0000":"bob"}'
    assert rows[0].args_digest == args_digest(tool, args)
    assert rows[0].tool_name == f"pay{MARK}out" and rows[0].metadata["tool_name"] == f"pay{MARK}out"

    decided = await asyncio.to_thread(
        decide, store, "c-nul", approve=True, principal=Principal(name="ana"), args_digest=rows[0].args_digest
    )
    assert decided.verdict is DecideVerdict.APPLIED, decided
    result = await asyncio.wait_for(run, 20)
    assert result.output.status == "ran" and ran == [args]  # the body got the arguments as the model sent them
    await asyncio.to_thread(channel.sink.flush)
    ledger = store.execution("c-nul")
    assert ledger is not None and ledger.state.value == "done" and ledger.result_json == '"paid\\u0000"'
    report = store.verify_audit()
    assert report.ok, report.problems
    await channel.aclose()


def test_every_text_of_an_event_is_stored_as_the_mark_and_lookups_by_the_raw_text_find_it(backend: Backend) -> None:
    store = backend.open()
    run = "run\x00x"
    request = events_pb2.ApprovalRequested(
        target_id="t\x00x", kind="tool", prompt="p\x00", task_id="k\x00", metadata={"tool_name": "n\x00", "a\x00": "v"}
    )
    started = make_event(run, 0, events_pb2.RunStarted(adapter="a\x00"))
    original = events_pb2.Event()
    original.CopyFrom(started)
    store.append_events([started, make_event(run, 1, request)], pid=1, host="h\x00")
    assert started == original  # the caller's event is never changed

    rows = store.approvals_for("t\x00x")  # looked up by the text the agent has
    assert len(rows) == 1 and rows == store.approvals_for(f"t{MARK}x")
    assert find_approval(store, "t\x00x", run_id=run) == rows[0]  # a decider naming the run as the agent does
    row = rows[0]
    assert (row.run_id, row.target_id, row.prompt, row.task_id, row.tool_name) == (
        f"run{MARK}x",
        f"t{MARK}x",
        f"p{MARK}",
        f"k{MARK}",
        f"n{MARK}",
    )
    assert row.metadata == {"tool_name": f"n{MARK}", f"a{MARK}": "v"}
    stored_run = store.run(run)
    assert stored_run is not None and stored_run.adapter == f"a{MARK}" and stored_run.host == f"h{MARK}"
    hashed = store.audit_rows()[1].event()
    assert hashed.approval_requested.prompt == f"p{MARK}" and hashed.run_id == f"run{MARK}x"
    report = store.verify_audit()
    assert report.ok, report.problems


async def test_a_decision_whose_reason_or_decider_holds_nul_is_refused_by_name_and_changes_nothing(
    backend: Backend,
) -> None:
    channel = StoreChannel(backend.open(), sweep_interval_s=0.2)

    async def agent(task: Task, tools: AgentTools) -> Any:
        await tools.report_task_started("t-r")
        return await tools.report_awaiting_approval("ship?", task_id="t-r", timeout_ms=60_000)

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("go"))
    store = backend.open()
    await await_until(lambda: store.approvals(), what="the request")
    for principal, reason, field in ((Principal(name="ana"), "no\x00", "reason"), (Principal(name="a\x00"), "", "")):
        refused = await asyncio.to_thread(decide, store, "t-r", approve=False, principal=principal, reason=reason)
        assert refused.verdict is DecideVerdict.INVALID and refused.field == (field or "decided_by"), refused
        assert "NUL" in refused.detail and "nothing was decided" in refused.detail
    assert store.approvals_for("t-r")[0].status.value == "pending" and store.pending_controls() == []
    done = await asyncio.to_thread(decide, store, "t-r", approve=False, principal=Principal(name="ana"), reason="no")
    assert done.verdict is DecideVerdict.APPLIED
    assert (await asyncio.wait_for(run, 20)).output["decision"] == "reject"
    await channel.aclose()


def test_the_command_line_shows_the_mark_and_decides_and_verifies_a_record_with_nul(backend: Backend) -> None:
    store = backend.open()
    started = make_event("run-n", 0, events_pb2.RunStarted(adapter="callable"))
    asked = make_event("run-n", 1, events_pb2.ApprovalRequested(target_id="t\x00x", kind="task", prompt="pay\x00?"))
    store.append_events([started, asked], pid=1, host="elsewhere")
    shown = cli(backend, "show", f"t{MARK}x")
    assert shown.returncode == 0 and f"pay{MARK}?" in shown.stdout, shown
    listed = json.loads(cli(backend, "pending", "--json").stdout)
    assert [(a["target_id"], a["prompt"]) for a in listed["pending"]] == [(f"t{MARK}x", f"pay{MARK}?")]
    rejected = cli(backend, "reject", f"t{MARK}x", "--reason", "not now")
    assert rejected.returncode == 0, rejected
    assert store.approvals_for("t\x00x")[0].status.value == "rejected"
    verified = cli(backend, "audit", "verify")
    assert verified.returncode == 0, verified


def test_an_edit_in_a_quorum_of_a_tool_whose_name_holds_nul_verifies(backend: Backend) -> None:
    tool = "pay\x00out"  # the agent's digests are of the name it has; the record shows pay␀out
    store = backend.open()
    metadata = {"tool_name": tool, "args_json": '{"amount":20}', "policy_quorum": "2"}
    request = events_pb2.ApprovalRequested(
        target_id="q-1", kind="tool", prompt="pay?", args_digest=args_digest(tool, {"amount": 20}), metadata=metadata
    )
    store.append_events([make_event("run-q", 0, request)], pid=1, host="h")
    edited = {"amount": 15}
    vote = ControlMessage(ControlKind.APPROVE, {"target_id": "q-1", "run_id": "run-q", "decided_by": "ana"})
    ident = store.post_control(vote, run_id="run-q")
    assert store.claim_controls([ident], endpoint="agent") == [ident]
    restart = {"decision": "counted", "quorum_progress": "1 of 2: ana", "args": edited}
    store.ack_controls(
        [(ident, ControlAck.success(vote.id, "counted", data={**restart, "args_digest": args_digest(tool, edited)}))]
    )
    voted = events_pb2.ApprovalVoted(target_id="q-1", decided_by="ana", decision="approve", progress="1 of 2: ana")
    store.append_events([make_event("run-q", 1, voted)], pid=1, host="h")  # what the run says of the vote
    [row] = store.approvals_for("q-1")
    assert (row.tool_name, row.args_json) == (f"pay{MARK}out", '{"amount":15}')
    report = store.verify_audit()
    assert report.ok, report.problems
