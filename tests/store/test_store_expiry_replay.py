"""A server rule's expiry recorded for a parked call is replayed as a timeout, and only as the server signed it.

The record closes as expired (by 'policy', with the server's signature of the expiry of that very request); the
call's replay hears ``approval_timed_out`` and the HUMAN_INTERVENTION_REQUIRED drift, and never runs. A trusting
agent refuses the expiry unsigned, moved to another request, or made from a rejection (and a rejection made from
an expiry), and asks a person instead. ``audit verify`` holds the record to its event and, with the key, its
signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from store_support import Backend, make_event

from goldfive_core import InMemorySink, Session, SteeringConfig
from goldfive_core._util import args_digest, new_id
from goldfive_core.approvals import ApprovalStatus, Principal
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.signing import DecisionSigner, load_or_create_signing_key
from goldfive_core.store import DecideVerdict, decide, run_approved
from goldfive_core.store.decide import record_expiry

ARGS = {"to": "bob", "amount": 10}
WHY = "expired: rule 'quick payments' allows 5m for a decision and none was taken; the call was not made"


@pytest.fixture
def signer(tmp_path: Path) -> DecisionSigner:
    key, _ = load_or_create_signing_key(tmp_path / "decision-key.pem")
    return key


def _parked(store: Any, target: str = "pay-1") -> Any:
    """A run of session conv-a that asked for ``target`` and is gone (parked): its open record."""
    run_id = new_id("run")
    request = events_pb2.ApprovalRequested(
        target_id=target,
        kind="tool",
        prompt="pay?",
        timeout_ms=600_000,
        args_digest=args_digest("pay", ARGS),
        request_id=new_id("req"),
        metadata={"tool_name": "pay", "args_json": '{"amount":10,"to":"bob"}'},
    )
    events = [
        make_event(run_id, 0, events_pb2.RunStarted(adapter="adk", root_task_id="t")),
        make_event(run_id, 1, request),
    ]
    for event in events:
        event.session_id = "conv-a"
    store.append_events(events, pid=0, host="gone")
    (row,) = [r for r in store.approvals_for(target) if r.run_id == run_id]
    return row


async def _resume(store: Any, signer: DecisionSigner | None, target: str = "pay-1") -> tuple[str, str, InMemorySink]:
    """The parked call replayed in a new run of the same session (as ADK resumes it); nobody answers a new ask."""
    sink = InMemorySink()
    session = Session(sinks=[sink], config=SteeringConfig(), has_channel=True, session_id="conv-a")
    ran: list[str] = []

    async def body(call_args: Mapping[str, Any]) -> None:
        ran.append("ran")

    trust = signer.trust_key if signer is not None else None
    out = await run_approved(
        session, store, call_id=target, tool_name="pay", args=ARGS, body=body, timeout_ms=300, trust=trust
    )
    assert ran == []
    return out.status, out.detail, sink


async def test_a_recorded_expiry_is_replayed_as_a_timeout_and_reads_expired(
    backend: Backend, signer: DecisionSigner
) -> None:
    store = backend.open()
    row = _parked(store)
    result = record_expiry(store, row, why=WHY, signer=signer, expires_ms=300_000)
    assert result.verdict is DecideVerdict.RECORDED, result.detail
    (after,) = store.approvals_for("pay-1")
    assert (after.status, after.decided_by, after.decision, after.detail) == (ApprovalStatus.EXPIRED, "policy", "", WHY)
    status, detail, sink = await _resume(store, signer)
    assert status == "timeout" and detail.startswith(WHY), detail  # the gate's timeout, with the server's words
    (timed_out,) = sink.of("approval_timed_out")
    assert (timed_out.approval_timed_out.expired_by, timed_out.approval_timed_out.still_open) == ("policy", False)
    assert any(
        "HUMAN_INTERVENTION_REQUIRED" in str(e.drift_detected) and "expired: rule" in e.drift_detected.detail
        for e in sink.of("drift_detected")
    )
    assert not sink.of("approval_rejected") and not sink.of("approval_requested")
    report = store.verify_audit(trust_key=signer.trust_key)
    assert report.ok, report.problems


def _tamper(store: Any, sql: str, *params: object) -> None:
    conn = store.db.conn()
    conn.execute(store.db.sql(sql), params)
    if hasattr(conn, "commit"):
        conn.commit()


@pytest.mark.parametrize("how", ["unsigned", "moved", "from a rejection"])
async def test_a_trusting_agent_refuses_an_expiry_the_server_did_not_sign_for_that_request(
    backend: Backend, signer: DecisionSigner, how: str
) -> None:
    store = backend.open()
    row = _parked(store)
    if how == "from a rejection":  # the server signed a person's rejection; a writer relabels it as an expiry
        rejected = decide(
            store, "pay-1", approve=False, principal=Principal(name="policy", channel="api"), reason=WHY, signer=signer
        )
        assert rejected.verdict is DecideVerdict.RECORDED, rejected.detail
        _tamper(store, "UPDATE gf_approvals SET status = 'expired', decision = '' WHERE id = ?", row.id)
    else:
        assert record_expiry(store, row, why=WHY, signer=signer, expires_ms=300_000).verdict is DecideVerdict.RECORDED
        if how == "unsigned":
            _tamper(store, "UPDATE gf_approvals SET decision_sig = '' WHERE id = ?", row.id)
        else:  # the signature of another request's expiry pasted here
            other = _parked(store, "pay-2")
            assert record_expiry(store, other, why=WHY, signer=signer).verdict is DecideVerdict.RECORDED
            (moved,) = store.approvals_for("pay-2")
            _tamper(store, "UPDATE gf_approvals SET decision_sig = ? WHERE id = ?", moved.decision_sig, row.id)
    status, _, sink = await _resume(store, signer)
    assert status == "timeout" and sink.of("decision_refused") and sink.of("approval_requested"), status
    assert not sink.of("approval_timed_out") or all(
        not e.approval_timed_out.expired_by for e in sink.of("approval_timed_out")
    )
    assert not store.verify_audit(trust_key=signer.trust_key).ok  # and audit verify reports the record


async def test_an_expiry_relabelled_as_a_rejection_is_refused(backend: Backend, signer: DecisionSigner) -> None:
    store = backend.open()
    row = _parked(store)
    assert record_expiry(store, row, why=WHY, signer=signer).verdict is DecideVerdict.RECORDED
    _tamper(store, "UPDATE gf_approvals SET status = 'rejected', decision = 'reject' WHERE id = ?", row.id)
    status, _, sink = await _resume(store, signer)
    assert sink.of("decision_refused") and sink.of("approval_requested") and not sink.of("approval_rejected"), status


async def test_without_a_trust_key_the_expiry_is_still_a_timeout_never_a_run(backend: Backend) -> None:
    store = backend.open()
    assert record_expiry(store, _parked(store), why=WHY, signer=None).verdict is DecideVerdict.RECORDED
    status, detail, _ = await _resume(store, None)
    assert status == "timeout" and detail.startswith(WHY)
    assert store.verify_audit().ok


@pytest.mark.parametrize(
    ("column", "value"), [("decided_by", "ana"), ("decided_channel", "cli"), ("decided_at_ms", 1), ("detail", "no")]
)
def test_audit_verify_holds_an_expired_record_to_its_event(backend: Backend, column: str, value: object) -> None:
    store = backend.open()
    row = _parked(store)
    assert record_expiry(store, row, why=WHY, signer=None).verdict is DecideVerdict.RECORDED
    assert store.verify_audit().ok, store.verify_audit().problems
    _tamper(store, f"UPDATE gf_approvals SET {column} = ? WHERE id = ?", value, row.id)
    problems = store.verify_audit().problems
    assert any(column in p for p in problems), problems
