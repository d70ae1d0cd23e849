"""The in-flight record (goldfive_core.inflight): from Proceed to the body's end, one way for every adapter."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from goldfive_core import ControlKind, ControlMessage, InMemorySink, Session, SteeringConfig
from goldfive_core.inflight import InDoubt, InFlight, NotStarted
from goldfive_core.store import open_store
from goldfive_core.store.base import Store
from goldfive_core.store.execution import StoreLedger
from goldfive_core.toolcall import Proceed, ToolCall, gate_tool_call

ARGS = {"to": "bob", "amount": 10}


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return open_store(tmp_path / "gf.db")


async def _approved(session: Session, store: Store, call_id: str, **decision: Any) -> Proceed:
    """``pay(ARGS)`` through the gate with the store's ledger, approved by ana."""
    call = ToolCall(call_id=call_id, tool_name="pay", args=ARGS)
    gated = asyncio.create_task(gate_tool_call(session, call, needs_person=True, ledger=StoreLedger(store)))
    sink = next(iter(session.events.sinks))
    assert isinstance(sink, InMemorySink)
    asked = len(sink.of("approval_requested")) + 1
    await sink.wait_for("approval_requested", count=asked)  # the ledger looked the call up: it is asked now
    payload = {"target_id": call_id, "decided_by": "ana", **decision}
    assert session.dispatch(ControlMessage(ControlKind.APPROVE, payload)).ok
    outcome = await gated
    assert isinstance(outcome, Proceed)
    return outcome


def _recorded(store: Store, call_id: str, session: Session) -> Any:
    row = store.execution(call_id, run_id=session.run_id)
    assert row is not None and row.state.value == "done"
    return json.loads(row.result_json)


def _session() -> Session:
    return Session(sinks=[InMemorySink()], config=SteeringConfig(tool_approval_timeout_ms=60_000), has_channel=True)


async def test_the_end_of_a_body_is_recorded_once_and_the_approvers_note_is_handed_back(store: Store) -> None:
    session, calls = _session(), InFlight()
    outcome = await _approved(session, store, "c-ok", detail="only to bob")
    calls.started(outcome)
    assert "c-ok" in calls
    note = await calls.finished("c-ok", result={"paid": 10})
    assert note == "A person (ana) approved this call: only to bob"
    assert _recorded(store, "c-ok", session) == {"paid": 10}
    assert "c-ok" not in calls and await calls.finished("c-ok", result="again") == ""  # its end is recorded once


async def test_a_failed_body_is_recorded_as_its_error_whether_raised_or_told_in_words(store: Store) -> None:
    session, calls = _session(), InFlight()
    raised = await _approved(session, store, "c-raised", detail="fine")
    told = await _approved(session, store, "c-told")
    calls.started(raised)
    calls.started(told)
    assert await calls.finished("c-raised", error=ValueError("bank closed")) == ""  # no note after a failure
    assert await calls.finished("c-told", result="ignored", error="the bank is closed") == ""
    assert _recorded(store, "c-raised", session) == {"error": "ValueError('bank closed')"}
    assert _recorded(store, "c-told", session) == {"error": "the bank is closed"}  # the host's words as they are


async def test_a_call_with_nothing_to_do_at_its_end_is_not_kept_and_an_adapters_end_step_runs() -> None:
    calls, ended = InFlight(), []
    plain = Proceed(call_id="c-plain", args=ARGS)
    calls.started(plain)
    assert "c-plain" not in calls

    async def settle() -> None:
        ended.append("settled")

    calls.started(plain, on_end=settle)
    assert await calls.finished("c-plain", result=1) == "" and ended == ["settled"]


async def test_run_records_the_body_it_runs_and_lets_its_error_through(store: Store) -> None:
    session, calls = _session(), InFlight()
    outcome = await _approved(session, store, "c-run")

    async def body(args: Any) -> Any:
        raise RuntimeError(f"no {args['to']}")

    with pytest.raises(RuntimeError, match="no bob"):
        await calls.run(outcome, body)
    assert _recorded(store, "c-run", session) == {"error": "RuntimeError('no bob')"}


def _ledger_states(store: Store, call_id: str) -> list[str]:
    rows = [r.event().execution_recorded for r in store.audit_rows() if r.kind == "execution_recorded"]
    return [row.state for row in rows if row.target_id == call_id]


async def test_a_body_that_never_began_gives_its_claim_back_released_not_run(store: Store) -> None:
    session, calls = _session(), InFlight()
    outcome = await _approved(session, store, "c-never")

    async def body(args: Any) -> Any:
        raise NotStarted("the request was never written to the server")

    with pytest.raises(NotStarted):
        await calls.run(outcome, body)
    assert store.execution("c-never", run_id=session.run_id) is None  # nothing left in doubt, nothing "done"
    assert _ledger_states(store, "c-never") == ["executing", "released_not_run"]


async def test_a_body_lost_mid_way_stays_in_doubt_and_the_run_is_told_a_person_must_settle_it(store: Store) -> None:
    session, calls = _session(), InFlight()
    outcome = await _approved(session, store, "c-lost")
    calls.started(outcome)
    assert await calls.finished("c-lost", error=InDoubt("sent, and its server stopped answering")) == ""
    row = store.execution("c-lost", run_id=session.run_id)
    assert row is not None and row.state.value == "executing"  # in doubt: never "done", never given back
    assert _ledger_states(store, "c-lost") == ["executing"]
    sink = next(iter(session.events.sinks))
    assert isinstance(sink, InMemorySink)
    drifts = [e.drift_detected for e in sink.of("drift_detected")]
    said = [d.detail for d in drifts if "c-lost" in d.detail]
    assert said and "it may or may not have run" in said[0] and "goldfive resolve c-lost" in said[0]
    assert "sent, and its server stopped answering" in said[0]
