"""The store's execution ledger keys on the call id and the args digest."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from store_support import Backend

from goldfive_core import ControlKind, ControlMessage, InMemorySink, Session, SteeringConfig
from goldfive_core.store import run_approved


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
