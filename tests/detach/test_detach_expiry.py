"""The server's rule expires a parked call: ``goldfive serve --policy`` with ``expires``, and a run parked by
``detach_after`` (not live, so no notice can be delivered to it).

The server's :class:`~goldfive_core.server.expiry.Expirer` records the signed expiry for the parked call; the
ADK server's Resumer takes the call up, the model hears that the request expired, and the body never runs. A
trusting agent (``GOLDFIVE_TRUST_KEY``) applies only the server's signed expiry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from adk_http_support import World, responses, texts, wait_until
from test_detach_http import _detach

from goldfive_core._util import now_ms
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
    assert final["reason"] == "user_rejected", final
    assert "expired: rule 'quick payments' allows 5m for a decision" in final["detail"], final
    assert world.runs_of_body() == []
    assert later.sweep() == 0  # once
    (row,) = store.approvals_for(approval)
    assert not row.open and row.decided_by == "policy", row  # decided by the server's rule


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
