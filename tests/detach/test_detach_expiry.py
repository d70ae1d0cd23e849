"""The server's rule expires a parked call: ``goldfive serve --policy`` with ``expires``, and a run parked by
``detach_after`` (not live, so no notice can be delivered to it).

The server's :class:`~goldfive_core.server.expiry.Expirer` closes the parked call's record as expired, with its
signature of the expiry; the ADK server's Resumer takes the call up and the gate replays it as a timeout (the
model hears the request expired, the run records ``approval_timed_out`` and the HUMAN_INTERVENTION_REQUIRED
drift), and the body never runs. A trusting agent (``GOLDFIVE_TRUST_KEY``) takes only the server's signed expiry
of that very request: unsigned, or signed as a rejection, it is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from adk_http_support import World, responses, texts, wait_until
from test_detach_http import _detach

from goldfive_core._util import now_ms
from goldfive_core.approvals import ApprovalStatus
from goldfive_core.policy import PolicyAuthority, parse_policy
from goldfive_core.server.expiry import Expirer
from goldfive_core.signing import load_or_create_signing_key
from goldfive_core.store import open_store

pytestmark = pytest.mark.timeout(120)

SERVER_POLICY = parse_policy(
    """
[[rule]]
name = "quick payments"
tool = "transfer"
action = "ask"
expires = "5m"
""",
    source="server.toml",
)
LATER_MS = 300_000  # the server's clock, 5 minutes on: the rule's expiry has passed


def _expired_answer(server: Any) -> dict[str, Any]:
    def done() -> list[dict[str, Any]] | None:
        events = list(server.session("s1")["events"])
        return events if any(t.startswith("tool said") for t in texts(events)) else None

    events = wait_until(done, what="the resumed run's final answer in the ADK session")
    final: dict[str, Any] = responses(events, "transfer")[-1]
    return final


def test_the_servers_expiry_reaches_a_parked_call_and_the_body_never_runs(
    world: World, servers: Any, tmp_path: Path
) -> None:
    signer, _ = load_or_create_signing_key(tmp_path / "keys" / "decision-key.pem")
    world.extra_env["GOLDFIVE_TRUST_KEY"] = signer.trust_key.text()
    server = servers()
    approval, _, _ = _detach(server)
    store = open_store(str(world.db))
    rules = PolicyAuthority(policy=SERVER_POLICY)
    assert Expirer(store, rules, signer).sweep() == 0  # not yet
    later = Expirer(store, rules, signer, clock=lambda: now_ms() + LATER_MS)
    assert later.sweep() == 1  # the run is parked, not live: the expiry is recorded for it

    final = _expired_answer(server)
    assert final["reason"] == "approval_timeout", final  # a timeout, not a person's rejection
    assert "expired: rule 'quick payments' allows 5m for a decision" in final["detail"], final
    assert world.runs_of_body() == []
    assert later.sweep() == 0  # once
    (row,) = store.approvals_for(approval)
    assert (row.status, row.decided_by, row.decision) == (ApprovalStatus.EXPIRED, "policy", ""), row
    assert row.detail.startswith("expired: rule 'quick payments'") and row.decision_sig  # signed by the server

    # The resumed run heard it as any timeout: approval_timed_out, and the HUMAN_INTERVENTION_REQUIRED drift (its
    # sink writes them to the store beside the ADK session: wait for both, bounded).
    def resumed_events() -> list[Any] | None:
        seen = [r.event() for r in store.audit_rows(limit=500) if r.run_id != row.run_id]
        kinds = {e.WhichOneof("payload") for e in seen}
        return seen if {"approval_timed_out", "drift_detected"} <= kinds else None

    seen = wait_until(resumed_events, what="the resumed run's approval_timed_out and drift in the store")
    timed_out = [e.approval_timed_out for e in seen if e.WhichOneof("payload") == "approval_timed_out"]
    assert [(t.target_id, t.expired_by) for t in timed_out] == [(approval, "policy")]
    drifts = [e.drift_detected for e in seen if e.WhichOneof("payload") == "drift_detected"]
    assert any("HUMAN_INTERVENTION_REQUIRED" in str(d) and "expired: rule" in d.detail for d in drifts), drifts
    assert not [e for e in seen if e.WhichOneof("payload") in ("approval_rejected", "approval_granted")]
    # The resumed run may still be writing its last events: verify_audit reads in several statements, not one
    # snapshot, so a commit landing in between reads as a transient problem (CI saw it once). Bounded: a real
    # problem stays and fails the test with its words.
    reports: list[Any] = []

    def verified() -> bool:
        reports.append(store.verify_audit(trust_key=signer.trust_key))
        return bool(reports[-1].ok)

    try:
        wait_until(verified, what="the audit log verified")
    except AssertionError:
        raise AssertionError(f"audit verify: {reports[-1].problems}") from None


def test_a_trusting_agent_does_not_take_an_unsigned_expiry(world: World, servers: Any, tmp_path: Path) -> None:
    signer, _ = load_or_create_signing_key(tmp_path / "keys" / "decision-key.pem")
    world.extra_env["GOLDFIVE_TRUST_KEY"] = signer.trust_key.text()
    server = servers()
    _detach(server)
    store = open_store(str(world.db))
    forged = Expirer(store, PolicyAuthority(policy=SERVER_POLICY), None, clock=lambda: now_ms() + LATER_MS)
    assert forged.sweep() == 1  # recorded, but not signed by the key the agent trusts
    wait_until(
        lambda: [r for r in store.audit_rows(limit=500) if r.kind == "decision_refused"] or None,
        what="the agent's refusal of the unsigned expiry",
    )
    assert world.runs_of_body() == []
    assert not [t for t in texts(list(server.session("s1")["events"])) if t.startswith("tool said")]
