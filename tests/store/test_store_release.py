"""A claim the APPROVE's ack won, then CANCEL or PAUSE before the body starts: "released, not run", never in doubt.

A StoreChannel folds the call's "executing" claim into the APPROVE's ack. When the run is cancelled (or paused)
before the gate starts the body, the gate gives the claim back: the ledger entry goes, the audit log says
``released_not_run``, ``goldfive show`` says so, and a later re-ask of the call may run it once. A release that
cannot be written leaves the call in doubt (never released by guess). Real store, real StoreChannel, real
``decide()`` from the deciders' side.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Mapping
from typing import Any

import pytest
from fold_support import install
from store_support import PYTHON, Backend, await_until

from goldfive_core import AgentTools, ControlKind, ControlMessage, RunStatus, Session, SteeringConfig, Task, wrap
from goldfive_core.approvals import Principal
from goldfive_core.errors import StoreUnavailableError
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.routing import ControlRouter
from goldfive_core.store import DecideVerdict, ExecutionState, Store, StoreChannel, decide, run_approved
from goldfive_core.store.execution import GuardedResult

ANN = Principal(name="ann", channel="cli")
ARGS = {"amount": 10}


async def _pay(
    store: Store, ran: list[int], *, then: ControlKind | None = None, channel: Any = None, asked: bool = True
) -> Any:
    """One run calling ``pay-1`` through a StoreChannel; approved from the deciders' side when asked. ``then``:
    what the run is sent the moment the approval's ack claims the call. Returns (the guarded call's result, the
    session, the claims); for PAUSE, the run's task instead of the result (the call waits)."""
    channel = channel or StoreChannel(store)
    claims = install(channel, then) if then is not None else None
    sessions: list[Session] = []
    outcomes: list[GuardedResult] = []

    async def body(call_args: Mapping[str, Any]) -> dict[str, Any]:
        ran.append(call_args["amount"])
        return {"paid": call_args["amount"]}

    async def agent(task: Task, tools: AgentTools) -> GuardedResult:
        sessions.append(tools.session)
        out = await run_approved(
            tools.session, store, call_id="pay-1", tool_name="pay", args=ARGS, body=body, ledger=channel.ledger
        )
        outcomes.append(out)
        return out

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("pay"))
    try:
        if asked:
            await await_until(lambda: any(r.target_id == "pay-1" for r in store.approvals()), what="the request")
            recorded = await asyncio.to_thread(decide, store, "pay-1", approve=True, principal=ANN)
            assert recorded.verdict is not DecideVerdict.REFUSED, recorded.detail
        if then is ControlKind.PAUSE:
            return run, sessions[0], claims
        result = await asyncio.wait_for(run, 60)
        return (outcomes[0] if outcomes else result), sessions[0], claims
    finally:
        if then is not ControlKind.PAUSE:
            await channel.aclose()


def _ledger_states(store: Store) -> list[str]:
    return [r.event().execution_recorded.state for r in store.audit_rows() if r.kind == "execution_recorded"]


