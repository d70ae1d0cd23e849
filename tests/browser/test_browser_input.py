"""A request for input in the inbox, in real Chromium: an MCP upstream's question (``ctx.elicit`` behind
``goldfive mcp``) arrives as a form; a person fills it, is told what does not fit, submits it, and the upstream
gets the values; the next one is declined. Screenshots land in ``tests/.artifacts/``.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
import test_browser_inbox as inbox
from browser_support import ARTIFACTS, ROOT, Proc
from test_browser_inbox import Server, _add_user, _login

pytestmark = pytest.mark.timeout(120)

chromium, browser, server = inbox.chromium, inbox.browser, inbox.server  # the inbox tests' fixtures, shared


def test_a_person_fills_the_form_is_told_what_does_not_fit_submits_and_declines_the_next(
    server: Server, browser: Any
) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    server.tokens["vic"] = _add_user(server.env, server.db, "vic", "viewer")
    page = _login(browser, server, "ana", width=1100, height=1000)
    viewer = _login(browser, server, "vic")
    client = Proc(
        [sys.executable, str(ROOT / "tests" / "browser" / "elicit_client.py"), str(server.db), "2"], env=server.env
    )
    server.agents.append(client)

    card = page.locator("li.card.input-card")
    expect(card).to_have_count(1)  # arrives without a reload
    expect(card.locator(".prompt")).to_contain_text("Booking at Chez Ana #1: who is it for, and how many?")
    expect(card.locator(".tool")).to_have_text("book_table asks for input")
    form = card.locator("form.input-form")
    expect(form.get_by_label("name (required)")).to_be_visible()
    expect(viewer.locator("li.card.input-card .act-submit")).to_be_disabled()  # a viewer sees it, cannot answer
    page.select_option("#kind-filter", "input")
    expect(card).to_be_visible()
    page.select_option("#kind-filter", "tool")
    expect(card).to_be_hidden()
    page.select_option("#kind-filter", "")

    form.get_by_label("name (required)").fill("Ana")
    form.get_by_label("guests (required)").fill("40")
    form.get_by_role("button", name="Submit").click()
    expect(form.locator(".field-error").nth(1)).to_have_text("Guests must be at most 12")
    page.screenshot(path=str(ARTIFACTS / "input-form-invalid.png"), full_page=True)
    assert not any(line.startswith("RESULT") for line in client.lines)  # nothing was sent

    form.get_by_label("guests (required)").fill("4")
    form.get_by_label("seating").select_option("terrace")
    form.get_by_label("vegetarian").check()
    page.screenshot(path=str(ARTIFACTS / "input-form-filled.png"), full_page=True)
    form.get_by_role("button", name="Submit").click()
    line = client.wait_for(lambda s: s.startswith("RESULT 1:"), timeout=30)
    assert line == "RESULT 1: booked Chez Ana #1 for Ana (4)"
    expect(page.locator("#toasts")).to_contain_text("Answered book_table asks for input")

    second = page.locator("li.card.input-card")
    expect(second.locator(".prompt")).to_contain_text("Chez Ana #2")  # the first left, the next arrived
    page.screenshot(path=str(ARTIFACTS / "input-form-next.png"), full_page=True)
    second.get_by_role("button", name="Decline").click()
    assert client.wait_for(lambda s: s.startswith("RESULT 2:"), timeout=30) == "RESULT 2: not booked: decline"
    expect(page.locator("li.card.input-card")).to_have_count(0)
    expect(page.locator("#inbox-empty")).to_be_visible()
    page.screenshot(path=str(ARTIFACTS / "input-form-gone.png"), full_page=True)
    assert page.errors == [] and viewer.errors == []
