"""Upstream faults through ``goldfive mcp`` are the caller's clear errors, never a hang — and the ledger agrees.

The real gateway process, the real MCP SDK client, and a real upstream that fails on purpose
(tests/mcp/faulty_upstream.py: it records every call with its process id, so a test sees whether a call reached an
upstream, which process, and how often). Decisions come from another process (``goldfive approve`` / ``answer``).
Each fault ends one of three ways, and the client's answer, the upstream's record and the ledger say the same:

* sent on the upstream's current connection and run once (a call approved after its upstream was restarted);
* never sent ("was not sent ... Nothing of it ran"; the ledger's claim given back: ``released_not_run``);
* sent and its answer lost, or never answered in time ("may or may not have run"; in doubt in the ledger:
  ``executing`` only, never re-sent).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import MessageHandlerFnT
from mcp_support import ROOT, Gateway, text

FAULTY = Path(__file__).with_name("faulty_upstream.py")

HELD = '[[rule]]\nname = "held"\ntool = "ok"\nwhen = "args.tag == \'held\'"\naction = "ask"\n'
"""A policy asking a person for ``ok(tag="held")`` only (every other call is allowed with ``--default allow``)."""


@contextlib.asynccontextmanager
async def faulty(
    tmp: Path,
    *flags: str,
    config: str = "",
    message_handler: MessageHandlerFnT | None = None,
) -> AsyncIterator[Gateway]:
    """``goldfive mcp`` in front of the faulty upstream ``f`` (``config``: extra keys of its ``[upstream.f]`` table)."""
    table = tmp / "gateway.toml"
    words = json.dumps([str(FAULTY), "--calls", str(tmp / "calls.jsonl")])
    table.write_text(f"[upstream.f]\ncommand = {json.dumps(sys.executable)}\nargs = {words}\n{config}")
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(tmp / "goldfive.db"), "--config", str(table), *flags]
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    async with Client(params, mode="legacy", message_handler=message_handler) as client:
        yield Gateway(tmp, client)


def counting(kind: type[Any]) -> tuple[list[Any], Callable[[object], Awaitable[None]]]:
    """An MCP client's message handler that keeps every notification of ``kind``."""
    seen: list[Any] = []

    async def handle(message: object) -> None:
        if isinstance(message, kind):
            seen.append(message)

    return seen, handle


async def until(check: Callable[[], Any], what: str) -> Any:
    """Wait (bounded) until ``check()`` is truthy; its value."""
    for _ in range(600):
        value = check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


async def ledger(gw: Gateway, target: str) -> list[str]:
    """The ledger's states of ``target`` on the audit log, in order."""
    rows = [e["execution_recorded"] for e in await gw.events() if "execution_recorded" in e]
    return [row["state"] for row in rows if row["target_id"] == target]


async def test_a_call_approved_after_its_upstream_was_restarted_runs_once_on_the_new_connection(
    tmp_path: Path,
) -> None:
    (tmp_path / "policy.toml").write_text(HELD)
    restarts, handler = counting(types.ToolListChangedNotification)
    flags = ("--default", "allow", "--policy", str(tmp_path / "policy.toml"))
    async with faulty(tmp_path, *flags, message_handler=handler) as gw:
        held = asyncio.create_task(gw.client.call_tool("ok", {"tag": "held"}))
        card = await gw.wait_pending()
        died = await gw.client.call_tool("die", {})  # meanwhile its upstream dies, and is started again
        assert died.is_error
        await until(lambda: restarts, "the upstream came back")
        approved = await gw.goldfive("approve", card["target_id"], "--by", "ana")
        assert approved.returncode == 0, approved.stderr
        result = await asyncio.wait_for(held, 60)
        assert not result.is_error, text(result)
        assert text(result) == "fine held"
        after = await gw.client.call_tool("ok", {"tag": "after"})
        assert not after.is_error and text(after) == "fine after"
        states = await ledger(gw, card["target_id"])
    calls = gw.upstream_calls()
    assert [c["tool"] for c in calls] == ["die", "ok", "ok"]
    first, held_pid, after_pid = (c["pid"] for c in calls)
    assert held_pid != first  # the approved call went to the restarted process, once
    assert after_pid == held_pid  # and that connection stayed up: no second restart for a stale link's fault
    assert len(restarts) == 1
    assert states == ["executing", "done"]


