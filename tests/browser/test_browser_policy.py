"""Policies in the web inbox, in a real browser against ``goldfive serve`` and real ADK agent processes: the
rule on the card, quorum progress ("1 of 2 approvals: ana") as two people approve, the escalation when nobody
finished answering in time, the grant an approval may add with its scope shown before confirming, the
standing grant listed with a Revoke button, revoked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from browser_support import ARTIFACTS, ROOT, goldfive_bin
from test_browser_inbox import Server, _card, _login, _target_of, browser, chromium, server, serving

__all__ = ["browser", "chromium", "server", "serving"]  # the fixtures (and serve), shared with the inbox tests

pytestmark = pytest.mark.timeout(150)

POLICY = """
[[rule]]
name = "large payments"
tool = "transfer_funds"
when = "args.amount > 1000"
action = "ask"
quorum = 2
escalate = { after = "1s", to = ["role:admin"] }

[[rule]]
name = "payments to acme"
tool = "transfer_funds"
when = "args.to == 'ACME Corp'"
action = "ask"
grants = ["run", "1h"]
"""


def test_quorum_progress_and_a_grant_with_its_scope_listed_and_revoked(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    example = str(ROOT / "examples" / "adk_approval.py")
    common = ("--db", str(server.db), "--wait", "--timeout-ms", "120000", "--policy", str(policy))
    ana = _login(browser, server, "ana")
    ben = _login(browser, server, "ben")
    big = server.agent(example, *common, "--invoice", "5000")
    big_id = _target_of(big)
    acme = server.agent(example, *common, "--invoice", "250")
    acme_id = _target_of(acme)

    # The rule and the count on the card; one approval is a vote, the card stays for everyone.
    card = _card(ana, big_id)
    expect(card.locator(".policy .rule")).to_have_text("rule large payments")
    expect(card.locator(".policy .quorum")).to_have_text("0 of 2 approvals")
    expect(card.locator(".grant-choice")).to_be_hidden()  # a quorum rule never grants
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(card.locator(".policy .quorum")).to_have_text("1 of 2 approvals: ana")
    expect(_card(ben, big_id).locator(".policy .quorum")).to_have_text("1 of 2 approvals: ana")
    expect(ana.locator(".toast").last).to_contain_text("was counted: 1 of 2 approvals: ana")
    # Approving again says it changed nothing (it said "was counted" again).
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(ana.locator(".toast").last).to_contain_text(
        "You had already approved transfer_funds; the same person counts once, so nothing changed: 1 of 2 approvals"
    )
    # Nobody finished answering within the rule's escalate.after: the card says who may answer now too.
    expect(card.locator(".policy .escalated")).to_have_text("escalated: role:admin may answer now too")

    # A quorum rule's card cannot go in a bulk approval: the page says why, and nothing is sent.
    _card(ben, big_id).locator("input.select").check()
    _card(ben, acme_id).locator("input.select").check()
    expect(ben.locator("#bulk-count")).to_have_text("2 selected")
    expect(ben.locator("#bulk-approve")).to_be_disabled()
    expect(ben.locator("#bulk-reject")).to_be_disabled()
    expect(ben.locator("#bulk-why")).to_contain_text("need several approvers: decide it one at a time")
    ben.screenshot(path=str(ARTIFACTS / "inbox-bulk-quorum-refused.png"), full_page=True)
    ben.locator("#bulk-clear").click()
    expect(ben.locator("#bulk")).to_be_hidden()

    # The grant an approval may add, its scope said before the approver confirms.
    grant_card = _card(ana, acme_id)
    expect(grant_card.locator(".policy .rule")).to_have_text("rule payments to acme")
    expect(grant_card.locator(".policy .quorum")).to_be_hidden()
    grant_card.locator("select.grant").select_option("1h")
    expect(grant_card.locator(".grant-scope")).to_have_text(
        'Approving also lets later transfer_funds calls that rule "payments to acme" would ask about run '
        "without asking, for 1h, until revoked."
    )
    confirm = grant_card.get_by_role("button", name="Approve and allow for 1h")
    expect(confirm).to_be_visible()
    ana.screenshot(path=str(ARTIFACTS / "inbox-policy-quorum-grant.png"), full_page=True)
    confirm.click()
    expect(grant_card).to_have_count(0)
    acme.wait_for(lambda s: s.startswith("ledger:"), timeout=60)

    # Listed for everyone, with who granted it and until when, and a Revoke button.
    for page in (ana, ben):
        item = page.locator("#grants .grant-item")
        expect(item).to_have_count(1)
        expect(item).to_contain_text(
            "allow transfer_funds calls matching rule 'payments to acme' for 1h, granted by ana"
        )
        expect(item).to_contain_text("expires")
    ben.screenshot(path=str(ARTIFACTS / "inbox-standing-grant.png"), full_page=True)
    ben.locator("#grants .grant-item").get_by_role("button", name="Revoke").click()
    expect(ben.locator("#grants")).to_be_hidden()
    expect(ana.locator("#grants")).to_be_hidden()  # the other inbox follows the revocation live
    listed = subprocess.run(
        [goldfive_bin(), "--db", str(server.db), "grants", "--all"],
        env=server.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "REVOKED" in listed and "revoked by ben" in listed

    # A bulk approval never makes a standing grant, even of a card whose grant choice was set.
    again = server.agent(example, *common, "--invoice", "260")
    again_id = _target_of(again)
    again_card = _card(ben, again_id)
    again_card.locator("select.grant").select_option("1h")
    again_card.locator("input.select").check()
    ben.locator("#bulk-approve").click()
    expect(ben.locator("#toasts")).to_contain_text("Approved 1 of 1 selected.")
    again.wait_for(lambda s: s.startswith("ledger:"), timeout=60)
    after = subprocess.run(
        [goldfive_bin(), "--db", str(server.db), "grants", "--all", "--json"],
        env=server.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert after.count('"grant_id"') == 1, after  # still only ana's, revoked

    # The second distinct approver completes the quorum: the call runs once, the card leaves both inboxes.
    _card(ben, big_id).get_by_role("button", name="Approve", exact=True).click()
    big.wait_for(lambda s: s.startswith("ledger:"), timeout=60)
    expect(_card(ana, big_id)).to_have_count(0)
    expect(_card(ben, big_id)).to_have_count(0)
    assert not ana.errors and not ben.errors, (ana.errors, ben.errors)


def test_an_edit_in_a_quorum_shows_the_edited_arguments_to_the_next_approver(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    example = str(ROOT / "examples" / "adk_approval.py")
    common = ("--db", str(server.db), "--wait", "--timeout-ms", "120000", "--policy", str(policy))
    ana = _login(browser, server, "ana")
    ben = _login(browser, server, "ben")
    big = server.agent(example, *common, "--invoice", "5000")
    big_id = _target_of(big)

    # Ana lowers the amount and approves: her edit restarts the count with her.
    card = _card(ana, big_id)
    expect(card.locator(".args")).to_contain_text("5000")
    expect(card.locator(".original")).to_be_hidden()
    card.get_by_role("button", name="Edit & approve").click()
    editor = card.locator("textarea.args-edit")
    editor.fill(editor.input_value().replace("5000", "4000"))
    card.get_by_role("button", name="Approve edited").click()
    expect(ana.locator(".toast").last).to_contain_text("was counted: 1 of 2 approvals: ana")

    # Ben's card shows what he would approve: the edited arguments, and what the agent asked for first.
    theirs = _card(ben, big_id)
    expect(theirs.locator(".policy .quorum")).to_have_text("1 of 2 approvals: ana")
    expect(theirs.locator(".args")).to_contain_text("4000")
    expect(theirs.locator(".args")).not_to_contain_text("5000")
    expect(theirs.locator(".original")).to_be_visible()
    expect(theirs.locator(".original-args")).to_contain_text("5000")
    ben.screenshot(path=str(ARTIFACTS / "inbox-quorum-edited.png"), full_page=True)

    # His approval carries the edited arguments' digest: it counts, and the call runs once with them.
    theirs.get_by_role("button", name="Approve", exact=True).click()
    big.wait_for(lambda s: s.startswith("ledger:"), timeout=60)
    assert "ledger: [{'amount': 4000, 'to': 'ACME Corp'}]" in big.output()  # once, with the edited amount
    expect(_card(ana, big_id)).to_have_count(0)
    expect(_card(ben, big_id)).to_have_count(0)
    assert not ana.errors and not ben.errors, (ana.errors, ben.errors)


SERVER_POLICY = """
[[rule]]
name = "large payments"
tool = "transfer_funds"
when = "args.amount > 1000"
action = "ask"
approvers = ["user:ana", "user:ben"]
quorum = 2

