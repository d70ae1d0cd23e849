"""The inbox page's files (no browser needed): ours only, and no way for data to become HTML."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

STATIC = resources.files("goldfive_core").joinpath("server", "static")
FILES = {
    *("index.html", "inbox.css", "inbox.js", "review.js", "text.js", "context.js", "context.css"),
    *("input.js", "input.css"),
}


def test_the_page_loads_only_its_own_files() -> None:
    page = STATIC.joinpath("index.html").read_text(encoding="utf-8")
    linked = re.findall(r"""(?:src|href)=["']([^"']+)""", page)
    assert linked and all(u.startswith(("/static/", "#", "data:")) for u in linked), linked
    assert "<script>" not in page  # no inline script: the page runs only /static/*.js
    assert {p.name for p in STATIC.iterdir()} == FILES


def test_the_script_never_turns_data_into_html() -> None:
    # Agent text (prompts, arguments, drift details, reasons) must stay inert: the page builds every node with
    # createElement/textContent. None of the HTML-parsing sinks may appear in the script at all.
    for name in sorted(f for f in FILES if f.endswith(".js")):
        js = STATIC.joinpath(name).read_text(encoding="utf-8")
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
            assert sink not in js, (name, sink)


async def test_goldfive_serve_sends_the_page_under_a_strict_content_security_policy(tmp_path: Path) -> None:
    import httpx

    from goldfive_core.server import ServerConfig, create_app
    from goldfive_core.signing import load_or_create_signing_key
    from goldfive_core.store import open_store

    signer, _ = load_or_create_signing_key(tmp_path / "key.pem")
    app = create_app(open_store(str(tmp_path / "goldfive.db")), ServerConfig(signer=signer))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
        page = await client.get("/")
        assets = [await client.get(f"/static/{name}") for name in ("text.js", "inbox.js", "inbox.css")]
        data = await client.get("/api/approvals")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.text == STATIC.joinpath("index.html").read_text(encoding="utf-8")
    assert [a.status_code for a in assets] == [200, 200, 200]
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert data.status_code == 401  # the page is public (it shows the sign-in form); the data is not
