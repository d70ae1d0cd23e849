"""Processes writing the store keep their calls in the ledger of their agent identity (GOLDFIVE_AGENT_ID).

Two store agents reusing a call id each run their body once; the same agent restarted (a new run, the
same identity) still finds its done call done and its in-doubt call in doubt; unnamed processes share one
ledger, as before (nothing runs twice).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from store_support import HERE, PYTHON, Backend, make_event, wait_until

from goldfive_core import ControlKind, ControlMessage, InMemorySink, Session, SteeringConfig
from goldfive_core._util import args_digest
from goldfive_core.approvals import Principal
from goldfive_core.errors import ConfigError
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import DecideVerdict, ExecutionState, StoreError, decide, run_approved
from goldfive_core.store.execution import StoreLedger
from goldfive_core.toolcall import ToolCall

ARGS = {"to": "bob", "amount": 10}
AGENT = str(HERE / "agent_proc.py")


async def _call(
    store: Any, agent: str | None, ran: list[str], *, approve: bool = True, who: str = ""
) -> tuple[str, Session, InMemorySink]:
    """One run of agent ``agent`` (a new run id, as after a restart) calling ``pay-1``; approved when asked."""
    sink = InMemorySink()
    session = Session(sinks=[sink], config=SteeringConfig(), has_channel=True)

    async def body(call_args: Mapping[str, Any]) -> dict[str, Any]:
        ran.append(who or str(agent))
        return {"paid": call_args["amount"]}

    named = {"agent": agent} if agent is not None else {}  # None: GOLDFIVE_AGENT_ID
    task = asyncio.create_task(
        run_approved(
            session,
            store,
            call_id="pay-1",
            tool_name="pay",
            args=ARGS,
            body=body,
            timeout_ms=30_000 if approve else 2_000,
            **named,
        )
    )
    if approve:
        asked = asyncio.create_task(sink.wait_for("approval_requested"))
        done, _ = await asyncio.wait({task, asked}, return_when=asyncio.FIRST_COMPLETED)
        if asked in done:
            assert session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": "pay-1"})).ok
        else:
            asked.cancel()
    out = await task
    return out.status, session, sink


async def test_two_store_agents_reusing_a_call_id_each_run_their_body_once(backend: Backend) -> None:
    store = backend.open()
    ran: list[str] = []
    assert (await _call(store, "billing", ran))[0] == "ran"
    assert (await _call(store, "payroll", ran))[0] == "ran"  # another agent, the same call id and arguments
    assert ran == ["billing", "payroll"]
    # Each restarted (a new run under the same identity): its own call is done, nothing runs again.
    assert (await _call(store, "billing", ran, approve=False))[0] == "already_done"
    assert (await _call(store, "payroll", ran, approve=False))[0] == "already_done"
    assert ran == ["billing", "payroll"]
    owners = sorted(r.owner for r in store.executions())
    assert owners == ["store:billing", "store:payroll"]
    assert all(r.state is ExecutionState.DONE for r in store.executions())
    assert store.verify_audit().ok, store.verify_audit().problems


async def test_the_identity_comes_from_goldfive_agent_id(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    store = backend.open()
    ran: list[str] = []
    for name in ("billing", "payroll"):
        monkeypatch.setenv("GOLDFIVE_AGENT_ID", name)
        assert (await _call(store, None, ran, who=name))[0] == "ran"
    monkeypatch.setenv("GOLDFIVE_AGENT_ID", "billing")
    assert (await _call(store, None, ran, approve=False))[0] == "already_done"
    assert ran == ["billing", "payroll"]


async def test_unnamed_store_agents_share_one_ledger_and_nothing_runs_twice(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOLDFIVE_AGENT_ID", raising=False)
    store = backend.open()
    ran: list[str] = []
    assert (await _call(store, None, ran, who="first"))[0] == "ran"
    assert (await _call(store, None, ran, approve=False, who="second"))[0] == "already_done"
    assert ran == ["first"] and [r.owner for r in store.executions()] == [""]


async def test_a_restarted_agent_sees_its_in_doubt_call_in_doubt_and_another_agent_runs(backend: Backend) -> None:
    store = backend.open()
    ran: list[str] = []
    # billing's process claimed pay-1 and died inside the body (no "done").
    dead = Session(config=SteeringConfig(), has_channel=True)
    ledger = StoreLedger(store, agent="billing")
    call = ToolCall(call_id="pay-1", tool_name="pay", args=ARGS, prompt="pay?")
    digest = args_digest("pay", ARGS)
    assert (await ledger.lookup(dead, call, digest)).kind == "none"
    assert await ledger.begin(dead, call, digest) is None
    status, restarted, sink = await _call(store, "billing", ran, approve=False)
    assert status == "in_doubt" and ran == []  # its own call: in doubt, never re-run
    assert any("in doubt: pay for 'pay-1'" in e.drift_detected.detail for e in sink.of("drift_detected"))
    assert (await _call(store, "payroll", ran))[0] == "ran" and ran == ["payroll"]  # not payroll's call
    row = store.execution("pay-1", run_id=restarted.run_id)
    assert row is not None and (row.owner, row.state, row.run_id) == (
        "store:billing",
        ExecutionState.EXECUTING,
        dead.run_id,
    )


async def test_a_decision_recorded_while_down_is_found_by_the_same_agent_only(backend: Backend) -> None:
    store = backend.open()
    first = Session(config=SteeringConfig(), has_channel=True)
    ledger = StoreLedger(store, agent="billing")
    call = ToolCall(call_id="pay-1", tool_name="pay", args=ARGS, prompt="pay?")
    assert (await ledger.lookup(first, call, args_digest("pay", ARGS))).kind == "none"  # registers the run
    request = events_pb2.ApprovalRequested(
        target_id="pay-1", kind="tool", prompt="pay?", timeout_ms=60_000, args_digest=args_digest("pay", ARGS)
    )
    store.append_events([make_event(first.run_id, 1, request)], pid=0, host="gone")
    recorded = decide(store, "pay-1", approve=True, principal=Principal(name="ann", channel="cli"), reason="ok")
    assert recorded.verdict is DecideVerdict.RECORDED, recorded.detail
    other = Session(config=SteeringConfig(), has_channel=True)
    seen = await StoreLedger(store, agent="payroll").lookup(other, call, args_digest("pay", ARGS))
    assert seen.kind == "none"  # not payroll's decision: payroll would ask its own person
    ran: list[str] = []
    assert (await _call(store, "billing", ran, approve=False))[0] == "ran" and ran == ["billing"]


def test_a_run_of_one_agent_is_never_another_agents(backend: Backend) -> None:
    store = backend.open()
    store.own_run("run-1", "store:billing")
    store.own_run("run-1", "store:billing")  # again: its own
    with pytest.raises(StoreError, match="ledger of 'store:billing'"):
        store.own_run("run-1", "store:payroll")


async def test_a_run_another_agent_owns_fails_closed(backend: Backend) -> None:
    store = backend.open()
    session = Session(config=SteeringConfig(), has_channel=True)
    store.own_run(session.run_id, "store:payroll")
    ran: list[str] = []

    async def body(call_args: Mapping[str, Any]) -> None:
        ran.append("billing")

    out = await run_approved(
        session, store, call_id="pay-1", tool_name="pay", args=ARGS, body=body, timeout_ms=1, agent="billing"
    )
    assert (out.status, ran) == ("unavailable", []), out.detail


async def test_a_bad_identity_refuses_the_call(backend: Backend) -> None:
    store = backend.open()
    session = Session(config=SteeringConfig(), has_channel=True)

    async def body(call_args: Mapping[str, Any]) -> None:
        raise AssertionError("ran")

    out = await run_approved(session, store, call_id="pay-1", tool_name="pay", args=ARGS, body=body, agent="bill ing:x")
    assert out.status == "refused" and "GOLDFIVE_AGENT_ID" not in out.detail and "agent=" in out.detail
    with pytest.raises(ConfigError):
        StoreLedger(store, agent="a" * 65)


# -- real processes: a crash inside the body, a restart, another agent -----------------------------------------
def _agent(backend: Backend, agent: str, marker: Path, *argv: str) -> subprocess.Popen[str]:
    env = {**backend.env(), "GOLDFIVE_AGENT_ID": agent}
    return subprocess.Popen(
        [PYTHON, AGENT, "tool", "--call-id", "pay-9", "--marker", str(marker), *argv],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _output(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    line: dict[str, Any] = json.loads(out.strip().splitlines()[-1])["output"]
    return line


def _approve_when_asked(backend: Backend, run_ids: set[str]) -> None:
    store = backend.open()
    wait_until(
        lambda: any(r.target_id == "pay-9" and r.run_id not in run_ids for r in store.approvals()),
        what="pay-9 asked in a new run",
    )
    (row,) = [r for r in store.approvals() if r.target_id == "pay-9"]
    run_ids.add(row.run_id)
    recorded = decide(store, "pay-9", approve=True, principal=Principal(name="ann", channel="cli"), reason="ok")
    assert recorded.verdict in (DecideVerdict.APPLIED, DecideVerdict.RECORDED), recorded.detail


def test_a_store_agent_killed_in_its_body_restarts_in_doubt_and_another_agent_runs(
    backend: Backend, tmp_path: Path
) -> None:
    marker, seen = tmp_path / "marker", set[str]()
    procs = [_agent(backend, "billing", marker, "--die-in-body")]
    try:
        _approve_when_asked(backend, seen)
        procs[0].wait(timeout=30)
        assert procs[0].returncode == 9 and len(marker.read_text().splitlines()) == 1
        procs.append(_agent(backend, "billing", marker))  # the same agent restarted: its call is in doubt
        assert _output(procs[-1])["status"] == "in_doubt"
        procs.append(_agent(backend, "payroll", marker))  # another agent reusing the call id: its own call
        _approve_when_asked(backend, seen)
        assert _output(procs[-1])["status"] == "ran"
        assert len(marker.read_text().splitlines()) == 2
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
