"""Decisions recorded in the store while no agent listens: the digest binds them on every path.

A decision reaches a call three ways: delivered to the live run (it checks the digest itself),
recorded in the store because the run is not running (offline), or recorded because the run died
while the decider waited for its ack (fallback). Each way refuses a stale ``--digest``, and a
refused decision is never applied when the call is replayed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_support import PYTHON, Backend, make_event, wait_until

from goldfive_core import AgentTools, Task, wrap
from goldfive_core._util import args_digest, canonical_json
from goldfive_core.control import ControlAck, ControlKind, ControlMessage
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import Store, run_approved
from goldfive_core.store.base import HOST

TOOL = "send_money"
ARGS = {"to": "bob", "amount": 10}
DIGEST = args_digest(TOOL, ARGS)
STALE = "sha256:" + "0" * 64


def cli(backend: Backend, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", *argv],
        env=backend.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def host_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for an agent's: the run looks alive while it lives."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def _asked(store: Store, run: str, target: str, *, pid: int, args: dict[str, Any] = ARGS, seq: int = 1) -> None:
    """A run (hosted by ``pid`` on this host) asking to approve ``send_money(args)`` as ``target``."""
    events = [make_event(run, 0, events_pb2.RunStarted(adapter="callable"))] if seq == 1 else []
    events.append(
        make_event(
            run,
            seq,
            events_pb2.ApprovalRequested(
                target_id=target,
                kind="tool",
                prompt="send money?",
                metadata={"tool_name": TOOL, "args_json": canonical_json(args)},
                args_digest=args_digest(TOOL, args),
                timeout_ms=60_000,
            ),
        )
    )
    store.append_events(events, pid=pid, host=HOST)
    store.heartbeat([run])


def _decision_events(store: Store, target: str) -> list[str]:
    return [
        r.kind
        for r in store.audit_rows(limit=10_000)
        if r.kind in ("approval_granted", "approval_rejected") and getattr(r.event(), r.kind).target_id == target
    ]


async def _replay(store: Store, target: str) -> tuple[str, list[Any]]:
    """A restarted run replays ``target``; returns (its status, the argument sets the body ran with).

    Nobody can answer in the replay (no control channel), so anything but a stored decision is refused.
    """
    ran: list[Any] = []

    async def body(call_args: Any) -> str:
        ran.append(dict(call_args))
        return "sent"

    async def agent(task: Task, tools: AgentTools) -> str:
        outcome = await run_approved(
            tools.session, store, call_id=target, tool_name=TOOL, args=ARGS, body=body, timeout_ms=1
        )
        return outcome.status

    result = await wrap(agent).run("replay")
    return str(result.output), ran


def _decide_while_the_run_dies(
    backend: Backend, store: Store, host_process: subprocess.Popen[bytes], *argv: str
) -> subprocess.CompletedProcess[str]:
    """Run ``goldfive *argv`` against a run that looks alive, and end the run's process while it waits."""
    decider = subprocess.Popen(
        [PYTHON, "-m", "goldfive_core.cli", *argv, "--by", "ann"],
        env=backend.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The run looked alive, so the decision went to the inbox (nobody claims it); now its process dies.
        wait_until(lambda: store.pending_controls(), what="the decision waiting in the inbox")
        host_process.kill()
        host_process.wait(timeout=10)  # reaped: its pid is gone
        out, err = decider.communicate(timeout=60)
    finally:
        if decider.poll() is None:
            decider.kill()
            decider.communicate()
    return subprocess.CompletedProcess(decider.args, decider.returncode, out, err)


def _assert_still_open_and_not_applied(store: Store, target: str) -> None:
    (row,) = store.approvals_for(target)
    assert (row.status, row.decision, row.decided_by) == ("pending", "", "")
    assert store.find_decision(target) is None
    assert _decision_events(store, target) == []


async def test_stale_digest_is_refused_when_the_run_dies_while_the_decider_waits(
    backend: Backend, host_process: subprocess.Popen[bytes]
) -> None:
    store = backend.open()
    _asked(store, "run-1", "pay-1", pid=host_process.pid)
    decider = await asyncio.to_thread(
        _decide_while_the_run_dies, backend, store, host_process, "approve", "pay-1", "--digest", STALE
    )
    assert decider.returncode == 1, decider.stdout + decider.stderr
    assert f"refused: args_digest {STALE!r} does not match the call" in decider.stderr
    assert "recorded" not in decider.stdout
    _assert_still_open_and_not_applied(store, "pay-1")
    status, ran = await _replay(store, "pay-1")
    assert (status, ran) == ("refused", [])


async def test_matching_digest_is_recorded_when_the_run_dies_while_the_decider_waits(
    backend: Backend, host_process: subprocess.Popen[bytes]
) -> None:
    store = backend.open()
    _asked(store, "run-1", "pay-2", pid=host_process.pid)
    decider = await asyncio.to_thread(
        _decide_while_the_run_dies, backend, store, host_process, "approve", "pay-2", "--digest", DIGEST
    )
    assert decider.returncode == 0, decider.stderr
    assert decider.stdout.startswith("recorded: approved 'pay-2' in the store; run run-1 is not running")
    assert _decision_events(store, "pay-2") == ["approval_granted"]
    status, ran = await _replay(store, "pay-2")
    assert (status, ran) == ("ran", [ARGS])


@pytest.mark.parametrize("verb", ["approve", "reject"])
async def test_stale_digest_is_refused_offline(backend: Backend, verb: str) -> None:
    store = backend.open()
    _asked(store, "run-1", "pay-3", pid=0)
    store.append_events([make_event("run-1", 2, events_pb2.RunAborted(reason="killed"))], pid=0, host=HOST)
    extra = ["--reason", "no"] if verb == "reject" else []
    refused = cli(backend, verb, "pay-3", "--digest", STALE, *extra)
    assert refused.returncode == 1
    assert f"refused: args_digest {STALE!r} does not match the call" in refused.stderr
    _assert_still_open_and_not_applied(store, "pay-3")
    status, ran = await _replay(store, "pay-3")
    assert (status, ran) == ("refused", [])


def test_a_decision_for_arguments_that_were_re_asked_meanwhile_is_not_recorded(backend: Backend) -> None:
    """The digest is checked inside the store's write, not only by whoever looked before it."""
    store = backend.open()
    _asked(store, "run-1", "pay-4", pid=0)
    (seen,) = store.approvals_for("pay-4")
    # The run re-asks the same call id with other arguments between the decider's look and its write.
    _asked(store, "run-1", "pay-4", pid=0, args={"to": "mallory", "amount": 9999}, seq=2)
    assert not store.decide_in_store(seen.id, approved=True, detail="", decided_by="ann", args_digest=seen.args_digest)
    (row,) = store.approvals_for("pay-4")
    assert (row.status, row.args_digest) == ("pending", args_digest(TOOL, {"to": "mallory", "amount": 9999}))
    assert store.decide_in_store(row.id, approved=True, detail="", decided_by="ann", args_digest=row.args_digest)
    assert store.approvals_for("pay-4")[0].status == "granted"


# -- the decision columns move once: pending (or timed out) -> granted | rejected, never back or across ----------
Op = tuple[str, bool, str]
OPS = st.one_of(
    st.tuples(st.sampled_from(["event", "ack", "store"]), st.booleans(), st.sampled_from(["ann", "bob"])),
    st.tuples(st.just("timed_out"), st.booleans(), st.just("")),
    st.tuples(st.just("cancelled"), st.just(False), st.just("")),
)


def _write(store: Store, run: str, target: str, seq: int, op: Op) -> bool | None:
    """Apply one write to ``target``'s record the way the store receives it; ``store`` ops return their bool."""
    what, flag, who = op
    if what == "event":
        payload: Any = (
            events_pb2.ApprovalGranted(target_id=target, decided_by=who, detail=f"{what} {who}")
            if flag
            else events_pb2.ApprovalRejected(target_id=target, decided_by=who, detail=f"{what} {who}")
        )
        store.append_events([make_event(run, seq, payload)], pid=0, host=HOST)
    elif what == "ack":
        kind = ControlKind.APPROVE if flag else ControlKind.REJECT
        msg = ControlMessage(kind, {"target_id": target, "run_id": run, "decided_by": who, "detail": f"{what} {who}"})
        ident = store.post_control(msg, run_id=run)
        assert store.claim_controls([ident], endpoint="test") == [ident]
        store.ack_controls([(ident, ControlAck.success(msg.id, "applied"))])
    elif what == "store":
        (row,) = store.approvals_for(target)
        return store.decide_in_store(row.id, approved=flag, detail=f"{what} {who}", decided_by=who)
    elif what == "timed_out":
        payload = events_pb2.ApprovalTimedOut(target_id=target, still_open=flag, detail="no answer")
        store.append_events([make_event(run, seq, payload)], pid=0, host=HOST)
    else:
        payload = events_pb2.ApprovalCancelled(target_id=target, reason="run ended")
        store.append_events([make_event(run, seq, payload)], pid=0, host=HOST)
    return None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(OPS, min_size=1, max_size=6))
