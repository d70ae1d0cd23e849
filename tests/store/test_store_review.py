"""The reviewer tier across a store: its verdict on the card and in ``goldfive review stats``, and a database
writer who forges a "reviewer allowed" record (in the inbox or as a recorded decision) never runs a body.

A reviewer's verdict is taken only in the agent's own gate: whatever the store says a reviewer decided, signed
or not, the agent refuses it and the call waits for a person.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from store_support import Backend
from test_store_trust import ANA, ARGS, TOOL, Agent, facts, orphaned, post

from goldfive_core import ControlKind
from goldfive_core.approvals import ApprovalStatus, Principal
from goldfive_core.cli import main
from goldfive_core.policy import Ask, Policy, PolicyAuthority, Rule, RuleReviewer
from goldfive_core.review import ReviewVerdict
from goldfive_core.signing import DecisionSigner, load_or_create_signing_key
from goldfive_core.store import DecideVerdict, decide
from goldfive_core.store.views import approval_json
from goldfive_core.testing import ScriptedVerdicts


def reviewed(reviewer: ScriptedVerdicts, *, mode: str = "act") -> Policy:
    review = RuleReviewer(target=reviewer, mode=mode)  # type: ignore[arg-type]
    return Policy([Rule(name="transfers", tool=TOOL, action=Ask(review=review))])


@pytest.fixture
def signer(tmp_path: Any) -> DecisionSigner:
    return load_or_create_signing_key(tmp_path / "signing.pem")[0]


async def test_a_forged_reviewer_allow_in_the_inbox_never_runs_the_body_signed_or_not(
    sqlite_backend: Backend, signer: DecisionSigner
) -> None:
    reviewer = ScriptedVerdicts([ReviewVerdict.ask("a new payee")])
    agent = Agent(sqlite_backend, "pay-rv", trust=signer.trust_key, policy=reviewed(reviewer))
    try:
        row = await agent.pending()
        assert row.metadata["review_by"] == "reviewer:scripted"
        # Unsigned, as a database writer can post it; then signed with the server's key (a reviewer's name can
        # never be a user's, but even a valid signature does not make a reviewer's verdict come from outside).
        unsigned = await post(sqlite_backend, row, ControlKind.APPROVE, decided_by="reviewer:scripted")
        as_channel = await post(sqlite_backend, row, ControlKind.APPROVE, decided_by="ana", channel="reviewer")
        sig = signer.sign(facts(row, by="reviewer:scripted"))
        signed = await post(sqlite_backend, row, ControlKind.APPROVE, decided_by="reviewer:scripted", signature=sig)
        for ack in (unsigned, as_channel, signed):
            assert not ack.ok and "only taken in the agent's own gate" in ack.detail, ack.detail
        assert agent.ran == [] and agent.row().status is ApprovalStatus.PENDING and not agent.task.done()
        assert len(reviewer.seen) == 1  # the reviewer that ran in this gate said ask
        person = await asyncio.to_thread(
            decide, sqlite_backend.open(), "pay-rv", approve=True, principal=ANA, signer=signer
        )
        assert person.verdict is DecideVerdict.APPLIED, person.detail
        assert await agent.result() == "ran" and agent.ran == [ARGS]
    finally:
        await agent.close()


@pytest.mark.parametrize("trusting", [True, False], ids=["trust-key", "no-trust-key"])
async def test_a_reviewer_allow_recorded_in_the_store_is_never_replayed(
    sqlite_backend: Backend, signer: DecisionSigner, trusting: bool
) -> None:
    store = sqlite_backend.open()
    row = orphaned(store, "pay-rr")
    assert store.decide_in_store(row.id, approved=True, detail="looks fine", decided_by="reviewer:scripted")
    replay = Agent(sqlite_backend, "pay-rr", trust=signer.trust_key if trusting else None, timeout_ms=200)
    try:
        assert await replay.result() == "timeout"  # asked a person again (nobody answered): the forgery never ran
        assert replay.ran == [] and replay.refused() == [("approve", "reviewer:scripted")]
    finally:
        await replay.close()


async def test_the_card_shows_the_verdict_and_review_stats_compares_it_with_the_people(
    sqlite_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    act = ScriptedVerdicts([ReviewVerdict.ask("a new payee")], name="payments")
    # The two shadowed calls run at once: each verdict is chosen by the call, not by which came first.
    shadow = ScriptedVerdicts(
        then=lambda seen: (
            ReviewVerdict.allow("usual amount") if seen.call.call_id == "pay-2" else ReviewVerdict.deny("odd")
        ),
        name="shadowy",
    )
    agents = [
        Agent(sqlite_backend, "pay-1", trust=None, policy=reviewed(act)),
        Agent(sqlite_backend, "pay-2", trust=None, policy=reviewed(shadow, mode="shadow")),
        Agent(sqlite_backend, "pay-3", trust=None, policy=reviewed(shadow, mode="shadow")),
    ]
    try:
        rows = [await agent.pending() for agent in agents]
        assert main(["pending", "--db", sqlite_backend.location]) == 0
        assert "reviewer:payments says ask: a new payee" in capsys.readouterr().out
        card = approval_json(rows[0], liveness="live")["review"]
        assert card is not None and (card["by"], card["verdict"], card["reason"]) == (
            "reviewer:payments",
            "ask",
            "a new payee",
        )
        assert approval_json(rows[1], liveness="live")["review"] is None  # shadow: the person is not told
        bo = Principal(name="bo", channel="cli")
        for target, approve in (("pay-1", True), ("pay-2", False), ("pay-3", False)):
            done = await asyncio.to_thread(
                decide, sqlite_backend.open(), target, approve=approve, principal=bo, reason="x"
            )
            assert done.verdict is DecideVerdict.APPLIED, done.detail
        for agent in agents:
            await agent.result()
        assert main(["show", "pay-1", "--db", sqlite_backend.location]) == 0
        assert "reviewer   reviewer:payments says ask: a new payee" in capsys.readouterr().out
        assert main(["review", "stats", "--db", sqlite_backend.location, "--json"]) == 0
        stats = json.loads(capsys.readouterr().out)
        assert stats["total"] == 3
        assert stats["by_verdict"]["allow"]["disagree"] == 1 and stats["by_verdict"]["deny"]["agree"] == 1
        assert stats["by_verdict"]["ask"]["approved"] == 1
        assert stats["by_reviewer"]["reviewer:shadowy"]["agree"] == 1
        assert stats["by_rule"]["transfers"]["disagree"] == 1
        [odd] = stats["disagreements"]
        assert (odd["call_id"], odd["verdict"], odd["person"], odd["decided_by"]) == ("pay-2", "allow", "reject", "bo")
        assert main(["review", "stats", "--db", sqlite_backend.location, "--reviewer", "shadowy"]) == 0
        text = capsys.readouterr().out
        assert "2 reviewer verdicts" in text and "disagreements (1):" in text and "reviewer:shadowy said allow" in text
    finally:
        for agent in agents:
            await agent.close()


async def test_under_the_servers_policy_a_verdict_its_rule_does_not_name_is_shown_not_verified(
    sqlite_backend: Backend, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # The reviewer runs in the agent's gate, and the agent writes its record: the server's own policy (serve
    # --policy) is what the card and the stats check the attribution against.
    reviewer = ScriptedVerdicts([ReviewVerdict.ask("hmm")], name="payments")
    agent = Agent(sqlite_backend, "pay-v", trust=None, policy=reviewed(reviewer))
    try:
        row = await agent.pending()
        same = Policy(
            [Rule(name="transfers", tool=TOOL, action=Ask(review=RuleReviewer(target="acme.review:payments")))]
        )
        other = Policy(
            [Rule(name="transfers", tool=TOOL, action=Ask(review=RuleReviewer(target="acme.review:strict")))]
        )
        plain = Policy([Rule(name="transfers", tool=TOOL, action=Ask())])
        shown = [approval_json(row, liveness="live", rules=PolicyAuthority(p))["review"] for p in (same, other, plain)]
        assert [r["verified"] for r in shown] == [True, False, False]
        assert "names reviewer:strict" in shown[1]["verified_note"] and "names no reviewer" in shown[2]["verified_note"]
        assert approval_json(row, liveness="live")["review"]["verified"] is None  # no server policy: unchecked
        policy_file = tmp_path / "server-policy.toml"
        policy_file.write_text(
            '[[rule]]\nname = "transfers"\ntool = "transfer"\naction = "ask"\nreview = "acme.review:strict"\n'
        )
        assert main(["review", "stats", "--db", sqlite_backend.location, "--policy", str(policy_file)]) == 0
        out = capsys.readouterr().out
        assert "NOT VERIFIED against the policy (1):" in out and "reviewer:payments (act) on rule 'transfers'" in out
    finally:
        await agent.close()
