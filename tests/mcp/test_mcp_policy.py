"""A policy's grants, quorum and escalation, and the run's loop detector, through ``goldfive mcp`` (no mocks of MCP).

The client is the real MCP SDK client on the gateway's stdio; the upstream is the demo bank, which records every
call it receives; people decide from other processes with the ``goldfive`` command on the gateway's SQLite store,
each under their own name (``--by``). What is checked is what the client reads, what reached the bank, and the
audit log.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from mcp_support import Gateway, gateway, text

TRANSFER = {"amount": 120, "to": "ACME"}


def _policy(tmp: Path, rule: str) -> str:
    path = tmp / "policy.toml"
    path.write_text(f'[[rule]]\nname = "payments"\ntool = "transfer_funds"\naction = "ask"\n{rule}')
    return str(path)


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e[kind] for e in events if kind in e]


async def test_an_approval_with_a_grant_lets_the_next_matching_call_through_without_asking(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--policy", _policy(tmp_path, 'grants = ["run"]\n')) as gw:
        first = asyncio.create_task(gw.client.call_tool("transfer_funds", TRANSFER))
        request = await gw.wait_pending()
        approved = await gw.goldfive("approve", request["target_id"], "--by", "ana", "--grant", "run")
        assert approved.returncode == 0, approved.stderr
        assert "for the rest of run" in approved.stdout, approved.stdout  # the ack states the grant's scope
        assert not (await asyncio.wait_for(first, 30)).is_error
        # The next matching call: nobody is asked (it would wait for the approval timeout, 10 minutes).
        second = await asyncio.wait_for(gw.client.call_tool("transfer_funds", {"amount": 80, "to": "ACME"}), 30)
        assert not second.is_error and "sent 80.00 EUR to ACME" in text(second)
        events = await gw.events()
    assert [c["args"]["amount"] for c in gw.upstream_calls()] == [120, 80]
    (grant,) = _of(events, "grant_created")
    assert grant["granted_by"] == "ana" and grant["scope"] == "run" and grant["rule"] == "payments"
    assert len(_of(events, "approval_requested")) == 1  # only the first call asked a person
    applied = [p for p in _of(events, "policy_applied") if p.get("grant_id")]
    assert [(p["tool_name"], p["grant_id"]) for p in applied] == [("transfer_funds", grant["grant_id"])]


async def test_a_quorum_of_two_needs_two_distinct_people_before_the_call_runs_once(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--policy", _policy(tmp_path, "quorum = 2\n")) as gw:
        call = asyncio.create_task(gw.client.call_tool("transfer_funds", TRANSFER))
        request = await gw.wait_pending()
        voted = await gw.goldfive("approve", request["target_id"], "--by", "ana")
        assert voted.returncode == 0 and "1 more needed (1 of 2: ana)" in voted.stdout, voted.stdout
        again = await gw.goldfive("approve", request["target_id"], "--by", "ana")
        assert "the same person counts once (1 of 2: ana)" in again.stdout, again.stdout
        # Each vote was acked by the gateway's run (the command waits for that): the call still waits.
        assert (await gw.pending())[0]["target_id"] == request["target_id"]
        assert gw.upstream_calls() == [] and not call.done()
        second = await gw.goldfive("approve", request["target_id"], "--by", "bo")
        assert second.returncode == 0, second.stderr
        result = await asyncio.wait_for(call, 30)
        events = await gw.events()
    assert not result.is_error and "sent 120.00 EUR to ACME" in text(result)
    assert gw.upstream_calls() == [{"tool": "transfer_funds", "args": {**TRANSFER, "currency": "EUR"}}]
    assert [(v["decided_by"], v["progress"]) for v in _of(events, "approval_voted")][-1] == ("bo", "2 of 2: ana, bo")


async def test_an_escalation_lets_the_named_person_answer_once_nobody_did(tmp_path: Path) -> None:
    rule = 'approvers = ["user:ana"]\nescalate = { after = "6s", to = ["user:cy"] }\n'
    async with gateway(tmp_path, "--policy", _policy(tmp_path, rule)) as gw:
        call = asyncio.create_task(gw.client.call_tool("transfer_funds", TRANSFER))
        request = await gw.wait_pending()
        early = await gw.goldfive("approve", request["target_id"], "--by", "cy")
        assert early.returncode != 0, early.stdout  # before the escalation cy may not answer
        assert "'cy' is not among the approvers (user:ana)" in early.stdout + early.stderr, early
        escalated = await _escalation(gw)  # nobody answered within 6 s: the run escalates to cy
        assert escalated["target_id"] == request["target_id"] and escalated["to"] == "user:cy"
        assert gw.upstream_calls() == [] and not call.done()
        answered = await gw.goldfive("approve", request["target_id"], "--by", "cy")
        assert answered.returncode == 0, answered.stderr
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error
    assert gw.upstream_calls() == [{"tool": "transfer_funds", "args": {**TRANSFER, "currency": "EUR"}}]


async def _escalation(gw: Gateway) -> dict[str, Any]:
    """The run's ``approval_escalated`` event, once it is on the audit log (a handshake, not a sleep)."""
    for _ in range(600):
        found = _of(await gw.events(), "approval_escalated")
        if found:
            return found[0]
        await asyncio.sleep(0.05)
    raise AssertionError("the request was never escalated")


async def test_the_same_call_looped_is_stopped_then_pauses_the_run_for_a_person(tmp_path: Path) -> None:
    """The run's loop detector sees every call through the gateway (docs/mcp.md): the fifth identical call is
    refused with the reason, the sixth is held in a run paused for a person, and a resume does not run it."""
    balance = {"account": "ACME"}
    async with gateway(tmp_path, "--default", "allow") as gw:
        for _ in range(4):
            assert not (await gw.client.call_tool("read_balance", balance)).is_error
        stopped = await asyncio.wait_for(gw.client.call_tool("read_balance", balance), 30)
        assert stopped.is_error and "read_balance was not run" in text(stopped)
        assert "called 3 times in a row with the same arguments" in text(stopped)
        assert "Do not call that tool with the same arguments again" in text(stopped)
        held = asyncio.create_task(gw.client.call_tool("read_balance", balance))
        paused = await _paused(gw)
        assert paused["escalated"] and paused["drift_kind"] == "LOOPING_TOOL_CALL", paused
        assert not held.done() and len(gw.upstream_calls()) == 4
        resumed = await gw.goldfive("resume")
        assert resumed.returncode == 0, resumed.stderr
        after = await asyncio.wait_for(held, 30)
    assert after.is_error and "goldfive stopped this read_balance call" in text(after)
    assert gw.upstream_calls() == [{"tool": "read_balance", "args": balance}] * 4


async def _paused(gw: Gateway) -> dict[str, Any]:
    """The gateway run's pause, once ``goldfive runs`` shows it (a handshake, not a sleep)."""
    for _ in range(600):
        out = await gw.goldfive("runs", "--json")
        runs = json.loads(out.stdout)["runs"]
        if runs and runs[0].get("paused"):
            return dict(runs[0]["paused"])
        await asyncio.sleep(0.05)
    raise AssertionError("the run never paused")
