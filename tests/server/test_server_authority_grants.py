"""With ``goldfive serve --policy`` a standing grant is the server's to allow: an approval may carry one only as the
rule the server judged the call by offers it (the scope, and a duration as written, never a longer one), to one
approver, and only when the agent's request names that same rule (the run keeps the grant under the rule its request
names). The server signs the rule it allowed the grant under with the scope, and a trusting agent creates the grant
under that rule only. The agents' own files here offer more than the server's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from server_support import eventually
from store_support import Backend
from test_server_authority import TrustingAgent, _done, _inbox_payload, authority_server

from goldfive_core.policy import parse_policy
from goldfive_core.signing import SignedDecision, check_decision

SERVER_TOML = """
[[rule]]
name = "refunds"
tool = "refund"
action = "ask"
approvers = ["user:ana"]
grants = ["run", "1h"]

[[rule]]
name = "payouts"
tool = "payout"
action = "ask"
approvers = ["user:ana"]

[[rule]]
name = "small buys"
tool = "buy_coffee"
action = "allow"
"""
SERVER_POLICY = parse_policy(SERVER_TOML, source="server.toml")
AGENT_POLICY = parse_policy(
    """
[[rule]]
name = "payouts"
tool = "payout"
action = "ask"
approvers = ["user:ana"]
grants = ["session", "run"]

[[rule]]
name = "coffee"
tool = "buy_coffee"
action = "ask"
approvers = ["user:ana"]
grants = ["session"]
""",
    source="agent.toml",
)
"""The agent's file: the server's "payouts" with grants the server's rule does not offer; coffee asked, with grants."""


@pytest.mark.parametrize(
    ("tool", "scope", "words"),
    [
        ("payout", "session", "the server's rule 'payouts' offers no grants"),
        ("payout", "run", "the server's rule 'payouts' offers no grants"),
        ("buy_coffee", "session", "the server's rule 'small buys' allows this call without a person"),
    ],
)
async def test_a_grant_the_servers_rule_does_not_offer_is_refused_whatever_the_agents_file_offers(
    backend: Backend, tmp_path: Path, tool: str, scope: str, words: str
) -> None:
    """The agent's file offers ``scope``; the server's rule for the call offers no grant. Ana's approval asking for
    it gets 409 naming the server's rule and what it offers; nothing is decided, no grant is made, the card offers
    no grant. Her approval without one runs the call once."""
    async with authority_server(backend, tmp_path) as (srv, api):
        api.policy_authority.policy = SERVER_POLICY
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"amount": 5}], policy=AGENT_POLICY, tool=tool)
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert card["metadata"]["policy_grants"]  # the agent's file offers grants
            assert card["policy"]["source"] == "server" and card["policy"]["grants"] == [], card["policy"]
            refused = await srv.post("/api/approvals/call-0/approve", {"grant": scope}, user="ana")
            assert refused.status_code == 409, refused.text
            assert words in refused.json()["error"] and "Nothing was decided" in refused.json()["error"], refused.text
            assert agent.ran == [] and (await srv.pending("call-0"))["state"] == "pending"
            plain = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
            assert plain.status_code == 200, plain.text
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [{"amount": 5}] and agent.sink.of("grant_created") == []
        finally:
            await agent.close()


async def test_a_grant_longer_than_the_servers_rule_offers_or_of_another_rule_is_refused(
    backend: Backend, tmp_path: Path
) -> None:
    """The server's "refunds" offers run and 1h. The agent's file has the same rule with a longer grant (2d): its
    request states other terms, so no grant is offered on the card and every one is refused (the run would keep it
    under its own rule); a 2d grant is refused as one the server's rule does not offer, naming what it does."""
    own = parse_policy(
        '[[rule]]\nname = "refunds"\ntool = "refund"\naction = "ask"\napprovers = ["user:ana"]\n'
        'grants = ["run", "1h", "2d"]\n',
        source="agent.toml",
    )
    async with authority_server(backend, tmp_path) as (srv, api):
        api.policy_authority.policy = SERVER_POLICY
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"amount": 5}], policy=own, tool="refund")
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert card["policy"]["disagrees"] is True and card["policy"]["grants"] == [], card["policy"]
            longer = await srv.post("/api/approvals/call-0/approve", {"grant": "2d"}, user="ana")
            assert longer.status_code == 409, longer.text
            assert (
                "the server's rule 'refunds' does not offer a grant for 2d (offered: for this run, for 1h)"
                in longer.json()["error"]
            ), longer.text
            offered = await srv.post("/api/approvals/call-0/approve", {"grant": "1h"}, user="ana")
            assert offered.status_code == 409, offered.text
            assert "names this rule with other terms than the server's rule 'refunds'" in offered.json()["error"]
            assert agent.ran == [] and agent.sink.of("grant_created") == []
        finally:
            await agent.close()


