"""An upstream's elicitation answered through ``goldfive serve``: a signed answer, and a trusting agent's refusals.

A real ``goldfive serve`` subprocess over a SQLite store with an approver (ana) and an agent (bot). The gateway is
either an agent of the server (``--url``) or on the same database (``--db``), and trusts the server's key
(``GOLDFIVE_TRUST_KEY``). ana answers with ``goldfive --url ... answer`` in another process or through the API as
the inbox does; a database writer's unsigned answer, or a signed one moved onto another request, is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp_support import ROOT, text

sys.path.insert(0, str(ROOT / "tests" / "store"))
sys.path.insert(0, str(ROOT / "tests" / "server"))

from server_support import serve_process
from store_support import Backend

from goldfive_core.control import ControlKind, ControlMessage
from goldfive_core.signing import load_or_create_signing_key
from goldfive_core.store.users import add_user

UPSTREAM = Path(__file__).with_name("elicit_upstream.py")


class Site:
    def __init__(self, url: str, tokens: dict[str, str], tmp: Path, backend: Backend, trust: str) -> None:
        self.url, self.tokens, self.tmp, self.backend, self.trust = url, tokens, tmp, backend, trust
        self.calls = tmp / "calls.jsonl"

    async def card(self, *, not_: str = "") -> dict[str, Any]:
        """The first open request the server lists, other than ``not_`` (a handshake on its view, not a sleep)."""
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as http:
            for _ in range(600):
                listed = (await http.get("/api/approvals", headers=self.auth("ana"))).json()["approvals"]
                items = [a for a in listed if a["state"] == "pending" and a["target_id"] != not_]
                if items:
                    return dict(items[0])
                await asyncio.sleep(0.05)
        raise AssertionError("no request for input reached the server")

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as http:
            return await http.post(path, headers=self.auth("ana"), json=body)

    def upstream_calls(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.calls.read_text().splitlines()] if self.calls.exists() else []

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    async def goldfive(self, *argv: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "goldfive_core.cli", *argv]
        env = {**os.environ, **self.backend.env()}
        return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=60, env=env)

    def gateway_params(self, *control: str) -> StdioServerParameters:
        """``goldfive mcp`` on ``control`` in front of the booking upstream (every call allowed; a person answers
        its questions), trusting only what the server signed: what any MCP client's config starts."""
        argv = ["-m", "goldfive_core.cli", "mcp", *control, "--default", "allow", "--elicit", "person"]
        argv += ["--upstream", f"bookings={sys.executable} {UPSTREAM} --calls {self.calls}"]
        env = {**os.environ, "GOLDFIVE_TRUST_KEY": self.trust}
        return StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT), env=env)

    def as_agent(self) -> tuple[str, ...]:
        """The gateway's control: an agent (bot) of the server."""
        return ("--url", self.url, "--token", self.tokens["bot"])

    async def answer_form(self, content: dict[str, Any]) -> dict[str, Any]:
        """ana submits the first open question's form through the server's API, as the inbox does; its card."""
        card = await self.card()
        assert card["kind"] == "input", card
        answered = await self.post(f"/api/approvals/{card['target_id']}/approve", {"edited_args": content})
        assert answered.status_code == 200, answered.text
        return card

    @contextlib.asynccontextmanager
    async def gateway(self, *control: str) -> AsyncIterator[Client]:
        async with Client(self.gateway_params(*control), mode="legacy") as client:
            yield client


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    backend = Backend("sqlite", str(tmp_path / "goldfive.db"))
    store = backend.open()
    tokens = {name: add_user(store, name, role).token for name, role in (("ana", "approver"), ("bot", "agent"))}
    store.close()
    key = tmp_path / "keys" / "decision-key.pem"
    signer, _ = load_or_create_signing_key(key)  # the server signs with it; the gateway trusts its public half
    with serve_process(backend, key) as server:
        yield Site(server.url, tokens, tmp_path, backend, signer.trust_key.text())


def _book(client: Client) -> asyncio.Task[Any]:
    return asyncio.create_task(client.call_tool("book_table", {"restaurant": "Chez Ana"}))


