"""The inbox page's files (no browser needed): ours only, and no way for data to become HTML."""

from __future__ import annotations

import re
from importlib import resources

STATIC = resources.files("goldfive_core").joinpath("server", "static")
FILES = {"index.html", "inbox.css", "inbox.js"}


def test_the_page_loads_only_its_own_files() -> None:
    page = STATIC.joinpath("index.html").read_text(encoding="utf-8")
    linked = re.findall(r"""(?:src|href)=["']([^"']+)""", page)
    assert linked and all(u.startswith(("/static/", "#", "data:")) for u in linked), linked
    assert "<script>" not in page  # no inline script: the page runs only /static/inbox.js
    assert {p.name for p in STATIC.iterdir()} == FILES


def test_the_script_never_turns_data_into_html() -> None:
    # Agent text (prompts, arguments, drift details, reasons) must stay inert: the page builds every node with
    # createElement/textContent. None of the HTML-parsing sinks may appear in the script at all.
    js = STATIC.joinpath("inbox.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in js, sink