async def test_a_grant_the_servers_rule_offers_is_signed_with_its_rule_and_made_under_it(
    backend: Backend, tmp_path: Path
) -> None:
    """Both files say the same of "refunds": the card offers its grants, ana approves with "run", the APPROVE the
    server signed states the rule ("grant_rule") and its signature covers it (stripped or changed, it fails), and
    the trusting agent creates the grant under that rule: the run's next refund runs without a person."""
    same = parse_policy(SERVER_TOML, source="agent.toml")
    async with authority_server(backend, tmp_path) as (srv, api):
        api.policy_authority.policy = SERVER_POLICY
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"amount": 5}, {"amount": 6}], policy=same, tool="refund")
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert card["policy"]["disagrees"] is False
            assert [g["scope"] for g in card["policy"]["grants"]] == ["run", "1h"], card["policy"]
            approved = await srv.post("/api/approvals/call-0/approve", {"grant": "run"}, user="ana")
            assert approved.status_code == 200, approved.text
            await eventually(lambda: _done(agent, 1), "the first refund")
            [created] = agent.sink.of("grant_created")
            assert (created.grant_created.rule, created.grant_created.scope) == ("refunds", "run")

            payload = _inbox_payload(srv, "call-0", "ana")
            assert (payload["grant"], payload["grant_rule"]) == ("run", "refunds")
            assert _signature_problem(srv, payload) is None
            for altered in ({**payload, "grant_rule": "payouts"}, {**payload, "grant_rule": ""}):
                assert "does not match what it claims" in (_signature_problem(srv, altered) or "")

            agent.go[1].set()
            await eventually(lambda: _done(agent, 2), "the second refund")
            assert agent.ran == [{"amount": 5}, {"amount": 6}] and agent.results[1].status == "ran"
            applied = [e.policy_applied for e in agent.sink.of("policy_applied")]
            assert [a.grant_id for a in applied if a.grant_id] == [created.grant_created.grant_id]
            assert len(await asyncio.to_thread(srv.store.approvals_for, "call-1")) == 0  # nobody was asked
        finally:
            await agent.close()


def _signature_problem(srv: Any, payload: dict[str, Any]) -> str | None:
    """What a trusting agent's check says of ``payload`` for the request the store holds."""
    [row] = srv.store.approvals_for(payload["target_id"])
    return check_decision(
        srv.signer.trust_key,
        target_id=payload["target_id"],
        run_id=row.run_id,
        approved=True,
        edited_args=None,
        args_digest=payload.get("args_digest", ""),
        decided_by=payload["decided_by"],
        detail=payload.get("detail", ""),
        signature=payload["signature"],
        grant=payload.get("grant", ""),
        grant_rule=payload.get("grant_rule", ""),
        request_id=row.request_id,
        request_digest=row.request_digest,
    )


def test_a_signed_decision_without_a_grant_signs_the_same_bytes_as_before_grant_rule_existed() -> None:
    """``grant_rule`` is left out of the signed bytes when empty, so older signatures still verify."""
    from goldfive_core.signing import decision_bytes

    plain = SignedDecision(
        target_id="c1",
        run_id="r1",
        decision="approve",
        edited_args_json="",
        args_digest="sha256:a",
        decided_by="ana",
        detail="",
        channel="web",
    )
    assert b"grant_rule" not in decision_bytes(plain, key_id="k", signed_at_ms=1)