[[rule]]
name = "payments"
tool = "transfer_funds"
action = "ask"
"""
AGENT_POLICY = """
[[rule]]
name = "any payment"
tool = "transfer_funds"
action = "ask"
approvers = ["user:ana"]
"""


def test_with_serve_policy_the_card_shows_the_servers_rule_not_the_one_the_request_named(
    tmp_path: Path, chromium: str, browser: Any
) -> None:
    """The agent's own file names "any payment" (ana alone) for a 5000 payment; ``goldfive serve --policy`` judges
    the call by its file: "large payments", ana and ben, two of them. The card says so, and that the request named
    another rule; ana's approval is one vote of two."""
    from playwright.sync_api import expect

    server_policy = tmp_path / "server-policy.toml"
    server_policy.write_text(SERVER_POLICY)
    agent_policy = tmp_path / "agent-policy.toml"
    agent_policy.write_text(AGENT_POLICY)
    with serving(tmp_path, "--policy", str(server_policy)) as server:
        example = str(ROOT / "examples" / "adk_approval.py")
        common = ("--db", str(server.db), "--wait", "--timeout-ms", "120000", "--policy", str(agent_policy))
        ana = _login(browser, server, "ana")
        big = server.agent(example, *common, "--invoice", "5000")
        card = _card(ana, _target_of(big))
        expect(card.locator(".policy .rule")).to_have_text("rule large payments · approvers user:ana, user:ben")
        expect(card.locator(".policy .quorum")).to_have_text("0 of 2 approvals")
        note = card.locator(".policy .policy-note")
        expect(note).to_be_visible()
        expect(note).to_contain_text("the agent's request names rule 'any payment'")
        expect(note).to_contain_text("the server's rule 'large payments' governs this call")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        ana.screenshot(path=str(ARTIFACTS / "inbox-server-rule.png"), full_page=True)
        card.get_by_role("button", name="Approve", exact=True).click()
        expect(card.locator(".policy .quorum")).to_have_text("1 of 2 approvals: ana")
        assert "ledger:" not in big.output()  # one vote: the call waits for ben
        assert not ana.errors, ana.errors


