"""``goldfive mcp --http``: the gateway on streamable HTTP, driven by the real ``mcp`` SDK client (no mocks of MCP).

The gateway is a subprocess on 127.0.0.1 in front of the bundled demo bank (examples/mcp_demo_server.py, which
records every call it receives); decisions come from another process (the ``goldfive`` command on the same
store). What the tests check is what a user sees: the tool result the model reads, the HTTP answer a client
without the token gets, the calls that reached the upstream, and the runs in the store.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import httpx
import mcp_types as types
import pytest
from mcp_http_support import HttpGateway, ProgressSeen, cancel_once_pending, elicit_http_session, http_gateway
from mcp_support import ROOT, text

TRANSFER = {"amount": 120, "to": "ACME"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_a_gated_call_over_http_waits_and_runs_once_with_the_edit(tmp_path: Path) -> None:
    progress = ProgressSeen()
    async with http_gateway(tmp_path, "--progress-every", "0.05") as gw, gw.connect() as client:
        call = asyncio.create_task(client.session.call_tool("transfer_funds", TRANSFER, progress_callback=progress))
        request = await gw.wait_pending()
        assert request["tool_name"] == "transfer_funds" and request["args"] == TRANSFER
        await asyncio.wait_for(progress.first.wait(), 30)  # progress reaches the client on the call's stream
        assert gw.upstream_calls() == [] and not call.done()
        edit = json.dumps({"amount": 100, "to": "ACME", "currency": "EUR"})
        decided = await gw.goldfive("approve", request["target_id"], "--by", "ana", "--edit", edit)
        assert decided.returncode == 0, decided.stderr
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error and "sent 100.00 EUR to ACME" in text(result)
    assert f"goldfive approve {request['target_id']}" in progress.messages[0]
    assert gw.upstream_calls() == [{"tool": "transfer_funds", "args": {"amount": 100, "to": "ACME", "currency": "EUR"}}]
    assert gw.token not in gw.log.read_text()  # the token is never logged


async def test_a_rejection_over_http_reaches_the_client_and_a_denied_call_never_runs(tmp_path: Path) -> None:
    async with http_gateway(tmp_path, "--deny", "read_*", token_env="BANK_GATEWAY_TOKEN") as gw, gw.connect() as client:
        denied = await client.call_tool("read_balance", {"account": "ACME"})
        assert denied.is_error and "denied by the gateway's --deny" in text(denied)
        call = asyncio.create_task(client.call_tool("transfer_funds", TRANSFER))
        request = await gw.wait_pending()
        decided = await gw.goldfive("reject", request["target_id"], "--by", "ana", "--reason", "ACME was paid already")
        assert decided.returncode == 0, decided.stderr
        result = await asyncio.wait_for(call, 30)
    assert result.is_error and "ACME was paid already" in text(result) and "A person (ana) rejected" in text(result)
    assert gw.upstream_calls() == []


async def test_without_the_token_or_with_another_the_answer_is_401(tmp_path: Path) -> None:
    async with http_gateway(tmp_path, "--default", "allow") as gw, httpx.AsyncClient(timeout=30) as http:
        bare = await http.post(gw.url, json=INITIALIZE, headers=ACCEPT)
        wrong = await http.post(gw.url, json=INITIALIZE, headers={**ACCEPT, "Authorization": "Bearer " + "x" * 43})
        basic = await http.post(gw.url, json=INITIALIZE, headers={**ACCEPT, "Authorization": f"Basic {gw.token}"})
        foreign = {**ACCEPT, "Authorization": f"Bearer {gw.token}", "Origin": "http://evil.example"}
        rebound = await http.post(gw.url, json=INITIALIZE, headers=foreign)
        renamed = {**ACCEPT, "Authorization": f"Bearer {gw.token}", "Host": f"evil.example:{httpx.URL(gw.url).port}"}
        misnamed = await http.post(gw.url, json=INITIALIZE, headers=renamed)
        authorized = {**ACCEPT, "Authorization": f"Bearer {gw.token}"}
        stray = await http.post(gw.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=authorized)
        probe = await http.get(gw.url, headers=authorized)
        unknown = await http.post(gw.url, json=INITIALIZE, headers={**authorized, "Mcp-Session-Id": "f" * 32})
        right = await http.post(gw.url, json=INITIALIZE, headers=authorized)
        runs = await gw.goldfive("runs", "--json")
    assert bare.status_code == 401 and "needs its bearer token" in bare.json()["error"]["message"]
    assert bare.headers["www-authenticate"].startswith("Bearer")
    assert wrong.status_code == 401 and "not this gateway's" in wrong.json()["error"]["message"]
    assert basic.status_code == 401
    assert rebound.status_code == 403  # a browser page of another origin (DNS rebinding) is refused
    assert misnamed.status_code == 421  # a loopback gateway reached under another name (DNS rebinding)
    assert stray.status_code == 400 and "only an initialize POST" in stray.json()["error"]["message"]
    assert probe.status_code == 400 and unknown.status_code == 404
    assert right.status_code == 200 and "mcp-session-id" in right.headers
    assert len(json.loads(runs.stdout)["runs"]) == 1  # only the authorized initialize opened a session (a run)
    assert gw.token not in gw.log.read_text()


async def test_two_sessions_are_two_runs(tmp_path: Path) -> None:
    async with http_gateway(tmp_path, "--allow", "read_*") as gw:
        async with gw.connect() as first, gw.connect() as second:
            assert not (await first.call_tool("read_balance", {})).is_error
            waiting = asyncio.create_task(first.call_tool("transfer_funds", TRANSFER))
            request = await gw.wait_pending()
            runs = json.loads((await gw.goldfive("runs", "--json")).stdout)["runs"]
            assert len(runs) == 2
            cancelled = await gw.goldfive("cancel", "--run", request["run_id"], "--reason", "enough for today")
            assert cancelled.returncode == 0, cancelled.stderr
            held = await asyncio.wait_for(waiting, 30)
            assert held.is_error
            after = await first.call_tool("read_balance", {})
            assert after.is_error and "enough for today" in text(after)  # the first session's run is cancelled
            other = await second.call_tool("read_balance", {"account": "ACME"})
            assert not other.is_error and "ACME: 1000.00 EUR" in text(other)  # the second's goes on
        await _until_finished(gw, 2)
    assert [c["args"] for c in gw.upstream_calls()] == [{"account": "checking"}, {"account": "ACME"}]


async def _until_finished(gw: HttpGateway, count: int) -> None:
    """A session's end ends its run: wait until ``count`` runs are finished (a handshake on the store)."""
    for _ in range(600):
        runs = json.loads((await gw.goldfive("runs", "--json")).stdout)["runs"]
        if sum(1 for r in runs if r["status"] != "running") >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the runs did not end: {runs}")


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (("--http", "0.0.0.0:0"), "--http-public"),
        (("--http", "127.0.0.1"), "HOST:PORT"),
        (("--http-token-env", "NOPE"), "need --http"),
        (("--http", "127.0.0.1:0", "--http-token-env", "GOLDFIVE_NO_SUCH_TOKEN"), "is not set"),
    ],
)
def test_bad_http_options_are_refused_before_anything_starts(tmp_path: Path, flags: tuple[str, ...], says: str) -> None:
    cmd = [sys.executable, "-m", "goldfive_core.cli", "mcp", "--db", str(tmp_path / "g.db"), *flags]
    cmd += ["--upstream", "bank=python -c pass"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and says in out.stderr, out.stderr


def test_a_token_file_others_may_read_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "mcp.token"
    token.write_text("a" * 40)
    token.chmod(0o644)
    cmd = [sys.executable, "-m", "goldfive_core.cli", "mcp", "--db", str(tmp_path / "g.db"), "--http", "127.0.0.1:0"]
    cmd += ["--http-token-file", str(token), "--upstream", "bank=python -c pass"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "chmod 600" in out.stderr and "a" * 40 not in out.stderr


async def test_a_cancelled_request_over_http_withdraws_the_approval(tmp_path: Path) -> None:
    async with http_gateway(tmp_path, "--allow", "read_balance") as gw, gw.connect() as client:
        request = await cancel_once_pending(gw, client, "transfer_funds", TRANSFER)
        await gw.wait_no_pending()
        late = await gw.goldfive("approve", request["target_id"])
        assert late.returncode != 0  # nothing left to approve
        assert not (await client.call_tool("read_balance", {})).is_error  # the session goes on
    assert [c["tool"] for c in gw.upstream_calls()] == ["read_balance"]


async def test_stopping_the_gateway_ends_every_sessions_run_and_withdraws_waiting_calls(tmp_path: Path) -> None:
    async with http_gateway(tmp_path) as gw, gw.connect() as client:
        call = asyncio.create_task(client.call_tool("transfer_funds", TRANSFER))
        request = await gw.wait_pending()
        assert await gw.stop() == 0  # SIGTERM: a clean stop
        await asyncio.gather(call, return_exceptions=True)
    assert await gw.pending() == []
    runs = json.loads((await gw.goldfive("runs", "--json")).stdout)["runs"]
    assert len(runs) == 1 and runs[0]["status"] != "running"  # the session's run ended with the gateway
    cancelled = [e["approval_cancelled"] for e in await gw.events() if "approval_cancelled" in e]
    assert [c["target_id"] for c in cancelled] == [request["target_id"]]
    assert gw.upstream_calls() == []


async def test_an_elicitation_over_http_is_answered_by_a_person_accept_decline_and_cancel(tmp_path: Path) -> None:
    """With ``--elicit person`` the upstream's question goes to a person even though this client could answer it;
    ``goldfive answer`` on the store submits, declines and cancels, and the upstream gets each distinctly."""
    asked: list[str] = []

    async def client_would_answer(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Mallory", "guests": 12})

    book = {"restaurant": "Chez Ana"}
    flags = ("--elicit", "person")
    async with elicit_http_session(tmp_path, *flags, elicitation_callback=client_would_answer) as (gw, client):
        answers = (("name=Ana", "guests=2", "seating=terrace"), ("--decline",), ("--cancel",))
        results = []
        for answer in answers:
            call = asyncio.create_task(client.call_tool("book_table", book))
            request = await gw.wait_pending()
            assert request["kind"] == "input" and request["metadata"]["mcp_tool"] == "book_table"
            assert request["prompt"] == "Booking at Chez Ana: who is it for, and how many?"
            answered = await gw.goldfive("answer", request["target_id"], *answer, "--by", "ana")
            assert answered.returncode == 0, answered.stderr
            results.append(text(await asyncio.wait_for(call, 30)))
    assert asked == []  # the operator chose a person: the client is never asked
    assert "booked Chez Ana for Ana (2)" in results[0]
    assert "not booked: decline" in results[1] and "not booked: cancel" in results[2]
    data = {"name": "Ana", "guests": 2, "seating": "terrace", "vegetarian": False}
    assert gw.upstream_calls() == [
        {"tool": "book_table", "action": "accept", "data": data},
        {"tool": "book_table", "action": "decline"},
        {"tool": "book_table", "action": "cancel"},
    ]
