"""goldfive_core.decide: one way in for decisions from outside the agent (the CLI's, next the server's)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from store_support import Backend, await_until, make_event

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.approvals import ApprovalStatus, Principal
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import (
    AmbiguousApprovalError,
    ApprovalRow,
    DecideVerdict,
    Store,
    StoreChannel,
    UnknownApprovalError,
    decide,
    run_approved,
)

ANN = Principal(name="ann", channel="cli")


def _ask(store: Store, run: str, target: str, seq: int = 1, digest: str = "sha256:abc") -> None:
    # No RunStarted: no process ever reported the run, so it is not live and decisions are recorded.
    request = events_pb2.ApprovalRequested(
        target_id=target, kind="tool", prompt="pay?", args_digest=digest, timeout_ms=60_000
    )
    store.append_events([make_event(run, seq, request)], pid=1, host="h")


def _row(store: Store, target: str) -> ApprovalRow:
    return store.approvals_for(target)[0]


def test_an_offline_decision_is_recorded_once_with_the_deciders_name(backend: Backend) -> None:
    store = backend.open()
    _ask(store, "run-a", "pay-1")
    result = decide(store, "pay-1", approve=True, principal=ANN, reason="fine")
    assert result.verdict is DecideVerdict.RECORDED and result.ok and result.ack is None
    assert "recorded: approved 'pay-1' in the store; run run-a is not running" in result.detail
    row = _row(store, "pay-1")
    assert (row.status, row.decided_by, row.decided_via, row.detail) == (ApprovalStatus.GRANTED, "ann", "store", "fine")

    again = decide(store, "pay-1", approve=False, principal=Principal(name="bob", channel="web"), reason="no")
    assert again.verdict is DecideVerdict.REFUSED and not again.ok
    assert again.detail == "already decided: 'pay-1' was approved by ann; this decision was not applied"
    assert _row(store, "pay-1").status is ApprovalStatus.GRANTED


def test_an_offline_decision_for_another_digest_is_refused(backend: Backend) -> None:
    store = backend.open()
    _ask(store, "run-a", "pay-1", digest="sha256:new")
    stale = decide(store, "pay-1", approve=True, principal=ANN, args_digest="sha256:old")
    assert stale.verdict is DecideVerdict.REFUSED
    assert "args_digest 'sha256:old' does not match" in stale.detail
    assert _row(store, "pay-1").status is ApprovalStatus.PENDING  # nothing recorded


def test_the_store_refuses_a_decision_bound_to_another_digest(backend: Backend) -> None:
    # The call was re-asked with other arguments between the decider's read and the write.
    store = backend.open()
    _ask(store, "run-a", "pay-1", digest="sha256:new")
    row = _row(store, "pay-1")
    assert not store.decide_in_store(row.id, approved=True, detail="", decided_by="ann", args_digest="sha256:old")
    assert store.decide_in_store(row.id, approved=True, detail="", decided_by="ann", args_digest="sha256:new")


def test_an_authority_decides_who_may_decide_before_anything_is_recorded(backend: Backend) -> None:
    store = backend.open()
    _ask(store, "run-a", "pay-1")
    seen: list[tuple[Principal, str, bool]] = []

    class OnlyAnn:
        def may_decide(self, principal: Principal, approval: ApprovalRow, *, approve: bool) -> str | None:
            seen.append((principal, approval.target_id, approve))
            return None if principal.name == "ann" else f"{principal.name} may not decide {approval.target_id}"

    mallory = Principal(name="mallory", channel="api")
    refused = decide(store, "pay-1", approve=True, principal=mallory, authority=OnlyAnn())
    assert (refused.verdict, refused.detail) == (DecideVerdict.REFUSED, "mallory may not decide pay-1")
    assert _row(store, "pay-1").status is ApprovalStatus.PENDING
    assert decide(store, "pay-1", approve=False, principal=ANN, authority=OnlyAnn()).verdict is DecideVerdict.RECORDED
    assert seen == [(mallory, "pay-1", True), (ANN, "pay-1", False)]


def test_lookup_errors_name_the_problem(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(UnknownApprovalError, match="unknown approval id 'nope': no such request"):
        decide(store, "nope", approve=True, principal=ANN)
    _ask(store, "run-a", "pay-1")
    _ask(store, "run-b", "pay-1")
    with pytest.raises(AmbiguousApprovalError, match=r"open in several runs \(run-b, run-a\)"):
        decide(store, "pay-1", approve=True, principal=ANN)
    assert decide(store, "pay-1", approve=True, principal=ANN, run_id="run-b").verdict is DecideVerdict.RECORDED


def test_edits_only_go_with_an_approval_and_closed_records_say_why(backend: Backend) -> None:
    store = backend.open()
    _ask(store, "run-a", "pay-1")
    edit_reject = decide(store, "pay-1", approve=False, principal=ANN, edited_args={"amount": 1})
    assert edit_reject.verdict is DecideVerdict.REFUSED and "edited_args only go with an approval" in edit_reject.detail
    store.append_events(
        [make_event("run-a", 2, events_pb2.ApprovalTimedOut(target_id="pay-1", still_open=False, detail="too late"))],
        pid=1,
        host="h",
    )
    assert _row(store, "pay-1").status is ApprovalStatus.EXPIRED
    closed = decide(store, "pay-1", approve=True, principal=ANN)
    assert closed.detail == "'pay-1' is expired (too late); nothing to decide"


def test_a_principal_needs_a_name_and_a_known_channel() -> None:
    with pytest.raises(ValueError, match="non-empty name"):
        Principal(name=" ")
    with pytest.raises(ValueError, match="channel must be"):
        Principal(name="ann", channel="fax")  # type: ignore[arg-type]


def test_a_recorded_decision_wakes_what_listens_on_postgresql(postgres_backend: Backend) -> None:
    """A Resumer of detached runs waits on the store's inbox: a decision recorded for a run that is not running
    NOTIFYs it, so it resumes at once instead of at its next poll. (SQLite's commit wake-ups: test_store_wake.)"""
    import threading
    import time

    store = postgres_backend.open()
    _ask(store, "run-a", "pay-1")
    waiter = postgres_backend.open()
    listening = threading.Event()
    woke: list[float] = []

    def wait() -> None:
        waiter.wait_inbox(0.01)  # this thread's LISTEN is open from here on: a NOTIFY after it is queued
        listening.set()
        began = time.monotonic()
        waiter.wait_inbox(60.0)
        woke.append(time.monotonic() - began)

    thread = threading.Thread(target=wait)
    thread.start()
    assert listening.wait(30)
    result = decide(store, "pay-1", approve=True, principal=ANN, reason="fine")
    assert result.verdict is DecideVerdict.RECORDED
    thread.join(30)  # far below the 60 s it would sleep without a NOTIFY
    assert not thread.is_alive() and woke, "the listener slept through the decision"
    waiter.close()


class _AnotherDeciderFirst:
    """The real store, except that bob's decision lands between this decider's read and its write."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def decide_in_store(self, approval_id: int, **kw: Any) -> bool:
        assert self._store.decide_in_store(approval_id, approved=False, detail="no", decided_by="bob")
        return self._store.decide_in_store(approval_id, **kw)


def test_a_decision_that_loses_the_race_to_the_store_is_told_already_decided(backend: Backend) -> None:
    store = backend.open()
    _ask(store, "run-a", "pay-1")
    racing: Any = _AnotherDeciderFirst(store)
    result = decide(racing, "pay-1", approve=True, principal=ANN)
    assert result.verdict is DecideVerdict.REFUSED and not result.ok
    assert result.detail == "already decided: 'pay-1' was rejected by bob; this decision was not applied"
    assert (_row(store, "pay-1").decision, _row(store, "pay-1").decided_by) == ("reject", "bob")


async def test_a_decision_the_live_run_refuses_is_reported_refused_with_its_ack(sqlite_backend: Backend) -> None:
    channel = StoreChannel(sqlite_backend.open())
    ran: list[Any] = []

    async def body(call_args: Mapping[str, Any]) -> str:
        ran.append(dict(call_args))
        return "paid"

    async def agent(task: Task, tools: AgentTools) -> Any:
        ledger = sqlite_backend.open()
        return (
            await run_approved(tools.session, ledger, call_id="pay-2", tool_name="pay", args={"n": 1}, body=body)
        ).status

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run())
    try:
        store = sqlite_backend.open()
        await await_until(lambda: [r for r in store.approvals_for("pay-2") if r.open], what="pay-2 open")
        stale = await asyncio.to_thread(decide, store, "pay-2", approve=True, principal=ANN, args_digest="sha256:old")
        assert stale.verdict is DecideVerdict.REFUSED and not stale.ok
        assert stale.ack is not None and not stale.ack.ok and "does not match" in stale.detail
        assert ran == [] and not run.done() and _row(store, "pay-2").status is ApprovalStatus.PENDING
        fresh = await asyncio.to_thread(decide, store, "pay-2", approve=True, principal=ANN)
        assert fresh.verdict is DecideVerdict.APPLIED, fresh.detail
        assert (await run).output == "ran" and ran == [{"n": 1}]
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await channel.aclose()