async def test_a_signed_answer_from_goldfive_answer_url_reaches_the_upstream(site: Site) -> None:
    async with site.gateway("--url", site.url, "--token", site.tokens["bot"]) as client:
        call = _book(client)
        card = await site.card()
        assert card["kind"] == "input" and card["form"]["required"] == ["name", "guests"]
        misfit = await site.post(
            f"/api/approvals/{card['target_id']}/approve", {"edited_args": {"name": "A", "guests": 0}}
        )
        assert misfit.status_code == 422 and misfit.json()["field"] == "guests", misfit.text
        assert "'guests' must be at least 1" in misfit.json()["error"]
        remote = ("--url", site.url, "--token", site.tokens["ana"])
        shown = await site.goldfive(*remote, "show", card["target_id"])
        assert "name (string, required, 1..40): Who the table is for" in shown.stdout, shown.stdout
        answered = await site.goldfive(*remote, "answer", card["target_id"], "name=Ana", "guests=3")
        assert answered.returncode == 0, answered.stderr
        result = await asyncio.wait_for(call, 60)
    assert "booked Chez Ana for Ana (3)" in text(result)
    data = {"name": "Ana", "guests": 3, "seating": "inside", "vegetarian": False}
    assert site.upstream_calls() == [{"tool": "book_table", "action": "accept", "data": data}]


async def test_a_trusting_gateway_refuses_an_unsigned_answer_and_one_moved_from_another_request(site: Site) -> None:
    db = ("--db", str(site.tmp / "goldfive.db"))
    async with site.gateway(*db) as client:
        first = _book(client)
        card = await site.card()
        unsigned = await site.goldfive(*db, "answer", card["target_id"], "name=Eve", "guests=9")
        assert unsigned.returncode == 1 and "not signed" in unsigned.stdout + unsigned.stderr, unsigned
        assert (await site.card())["target_id"] == card["target_id"]  # still asked
        signed = await site.post(
            f"/api/approvals/{card['target_id']}/approve", {"edited_args": {"name": "Ana", "guests": 2}}
        )
        assert signed.status_code == 200, signed.text
        assert "booked Chez Ana for Ana (2)" in text(await asyncio.wait_for(first, 60))
        # A writer copies ana's signed answer onto the next request (its target and request id).
        second = _book(client)
        other = await site.card(not_=card["target_id"])
        store = site.backend.open()
        try:
            (row,) = [r for r in store.approvals_for(card["target_id"])]
            payload = next(json.loads(p) for p, k in _inbox(store) if k == "APPROVE" and '"signature"' in p)
            moved = {**payload, "target_id": other["target_id"], "request_id": other["request_id"]}
            message = ControlMessage(ControlKind.APPROVE, moved)
            await asyncio.to_thread(store.post_control, message, run_id=row.run_id)
            ack = None
            for _ in range(600):
                ack = store.get_ack(message.id)
                if ack is not None:
                    break
                await asyncio.sleep(0.05)
            assert ack is not None and not ack.ok and "signature does not match" in ack.detail, ack
        finally:
            store.close()
        assert (await site.card(not_=card["target_id"]))["target_id"] == other["target_id"]  # still asked
        cancelled = await site.post(f"/api/approvals/{other['target_id']}/reject", {"answer": "cancel"})
        assert cancelled.status_code == 200, cancelled.text
        assert "not booked: cancel" in text(await asyncio.wait_for(second, 60))
    assert [c["action"] for c in site.upstream_calls()] == ["accept", "cancel"]
    store = site.backend.open()
    try:
        report = store.verify_audit(
            trust_key=load_or_create_signing_key(site.tmp / "keys" / "decision-key.pem")[0].trust_key
        )
        assert report.ok, report.problems
    finally:
        store.close()


def _inbox(store: Any) -> list[tuple[str, str]]:
    cur = store.db.execute(store.db.conn(), "SELECT payload_json, kind FROM gf_inbox ORDER BY id", ())
    return [(str(p), str(k)) for p, k in cur.fetchall()]