DENYING_SERVER_POLICY = """
[[rule]]
name = "no mallory"
tool = "transfer_funds"
when = "args.to == 'Mallory Ltd'"
action = "deny"
reason = "Mallory Ltd is on the sanctions list"

[[rule]]
name = "payments"
tool = "transfer_funds"
action = "ask"
approvers = ["user:ana", "user:ben"]
"""


def test_a_card_the_servers_rule_denies_offers_no_approve_and_says_why(
    tmp_path: Path, chromium: str, browser: Any
) -> None:
    """The agent's own file asks ana about any payment ("any payment"); ``goldfive serve --policy`` denies payments
    to Mallory Ltd. That card offers no Approve (nor Edit & approve), says why, and says plainly that the agent
    named another rule and the server's applies; the key ``a`` sends nothing, Approve selected is off with the
    reason, and Reject still works (the call never runs). A card the server's rule asks about keeps its Approve."""
    from playwright.sync_api import expect

    server_policy = tmp_path / "server-policy.toml"
    server_policy.write_text(DENYING_SERVER_POLICY)
    agent_policy = tmp_path / "agent-policy.toml"
    agent_policy.write_text(AGENT_POLICY)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serving(tmp_path, "--policy", str(server_policy)) as server:
        example = str(ROOT / "examples" / "adk_approval.py")
        common = ("--db", str(server.db), "--wait", "--timeout-ms", "120000", "--policy", str(agent_policy))
        ana = _login(browser, server, "ana")
        posted: list[str] = []
        ana.on("request", lambda r: posted.append(r.url) if r.method == "POST" else None)
        mallory = server.agent(example, *common, "--invoice", "90", "--payee", "Mallory Ltd")
        mallory_id = _target_of(mallory)
        acme = server.agent(example, *common, "--invoice", "250")
        acme_id = _target_of(acme)

        card = _card(ana, mallory_id)
        expect(card.locator(".policy .rule")).to_have_text("rule no mallory (deny)")
        expect(card.locator(".policy .policy-disagrees")).to_have_text(
            'The agent named rule "any payment"; the server\'s rule "no mallory" applies.'
        )
        bar = card.locator(".rule-bar")
        expect(bar).to_be_visible()
        expect(bar).to_contain_text("Approve is not offered: the deciding side's policy denies this call")
        expect(bar).to_contain_text("(rule 'no mallory'): Mallory Ltd is on the sanctions list")
        for name in ("Approve", "Edit & approve"):
            expect(card.get_by_role("button", name=name, exact=True)).to_be_hidden()
        expect(card.locator("input.comment")).to_be_hidden()
        expect(card.get_by_role("button", name="Reject", exact=True)).to_be_visible()

        other = _card(ana, acme_id)
        expect(other.locator(".policy .policy-disagrees")).to_have_text(
            'The agent named rule "any payment"; the server\'s rule "payments" applies.'
        )
        expect(other.locator(".rule-bar")).to_be_hidden()
        expect(other.get_by_role("button", name="Approve", exact=True)).to_be_visible()
        ana.screenshot(path=str(ARTIFACTS / "inbox-server-denies.png"), full_page=True)

        # The keyboard's approve does nothing on the denied card: no decision is sent, the card stays.
        card.focus()
        expect(card).to_have_class(re.compile(r"\bcurrent\b"))
        ana.keyboard.press("a")
        expect(card).to_be_visible()

        # Approve selected is off for a selection holding it, with the reason; Reject selected is not.
        card.locator("input.select").check()
        other.locator("input.select").check()
        expect(ana.locator("#bulk-count")).to_have_text("2 selected")
        expect(ana.locator("#bulk-approve")).to_be_disabled()
        expect(ana.locator("#bulk-reject")).to_be_enabled()
        expect(ana.locator("#bulk-why")).to_contain_text("the server's rule does not let anyone approve it")
        ana.evaluate("window.scrollTo(0, 0)")  # the bar and the denied card below it, as a person first sees them
        ana.screenshot(path=str(ARTIFACTS / "inbox-bulk-server-denies.png"))
        ana.locator("#bulk-clear").click()

        # Rejected with a reason: the card leaves, the call never runs.
        card.get_by_role("button", name="Reject", exact=True).click()
        card.locator("textarea.reason").fill("sanctioned payee")
        card.get_by_role("button", name="Reject with reason").click()
        expect(card).to_have_count(0)
        mallory.wait_for(lambda s: "sanctioned payee" in s, timeout=60)
        assert "ledger: []" in mallory.output() or "ledger:" not in mallory.output(), mallory.output()
        assert not [u for u in posted if "/approve" in u], posted  # neither the key nor a button sent an approval
        assert not ana.errors, ana.errors
