"""The inbox shows what will run, in a real browser against ``goldfive serve`` and a real ADK agent process.

The agent (spoofing_agent.py) hides characters in a task title, a prompt and a tool call's arguments: an IBAN
stored reversed behind U+202E (rendered raw it reads ``DE89 3704 0044 0532 0130 00``), zero-width and tag
characters, a number past 2^53 and a 200,000-character first argument. A person sees each hidden character as a
marked token, the IBAN in its stored order, every argument on the card (the long one clipped with "… N more
characters" and a Show all), the same in the editor, the diff, the run view and the history; Approve is off on
a card whose whole arguments the page does not hold. Screenshots land in ``tests/.artifacts/``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import spoofing_agent as spoof
from browser_support import ARTIFACTS
from test_browser_inbox import Server, _card, _login, browser, chromium, server

__all__ = ["browser", "chromium", "server"]  # the fixtures, shared with the inbox tests

pytestmark = pytest.mark.timeout(150)

AGENT = str(Path(__file__).with_name("spoofing_agent.py"))
SHOWN_STORED_ORDER = "⟨U+202E⟩00 0310 2350 4400 4073 98ED"


def _tool_target(page: Any) -> str:
    from playwright.sync_api import expect

    card = page.locator("li.card", has=page.locator(".tool", has_text="wire_transfer"))
    expect(card).to_have_count(1)
    return str(card.get_attribute("data-target-id"))


def _inside(inner: Any, outer: Any) -> bool:
    a, b = inner.bounding_box(), outer.bounding_box()
    return (
        bool(a and b)
        and b["x"] <= a["x"]
        and a["x"] + a["width"] <= b["x"] + b["width"] + 1
        and (b["y"] <= a["y"] and a["y"] + a["height"] <= b["y"] + b["height"] + 1)
    )


def _shown_left_to_right(box: Any, text: str) -> bool:
    """Whether the first character of ``text`` (found in one text node inside ``box``) is drawn left of its
    last one: the stored order, not one that a bidi override or right-to-left letters reversed."""
    return bool(
        box.evaluate(
            """(box, text) => {
              const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
              for (let n = walk.nextNode(); n; n = walk.nextNode()) {
                const at = n.data.indexOf(text);
                if (at < 0) continue;
                const edge = (i) => { const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + 1);
                                      return r.getBoundingClientRect().left; };
                return edge(at) < edge(at + text.length - 1);
              }
              return null;
            }""",
            text,
        )
    )


def _args_cut_short(route: Any) -> None:
    """What a page gets from a server or proxy that shortens long records: args_json cut at 20,000 characters."""
    response = route.fetch()
    body = response.json()
    for item in body.get("approvals", []):
        if len(item.get("args_json") or "") > 20_000:
            item["args_json"] = item["args_json"][:20_000]
            item["args"] = None
    route.fulfill(response=response, body=json.dumps(body), content_type="application/json")


def test_hidden_characters_show_as_tokens_every_argument_shows_and_approve_needs_the_whole_arguments(
    server: Server, browser: Any
) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ana = _login(browser, server, "ana")
    phone = _login(browser, server, "ana", width=390, height=844)
    agent = server.agent(AGENT)

    # Flow A: the prompt's override and separators are tokens, and the card says what it found and where.
    task = _card(ana, "pay-1042")
    expect(task).to_be_visible(timeout=60_000)  # the agent process starts (ADK imports) on a shared machine
    prompt = task.locator(".prompt")
    expect(prompt).to_contain_text("Approve paying ⟨U+202E⟩RUE 05⟨U+202C⟩ to ACME?")
    expect(prompt).to_contain_text("Second line⟨U+2028⟩hidden break")
    assert "\u202e" not in (prompt.text_content() or "")
    expect(task.locator(".hidden-note")).to_contain_text("U+202E right-to-left override in the prompt")
    task.get_by_role("button", name="Approve", exact=True).click()
    agent.wait_for(lambda s: s.startswith("report_awaiting_approval ->") and "approve" in s)

    # Flow B: the IBAN in its stored order behind a visible token, the zero-width and tag characters marked.
    target = _tool_target(ana)
    card = _card(ana, target)
    run_id = card.get_attribute("data-run-id")
    args = card.locator(".args")
    expect(args).to_contain_text(f'"iban": "{SHOWN_STORED_ORDER}"')
    expect(args).to_contain_text('"memo": "invoice⟨U+200B⟩ 1042⟨U+200D⟩ paid⟨U+2060⟩⟨U+FEFF⟩⟨U+E0041⟩"')
    expect(args).to_contain_text('"ref": 90071992547409931')  # exactly: not 90071992547409920
    shown = args.text_content() or ""
    assert spoof.SHOWN_IBAN not in shown and "\u202e" not in shown and "\u200b" not in shown
    assert _shown_left_to_right(args, "00 0310 2350 4400 4073 98ED")
    assert _shown_left_to_right(args, "1111 2222")  # in stored order, right-to-left letters around them
    note = card.locator(".hidden-note")
    expect(note).to_contain_text("U+202E right-to-left override in argument iban")
    expect(note).to_contain_text("U+200B zero width space in argument memo")
    expect(note).to_contain_text("U+E0041 tag character in argument memo")
    expect(note).to_contain_text("in argument to mixes Latin and Cyrillic letters: U+0410 is Cyrillic")

    # The 200,000-character first argument is clipped on its own; every other argument is on the card.
    expect(args.locator(".more").first).to_have_text("… 199,600 more characters")
    for key in ("iban", "memo", "ref", "to"):
        name = args.locator(".key", has_text=f'"{key}"')
        expect(name).to_be_visible()
        assert _inside(name, card), key
    approve = card.get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_enabled()
    expect(card.locator(".partial-note")).to_be_hidden()
    ana.screenshot(path=str(ARTIFACTS / "hidden-text-card.png"), full_page=True)

    # At phone width too: the tokens, the clip, every argument inside the card, nothing wider than the screen.
    on_phone = _card(phone, target)
    expect(on_phone.locator(".args")).to_contain_text(f'"iban": "{SHOWN_STORED_ORDER}"')
    for key in ("iban", "memo", "ref", "to"):
        assert _inside(on_phone.locator(".args .key", has_text=f'"{key}"'), on_phone), key
    box = on_phone.bounding_box()
    assert box and box["x"] + box["width"] <= 390, box
    phone.screenshot(path=str(ARTIFACTS / "hidden-text-phone.png"), full_page=True)

    # Show all shows the whole value.
    args.get_by_role("button", name="Show all").click()
    whole = args.locator(".long.whole").first
    expect(whole).to_be_visible()
    assert whole.evaluate("n => n.textContent") == json.dumps(spoof.ATTACHMENT)
    ana.screenshot(path=str(ARTIFACTS / "hidden-text-show-all.png"))

    # A page that does not hold the whole arguments (a shortened record) offers no Approve, and says why.
    cut = _login(browser, server, "ana")
    cut.route(re.compile(r".*/api/approvals\?status=pending.*"), _args_cut_short)
    cut.reload()
    partial = _card(cut, target)
    expect(partial.locator(".partial-note")).to_contain_text(
        "Approve is off on this card: this page cannot read the arguments as JSON"
    )
    expect(partial.get_by_role("button", name="Approve", exact=True)).to_be_disabled()
    expect(partial.get_by_role("button", name="Edit & approve")).to_be_disabled()
    expect(partial.get_by_role("button", name="Reject")).to_be_enabled()
    cut.screenshot(path=str(ARTIFACTS / "hidden-text-partial.png"), full_page=True)

    # The editor: hidden characters written as \u escapes (a textarea cannot mark them), listed under it; one
    # pasted raw is named with its line and column and can be escaped; the diff marks them.
    card.get_by_role("button", name="Edit & approve").click()
    editor = card.locator("textarea.args-edit")
    text = editor.input_value()
    assert '"iban": "\\u202e00 0310 2350 4400 4073 98ED"' in text, text[-400:]
    assert '"ref": 90071992547409931' in text and "\u202e" not in text
    warning = card.locator(".edit-hidden")
    expect(warning).to_contain_text("U+202E right-to-left override in argument iban")
    editor.fill(text.replace("CME Corp ", "CME\u200b Corp "))
    expect(warning).to_contain_text(re.compile(r"U\+200B zero width space at line \d+, column \d+"))
    expect(card.locator(".diff .add")).to_contain_text('+ to: "\u0410CME⟨U+200B⟩ Corp')
    for line in (".diff .del", ".diff .add"):
        assert _shown_left_to_right(card.locator(line), "1111 2222"), line
    ana.screenshot(path=str(ARTIFACTS / "hidden-text-editor.png"), full_page=True)
    card.get_by_role("button", name="Write them as \\u escapes").click()
    assert '"to": "\u0410CME\\u200b Corp ' in editor.input_value()
    expect(card.get_by_role("button", name="Write them as \\u escapes")).to_be_hidden()

    # Back on the card, approved as shown: the tool gets exactly what the card showed (the number too).
    card.get_by_role("button", name="Back").click()
    approve.click()
    got = agent.wait_for(lambda s: s.startswith("wire_transfer got"), timeout=30)
    assert (
        "'iban': '\\u202e00 0310 2350 4400 4073 98ED'" in got
        and "'memo': 'invoice\\u200b 1042\\u200d paid\\u2060\\ufeff\\U000e0041'" in got
        and "'ref': 90071992547409931" in got
        and "'attachment': 200000" in got
        and "'to': '\\u0410CME Corp \\u05d0 1111 2222 \\u05d1'" in got
    ), got

    # The run view: the task title's hidden characters are tokens on the timeline and in the events.
    ana.goto(f"{server.url}/#/runs/{run_id}")
    expect(ana.locator("#timeline .tl-row", has_text="Pay⟨U+200B⟩ invoice ⟨U+202E⟩2401#")).to_have_count(1)
    expect(ana.locator("#run-events")).to_contain_text("started: Pay⟨U+200B⟩ invoice ⟨U+202E⟩2401#")
    assert "\u202e" not in (ana.locator("#view-run").text_content() or "")
    ana.screenshot(path=str(ARTIFACTS / "hidden-text-run.png"), full_page=True)

    # The history shows the decided call the same way.
    ana.goto(f"{server.url}/#/history")
    entry = ana.locator(f'#history li[data-target-id="{target}"]')
    expect(entry.locator(".args")).to_contain_text(f'"iban": "{SHOWN_STORED_ORDER}"')
    expect(entry.locator(".args .more")).to_have_text("… 199,600 more characters")
    assert _shown_left_to_right(entry.locator(".args"), "1111 2222")
    assert not (ana.errors or phone.errors or cut.errors), ana.errors + phone.errors + cut.errors
