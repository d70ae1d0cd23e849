"""The store's execution ledger keys on the call's owner, the call id and the args digest."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Mapping
from typing import Any

import pytest
from store_support import PYTHON, Backend, make_event

from goldfive_core import ControlKind, ControlMessage, InMemorySink, Session, SteeringConfig
from goldfive_core._util import args_digest
from goldfive_core.approvals import Principal
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import DecideVerdict, ExecutionState, StoreUnavailableError, decide, run_approved
from goldfive_core.store import agents as owners
from goldfive_core.store.audit import result_digest
from goldfive_core.store.execution import StoreLedger
from goldfive_core.toolcall import ToolCall


async def _approved_run(
    session: Session, sink: InMemorySink, store: Any, args: Mapping[str, Any], ran: list[Any], *, asks: int = 0
) -> Any:
    async def body(call_args: Mapping[str, Any]) -> dict[str, Any]:
        ran.append(dict(call_args))
        return {"paid": call_args["amount"]}

    task = asyncio.create_task(
        run_approved(session, store, call_id="pay-1", tool_name="pay", args=args, body=body, timeout_ms=30_000)
    )
    if asks:  # the asks-th ApprovalRequested of the test is this call's
        await sink.wait_for("approval_requested", count=asks)
        assert session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": "pay-1"})).ok
    return await task


async def test_a_reused_call_id_with_other_arguments_is_a_new_call(backend: Backend) -> None:
    store = backend.open()
    sink = InMemorySink()
    session = Session(sinks=[sink], config=SteeringConfig(), has_channel=True)
    ran: list[Any] = []
    first = await _approved_run(session, sink, store, {"amount": 10}, ran, asks=1)
    assert first.status == "ran"
    again = await _approved_run(session, sink, store, {"amount": 10}, ran)  # a replay: the recorded result, no run
    assert (again.status, again.result) == ("already_done", {"paid": 10})
    other = await _approved_run(session, sink, store, {"amount": 99}, ran, asks=2)  # same id, other args: asked and run
    assert other.status == "ran" and ran == [{"amount": 10}, {"amount": 99}]
    assert len(sink.of("approval_requested")) == 2
    row = store.execution("pay-1")
    assert row is not None and row.state.value == "done" and row.args_digest != ""


# -- agents own their calls --------------------------------------------------------------------------------------
def test_a_run_its_agent_owns_already_is_claimed_again_without_a_write_transaction(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every event batch an agent posts over HTTP re-claims its run: once owned, that is a read (no write lock for the
    ack with its claim, posted at the same moment, to queue behind); another agent is still refused."""
    store = backend.open()
    assert owners.claim_run(store, "run-bot", "bot") is None
    opened: list[str] = []
    transaction = store.db.transaction  # type: ignore[attr-defined]

    def counted(*args: Any, **kwargs: Any) -> Any:
        opened.append("transaction")
        return transaction(*args, **kwargs)

    monkeypatch.setattr(store.db, "transaction", counted)  # type: ignore[attr-defined]
    assert owners.claim_run(store, "run-bot", "bot") is None
    assert opened == []
    refused = owners.claim_run(store, "run-bot", "eve")
    assert refused is not None and "belongs to another agent" in refused
    assert owners.owned_runs(store, "eve", ["run-bot"]) == set() and owners.owned_runs(store, "bot", ["run-bot"]) == {
        "run-bot"
    }


def test_each_owner_has_its_own_ledger_and_reaches_no_other(backend: Backend) -> None:
    """A run of agent 'bot' (over HTTP) and a run of a process writing the store reuse a call id: no collision."""
    store = backend.open()
    assert owners.claim_run(store, "run-bot", "bot") is None
    assert owners.claim_run(store, "run-bot-2", "bot") is None
    assert store.mark_executing("c-1", run_id="run-direct", pid=1, host="h", args_digest="sha256:a")
    assert store.mark_executing("c-1", run_id="run-bot", pid=2, host="h", args_digest="sha256:a")  # its own call
    assert not store.mark_executing("c-1", run_id="run-bot-2", pid=3, host="h", args_digest="sha256:a")  # bot's, once
    assert not store.mark_done("c-1", result_json="{}", run_id="run-bot-2")  # only the claiming run finishes it
    assert store.mark_done("c-1", result_json='{"by":"bot"}', run_id="run-bot")
    direct, bot = store.execution("c-1", run_id="run-direct"), store.execution("c-1", run_id="run-bot-2")
    assert direct is not None and (direct.owner, direct.state) == ("", ExecutionState.EXECUTING)
    assert bot is not None and (bot.owner, bot.state, bot.result_json) == ("bot", ExecutionState.DONE, '{"by":"bot"}')
    assert not store.resolve_execution("c-1", ran=False, by="ann", run_id="run-bot")  # finished: never "did not run"
    assert store.verify_audit().ok, store.verify_audit().problems
    # Moving a row to another owner (a database writer) is caught: no ledger event holds it there.
    store.db.execute(store.db.conn(), "UPDATE gf_executions SET owner = 'eve' WHERE owner = 'bot'")  # type: ignore[attr-defined]
    store.db.conn().commit()  # type: ignore[attr-defined]
    problems = store.verify_audit().problems
    assert any("'c-1' of 'eve' has no execution_recorded" in p for p in problems), problems
    assert any("'c-1' of 'bot' is on the audit log but its ledger row is gone" in p for p in problems), problems


class _LostClaims:
    """The store, but the claim is lost: ``mark_executing`` answers False having written nothing, or raises."""

    def __init__(self, store: Any, *, raises: bool) -> None:
        self._store, self._raises = store, raises

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def mark_executing(self, target_id: str, **kw: Any) -> bool:
        if self._raises:
            raise StoreUnavailableError("store gone while claiming")
        return False


