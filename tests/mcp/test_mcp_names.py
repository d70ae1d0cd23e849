"""A policy written for other tool names than the gateway exposes is said at start-up, and never widened.

With several upstreams every tool is ``UPSTREAM__tool``, so a rule naming ``transfer_funds`` matches nothing; with
one, ``bank__transfer_funds`` matches nothing. ``goldfive mcp`` says so on stderr (its log) for each such entry of
the policy file and of ``--gate/--allow/--deny``, naming the exposed names to write. The rule itself is left as
written: a bare ``--allow read_balance`` does not start allowing ``bank__read_balance`` (nor another upstream's
tool of the name).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_support import DEMO, ROOT, Gateway, text


def _start_up(tmp: Path, upstreams: tuple[str, ...], *flags: str) -> str:
    """What ``goldfive mcp`` says on stderr while it starts (its client, stdin, is gone at once)."""
    cmd = [sys.executable, "-m", "goldfive_core.cli", "mcp", "--db", str(tmp / "goldfive.db"), *flags]
    for name in upstreams:
        cmd += ["--upstream", f"{name}={sys.executable} {DEMO}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    return out.stderr


def test_bare_names_behind_several_upstreams_are_named_with_the_prefix_to_write(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    rules = [
        '[[rule]]\nname = "payments"\ntool = ["transfer_funds", "wire_*"]\naction = "ask"\n',
        '[[rule]]\nname = "the rest"\ntool = "*"\naction = "ask"\n',
    ]
    policy.write_text("\n".join(rules))
    flags = ("--deny", "transfer_funds", "--allow", "read_*", "--gate", "bank__transfer_funds")
    said = _start_up(tmp_path, ("bank", "shop"), *flags, "--policy", str(policy))
    lines = [line for line in said.splitlines() if "goldfive mcp: " in line]
    assert any(
        "rule '--deny transfer_funds' names the tool 'transfer_funds', which matches none of this gateway's tools"
        in line
        and "It would match bank__transfer_funds, shop__transfer_funds" in line
        and "write 'bank__transfer_funds' or 'shop__transfer_funds'" in line
        for line in lines
    ), said
    assert any(
        "rule '--allow read_*' names the tool 'read_*'" in line and "write 'bank__read_*' or 'shop__read_*'" in line
        for line in lines
    ), said
    assert any("rule 'payments' (line 1) names the tool 'transfer_funds'" in line for line in lines), said
    assert len(lines) == 3, said  # 'wire_*' matches no tool at all; 'bank__transfer_funds' and '*' match
    assert "write '*__" not in said


def test_prefixed_names_behind_one_upstream_are_named_without_it(tmp_path: Path) -> None:
    said = _start_up(tmp_path, ("bank",), "--deny", "bank__transfer_funds", "--allow", "read_balance")
    lines = [line for line in said.splitlines() if "goldfive mcp: " in line]
    assert len(lines) == 1, said
    assert "rule '--deny bank__transfer_funds' names the tool 'bank__transfer_funds'" in lines[0]
    assert "with one upstream the tools keep their own names" in lines[0]
    assert "write 'transfer_funds'" in lines[0]


async def test_a_bare_allow_is_said_and_still_lets_no_prefixed_call_through(tmp_path: Path) -> None:
    """The warning is all that changes: ``--allow read_balance`` behind two upstreams allows neither upstream's
    ``read_balance`` (each still asks a person), and ``--allow bank__read_balance`` allows bank's alone."""
    gw = Gateway(tmp_path, client=None)
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(gw.db)]
    argv += ["--allow", "read_balance", "--allow", "bank__read_balance", "--approval-timeout", "60"]
    for name in ("bank", "shop"):
        argv += ["--upstream", f"{name}={sys.executable} {DEMO} --calls {gw.calls}"]
    log = tmp_path / "gateway.log"
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            allowed = await client.call_tool("bank__read_balance", {"account": "ACME"})
            assert not allowed.is_error and "ACME: 1000.00 EUR" in text(allowed)
            other = asyncio.create_task(client.call_tool("shop__read_balance", {"account": "ACME"}))
            request = await gw.wait_pending()  # the other upstream's tool of that name asks a person
            assert request["tool_name"] == "shop__read_balance" and not other.done()
            rejected = await gw.goldfive("reject", request["target_id"], "--reason", "not the shop")
            assert rejected.returncode == 0, rejected.stderr
            assert "not the shop" in text(await asyncio.wait_for(other, 30))
    assert gw.upstream_calls() == [{"tool": "read_balance", "args": {"account": "ACME"}}]
    said = log.read_text()
    assert "rule '--allow read_balance' names the tool 'read_balance'" in said, said
    assert "write 'bank__read_balance' or 'shop__read_balance'" in said
    assert "rule '--allow bank__read_balance'" not in said
