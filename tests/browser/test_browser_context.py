"""The context on a card and the history's refused decisions, in a real browser against ``goldfive serve``.

An ADK agent process (scripted model: text, two tool calls, then the gated transfer) waits on the store; ana reads
on its card what maria asked, who, the last steps and why, every word inert, and approves it. A request whose host
recorded nothing says so. A decision the server refused (a request past its deadline) and one an agent refused (a
bad signature) are records on the History page.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import test_browser_inbox as inbox
from browser_support import ARTIFACTS
from context_agent import SAID, USER
from test_browser_inbox import Server, _login

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import open_store

pytestmark = pytest.mark.timeout(120)

chromium, browser, server = inbox.chromium, inbox.browser, inbox.server  # the inbox tests' fixtures, shared


def _event(run_id: str, seq: int, **payload: Any) -> events_pb2.Event:
    event = events_pb2.Event(event_id=f"{run_id}-{seq}", run_id=run_id, session_id="s", sequence=seq, **payload)
    event.emitted_at.GetCurrentTime()
    return event


def _seed(server: Server, *events: events_pb2.Event) -> None:
    store = open_store(str(server.db))
    try:
        store.append_events(list(events), pid=1, host="elsewhere")
    finally:
        store.close()


def _ask(run_id: str, seq: int, target: str, tool: str) -> events_pb2.Event:
    asked = events_pb2.ApprovalRequested(
        target_id=target,
        kind="tool",
        prompt=f"Allow {tool}?",
        metadata={"tool_name": tool, "args_json": '{"table":"users"}', "agent_name": "janitor"},
        request_id=f"req-{target}",
        timeout_ms=600_000,
    )
    return _event(run_id, seq, approval_requested=asked)


def test_a_card_shows_what_led_to_it_inert_and_a_host_with_nothing_says_so(server: Server, browser: Any) -> None:
    from playwright.sync_api import expect

    agent = server.agent(str(Path(__file__).with_name("context_agent.py")))
    _seed(server, _event("run-bare", 0, run_started=events_pb2.RunStarted(adapter="elsewhere")))
    _seed(server, _ask("run-bare", 1, "wipe-1", "wipe_table"))
    ana = _login(browser, server, "ana")
    card = ana.locator("li.card", has_text="transfer_funds")
    context = card.locator(".context")
    expect(context).to_contain_text("Pay the ACME invoice")
    expect(context.locator(".ctx-asked .uc")).to_have_text("⟨U+202E⟩")  # the hidden override, made visible
    expect(context.locator(".ctx-who")).to_contain_text("agent treasurer · started by ")
    expect(context.locator(".ctx-who")).to_contain_text(f"for {USER} · on adk")
    expect(context.locator(".ctx-why")).to_have_text("Why the tool asks for confirmation before it runs")
    steps = context.locator(".ctx-steps li")
    expect(steps).to_have_count(5)
    expect(steps.nth(0)).to_have_text(f"said treasurer {SAID}")
    expect(steps.nth(1)).to_have_text('called lookup_invoice {"invoice":"INV-7"}')
    expect(steps.nth(2)).to_contain_text("result lookup_invoice")
    expect(steps.nth(2)).to_contain_text('"memo":"<script>window.pwned=2</script>xxx')  # as text, clipped
    expect(steps.nth(3)).to_have_text('called check_balance {"account":"ops"}')
    expect(context.locator("img, script")).to_have_count(0)
    assert ana.evaluate("() => window.pwned === undefined")
    expect(context.get_by_role("link", name="Open the whole run")).to_have_attribute("href", "#/runs/" + _run(card))
    card.scroll_into_view_if_needed()
    card.screenshot(path=str(ARTIFACTS / "card-context.png"))
    bare = ana.locator('li.card[data-target-id="wipe-1"]')
    expect(bare.locator(".ctx-note")).to_have_text("no context from this host")
    bare.scroll_into_view_if_needed()
    bare.screenshot(path=str(ARTIFACTS / "card-no-context.png"))
    card.get_by_role("button", name="Approve").first.click()
    expect(card).to_have_count(0)
    agent.wait_for(lambda line: line.startswith("result: {'sent': 250"), timeout=30)
    assert not ana.errors, ana.errors


def _run(card: Any) -> str:
    run_id: str = card.get_attribute("data-run-id") or ""
    assert run_id
    return run_id


def test_the_history_lists_refused_decisions_with_who_claimed_and_why(server: Server, browser: Any) -> None:
    from playwright.sync_api import expect

    forged = events_pb2.DecisionRefused(
        target_id="wipe-2",
        decision="approve",
        decided_by='mallory <img src=x onerror="window.pwned=3">',
        reason="signature does not match the key this agent trusts\u200b",
        channel="web",
    )
    timed_out = events_pb2.ApprovalTimedOut(target_id="wipe-1", timeout_ms=1000)
    _seed(
        server,
        _event("run-h", 0, run_started=events_pb2.RunStarted(adapter="callable")),
        _ask("run-h", 1, "wipe-1", "wipe_table"),
        _event("run-h", 2, approval_timed_out=timed_out),
        _ask("run-h", 3, "wipe-2", "drop_table"),
        _event("run-h", 4, decision_refused=forged),
    )
    late = urllib.request.Request(
        server.url + "/api/approvals/wipe-1/approve",
        data=json.dumps({}).encode(),
        headers={"Authorization": f"Bearer {server.tokens['ben']}", "Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:  # ben approves after the deadline: 409, audited
        urllib.request.urlopen(late, timeout=30)
    assert refused.value.code == 409
    ana = _login(browser, server, "ana")
    ana.goto(server.url + "/#/history")
    ana.locator("#h-status").select_option("refused")
    ana.get_by_role("button", name="Search").click()
    entries = ana.locator("#history li")
    expect(entries).to_have_count(2)
    late_entry = ana.locator('#history li[data-target-id="wipe-1"]')
    expect(late_entry.locator(".verdict")).to_have_text("refused approve")
    expect(late_entry).to_contain_text("claimed by ben")
    expect(late_entry.locator(".reason")).to_contain_text("Not applied: ")
    expect(late_entry.locator(".reason")).to_contain_text("expired")
    forged_entry = ana.locator('#history li[data-target-id="wipe-2"]')
    expect(forged_entry).to_contain_text('claimed by mallory <img src=x onerror="window.pwned=3">')
    expect(forged_entry.locator(".reason .uc")).to_have_text("⟨U+200B⟩")
    expect(forged_entry).to_contain_text("drop_table")
    expect(ana.locator("#history img")).to_have_count(0)
    assert ana.evaluate("() => window.pwned === undefined")
    expect(ana.locator("#history-count")).to_have_text("1\u20132 of 2, newest first")
    exported = ana.evaluate("async () => (await fetch(document.querySelector('#h-csv').href)).text()")
    assert "status=refused" in (ana.locator("#h-csv").get_attribute("href") or "")
    assert exported.count("refused,approve,") == 2, exported
    ana.screenshot(path=str(ARTIFACTS / "history-refused.png"), full_page=True)
    assert not ana.errors, ana.errors


def test_a_remote_agents_wait_for_a_person_shows_under_the_callers_run_with_a_safe_link(
    server: Server, browser: Any
) -> None:
    """An A2A delegation (goldfive_adk.a2a.RemoteWaits) puts the remote wait on the caller's run: its run view says
    who waits for whom and links to the remote approval; a link that is not http(s) is never made one."""
    from playwright.sync_api import expect

    waiting = events_pb2.RemoteApprovalWaiting(
        remote_agent="payments",
        task_id="task-9",
        approval_id="adk-77",
        tool="wire_transfer",
        rule="large transfers",
        inbox_url="http://127.0.0.1:9/#/approvals/adk-77",
        state="TASK_STATE_AUTH_REQUIRED",
        text='waiting for a person <img src=x onerror="window.pwned=4">',
    )
    hostile = events_pb2.RemoteApprovalWaiting(
        remote_agent="mallory", task_id="task-10", approval_id="x-1", inbox_url="javascript:window.pwned=5"
    )
    _seed(
        server,
        _event("run-caller", 0, run_started=events_pb2.RunStarted(adapter="adk", input="pay the invoice")),
        _event("run-caller", 1, remote_approval_waiting=waiting),
        _event("run-caller", 2, remote_approval_waiting=hostile),
    )
    ana = _login(browser, server, "ana")
    ana.goto(server.url + "/#/runs/run-caller")
    line = ana.locator("#run-events li", has_text="remote agent payments")
    expect(line).to_contain_text(
        "remote agent payments waits for a person: approval adk-77 for wire_transfer (rule large transfers) in task "
        'task-9 — waiting for a person <img src=x onerror="window.pwned=4">'
    )
    link = line.locator("a.remote-approval")
    expect(link).to_have_attribute("href", "http://127.0.0.1:9/#/approvals/adk-77")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    bad = ana.locator("#run-events li", has_text="remote agent mallory")
    expect(bad).to_have_count(1)
    expect(bad.locator("a")).to_have_count(0)
    expect(ana.locator("#run-events img")).to_have_count(0)
    assert ana.evaluate("() => window.pwned === undefined")
    ana.screenshot(path=str(ARTIFACTS / "run-remote-wait.png"), full_page=True)
    assert not ana.errors, ana.errors
