"""An upstream over streamable HTTP that needs a header: the gateway sends the one ``headers_from_env`` names.

The upstream (tests/mcp/faulty_upstream.py ``--http``) refuses every request whose ``Authorization`` is not the
value it was started with (401, recorded without the value). The gateway reads the header's value from the
variable its config names — never from the file or the command line — and a variable that is not set stops it at
start, naming the variable.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from mcp_support import ROOT, text

FAULTY = Path(__file__).with_name("faulty_upstream.py")
SECRET = "Bearer upstream-s3cret-0123456789"


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[int]:
    """The faulty upstream on streamable HTTP (its port), refusing any request without ``Authorization: SECRET``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    argv = [sys.executable, str(FAULTY), "--http", str(port), "--calls", str(tmp_path / "calls.jsonl")]
    env = {**os.environ, "UPSTREAM_EXPECTS": SECRET}
    server = subprocess.Popen([*argv, "--require-auth-env", "UPSTREAM_EXPECTS"], env=env, stderr=subprocess.DEVNULL)
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


def _argv(tmp: Path, table: str) -> list[str]:
    config = tmp / "gateway.toml"
    config.write_text(table)
    return ["-m", "goldfive_core.cli", "mcp", "--db", str(tmp / "goldfive.db"), "--config", str(config)]


def _records(tmp: Path) -> list[dict[str, object]]:
    calls = tmp / "calls.jsonl"
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


async def test_the_gateway_sends_the_header_its_environment_holds(tmp_path: Path, guarded: int) -> None:
    table = (
        f'[upstream.crm]\nurl = "http://127.0.0.1:{guarded}/mcp"\nheaders_from_env = {{ Authorization = "CRM_AUTH" }}\n'
    )
    argv = [*_argv(tmp_path, table), "--default", "allow"]
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT), env={"CRM_AUTH": SECRET})
    async with Client(params, mode="legacy") as client:
        assert "ok" in [tool.name for tool in (await client.list_tools()).tools]
        result = await client.call_tool("ok", {"tag": "with the header"})
    assert not result.is_error and text(result) == "fine with the header"
    records = _records(tmp_path)
    assert [r.get("tool") for r in records] == ["ok"]
    assert not any("refused" in r for r in records)  # every request carried it


async def test_without_the_header_the_upstream_refuses_and_its_tools_are_unavailable(
    tmp_path: Path, guarded: int
) -> None:
    argv = [*_argv(tmp_path, f'[upstream.crm]\nurl = "http://127.0.0.1:{guarded}/mcp"\n'), "--default", "allow"]
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        result = await client.call_tool("ok", {})
    assert result.is_error and "crm did not start" in text(result)
    records = _records(tmp_path)
    assert records and all(r == {"refused": "http", "had_auth": False, "pid": r["pid"]} for r in records)


def test_a_header_variable_that_is_not_set_stops_the_gateway_at_start_naming_it(tmp_path: Path) -> None:
    table = (
        '[upstream.crm]\nurl = "http://127.0.0.1:9/mcp"\nheaders_from_env = { Authorization = "NO_SUCH_CRM_AUTH" }\n'
    )
    env = {k: v for k, v in os.environ.items() if k != "NO_SUCH_CRM_AUTH"}
    done = subprocess.run(
        [sys.executable, *_argv(tmp_path, table)],
        cwd=str(ROOT),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "upstream 'crm': headers_from_env names NO_SUCH_CRM_AUTH" in done.stderr
    assert done.stdout == ""  # nothing on the MCP stream