def test_a_recorded_decision_is_final_whatever_writes_follow(backend: Backend, ops: list[Op]) -> None:
    """Model check: events, acks and store decisions in any order; only the first decision of an open record counts."""
    store = backend.open()
    target = f"t-{uuid.uuid4().hex[:10]}"
    _asked(store, "run-g", target, pid=0, seq=2)  # no RunStarted: nobody hosts the run
    status, decision, decided_by = "pending", "", ""
    for seq, op in enumerate(ops, start=3):
        what, flag, who = op
        was_open = status in ("pending", "timed_out")
        recorded = _write(store, "run-g", target, seq, op)
        if what in ("event", "ack", "store") and was_open:
            status, decision, decided_by = ("granted", "approve", who) if flag else ("rejected", "reject", who)
        elif what == "timed_out" and status == "pending":
            status = "timed_out" if flag else "expired"
        elif what == "cancelled" and was_open:
            status = "cancelled"
        if what == "store":
            assert recorded is was_open, (ops, seq)
        (row,) = store.approvals_for(target)
        assert (row.status, row.decision, row.decided_by) == (status, decision, decided_by), (ops, seq)
    store.close()


async def test_a_later_approval_event_cannot_turn_a_recorded_rejection_into_an_approval(backend: Backend) -> None:
    store = backend.open()
    _asked(store, "run-1", "pay-5", pid=0)
    (row,) = store.approvals_for("pay-5")
    assert store.decide_in_store(row.id, approved=False, detail="too much", decided_by="ann")
    stray = events_pb2.ApprovalGranted(target_id="pay-5", decided_by="mallory", detail="let it through")
    store.append_events([make_event("run-1", 5, stray)], pid=0, host=HOST)
    (row,) = store.approvals_for("pay-5")
    assert (row.status, row.decision, row.decided_by, row.decided_via) == ("rejected", "reject", "ann", "store")
    status, ran = await _replay(store, "pay-5")
    assert (status, ran) == ("reject", [])
