"""The goldfive command against a server (--url/--token, GOLDFIVE_URL/GOLDFIVE_TOKEN): same commands, same output."""

from __future__ import annotations

import asyncio
import getpass
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from server_support import goldfive, serve_process, start_tool_agent
from store_support import REPO, Backend, make_event

from goldfive_core._util import args_digest
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store.base import HOST

_ago = re.compile(r"\d+(\.\d)?[smh] ago")


async def _cli(backend: Backend, *args: str, url: str = "", token: str = "") -> subprocess.CompletedProcess[str]:
    env = backend.env()
    if url:
        env["GOLDFIVE_URL"], env["GOLDFIVE_TOKEN"] = url, token
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "goldfive_core.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )


async def _both(
    backend: Backend, *args: str, url: str, token: str
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The same command on the database and through the server, at once (each is a new Python process)."""
    local, remote = await asyncio.gather(_cli(backend, *args), _cli(backend, *args, url=url, token=token))
    return local, remote


@pytest.mark.timeout(240)  # some 50 command-line processes, two at a time: slow on a loaded machine
async def test_the_command_line_through_a_server_prints_what_it_prints_on_the_database(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    backend = sqlite_backend
    backend.open()
    made = goldfive(backend, "users", "add", "ana", "--role", "approver")
    token = made.stdout.strip().splitlines()[-1]
    with serve_process(backend, tmp_path / "k.pem") as served:
        agent = start_tool_agent(backend, "call-r", {"amount": 10, "to": "bob"}, trust=served.trust_key)
        try:
            for _ in range(400):
                if backend.open().approvals():
                    break
                await asyncio.sleep(0.025)
            for command in (["pending"], ["show", "call-r"], ["runs"], ["audit", "verify"]):
                local, remote = await _both(backend, *command, url=served.url, token=token)
                same = (remote.returncode, _ago.sub("ago", remote.stdout))
                assert same == (local.returncode, _ago.sub("ago", local.stdout)), command
            local_events, remote_events = await _both(backend, "events", url=served.url, token=token)
            assert remote_events.stdout == local_events.stdout
            wrong = await _cli(backend, "pending", url=served.url, token="gf5_0000000000000000_" + "x" * 43)
            assert wrong.returncode == 1 and "not valid" in wrong.stderr
            by = await _cli(backend, "approve", "call-r", "--by", "cfo", url=served.url, token=token)
            assert by.returncode == 2 and "--by is not used with --url" in by.stderr
            ok = await _cli(
                backend,
                "--json",
                "approve",
                "call-r",
                "--edit",
                '{"amount": 12, "to": "bob"}',
                url=served.url,
                token=token,
            )
            assert ok.returncode == 0, ok.stderr
            assert json.loads(ok.stdout)["result"] == "SUCCESS"
            assert (await agent.result()).output.status == "ran" and agent.ran == [{"amount": 12, "to": "bob"}]
            again = await _cli(backend, "reject", "call-r", "--reason", "no", url=served.url, token=token)
            assert again.returncode == 1
            assert (
                again.stdout.strip()
                == "refused: already decided: 'call-r' was approved by ana; this decision was not applied"
            )
            shown = (await _cli(backend, "show", "call-r", url=served.url, token=token)).stdout
            assert "decision   approve by ana" in shown
            # Decided, edited and run: the same lines both ways (decision, edited, execution).
            assert 'edited     {"amount":12,"to":"bob"}' in shown and "execution  done (started 20" in shown
            assert _ago.sub("ago", shown) == _ago.sub("ago", (await _cli(backend, "show", "call-r")).stdout)

            # A request a policy asked for: the policy line too, before and after a recorded decision.
            req = events_pb2.ApprovalRequested(
                target_id="call-p",
                kind="tool",
                prompt="pay?",
                metadata={
                    "tool_name": "transfer_funds",
                    "args_json": '{"amount":9000}',
                    "policy_rule": "large transfers",
                    "policy_action": "ask",
                    "policy_approvers": "role:cfo",
                    "policy_quorum": "1",
                    "policy_escalate_after": "30m",
                    "policy_escalate_to": "role:ceo",
                },
                args_digest=args_digest("transfer_funds", {"amount": 9000}),
            )
            dead = 2**22 + 777  # above pid_max: no such process, so the request is orphaned
            events = [make_event("run-p", 0, events_pb2.RunStarted(adapter="adk")), make_event("run-p", 1, req)]
            backend.open().append_events(events, pid=dead, host=HOST)
            local, remote = await _both(backend, "show", "call-p", url=served.url, token=token)
            assert "policy     rule 'large transfers' (ask) · approvers role:cfo" in local.stdout
            assert (remote.returncode, remote.stdout) == (local.returncode, local.stdout)

            # A call whose process died while its body ran: in doubt, listed by `pending` both ways.
            backend.open().mark_executing("call-p", run_id="run-p", pid=dead, host=HOST, args_digest=req.args_digest)
            # --json: the same single object whichever way the store is reached (scripts read either).
            for command in (
                ["pending"],
                ["pending", "--limit", "1"],
                ["pending", "--limit", "1", "--offset", "1"],
                ["show", "call-p"],
                ["show", "call-r"],
                ["runs"],
                ["runs", "--limit", "1"],
                ["events"],
                ["events", "--limit", "0"],
                ["events", "--limit", "2"],
                ["events", "--run", "run-p"],
                ["audit", "verify"],
                ["grants"],
            ):
                local, remote = await _both(backend, "--json", *command, url=served.url, token=token)
                assert (remote.returncode, json.loads(remote.stdout)) == (local.returncode, json.loads(local.stdout))
                assert local.stdout.count("\n") == 1, command  # one object, one line
            listed = json.loads((await _cli(backend, "--json", "pending", url=served.url, token=token)).stdout)
            assert [p["target_id"] for p in listed["pending"]] == ["call-p"]  # call-r was decided above
            assert listed["pending"][0]["status"] == "orphaned" and listed["total"] == 1
            assert [d["target_id"] for d in listed["in_doubt"]] == ["call-p"]
            text = (await _cli(backend, "pending", url=served.url, token=token)).stdout
            assert "IN DOUBT  call-p" in text and text == (await _cli(backend, "pending")).stdout
            run_events = json.loads(
                (await _cli(backend, "--json", "events", "--run", "run-p", url=served.url, token=token)).stdout
            )
            assert [e["event"]["run_id"] for e in run_events["events"]] == ["run-p"] * 3  # + the ledger's claim
            assert "execution_recorded" in run_events["events"][-1]["event"]
        finally:
            await agent.close()
    gone = await _cli(backend, "pending", url=served.url, token=token)
    assert gone.returncode == 3 and "unreachable" in gone.stderr


async def test_a_local_command_line_decision_is_recorded_with_channel_cli_and_the_os_user(
    sqlite_backend: Backend,
) -> None:
    backend = sqlite_backend
    agent = start_tool_agent(backend, "call-l", {"amount": 1})
    try:
        for _ in range(400):
            if backend.open().approvals():
                break
            await asyncio.sleep(0.025)
        env = backend.env()
        env.pop("GOLDFIVE_USER", None)
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "goldfive_core.cli", "approve", "call-l"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=REPO,
        )
        assert done.returncode == 0, done.stderr
        assert (await agent.result()).output.status == "ran"
        (granted,) = agent.sink.of("approval_granted")
        assert (granted.approval_granted.decided_by, granted.approval_granted.channel) == (getpass.getuser(), "cli")
        row = backend.open().approvals_for("call-l")[0]
        assert (row.decided_by, row.decided_channel, row.decision_sig) == (getpass.getuser(), "cli", "")
    finally:
        await agent.close()


async def test_a_bad_edit_is_refused_the_same_way_in_both_modes_before_anything_is_sent(
    sqlite_backend: Backend,
) -> None:
    # Port 9 (discard) has no server: a usage error must come before any connection is tried (exit 2, not 3).
    for edit, words in (
        ('{"amount": NaN}', "NaN is not valid JSON"),
        ("[1]", "must be a JSON object, got list"),
        ("[" * 200 + "]" * 200, "GOLDFIVE_LIMIT_MAX_JSON_DEPTH"),
    ):
        remote = await _cli(sqlite_backend, "approve", "t1", "--edit", edit, url="http://127.0.0.1:9", token="t")
        local = await _cli(sqlite_backend, "approve", "t1", "--edit", edit)
        assert (remote.returncode, local.returncode) == (2, 2), (edit, remote.stderr, local.stderr)
        assert words in remote.stderr and remote.stderr == local.stderr
        assert "Traceback" not in remote.stderr + local.stderr
