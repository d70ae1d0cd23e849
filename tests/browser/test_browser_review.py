"""The reviewer tier in the web inbox, in a real browser against ``goldfive serve`` and real ADK agent processes:
the rule's reviewer said "ask" (its reason on the card), another could not decide (the card says so, a person
decides), and one it allowed never reached the inbox."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from browser_support import ARTIFACTS, ROOT, Proc, free_port, goldfive_bin, wait_http
from test_browser_inbox import Server, _card, _login, _target_of, browser, chromium, server

__all__ = ["browser", "chromium", "server"]  # the fixtures, shared with the inbox tests

pytestmark = pytest.mark.timeout(150)

REVIEWER = """
from goldfive_core.review import ReviewVerdict


def payments(call, context, rule):
    amount, to = call.args["amount"], call.args["to"]
    if amount <= 100:
        return ReviewVerdict.allow(f"{amount} EUR is within the petty-cash limit")
    if amount > 10000:
        raise RuntimeError("the review model is unreachable")
    return ReviewVerdict.ask(f"{to} is a new payee and {amount} EUR is above the usual <b>invoice</b>")
"""

POLICY = """
[[rule]]
name = "reviewed payments"
tool = "transfer_funds"
action = "ask"
review = "gf_browser_reviewer:payments"
"""


def test_the_reviewers_verdict_and_reason_are_on_the_card_and_its_allow_never_reaches_the_inbox(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (tmp_path / "gf_browser_reviewer.py").write_text(textwrap.dedent(REVIEWER))
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    server.env["PYTHONPATH"] = str(tmp_path)  # where the agents import the reviewer from
    example = str(ROOT / "examples" / "adk_approval.py")
    common = ("--db", str(server.db), "--wait", "--timeout-ms", "120000", "--policy", str(policy))
    small = server.agent(example, *common, "--invoice", "80")
    asked = server.agent(example, *common, "--invoice", "2500", "--payee", "Globex")
    asked_id = _target_of(asked)
    broken = server.agent(example, *common, "--invoice", "50000")
    broken_id = _target_of(broken)
    # The reviewer allowed the small one in the agent's own gate: it ran, and no person was asked.
    small.wait_for(lambda s: s.startswith("ledger: [{'amount': 80"), timeout=60)
    assert "approval_requested" not in small.output()

    ana = _login(browser, server, "ana")
    expect(ana.locator("li.card")).to_have_count(2)
    card = _card(ana, asked_id)
    review = card.locator(".review")
    expect(review.locator(".review-by")).to_have_text("reviewer:payments")
    expect(review.locator(".review-verdict")).to_have_text("asks a person to decide")
    # The reason is the agent side's text: shown as text, never as markup.
    expect(review.locator(".review-reason")).to_have_text(
        "“Globex is a new payee and 2500 EUR is above the usual <b>invoice</b>”"
    )
    expect(review.locator("b")).to_have_count(0)
    failed = _card(ana, broken_id).locator(".review")
    expect(failed.locator(".review-verdict")).to_have_text("gave no verdict: a person decides")
    expect(failed.locator(".review-error")).to_contain_text("raised RuntimeError: the review model is unreachable")
    ana.screenshot(path=str(ARTIFACTS / "reviewer-verdict-on-card.png"), full_page=True)

    # The person decides as usual; the reviewer's verdict stays on the record beside theirs.
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(card).to_have_count(0)
    asked.wait_for(lambda s: s.startswith("ledger: [{'amount': 2500"), timeout=60)
    assert ana.errors == []


SERVER_POLICY = """
[[rule]]
name = "reviewed payments"
tool = "transfer_funds"
action = "ask"
"""


def test_a_verdict_the_servers_own_rule_does_not_name_is_marked_not_verified(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    """The agent's file names a reviewer, ``serve --policy`` names none for that rule: the card says the verdict
    was not checked by the server, so a person does not take the agent's reviewer as the operator's."""
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (tmp_path / "gf_browser_reviewer.py").write_text(textwrap.dedent(REVIEWER))
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    theirs = tmp_path / "server-policy.toml"
    theirs.write_text(SERVER_POLICY)
    port = free_port()
    strict = Proc(
        [goldfive_bin(), "--db", str(server.db), "serve", "--port", str(port), "--policy", str(theirs)],
        env=server.env,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/", strict)
        site = Server(
            url=f"http://127.0.0.1:{port}", db=server.db, env=server.env, tokens=server.tokens, proc=strict, agents=[]
        )
        server.env["PYTHONPATH"] = str(tmp_path)
        example = str(ROOT / "examples" / "adk_approval.py")
        common = ("--db", str(server.db), "--wait", "--timeout-ms", "120000", "--policy", str(policy))
        asked_id = _target_of(server.agent(example, *common, "--invoice", "2500", "--payee", "Globex"))

        plain = _card(_login(browser, server, "ana"), asked_id).locator(".review")
        expect(plain.locator(".review-verdict")).to_have_text("asks a person to decide")
        expect(plain.locator(".review-unverified")).to_have_count(0)  # no server policy to check against

        ana = _login(browser, site, "ana")
        review = _card(ana, asked_id).locator(".review")
        expect(review.locator(".review-by")).to_have_text("reviewer:payments")
        expect(review.locator(".review-unverified")).to_have_text(
            "Not verified: the server's rule 'reviewed payments' names no reviewer; "
            "this verdict was not checked by goldfive serve"
        )
        ana.screenshot(path=str(ARTIFACTS / "reviewer-not-verified.png"), full_page=True)
        assert ana.errors == []
    finally:
        strict.stop()