async def test_a_call_approved_after_its_upstream_died_for_good_is_not_sent_and_its_claim_is_given_back(
    tmp_path: Path,
) -> None:
    (tmp_path / "policy.toml").write_text(HELD)
    flags = ("--default", "allow", "--restarts", "0", "--policy", str(tmp_path / "policy.toml"))
    async with faulty(tmp_path, *flags) as gw:
        held = asyncio.create_task(gw.client.call_tool("ok", {"tag": "held"}))
        card = await gw.wait_pending()
        await gw.client.call_tool("die", {})  # not restarted
        approved = await gw.goldfive("approve", card["target_id"], "--by", "ana")
        assert approved.returncode == 0, approved.stderr
        result = await asyncio.wait_for(held, 60)
        states = await ledger(gw, card["target_id"])
        shown = await gw.goldfive("show", card["target_id"])
    assert result.is_error
    assert "ok was not sent: its MCP server 'f' stopped answering" in text(result)
    assert "Nothing of it ran" in text(result)
    assert [c["tool"] for c in gw.upstream_calls()] == ["die"]  # it never reached an upstream
    assert states == ["executing", "released_not_run"]  # nothing in doubt, nothing "done"
    assert "execution  released, not run" in shown.stdout, shown.stdout


async def test_a_hung_upstream_is_answered_in_time_and_the_call_stays_in_doubt(tmp_path: Path) -> None:
    async with faulty(tmp_path, "--gate", "hang", "--default", "allow", config="timeout = 2\n") as gw:
        call = asyncio.create_task(gw.client.call_tool("hang", {"tag": "x"}))
        card = await gw.wait_pending()
        approved = await gw.goldfive("approve", card["target_id"], "--by", "ana")
        assert approved.returncode == 0, approved.stderr
        result = await asyncio.wait_for(call, 60)
        # The upstream is told the gateway gave up (notifications/cancelled), and the gateway goes on serving.
        await until(lambda: any(c.get("cancelled") for c in gw.upstream_calls()), "the upstream saw the cancel")
        fine = await gw.client.call_tool("ok", {"tag": "next"})
        assert not fine.is_error and text(fine) == "fine next"
        states = await ledger(gw, card["target_id"])
        shown = await gw.goldfive("show", card["target_id"])
        events = await gw.events()
    assert result.is_error
    assert "hang may or may not have run: its MCP server 'f' did not answer within 2 s" in text(result)
    assert "goldfive does not send it again" in text(result)
    calls = gw.upstream_calls()
    assert [c["tool"] for c in calls] == ["hang", "hang", "ok"]
    assert calls[0]["pid"] == calls[2]["pid"]  # alive, silent: not restarted
    assert states == ["executing"]  # in doubt: never "done", never sent again
    assert "execution  executing" in shown.stdout, shown.stdout
    drifts = [e["drift_detected"]["detail"] for e in events if "drift_detected" in e]
    assert any(f"goldfive resolve {card['target_id']}" in d for d in drifts), drifts


async def test_the_upstream_timeout_option_bounds_a_call_no_person_was_asked_for(tmp_path: Path) -> None:
    async with faulty(tmp_path, "--default", "allow", "--upstream-timeout", "1.5") as gw:
        result = await asyncio.wait_for(gw.client.call_tool("hang", {}), 60)
    assert result.is_error and "did not answer within 1.5 s" in text(result)


async def test_the_clock_stops_while_a_person_answers_the_upstreams_question(tmp_path: Path) -> None:
    async with faulty(tmp_path, "--default", "allow", "--upstream-timeout", "1") as gw:
        call = asyncio.create_task(gw.client.call_tool("confirm", {"tag": "refund"}))
        question = await gw.wait_pending()
        assert question["kind"] == "input"
        await asyncio.sleep(1.5)  # the person takes longer than the upstream's timeout (not an ordering wait)
        answered = await gw.goldfive("answer", question["target_id"], "sure=yes", "--by", "ana")
        assert answered.returncode == 0, answered.stderr
        result = await asyncio.wait_for(call, 60)
    assert not result.is_error, text(result)
    assert text(result) == "confirmed refund: accept"


async def test_a_stale_rounds_fault_never_ends_the_upstreams_new_connection(tmp_path: Path) -> None:
    """A 2026-07-28 call waits between its rounds for a person; meanwhile its upstream dies and is started again.
    The second round, on the old connection, is lost (the first reached the upstream: in doubt); the new
    connection is left alone."""
    restarts, handler = counting(types.ToolListChangedNotification)
    modern = 'protocol = "2026-07-28"\n'
    async with faulty(tmp_path, "--default", "allow", config=modern, message_handler=handler) as gw:
        refund = asyncio.create_task(gw.client.call_tool("refund", {"order": "A-1"}))
        question = await gw.wait_pending()  # round 1 answered input_required: a person is asked why
        await gw.client.call_tool("die", {})
        await until(lambda: restarts, "the upstream came back")
        before = await gw.client.call_tool("ok", {"tag": "before"})
        assert not before.is_error
        answered = await gw.goldfive("answer", question["target_id"], "reason=damaged", "--by", "ana")
        assert answered.returncode == 0, answered.stderr
        result = await asyncio.wait_for(refund, 60)
        after = await gw.client.call_tool("ok", {"tag": "after"})
        assert not after.is_error, text(after)
    assert result.is_error and "refund may or may not have run" in text(result)
    calls = gw.upstream_calls()
    assert [(c["tool"], c.get("round")) for c in calls] == [("refund", 1), ("die", None), ("ok", None), ("ok", None)]
    assert calls[3]["pid"] == calls[2]["pid"]  # the restarted connection served on: the old one's fault ended nothing
    assert len(restarts) == 1


async def test_a_call_the_client_cancels_while_its_upstream_runs_it_stays_in_doubt(tmp_path: Path) -> None:
    """The client gives up (``notifications/cancelled``) after the approved call reached its upstream: nobody saw it
    finish, so the ledger keeps it in doubt ("executing", never "done", never sent again) and the upstream is told."""
    async with faulty(tmp_path, "--gate", "hang", "--default", "allow") as gw:
        call = asyncio.create_task(gw.client.call_tool("hang", {"tag": "x"}))
        card = await gw.wait_pending()
        approved = await gw.goldfive("approve", card["target_id"], "--by", "ana")
        assert approved.returncode == 0, approved.stderr
        await until(lambda: [c for c in gw.upstream_calls() if c["tool"] == "hang"], "the call reached the upstream")
        call.cancel()  # the SDK client sends notifications/cancelled
        await asyncio.gather(call, return_exceptions=True)
        await until(lambda: any(c.get("cancelled") for c in gw.upstream_calls()), "the upstream saw the cancel")
        fine = await gw.client.call_tool("ok", {"tag": "next"})  # the session goes on
        assert not fine.is_error and text(fine) == "fine next"
        states = await ledger(gw, card["target_id"])
        shown = await gw.goldfive("show", card["target_id"])
    assert states == ["executing"], states  # in doubt: not "done" (nobody saw it end), not given back
    assert "execution  executing" in shown.stdout, shown.stdout
    assert [c["tool"] for c in gw.upstream_calls()] == ["hang", "hang", "ok"]  # sent once; its cancel; the next


async def test_a_call_the_client_cancelled_mid_forward_gets_no_answer(tmp_path: Path) -> None:
    """MCP: a request the client cancelled gets no answer. Seen on the wire (a raw JSON-RPC client over stdio: the
    SDK client drops a late answer silently) — and the call is in doubt, not answered as an error result."""
    table = tmp_path / "gateway.toml"
    words = json.dumps([str(FAULTY), "--calls", str(tmp_path / "calls.jsonl")])
    table.write_text(f"[upstream.f]\ncommand = {json.dumps(sys.executable)}\nargs = {words}\n")
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(tmp_path / "goldfive.db"), "--config", str(table)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *argv,
        "--gate",
        "hang",
        "--default",
        "allow",
        cwd=str(ROOT),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    gw = Gateway(tmp_path, None)
    answers: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        await proc.stdin.drain()

    async def answer_to(ident: int) -> dict[str, Any]:
        assert proc.stdout is not None
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line, "the gateway closed its output"
            message = json.loads(line)
            if "id" in message and "method" not in message:
                answers.append(message)
                if message["id"] == ident:
                    return message

    try:
        client = {"name": "raw", "version": "1"}
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
        await send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        await answer_to(1)
        await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "hang", "arguments": {"tag": "x"}}
        await send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        card = await gw.wait_pending()
        approved = await gw.goldfive("approve", card["target_id"], "--by", "ana")
        assert approved.returncode == 0, approved.stderr
        await until(lambda: [c for c in gw.upstream_calls() if c["tool"] == "hang"], "the call reached the upstream")
        await send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})
        await until(lambda: any(c.get("cancelled") for c in gw.upstream_calls()), "the upstream saw the cancel")
        await send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ok", "arguments": {}}})
        nxt = await answer_to(3)
        states = await ledger(gw, card["target_id"])
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        await proc.wait()
    assert not nxt["result"].get("isError"), nxt
    assert [a["id"] for a in answers] == [1, 3], answers  # the cancelled call was not answered
    assert states == ["executing"], states
