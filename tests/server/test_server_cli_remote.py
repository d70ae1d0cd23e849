"""The goldfive command against a server (--url/--token, GOLDFIVE_URL/GOLDFIVE_TOKEN): same commands, same output."""

from __future__ import annotations

import asyncio
import getpass
import json
import re
import subprocess
import sys
from pathlib import Path

from server_support import goldfive, serve_process, start_tool_agent
from store_support import REPO, Backend

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
                local = await _cli(backend, *command)
                remote = await _cli(backend, *command, url=served.url, token=token)
                same = (remote.returncode, _ago.sub("ago", remote.stdout))
                assert same == (local.returncode, _ago.sub("ago", local.stdout)), command
            local_events = (await _cli(backend, "events")).stdout
            remote_events = (await _cli(backend, "events", url=served.url, token=token)).stdout
            assert remote_events == local_events
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