def _show(backend: Backend) -> str:
    argv = [PYTHON, "-m", "goldfive_core.cli", "show", "pay-1"]
    done = subprocess.run(argv, env=backend.env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_a_cancel_after_the_claim_releases_it_and_a_re_ask_runs_the_call_once(backend: Backend) -> None:
    store = backend.open()
    ran: list[int] = []
    result, session, claims = await _pay(store, ran, then=ControlKind.CANCEL)
    assert claims.folded == 1  # the APPROVE's ack did carry the claim
    assert ran == [] and result.status is RunStatus.CANCELLED
    await await_until(lambda: "released_not_run" in _ledger_states(store), what="the release")
    assert store.execution("pay-1", run_id=session.run_id) is None  # not "executing": nothing is in doubt
    assert _ledger_states(store) == ["executing", "released_not_run"]
    shown = _show(backend)
    assert "released, not run" in shown and "a re-ask may run it" in shown
    assert store.verify_audit().ok, store.verify_audit().problems
    # A new run reusing the call id: ann's approval (its call never ran) is found and applied, the body runs once.
    again, _, _ = await _pay(store, ran, asked=False)
    assert (again.status, again.decided_by, ran) == ("ran", "ann", [10])
    row = store.execution("pay-1")
    assert row is not None and row.state is ExecutionState.DONE
    assert store.verify_audit().ok, store.verify_audit().problems


async def test_a_pause_after_the_claim_releases_it_and_resume_claims_anew(backend: Backend) -> None:
    store = backend.open()
    ran: list[int] = []
    channel = StoreChannel(store)
    try:
        run, session, claims = await _pay(store, ran, then=ControlKind.PAUSE, channel=channel)
        # Paused (the process could be stopped now): the claim is given back, so nothing would be left in doubt.
        await await_until(lambda: "released_not_run" in _ledger_states(store), what="the release")
        assert claims.folded == 1 and ran == [] and store.execution("pay-1", run_id=session.run_id) is None
        assert session.dispatch(ControlMessage(ControlKind.RESUME, {})).ok
        result = await asyncio.wait_for(run, 60)
    finally:
        await channel.aclose()
    assert (result.output.status, ran) == ("ran", [10])  # claimed anew on its own commit, run once
    assert _ledger_states(store) == ["executing", "released_not_run", "executing", "done"]
    assert store.verify_audit().ok, store.verify_audit().problems


class _NoRelease:
    """The real store, except that a release never gets through (the store is out past its retry budget)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def release_execution(self, target_id: str, **kw: Any) -> bool:
        raise StoreUnavailableError("the store is down")


async def test_a_release_that_cannot_be_written_leaves_the_call_in_doubt(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = backend.open()
    ran: list[int] = []
    channel = StoreChannel(store)
    channel.ledger.store = _NoRelease(store)  # type: ignore[attr-defined]
    result, session, _ = await _pay(store, ran, then=ControlKind.CANCEL, channel=channel)
    assert ran == [] and result.status is RunStatus.CANCELLED
    await await_until(lambda: "stays in doubt for a person" in caplog.text, what="the failed release")
    row = store.execution("pay-1", run_id=session.run_id)
    assert row is not None and row.state is ExecutionState.EXECUTING  # in doubt for a person, not released by guess
    assert _ledger_states(store) == ["executing"]


def test_only_the_claiming_runs_unstarted_claim_is_released(backend: Backend) -> None:
    store = backend.open()
    assert store.mark_executing("c-1", run_id="run-a", pid=1, host="h", args_digest="d")
    assert not store.release_execution("c-1", run_id="run-b", args_digest="d")  # another run's claim
    assert not store.release_execution("c-1", run_id="run-a", args_digest="other")  # other arguments
    assert store.mark_done("c-1", result_json="{}", run_id="run-a")
    assert not store.release_execution("c-1", run_id="run-a", args_digest="d")  # it ran: never given back
    row = store.execution("c-1")
    assert row is not None and row.state is ExecutionState.DONE
    assert store.mark_executing("c-2", run_id="run-a", pid=1, host="h", args_digest="d")
    assert store.release_execution("c-2", run_id="run-a", args_digest="d")
    assert store.execution("c-2") is None
    assert store.verify_audit().ok, store.verify_audit().problems


async def test_a_bare_run_stopped_after_the_claim_releases_it(backend: Backend) -> None:
    """``run_approved`` on a session of its own (no runner cancels its task): the gate itself finds the run stopped."""
    store = backend.open()
    channel = StoreChannel(store)
    claims = install(channel, ControlKind.CANCEL)
    session = Session(config=SteeringConfig(), has_channel=True, sinks=[channel.sink])
    router = ControlRouter(channel)
    router.attach(session)
    session.events.emit(events_pb2.RunStarted(adapter="callable"))  # its process is running (heartbeats)
    ran: list[int] = []

    async def body(call_args: Mapping[str, Any]) -> None:
        ran.append(call_args["amount"])

    try:
        call = asyncio.create_task(
            run_approved(session, store, call_id="pay-1", tool_name="pay", args=ARGS, body=body, ledger=channel.ledger)
        )
        await await_until(lambda: any(r.target_id == "pay-1" for r in store.approvals()), what="the request")
        got = await asyncio.to_thread(decide, store, "pay-1", approve=True, principal=ANN)
        assert got.verdict is DecideVerdict.APPLIED, got.detail
        out = await asyncio.wait_for(call, 60)
    finally:
        router.detach(session)
        await channel.aclose()
    assert (out.status, ran, claims.folded) == ("cancelled", [], 1)
    assert store.execution("pay-1", run_id=session.run_id) is None
    assert _ledger_states(store) == ["executing", "released_not_run"]
