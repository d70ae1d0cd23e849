"""The web inbox in a real browser (Debian's Chromium through Playwright) against ``goldfive serve``.

Everything here is real: a ``goldfive serve`` subprocess over a SQLite store, ADK agents in their own
processes (the bundled example with its scripted model, and a looping agent) waiting on that store,
and people who log in with a name and a token. Screenshots land in ``tests/.artifacts/``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from browser_support import ARTIFACTS, ROOT, Proc, chromium_or_skip, free_port, goldfive_bin, this_tree, wait_http

pytestmark = pytest.mark.timeout(120)

PAGE_TIMEOUT_MS = 15_000  # a bound on any single wait in the page, so a broken page fails instead of hanging


@dataclass
class Server:
    url: str
    db: Path
    env: dict[str, str]
    tokens: dict[str, str]
    proc: Proc
    agents: list[Proc]

    def agent(self, *args: str) -> Proc:
        proc = Proc([sys.executable, *args], env=self.env)
        self.agents.append(proc)
        return proc


def _add_user(env: dict[str, str], db: Path, name: str, role: str) -> str:
    import subprocess

    out = subprocess.run(
        [goldfive_bin(), "--db", str(db), "users", "add", name, "--role", role, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    token: str = json.loads(out.strip().splitlines()[-1])["token"]
    return token


@pytest.fixture(scope="module")
def chromium() -> str:
    return chromium_or_skip()


@pytest.fixture
def server(tmp_path: Path, chromium: str) -> Iterator[Server]:
    with serving(tmp_path) as srv:
        yield srv


@contextlib.contextmanager
def serving(tmp_path: Path, *serve_args: str) -> Iterator[Server]:
    """A ``goldfive serve`` subprocess (``serve_args`` added: ``--policy FILE``) with approvers ana and ben."""
    db = tmp_path / "goldfive.db"
    env = this_tree({k: v for k, v in os.environ.items() if not k.startswith("GOLDFIVE_")})
    env.update(GOLDFIVE_DB=str(db), GOLDFIVE_KEY_DIR=str(tmp_path / "keys"), HOME=str(tmp_path))
    tokens = {"ana": "", "ben": ""}
    port = free_port()
    proc = Proc([goldfive_bin(), "--db", str(db), "serve", "--port", str(port), *serve_args], env=env)
    url = f"http://127.0.0.1:{port}"
    srv = Server(url=url, db=db, env=env, tokens=tokens, proc=proc, agents=[])
    try:
        wait_http(url + "/", proc)
        tokens["ana"] = _add_user(env, db, "ana", "approver")
        tokens["ben"] = _add_user(env, db, "ben", "approver")
        yield srv
    finally:
        for agent in srv.agents:
            agent.stop()
        proc.stop()


@pytest.fixture
def browser(chromium: str) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium)
        try:
            yield b
        finally:
            b.close()


def _login(browser: Any, server: Server, name: str, *, width: int = 1200, height: int = 900) -> Any:
    from playwright.sync_api import expect

    expect.set_options(timeout=PAGE_TIMEOUT_MS)
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    page.goto(server.url + "/")
    page.get_by_label("Name").fill(name)
    page.get_by_label("Token").fill(server.tokens[name])
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#user-name")).to_contain_text(name)
    expect(page.locator("#live")).to_have_text("live")
    return page


def _target_of(agent: Proc) -> str:
    line = agent.wait_for(lambda s: "approval_requested" in s, timeout=30)
    found = re.search(r"target_id='([^']+)'", line)
    assert found, line
    return found.group(1)


def _card(page: Any, target_id: str) -> Any:
    return page.locator(f'li.card[data-target-id="{target_id}"]')


def test_a_person_edits_and_approves_the_card_leaves_every_inbox_and_a_reject_reason_reaches_the_model(
    server: Server, browser: Any
) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ana = _login(browser, server, "ana")
    ben = _login(browser, server, "ben")
    phone = _login(browser, server, "ana", width=390, height=844)
    expect(ana.locator("#inbox-empty")).to_be_visible()

    # Two agents ask while the pages are open: the cards appear without a reload.
    example = str(ROOT / "examples" / "adk_approval.py")
    payer = server.agent(example, "--db", str(server.db), "--wait", "--timeout-ms", "90000")
    first = _target_of(payer)
    expect(_card(ana, first)).to_be_visible()
    second_agent = server.agent(example, "--db", str(server.db), "--wait", "--timeout-ms", "60000")
    second = _target_of(second_agent)
    for page in (ana, ben, phone):
        expect(page.locator("li.card")).to_have_count(2)
    expect(_card(ana, first).locator(".args")).to_contain_text('"amount": 250')
    expect(_card(ana, first).locator(".prompt")).to_contain_text("transfer_funds")
    expect(ana).to_have_title(re.compile(r"^\(2\) "))
    ana.screenshot(path=str(ARTIFACTS / "inbox-two-pending.png"), full_page=True)
    ana.get_by_placeholder("Filter").fill(_card(ana, first).get_attribute("data-run-id") or "?")
    expect(ana.locator("li.card:visible")).to_have_count(1)
    ana.get_by_placeholder("Filter").fill("")
    phone.screenshot(path=str(ARTIFACTS / "inbox-phone.png"), full_page=True)

    # Ana edits the amount; the change shows as a diff against the original; she approves.
    card = _card(ana, first)
    card.get_by_role("button", name="Edit & approve").click()
    editor = card.locator("textarea.args-edit")
    editor.fill(editor.input_value().replace("250", "120"))
    expect(card.locator(".diff .del")).to_have_text("- amount: 250")
    expect(card.locator(".diff .add")).to_have_text("+ amount: 120")
    ana.screenshot(path=str(ARTIFACTS / "inbox-edit-diff.png"), full_page=True)
    card.get_by_role("button", name="Approve edited").click()

    # The tool runs with the edited arguments, and the card leaves every open inbox.
    payer.wait_for(lambda s: "transfer_funds ->" in s and "'amount': 120" in s, timeout=30)
    started = time.monotonic()
    expect(_card(ben, first)).to_have_count(0, timeout=3000)
    expect(_card(phone, first)).to_have_count(0, timeout=3000)
    gone_after_s = time.monotonic() - started
    expect(_card(ana, first)).to_have_count(0)
    expect(ben.locator("#toasts")).to_contain_text("approved by ana")
    # Ana's own page says it once ("with your edits"), not again as news of "approved by ana".
    expect(ana.locator("#toasts")).to_contain_text("with your edits")
    mine = [t for t in ana.locator("#toasts .toast").all_inner_texts() if "transfer_funds" in t]
    assert len(mine) == 1, mine
    expect(ben).to_have_title(re.compile(r"^\(1\) "))
    payer.wait_for(lambda s: s.startswith("ledger:"), timeout=30)
    assert "[{'amount': 120, 'to': 'ACME Corp'}]" in payer.output()
    with (ARTIFACTS / "timings.txt").open("a", encoding="utf-8") as f:
        f.write(f"card left the other two inboxes {gone_after_s:.3f} s after the agent ran the tool\n")

    # Ben rejects the other one; the reason is required and reaches the model.
    card = _card(ben, second)
    card.get_by_role("button", name="Reject").click()
    expect(card.get_by_role("button", name="Reject with reason")).to_be_disabled()
    card.locator("textarea.reason").fill("wrong payee: pay the IBAN on the invoice")
    card.get_by_role("button", name="Reject with reason").click()
    second_agent.wait_for(lambda s: "I did not pay" in s and "wrong payee: pay the IBAN on the invoice" in s)
    expect(_card(ana, second)).to_have_count(0, timeout=3000)
    expect(ana.locator("#inbox-empty")).to_be_visible()

    # History: who decided, when, what, and the edit as a diff.
    ana.get_by_role("link", name="History").click()
    entry = ana.locator(f'#history li[data-target-id="{first}"]')
    expect(entry).to_contain_text("approved")
    expect(entry).to_contain_text("by ana")
    expect(entry.locator(".diff .add")).to_have_text("+ amount: 120")
    expect(ana.locator(f'#history li[data-target-id="{second}"]')).to_contain_text("wrong payee")
    # It is a record: dated, counted, searchable, exportable.
    year = str(time.gmtime().tm_year)
    expect(entry.locator(".when")).to_contain_text(year)
    expect(ana.locator("#history-count")).to_have_text("1\u20132 of 2, newest first")
    ana.locator("#h-status").select_option("decided")
    ana.locator("#h-decider").fill("nobody")
    ana.get_by_role("button", name="Search").click()
    expect(ana.locator("#history li")).to_have_count(0)
    expect(ana.locator("#history-empty")).to_be_visible()
    ana.locator("#h-decider").fill("ben")  # ben rejected the second one
    ana.get_by_role("button", name="Search").click()
    expect(ana.locator("#history li")).to_have_count(1)
    expect(ana.locator(f'#history li[data-target-id="{second}"]')).to_contain_text("by ben")
    ana.locator("#h-decider").fill("ana")
    ana.get_by_role("button", name="Search").click()
    expect(ana.locator(f'#history li[data-target-id="{first}"]')).to_be_visible()
    expect(ana.locator("#history li")).to_have_count(1)
    assert "decider=ana" in (ana.locator("#h-csv").get_attribute("href") or "")
    exported = ana.evaluate("async () => (await fetch(document.querySelector('#h-csv').href)).text()")
    assert exported.splitlines()[0].startswith("closed_at,status,decision,tool,decided_by") and first in exported
    ana.screenshot(path=str(ARTIFACTS / "history-record.png"), full_page=True)
    # The run view of the first run: the request on its timeline, waiting and then approved.
    entry.get_by_role("link").click()
    expect(ana.locator('#timeline .tl-row[data-status="approved"]')).to_contain_text("transfer_funds")
    ana.screenshot(path=str(ARTIFACTS / "run-approved.png"), full_page=True)
    assert not (ana.errors or ben.errors or phone.errors), ana.errors + ben.errors + phone.errors


def test_a_wrong_token_is_refused_and_acting_on_a_card_someone_else_decided_says_who_and_when(
    server: Server, browser: Any
) -> None:
    from playwright.sync_api import expect

    # A wrong token is refused on the sign-in form, and nothing else of the page shows.
    stranger = browser.new_page()
    stranger.goto(server.url + "/")
    stranger.get_by_label("Name").fill("ana")
    stranger.get_by_label("Token").fill("gf5_not.a-real-token")
    stranger.get_by_role("button", name="Sign in").click()
    expect(stranger.locator("#login-error")).not_to_be_empty()
    expect(stranger.locator("#view-inbox")).to_be_hidden()
    stranger.close()

    ana = _login(browser, server, "ana")
    # Ben's page gets no live updates (as if its connection stalled): his card stays after Ana decides.
    ben = _login(browser, server, "ben")
    ben.route("**/api/events", lambda route: route.abort())
    ben.reload()
    expect(ben.locator("#user-name")).to_contain_text("ben")
    payer = server.agent(str(ROOT / "examples" / "adk_approval.py"), "--db", str(server.db), "--wait")
    target = _target_of(payer)
    ben.reload()  # no stream: a reload is how this page learns of the request
    expect(_card(ben, target)).to_be_visible()
    expect(_card(ana, target)).to_be_visible()
    _card(ana, target).get_by_role("button", name="Approve", exact=True).click()
    payer.wait_for(lambda s: s.startswith("ledger:"), timeout=30)

    _card(ben, target).get_by_role("button", name="Approve", exact=True).click()
    expect(ben.locator("#toasts")).to_contain_text(re.compile(r"already approved by ana at \d"))
    expect(_card(ben, target)).to_have_count(0)
    # One toast says what happened; no second one reads "…was undefined at …" (read now: toasts fade).
    toasts = ben.locator("#toasts .toast").all_inner_texts()
    assert len(toasts) == 1 and "undefined" not in toasts[0], toasts
    assert payer.output().count("transfer_funds ->") == 1


def test_an_escalated_run_shows_its_badge_and_a_steer_reaches_the_model(server: Server, browser: Any) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ana = _login(browser, server, "ana")
    agent = server.agent(str(Path(__file__).with_name("escalating_agent.py")))
    ana.get_by_role("link", name="Runs").click()
    run_link = ana.locator("#runs-table a").first
    expect(run_link).to_be_visible()
    run_link.click()
    badge = ana.locator("#run-badge")
    expect(badge).to_have_text("ESCALATED · LOOPING TOOL CALL")
    expect(ana.locator("#run-drift")).to_contain_text("called 4 times in a row")
    # The agent's markup is shown as text and never runs.
    expect(ana.locator("#run-drift")).to_contain_text('<img src=x onerror=\\"window.pwned=1\\">')
    assert ana.locator("#run-drift img, #run-events img").count() == 0
    assert ana.evaluate("window.pwned") is None
    expect(ana.locator("#timeline .tl-row")).to_have_count(1)
    expect(ana.locator("#timeline .tl-row .seg.blocked")).to_have_count(1)
    ana.screenshot(path=str(ARTIFACTS / "run-escalated.png"), full_page=True)

    ana.get_by_placeholder("Tell the agent what to do instead").fill("STEER: read the cached forecast")
    ana.get_by_role("button", name="Steer").click()
    expect(ana.locator("#run-result")).to_contain_text("steer: done")
    agent.wait_for(lambda s: s.startswith("model read:") and "STEER: read the cached forecast" in s)
    expect(badge).not_to_have_text(re.compile("ESCALATED"))
    expect(ana.locator("#run-events")).to_contain_text("run resumed with a steer by ana")
    assert not ana.errors, ana.errors


def test_an_edit_that_does_not_fit_the_tool_is_refused_by_the_server_with_the_field_shown_in_the_editor(
    server: Server, browser: Any
) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ana = _login(browser, server, "ana")
    payer = server.agent(str(ROOT / "examples" / "adk_approval.py"), "--db", str(server.db), "--wait")
    target = _target_of(payer)
    card = _card(ana, target)
    card.get_by_role("button", name="Edit & approve").click()
    editor = card.locator("textarea.args-edit")
    editor.fill(editor.input_value().replace("250", '"two hundred"'))
    card.get_by_role("button", name="Approve edited").click()
    error = card.locator(".error")
    expect(error).to_contain_text("Field “amount”")
    expect(error).to_contain_text("'amount' must be an integer, got string 'two hundred'")
    expect(editor).to_have_attribute("aria-invalid", "true")
    expect(editor).to_be_focused()
    ana.screenshot(path=str(ARTIFACTS / "inbox-edit-refused.png"), full_page=True)
    assert "transfer_funds ->" not in payer.output()  # nothing reached the agent

    editor.fill(editor.input_value().replace('"two hundred"', "200"))
    expect(error).to_be_empty()  # the server's word was on the text before the fix, not on this one
    card.get_by_role("button", name="Approve edited").click()
    payer.wait_for(lambda s: s.startswith("ledger:"), timeout=30)
    assert "[{'amount': 200, 'to': 'ACME Corp'}]" in payer.output()
    expect(card).to_have_count(0)
    assert not ana.errors, ana.errors


def test_a_paused_run_shows_its_badge_live_resume_clears_it_and_a_steer_reaches_the_model(
    server: Server, browser: Any
) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ana = _login(browser, server, "ana")
    ben = _login(browser, server, "ben")
    agent = server.agent(str(Path(__file__).with_name("escalating_agent.py")), "--patient")
    agent.wait_for(lambda s: s.startswith("searching"), timeout=30)
    run_id = _only_run(server)
    for page in (ana, ben):
        page.goto(f"{server.url}/#/runs/{run_id}")
        expect(page.locator("#run-badge")).to_have_text("RUNNING")
    expect(ana.get_by_role("button", name="Resume")).to_be_hidden()

    # Ana pauses the run: both pages show PAUSED (Ben's only from the run's own run_paused event).
    ana.get_by_role("button", name="Pause").click()
    expect(ana.locator("#run-result")).to_contain_text("pause: done")
    for page in (ana, ben):
        expect(page.locator("#run-badge")).to_have_text("PAUSED")
        expect(page.locator("#run-drift")).to_contain_text("by ana (web): paused from the inbox")
        expect(page.locator("#run-events")).to_contain_text("run paused by ana")
    expect(ben.get_by_role("button", name="Resume")).to_be_visible()
    expect(ben.get_by_role("button", name="Pause")).to_be_hidden()
    ana.screenshot(path=str(ARTIFACTS / "run-paused.png"), full_page=True)
    # The runs list says so too (it has no events: the server reads the run's standing pause), and so does
    # `goldfive runs` on the database.
    ben.goto(f"{server.url}/#/runs")
    listed = ben.locator("#runs-table .badge")
    expect(listed).to_have_text("PAUSED")
    expect(listed).to_have_attribute("title", "by ana (web): paused from the inbox")
    ben.screenshot(path=str(ARTIFACTS / "runs-list-paused.png"), full_page=True)
    runs = subprocess.run(
        [sys.executable, "-m", "goldfive_core.cli", "--db", str(server.db), "runs"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert f"{run_id}  pid" in runs and "live  PAUSED by ana (web): paused from the inbox" in runs, runs
    ben.goto(f"{server.url}/#/runs/{run_id}")

    # Ben resumes it: the badge clears everywhere and the agent goes on working.
    searched = len([line for line in agent.output().splitlines() if line.startswith("searching")])
    ben.get_by_role("button", name="Resume").click()
    for page in (ana, ben):
        expect(page.locator("#run-badge")).to_have_text("RUNNING")
        expect(page.locator("#run-drift")).to_be_hidden()
    expect(ana.locator("#run-events")).to_contain_text("run resumed by ben")
    ana.goto(f"{server.url}/#/runs")
    expect(ana.locator("#runs-table .badge")).to_have_text("RUNNING")
    ana.goto(f"{server.url}/#/runs/{run_id}")
    agent.wait_for(lambda _: len([x for x in agent.output().splitlines() if x.startswith("searching")]) > searched)

    # Paused again, a steer resumes it and its text reaches the model.
    ana.get_by_role("button", name="Pause").click()
    expect(ana.locator("#run-badge")).to_have_text("PAUSED")
    ana.get_by_placeholder("Tell the agent what to do instead").fill("STEER: stop searching and report")
    ana.get_by_role("button", name="Steer").click()
    agent.wait_for(lambda s: s.startswith("model read:") and "STEER: stop searching and report" in s)
    expect(ana.locator("#run-badge")).not_to_have_text("PAUSED")
    expect(ana.locator("#run-events")).to_contain_text("run resumed with a steer by ana")
    assert not (ana.errors or ben.errors), ana.errors + ben.errors


def _only_run(server: Server) -> str:
    import sqlite3

    with contextlib.closing(sqlite3.connect(server.db)) as db:
        rows = db.execute("SELECT run_id FROM gf_runs").fetchall()
    assert len(rows) == 1, rows
    return str(rows[0][0])


def test_a_notification_link_opens_its_card_and_failed_deliveries_show_in_the_inbox(
    server: Server, browser: Any
) -> None:
    import asyncio
    import threading

    from playwright.sync_api import expect

    from goldfive_core.server.notify import Notifier, NotifyConfig, RetryPolicy, WebhookTarget
    from goldfive_core.store import open_store

    payer = server.agent(str(ROOT / "examples" / "adk_approval.py"), "--db", str(server.db), "--wait")
    target = _target_of(payer)
    # A webhook nobody listens on (a closed loopback port): the one try fails and the notice is marked failed.
    dead = WebhookTarget(name="ops", url=f"http://127.0.0.1:{free_port()}/hook", secret="s")
    config = NotifyConfig(public_url=server.url, targets=(dead,), retry=RetryPolicy(max_attempts=1))

    def deliver_once() -> None:  # in a thread of its own: Playwright's sync API holds this thread's event loop
        store = open_store(str(server.db))
        try:
            asyncio.run(Notifier(store, config, start_at=0).step())
        finally:
            store.close()

    worker = threading.Thread(target=deliver_once)
    worker.start()
    worker.join(timeout=60)

    from playwright.sync_api import Page

    page: Page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(f"{server.url}/#/approvals/{target}")  # the link a notification carries
    page.get_by_label("Name").fill("ana")
    page.get_by_label("Token").fill(server.tokens["ana"])
    page.get_by_role("button", name="Sign in").click()
    expect(_card(page, target)).to_have_class(re.compile(r"\bfocused\b"))
    banner = page.locator("#notify-failed")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("1 notification could not be sent — webhook:ops")
    assert "127.0.0.1" not in (banner.text_content() or "")  # the channel is named, never its URL
    page.screenshot(path=str(ARTIFACTS / "inbox-notification-link.png"), full_page=True)
    _card(page, target).get_by_role("button", name="Approve", exact=True).click()
    payer.wait_for(lambda s: s.startswith("ledger:"), timeout=30)


def test_a_lockout_says_its_wait_an_ended_session_says_so_and_a_stopped_server_shows_disconnected(
    server: Server, browser: Any
) -> None:
    """What the page says is what is true: the server's wait on a lockout, why the sign-in form came back,
    that the server is gone, and that a click it could not send was not sent (never "will be retried")."""
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    expect.set_options(timeout=PAGE_TIMEOUT_MS)
    # Wrong secrets for ben's real token id: after a few, the server asks for a wait of some seconds.
    stranger = browser.new_page()
    stranger.set_default_timeout(PAGE_TIMEOUT_MS)
    stranger.goto(server.url + "/")
    token = server.tokens["ben"]
    wrong = token[:-3] + ("xyz" if not token.endswith("xyz") else "abc")
    error = stranger.locator("#login-error")
    for _ in range(10):
        stranger.get_by_label("Name").fill("ben")
        stranger.get_by_label("Token").fill(wrong)
        with stranger.expect_response("**/api/login") as answer:
            stranger.get_by_role("button", name="Sign in").click()
        if answer.value.status == 429:
            break
    assert answer.value.status == 429
    wait_s = int(answer.value.headers["retry-after"])
    expect(error).to_have_text(f"Too many failed attempts; try again in {wait_s} s.")
    stranger.screenshot(path=str(ARTIFACTS / "login-lockout.png"))
    stranger.close()

    # Ana's session ends from another process (disabled): her page says so on the sign-in form.
    ana = _login(browser, server, "ana")
    subprocess.run(
        [goldfive_bin(), "--db", str(server.db), "users", "disable", "ana"],
        env=server.env,
        capture_output=True,
        timeout=60,
        check=True,
    )
    expect(ana.locator("#view-login")).to_be_visible()
    expect(ana.locator("#login-error")).to_have_text("Your session ended; sign in again.")
    ana.screenshot(path=str(ARTIFACTS / "session-ended.png"))
    subprocess.run(
        [goldfive_bin(), "--db", str(server.db), "users", "enable", "ana"],
        env=server.env,
        capture_output=True,
        timeout=60,
        check=True,
    )

    # The server stops: the page says disconnected, and a click is refused with words.
    ana = _login(browser, server, "ana")
    payer = server.agent(str(ROOT / "examples" / "adk_approval.py"), "--db", str(server.db), "--wait")
    target = _target_of(payer)
    card = _card(ana, target)
    expect(card).to_be_visible()
    server.proc.stop()
    # One SIGTERM stopped it with a tab open (ended by the signal it re-raises after a clean stop, not SIGKILL).
    assert server.proc.proc.returncode in (0, -signal.SIGTERM), server.proc.output()
    expect(ana.locator("#live")).to_contain_text("disconnected")
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(card.locator(".error")).to_contain_text("was not sent")
    expect(card.locator(".error")).not_to_contain_text("retrying")
    ana.screenshot(path=str(ARTIFACTS / "inbox-disconnected.png"), full_page=True)
    assert "transfer_funds ->" not in payer.output()
    assert not ana.errors, ana.errors


def test_keyboard_bulk_approve_a_comment_and_the_runs_table_on_a_phone(server: Server, browser: Any) -> None:
    """An approver works the queue from the keyboard (? lists the keys, j moves, a approves and the next card
    takes the focus), approves with a comment the model reads, approves two selected cards in one action —
    each its own record, only those two — and reads the Runs table at 390 px with its column names."""
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ana = _login(browser, server, "ana")
    amounts = [101, 202, 303, 404]
    payers = [
        server.agent(str(ROOT / "examples" / "adk_approval.py"), "--db", str(server.db), "--wait", "--invoice", str(n))
        for n in amounts
    ]
    targets = [_target_of(p) for p in payers]
    for target in targets:
        expect(_card(ana, target)).to_be_visible()

    ana.keyboard.press("?")
    expect(ana.locator("#keys")).to_be_visible()
    expect(ana.locator("#keys")).to_contain_text("approve this request as it is")
    ana.screenshot(path=str(ARTIFACTS / "inbox-keys.png"))
    ana.keyboard.press("Escape")
    expect(ana.locator("#keys")).to_be_hidden()

    # j to the first card, a approves it, and the next card is where the focus goes.
    ana.keyboard.press("j")
    cards = ana.locator("#cards li.card")
    first = cards.nth(0)
    first_target = first.get_attribute("data-target-id")
    second_target = cards.nth(1).get_attribute("data-target-id")
    expect(first).to_have_class(re.compile(r"\bcurrent\b"))
    ana.keyboard.press("a")
    expect(_card(ana, first_target)).to_have_count(0)
    expect(_card(ana, second_target)).to_be_focused()
    expect(_card(ana, second_target)).to_have_class(re.compile(r"\bcurrent\b"))

    # A comment goes with the approval of the (now first) card, and its model reads it.
    second = _card(ana, second_target)
    second.locator("input.comment").fill("checked with finance: invoice is real")
    second.get_by_role("button", name="Approve", exact=True).click()
    expect(second).to_have_count(0)
    commented = payers[targets.index(second_target)]
    commented.wait_for(lambda s: "transfer_funds ->" in s, timeout=30)
    assert "checked with finance: invoice is real" in commented.output()

    # The last two are selected (x on one, a click on the other) and approved in one action.
    rest = [t for t in targets if t not in (first_target, second_target)]
    _card(ana, rest[0]).focus()
    ana.keyboard.press("x")
    _card(ana, rest[1]).locator("input.select").check()
    expect(ana.locator("#bulk-count")).to_have_text("2 selected")
    ana.screenshot(path=str(ARTIFACTS / "inbox-bulk-selected.png"), full_page=True)
    ana.locator("#bulk-approve").click()
    expect(ana.locator("#toasts")).to_contain_text("Approved 2 of 2 selected.")
    expect(ana.locator("#cards li.card")).to_have_count(0)
    for payer, amount in zip(payers, amounts, strict=True):
        payer.wait_for(lambda s: s.startswith("ledger:"), timeout=30)
        assert payer.output().count("transfer_funds ->") == 1
        assert f"'amount': {amount}" in payer.output()
    # Each approval is its own record, by ana, and none made a standing grant.
    listing = subprocess.run(
        [goldfive_bin(), "--db", str(server.db), "events"], env=server.env, capture_output=True, text=True, timeout=60
    ).stdout
    assert listing.count("approval_granted") == 4, listing
    assert "grant_created" not in listing
    assert not ana.errors, ana.errors

    phone = _login(browser, server, "ben", width=390, height=800)
    phone.get_by_role("link", name="Runs").click()
    first_row = phone.locator("#runs-table tbody tr").first
    expect(first_row).to_be_visible()
    for label in ("Run", "State", "Agent", "Started", "Process"):
        expect(first_row.locator(f'td[data-label="{label}"]')).to_be_visible()
    label_shown = phone.evaluate(
        "getComputedStyle(document.querySelector('#runs-table td[data-label]'), '::before').content"
    )
    assert label_shown == '"Run"', label_shown
    phone.screenshot(path=str(ARTIFACTS / "runs-phone.png"), full_page=True)


def test_an_escalated_run_is_a_card_in_the_inbox_counted_filtered_and_steered_from_there(
    server: Server, browser: Any
) -> None:
    """A run the ladder paused for a person (level 4) is a card in the Inbox queue and its count, with the
    drift (inert) and Resume / Steer / Cancel on the card; the kind filter shows it under escalations only."""
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ana = _login(browser, server, "ana")
    agent = server.agent(str(Path(__file__).with_name("escalating_agent.py")))
    payer = server.agent(str(ROOT / "examples" / "adk_approval.py"), "--db", str(server.db), "--wait")
    target = _target_of(payer)
    card = ana.locator("#cards li.card.escalation")
    expect(card).to_have_count(1)
    expect(card).to_contain_text("Escalated: looping tool call")
    expect(card.locator(".drift-reason")).to_contain_text("called 4 times in a row")
    expect(card.locator(".drift-reason")).to_contain_text('<img src=x onerror=\\"window.pwned=1\\">')
    assert ana.locator("#cards img").count() == 0 and ana.evaluate("window.pwned") is None
    expect(ana.locator("#pending-count")).to_have_text("2")  # the escalation and the payment
    expect(ana.locator("#cards li.card").first).to_have_class(re.compile(r"\bescalation\b"))  # it leads
    ana.screenshot(path=str(ARTIFACTS / "inbox-escalation-card.png"), full_page=True)

    ana.locator("#kind-filter").select_option("escalation")
    expect(card).to_be_visible()
    expect(_card(ana, target)).to_be_hidden()
    ana.locator("#kind-filter").select_option("tool")
    expect(card).to_be_hidden()
    expect(_card(ana, target)).to_be_visible()
    ana.locator("#kind-filter").select_option("")

    card.get_by_placeholder("A new direction for this run").fill("STEER: read the cached forecast")
    card.get_by_role("button", name="Steer").click()
    expect(ana.locator("#toasts")).to_contain_text("Steered run")
    agent.wait_for(lambda s: s.startswith("model read:") and "STEER: read the cached forecast" in s)
    expect(ana.locator("#cards li.card.escalation")).to_have_count(0)
    expect(ana.locator("#pending-count")).to_have_text("1")
    assert not ana.errors, ana.errors
