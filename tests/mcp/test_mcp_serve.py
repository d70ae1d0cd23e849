"""``goldfive mcp --url``: the gateway as an agent of a ``goldfive serve`` (its HTTP agent channel, no database).

A real ``goldfive serve`` subprocess on 127.0.0.1 over a SQLite store with an approver (ana) and an agent (bot);
the gateway gets only the server's URL and bot's token. A person decides through the server's API, as the inbox
does; what the test checks is the tool result the MCP client reads and what reached the demo upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp_support import DEMO, ROOT, text

sys.path.insert(0, str(ROOT / "tests" / "store"))
sys.path.insert(0, str(ROOT / "tests" / "server"))

from server_support import serve_process
from store_support import Backend

from goldfive_core.store.users import add_user


class Site:
    def __init__(self, url: str, tokens: dict[str, str], calls: Path) -> None:
        self.url, self.tokens, self.calls = url, tokens, calls

    async def pending(self) -> dict[str, Any]:
        """The first open request the server lists (a handshake on the server's own view, not a sleep)."""
        async with httpx.AsyncClient(base_url=self.url, timeout=10) as http:
            for _ in range(600):
                answer = await http.get("/api/approvals", headers=self._auth("ana"))
                items = [a for a in answer.json()["approvals"] if a["state"] == "pending"]
                if items:
                    return dict(items[0])
                await asyncio.sleep(0.05)
        raise AssertionError("no approval request reached the server")

    async def decide(self, target: str, verb: str, body: dict[str, Any]) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.url, timeout=60) as http:
            return await http.post(f"/api/approvals/{target}/{verb}", headers=self._auth("ana"), json=body)

    def upstream_calls(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.calls.read_text().splitlines()] if self.calls.exists() else []

    def _auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Site]:
    backend = Backend("sqlite", str(tmp_path / "goldfive.db"))
    store = backend.open()
    tokens = {name: add_user(store, name, role).token for name, role in (("ana", "approver"), ("bot", "agent"))}
    store.close()
    with serve_process(backend, tmp_path / "keys" / "decision-key.pem") as server:
        yield Site(server.url, tokens, tmp_path / "calls.jsonl")


@contextlib.asynccontextmanager
async def remote_gateway(site: Site, token: str) -> AsyncIterator[Client]:
    argv = ["-m", "goldfive_core.cli", "mcp", "--url", site.url, "--token", token, "--gate", "transfer_funds"]
    argv += ["--default", "allow", "--upstream", f"bank={sys.executable} {DEMO} --calls {site.calls}"]
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        yield client


async def test_a_call_waits_in_the_servers_inbox_and_runs_once_with_the_edit(served: Site) -> None:
    async with remote_gateway(served, served.tokens["bot"]) as client:
        allowed = await client.call_tool("read_balance", {"account": "ACME"})
        assert not allowed.is_error and "ACME" in text(allowed)
        call = asyncio.create_task(client.call_tool("transfer_funds", {"amount": 120, "to": "ACME"}))
        card = await served.pending()
        assert card["tool_name"] == "transfer_funds" and not call.done()
        assert served.upstream_calls() == [{"tool": "read_balance", "args": {"account": "ACME"}}]
        answer = await served.decide(card["target_id"], "approve", {"edited_args": {"amount": 80, "to": "ACME"}})
        assert answer.status_code == 200, answer.text
        result = await asyncio.wait_for(call, 60)
    assert not result.is_error, text(result)
    assert served.upstream_calls()[1:] == [
        {"tool": "transfer_funds", "args": {"amount": 80, "to": "ACME", "currency": "EUR"}}
    ]


async def test_a_rejection_from_the_server_reaches_the_client_and_nothing_runs(served: Site) -> None:
    async with remote_gateway(served, served.tokens["bot"]) as client:
        call = asyncio.create_task(client.call_tool("transfer_funds", {"amount": 120, "to": "ACME"}))
        card = await served.pending()
        answer = await served.decide(card["target_id"], "reject", {"reason": "not this month"})
        assert answer.status_code == 200, answer.text
        result = await asyncio.wait_for(call, 60)
    assert result.is_error and "not this month" in text(result)
    assert served.upstream_calls() == []


def test_without_a_token_the_gateway_says_how_to_get_one(served: Site) -> None:
    cmd = [sys.executable, "-m", "goldfive_core.cli", "mcp", "--url", served.url, "--upstream", f"bank=python {DEMO}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "--url needs a token" in out.stderr


async def test_a_call_approved_through_the_server_after_its_upstream_died_is_not_sent_and_given_back(
    served: Site,
) -> None:
    faulty = Path(__file__).with_name("faulty_upstream.py")
    argv = ["-m", "goldfive_core.cli", "mcp", "--url", served.url, "--token", served.tokens["bot"], "--gate", "ok"]
    argv += [
        "--default",
        "allow",
        "--restarts",
        "0",
        "--upstream",
        f"f={sys.executable} {faulty} --calls {served.calls}",
    ]
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        call = asyncio.create_task(client.call_tool("ok", {"tag": "held"}))
        card = await served.pending()
        await client.call_tool("die", {})  # its upstream is gone for good
        answer = await served.decide(card["target_id"], "approve", {})
        assert answer.status_code == 200, answer.text
        result = await asyncio.wait_for(call, 60)
    assert result.is_error and "ok was not sent" in text(result) and "Nothing of it ran" in text(result)
    assert [c["tool"] for c in served.upstream_calls()] == ["die"]
    async with httpx.AsyncClient(base_url=served.url, timeout=10) as http:
        shown = await http.get(f"/api/approvals/{card['target_id']}", headers=served._auth("ana"))
    assert shown.json()["execution"] == "released"  # the server's ledger: given back, not in doubt, not done