async def test_a_lost_claim_never_runs_the_body(backend: Backend) -> None:
    for raises, status in ((False, "in_doubt"), (True, "unavailable")):
        store: Any = _LostClaims(backend.open(), raises=raises)
        store.retry_budget_s = 0.0
        sink = InMemorySink()
        session = Session(sinks=[sink], config=SteeringConfig(), has_channel=True)
        ran: list[Any] = []
        out = await _approved_run(session, sink, store, {"amount": 10}, ran, asks=1)
        assert (out.status, ran) == (status, []), out.detail  # approved, but not claimed: not run
        assert backend.open().execution("pay-1") is None


async def test_a_reused_call_id_with_other_arguments_does_not_take_over_an_in_doubt_row(backend: Backend) -> None:
    store = backend.open()
    in_doubt = args_digest("pay", {"amount": 10})
    assert store.mark_executing("pay-1", run_id="run-dead", pid=1, host="gone", args_digest=in_doubt)
    sink = InMemorySink()
    session = Session(sinks=[sink], config=SteeringConfig(), has_channel=True)
    ran: list[Any] = []
    out = await _approved_run(session, sink, store, {"amount": 99}, ran, asks=1)  # asked (other args) and approved
    assert (out.status, ran) == ("in_doubt", []), out.detail  # the row is held: the other call is not run over it
    row = store.execution("pay-1")
    assert row is not None and (row.run_id, row.state, row.args_digest) == (
        "run-dead",
        ExecutionState.EXECUTING,
        in_doubt,
    )


def test_a_decision_recorded_for_one_owners_request_is_found_only_in_that_owners_runs(backend: Backend) -> None:
    store = backend.open()
    assert owners.claim_run(store, "run-bot", "bot") is None
    assert owners.claim_run(store, "run-bot-next", "bot") is None  # bot restarted: its next run replays the call
    request = events_pb2.ApprovalRequested(target_id="c-9", kind="tool", prompt="pay?", timeout_ms=60_000)
    store.append_events([make_event("run-bot", 1, request)], pid=0, host="elsewhere")
    recorded = decide(store, "c-9", approve=True, principal=Principal(name="ann", channel="cli"), reason="ok")
    assert recorded.verdict is DecideVerdict.RECORDED, recorded.detail
    found = store.find_decision("c-9", run_id="run-bot-next")
    assert found is not None and found.run_id == "run-bot" and found.approved
    assert store.find_decision("c-9", run_id="run-direct") is None  # another owner's call id: its own, undecided
    assert store.mark_executing("c-9", run_id="run-direct", pid=1, host="h")  # ... and claiming it uses nothing
    assert store.find_decision("c-9", run_id="run-bot-next") is not None  # bot's decision is still bot's to use


# -- a "done" that comes after a person resolved the call ------------------------------------------------------
def _ledger_states(store: Any, run_id: str) -> list[str]:
    rows = store.audit_rows(run_id=run_id, limit=1000)
    return [r.event().execution_recorded.state for r in rows if r.kind == "execution_recorded"]


async def test_a_done_after_the_call_was_resolved_as_not_run_is_on_the_audit_log(backend: Backend) -> None:
    store = backend.open()
    session = Session(config=SteeringConfig(), has_channel=True)
    ledger = StoreLedger(store)
    call = ToolCall(call_id="pay-1", tool_name="pay", args={"amount": 10}, prompt="pay?")
    digest = args_digest("pay", {"amount": 10})
    assert await ledger.begin(session, call, digest) is None  # the body starts; its process stalls ...
    assert store.resolve_execution("pay-1", ran=False, by="ann", run_id=session.run_id)  # ... a person says no
    await ledger.finish("pay-1", digest, result={"paid": 10})  # ... then it finishes after all
    assert store.execution("pay-1") is None  # the person's word stands in the ledger
    assert _ledger_states(store, session.run_id) == ["executing", "resolved_not_run", "finished_after_resolved"]
    (late,) = [
        r.event().execution_recorded
        for r in store.audit_rows(run_id=session.run_id, limit=1000)
        if r.kind == "execution_recorded" and r.event().execution_recorded.state == "finished_after_resolved"
    ]
    assert late.target_id == "pay-1" and late.result_digest == result_digest('{"paid":10}')
    assert store.verify_audit().ok, store.verify_audit().problems
    # A "done" of a run that never claimed the call is not a late finish: nothing is recorded.
    assert not store.mark_done("pay-1", result_json="{}", run_id="run-other")
    assert _ledger_states(store, "run-other") == []


async def test_goldfive_show_says_a_call_finished_after_it_was_resolved(backend: Backend) -> None:
    store = backend.open()
    session = Session(config=SteeringConfig(), has_channel=True)
    request = events_pb2.ApprovalRequested(target_id="pay-2", kind="tool", prompt="pay?", timeout_ms=60_000)
    store.append_events([make_event(session.run_id, 0, request)], pid=0, host="gone")
    call = ToolCall(call_id="pay-2", tool_name="pay", args={"amount": 10}, prompt="pay?")
    ledger = StoreLedger(store)
    assert await ledger.begin(session, call, "") is None
    assert store.resolve_execution("pay-2", ran=False, by="ann", run_id=session.run_id)
    before = await asyncio.to_thread(_show, backend, "pay-2")
    assert "after a person resolved it as not run" not in before
    await ledger.finish("pay-2", "", result={"paid": 10})
    shown = await asyncio.to_thread(_show, backend, "pay-2")
    assert "after a person resolved it as not run: it did run" in shown, shown


def _show(backend: Backend, target: str) -> str:
    argv = [PYTHON, "-m", "goldfive_core.cli", "show", target]
    done = subprocess.run(argv, env=backend.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout
