"""``goldfive mcp`` with the real MCP SDK client and a real upstream MCP server over stdio (no mocks of MCP).

Each test starts the gateway as a subprocess in front of the bundled demo bank (examples/mcp_demo_server.py),
calls it as any MCP client would, and answers from another process with the ``goldfive`` command on the same
SQLite store. What the test checks is what a user sees: the tool result the model reads, the calls that reached
the upstream (the demo server's own record) and the store's requests and audit log.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp_support import DEMO, DYING, GROWING, ROOT, Gateway, gateway, on_tools_changed, text

TRANSFER = {"amount": 120, "to": "ACME"}


async def test_tools_resources_and_prompts_pass_through_unchanged(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gw:
        tools = {tool.name: tool for tool in (await gw.client.list_tools()).tools}
        assert sorted(tools) == ["read_balance", "transfer_funds"]
        schema = tools["transfer_funds"].input_schema
        assert schema["required"] == ["amount", "to"]
        assert tools["transfer_funds"].description == "Move money from the checking account to a payee. Irreversible."
        resources = (await gw.client.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["bank://accounts"]
        read = await gw.client.read_resource("bank://accounts")
        assert "ACME" in read.contents[0].text
        prompts = (await gw.client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["pay"]
        prompt = await gw.client.get_prompt("pay", {"payee": "ACME"})
        assert "ACME" in prompt.messages[0].content.text


async def test_several_upstreams_are_prefixed_and_routed(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--default", "allow", upstreams=("bank", "savings")) as gw:
        names = sorted(tool.name for tool in (await gw.client.list_tools()).tools)
        assert names == [
            "bank__read_balance",
            "bank__transfer_funds",
            "savings__read_balance",
            "savings__transfer_funds",
        ]
        result = await gw.client.call_tool("savings__read_balance", {"account": "ACME"})
        assert not result.is_error and "ACME: 1000.00 EUR" in text(result)
        assert gw.upstream_calls() == [{"tool": "read_balance", "args": {"account": "ACME"}}]


async def test_an_approved_call_with_an_edit_runs_upstream_exactly_once(tmp_path: Path) -> None:
    progress: list[str] = []
    first_progress = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")
        first_progress.set()

    async with gateway(tmp_path, "--progress-every", "0.05") as gw:
        call = asyncio.create_task(
            gw.client.session.call_tool("transfer_funds", TRANSFER, progress_callback=on_progress)
        )
        request = await gw.wait_pending()
        assert request["tool_name"] == "transfer_funds" and request["args"] == TRANSFER
        assert request["metadata"]["mcp_client"].startswith("mcp")  # the client's own clientInfo
        assert request["metadata"]["mcp_session"].startswith("mcp-session-")
        assert json.loads(request["metadata"]["args_schema"])["required"] == ["amount", "to"]
        await asyncio.wait_for(first_progress.wait(), 30)  # the waiting call tells the client it is alive
        assert gw.upstream_calls() == []  # nothing ran while it waited
        edit = json.dumps({"amount": 100, "to": "ACME", "currency": "EUR"})
        decided = await gw.goldfive(
            "approve", request["target_id"], "--by", "ana", "--reason", "capped", "--edit", edit
        )
        assert decided.returncode == 0, decided.stderr
        result = await asyncio.wait_for(call, 30)
        assert not result.is_error
        assert "sent 100.00 EUR to ACME" in text(result)
        assert "A person (ana) approved this call: capped" in text(result)
        assert f"goldfive approve {request['target_id']}" in progress[0]
    assert gw.upstream_calls() == [{"tool": "transfer_funds", "args": {"amount": 100, "to": "ACME", "currency": "EUR"}}]
    recorded = [e["execution_recorded"] for e in await gw.events() if "execution_recorded" in e]
    assert [r["state"] for r in recorded] == ["executing", "done"]


async def test_a_rejection_reaches_the_client_with_its_reason(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gw:
        call = asyncio.create_task(gw.client.call_tool("transfer_funds", TRANSFER))
        request = await gw.wait_pending()
        decided = await gw.goldfive("reject", request["target_id"], "--by", "ana", "--reason", "ACME was paid already")
        assert decided.returncode == 0, decided.stderr
        result = await asyncio.wait_for(call, 30)
    assert result.is_error
    assert "A person (ana) rejected this transfer_funds call" in text(result)
    assert "ACME was paid already" in text(result)
    assert gw.upstream_calls() == []


async def test_a_denied_call_never_reaches_the_upstream(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[rule]]\nname = "no big transfers"\ntool = "transfer_funds"\nwhen = "args.amount > 100"\n'
        'action = "deny"\nreason = "transfers over 100 need the finance desk"\n'
    )
    async with gateway(tmp_path, "--policy", str(policy)) as gw:
        result = await gw.client.call_tool("transfer_funds", TRANSFER)
        assert await gw.pending() == []
    assert result.is_error
    assert "transfers over 100 need the finance desk" in text(result)
    assert gw.upstream_calls() == []
    applied = [e["policy_applied"] for e in await gw.events() if "policy_applied" in e]
    assert [(a["rule"], a["action"]) for a in applied] == [("no big transfers", "deny")]


async def test_an_allowed_call_needs_no_person(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--allow", "read_*") as gw:
        result = await gw.client.call_tool("read_balance", {"account": "ACME"})
        assert not result.is_error and "ACME: 1000.00 EUR" in text(result)
        assert await gw.pending() == []
    assert gw.upstream_calls() == [{"tool": "read_balance", "args": {"account": "ACME"}}]


async def test_bad_input_is_a_clear_error_and_the_gateway_keeps_serving(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--default", "allow") as gw:
        unknown = await gw.client.call_tool("wire_everything", {})
        assert unknown.is_error
        assert "unknown tool 'wire_everything'" in text(unknown) and "transfer_funds" in text(unknown)
        misfit = await gw.client.call_tool("transfer_funds", {"amount": "lots", "to": "ACME"})
        assert misfit.is_error
        assert "do not fit its input schema" in text(misfit) and "amount" in text(misfit)
        fine = await gw.client.call_tool("read_balance", {})  # still serving
        assert not fine.is_error
    assert gw.upstream_calls() == [{"tool": "read_balance", "args": {"account": "checking"}}]


async def test_an_edit_that_does_not_fit_the_schema_is_refused(tmp_path: Path) -> None:
    async with gateway(tmp_path) as gw:
        call = asyncio.create_task(gw.client.call_tool("transfer_funds", TRANSFER))
        request = await gw.wait_pending()
        decided = await gw.goldfive(
            "approve", request["target_id"], "--edit", json.dumps({"amount": "all", "to": "ACME"})
        )
        assert decided.returncode != 0
        assert "amount" in (decided.stdout + decided.stderr)
        assert (await gw.pending())[0]["target_id"] == request["target_id"]  # still waiting for a usable answer
        await gw.goldfive("reject", request["target_id"], "--reason", "no")
        await asyncio.wait_for(call, 30)
    assert gw.upstream_calls() == []


async def test_no_decision_in_time_is_a_clear_error(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--approval-timeout", "0.2") as gw:
        result = await gw.client.call_tool("transfer_funds", TRANSFER)
    assert result.is_error
    assert "approval_timeout" in text(result) and "Do not assume it was approved" in text(result)
    assert gw.upstream_calls() == []


async def test_a_cancelled_request_withdraws_the_approval(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--allow", "read_balance") as gw:
        call = asyncio.create_task(gw.client.call_tool("transfer_funds", TRANSFER))
        request = await gw.wait_pending()
        call.cancel()  # the SDK client sends notifications/cancelled
        await asyncio.gather(call, return_exceptions=True)
        await gw.wait_no_pending()
        late = await gw.goldfive("approve", request["target_id"])
        assert late.returncode != 0  # nothing left to approve
        result = await gw.client.call_tool("read_balance", {})  # the session goes on
        assert not result.is_error
    cancelled = [e["approval_cancelled"] for e in await gw.events() if "approval_cancelled" in e]
    assert cancelled[0]["target_id"] == request["target_id"]
    assert all(c["tool"] != "transfer_funds" for c in gw.upstream_calls())


async def test_a_cancelled_run_answers_calls_with_a_cancelled_error(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--default", "allow") as gw:
        await gw.client.call_tool("read_balance", {})
        runs = await gw.goldfive("runs", "--json")
        run_id = json.loads(runs.stdout)["runs"][0]["run_id"]
        stopped = await gw.goldfive("cancel", "--run", run_id, "--reason", "enough for today")
        assert stopped.returncode == 0, stopped.stderr
        result = await gw.client.call_tool("read_balance", {})
    assert result.is_error and "enough for today" in text(result)
    assert len(gw.upstream_calls()) == 1


async def test_a_paused_run_holds_the_next_call_until_resumed(tmp_path: Path) -> None:
    held = asyncio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        if "paused" in (message or ""):
            held.set()

    async with gateway(tmp_path, "--default", "allow", "--progress-every", "0.05") as gw:
        await gw.client.call_tool("read_balance", {})
        run_id = json.loads((await gw.goldfive("runs", "--json")).stdout)["runs"][0]["run_id"]
        paused = await gw.goldfive("pause", "--run", run_id, "--reason", "lunch")
        assert paused.returncode == 0, paused.stderr
        call = asyncio.create_task(
            gw.client.session.call_tool("read_balance", {"account": "ACME"}, progress_callback=on_progress)
        )
        await asyncio.wait_for(held.wait(), 30)  # the gateway says the call is held
        assert len(gw.upstream_calls()) == 1
        resumed = await gw.goldfive("resume", "--run", run_id)
        assert resumed.returncode == 0, resumed.stderr
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error and "ACME: 1000.00 EUR" in text(result)
    assert len(gw.upstream_calls()) == 2


async def test_a_steer_hands_the_next_call_the_persons_words_instead_of_running_it(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--default", "allow") as gw:
        await gw.client.call_tool("read_balance", {})
        steered = await gw.goldfive("steer", "pay Initech instead, ACME was paid")  # the only live run: the gateway's
        assert steered.returncode == 0, steered.stderr
        redirected = await gw.client.call_tool("transfer_funds", TRANSFER)
        after = await gw.client.call_tool("transfer_funds", {"amount": 80, "to": "Initech"})
    assert redirected.is_error
    assert "transfer_funds was not run. The people supervising this session say:" in text(redirected)
    assert "- pay Initech instead, ACME was paid" in text(redirected)
    assert not after.is_error and "sent 80.00 EUR to Initech" in text(after)  # the words replace one call, once
    assert [c["args"].get("to") for c in gw.upstream_calls()] == [None, "Initech"]


@pytest.fixture
def http_bank(tmp_path: Path) -> Iterator[int]:
    """The demo bank serving streamable HTTP on 127.0.0.1 (its port), recording calls in tmp_path/calls.jsonl."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    argv = [sys.executable, str(DEMO), "--http", str(port), "--calls", str(tmp_path / "calls.jsonl")]
    server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(400):  # until it listens (a handshake: the connection is accepted)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        server.terminate()
        server.wait(10)


async def test_an_upstream_over_streamable_http(tmp_path: Path, http_bank: int) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text(
        f'[upstream.bank]\nurl = "http://127.0.0.1:{http_bank}/mcp"\nheaders_from_env = {{ Authorization = "PATH" }}\n'
    )
    async with gateway(tmp_path, "--config", str(config), "--allow", "read_*", upstreams=()) as gw:
        names = sorted(tool.name for tool in (await gw.client.list_tools()).tools)
        assert names == ["read_balance", "transfer_funds"]
        result = await gw.client.call_tool("read_balance", {"account": "ACME"})
        assert not result.is_error and "ACME: 1000.00 EUR" in text(result)
    assert gw.upstream_calls() == [{"tool": "read_balance", "args": {"account": "ACME"}}]


async def test_an_upstream_that_cannot_start_is_named_in_the_error(tmp_path: Path) -> None:
    config = tmp_path / "gateway.toml"
    config.write_text('[upstream.vault]\nurl = "http://127.0.0.1:9/mcp"\n')  # nothing listens there
    async with gateway(tmp_path, "--config", str(config), "--default", "allow") as gw:  # bank works, vault does not
        assert sorted(t.name for t in (await gw.client.list_tools()).tools) == [
            "bank__read_balance",
            "bank__transfer_funds",
        ]
        result = await gw.client.call_tool("vault__open", {})
    assert result.is_error
    assert "unavailable upstreams: vault did not start:" in text(result)


async def test_an_upstream_that_dies_mid_call_is_reported_unavailable(tmp_path: Path) -> None:
    dying = tmp_path / "dying.py"
    dying.write_text(DYING)
    flags = ("--default", "allow", "--restarts", "0", "--upstream", f"d={sys.executable} {dying}")
    async with gateway(tmp_path, *flags) as gw:
        assert not (await gw.client.call_tool("d__ok", {})).is_error
        died = await gw.client.call_tool("d__die", {})
        assert died.is_error and "d__die may or may not have run: its MCP server 'd' stopped answering" in text(died)
        after = await gw.client.call_tool("d__ok", {})
        assert after.is_error and "its MCP server 'd' stopped answering" in text(after)
        assert not (await gw.client.call_tool("bank__read_balance", {})).is_error  # the other upstream serves
    done = [e["execution_recorded"] for e in await gw.events() if "execution_recorded" in e]
    assert done == []  # allowed calls need no ledger; an approved one would be left in doubt


async def test_an_upstream_that_died_is_restarted_and_an_approved_call_lost_in_flight_stays_in_doubt(
    tmp_path: Path,
) -> None:
    dying = tmp_path / "dying.py"
    dying.write_text(DYING)
    back = asyncio.Event()
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(tmp_path / "goldfive.db"), "--allow", "ok", "--gate", "die"]
    argv += ["--upstream", f"d={sys.executable} {dying}"]
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    async with Client(params, mode="legacy", message_handler=on_tools_changed(back)) as client:
        gw = Gateway(tmp_path, client)
        call = asyncio.create_task(client.call_tool("die", {}))
        card = await gw.wait_pending()
        approved = await gw.goldfive("approve", card["target_id"], "--by", "ana")
        assert approved.returncode == 0, approved.stderr
        died = await asyncio.wait_for(call, 60)
        assert died.is_error and "die may or may not have run" in text(died)
        assert "goldfive does not send it again" in text(died)
        await asyncio.wait_for(back.wait(), 60)  # restarted: the client is told its tools are back
        after = await client.call_tool("ok", {})
        assert not after.is_error and text(after) == "fine"
        events = await gw.events()
        shown = await gw.goldfive("show", card["target_id"])
    # The approved call reached the process that died and got no answer: in doubt ("executing", never "done"),
    # for a person to settle; it is not re-sent.
    done = [e["execution_recorded"] for e in events if "execution_recorded" in e]
    assert [(d["target_id"], d["state"]) for d in done] == [(card["target_id"], "executing")]
    assert "execution  executing" in shown.stdout, shown.stdout
    drifts = [e["drift_detected"]["detail"] for e in events if "drift_detected" in e]
    assert any(f"goldfive resolve {card['target_id']}" in d for d in drifts), drifts


async def test_an_upstreams_tool_list_change_reaches_the_client(tmp_path: Path) -> None:
    growing = tmp_path / "growing.py"
    growing.write_text(GROWING)
    changed = asyncio.Event()
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(tmp_path / "g.db"), "--default", "allow"]
    params = StdioServerParameters(command=sys.executable, args=[*argv, "--upstream", f"g={sys.executable} {growing}"])
    async with Client(params, mode="legacy", message_handler=on_tools_changed(changed), cache=None) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["grow"]
        assert text(await client.call_tool("grow", {})) == "grown"
        await asyncio.wait_for(changed.wait(), 30)
        assert sorted(t.name for t in (await client.list_tools()).tools) == ["grow", "shiny"]
        assert text(await client.call_tool("shiny", {})) == "new"


def test_a_gateway_whose_stdin_is_the_null_device_ends_at_once(tmp_path: Path) -> None:
    """No client (stdin is ``/dev/null``, as a service's is): the gateway starts, reads the end and exits cleanly,
    instead of waiting forever on a device its event loop cannot watch."""
    cmd = [sys.executable, "-m", "goldfive_core.cli", "mcp", "--db", str(tmp_path / "g.db")]
    cmd += ["--upstream", f"bank={sys.executable} {DEMO}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    runs = subprocess.run(
        [sys.executable, "-m", "goldfive_core.cli", "--db", str(tmp_path / "g.db"), "runs", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    (run,) = json.loads(runs.stdout)["runs"]
    assert run["status"] != "running"  # its run ended with it
