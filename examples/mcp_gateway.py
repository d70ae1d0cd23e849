"""The MCP gateway end to end, offline: an MCP client calls a bank's tools through ``goldfive mcp``.

This script is the MCP client (the role Claude Code, Cursor or ADK's McpToolset play). It starts::

    goldfive mcp --db goldfive.db --allow read_balance \\
        --upstream bank="python examples/mcp_demo_server.py --calls mcp-calls.jsonl"

reads a balance (allowed by the rule: no person), then asks to transfer money, which waits for a person::

    goldfive pending                          # terminal 2: what is waiting
    goldfive approve mcp-1a2b3c --by ana      # or: goldfive reject mcp-1a2b3c --reason "..."

Without ``--wait`` (and in CI, without a terminal) a second process approves it with the real ``goldfive
approve`` command as soon as it is pending. The demo bank writes every call that reached it to
``mcp-calls.jsonl``. See docs/mcp.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent


def goldfive(db: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """The ``goldfive`` command, as a person would type it in another terminal."""
    return subprocess.run(
        [sys.executable, "-m", "goldfive_core.cli", "--db", db, *argv], capture_output=True, text=True
    )


async def approve_when_pending(db: str) -> None:
    """The non-interactive second terminal: approve the first pending request once it exists."""
    for _ in range(600):
        out = await asyncio.to_thread(goldfive, db, "pending", "--json")
        pending = json.loads(out.stdout or "{}").get("pending") or []
        if pending:
            target = pending[0]["target_id"]
            done = await asyncio.to_thread(goldfive, db, "approve", target, "--by", "demo", "--reason", "looks right")
            print(f"  second terminal $ goldfive approve {target} --by demo\n  {done.stdout.strip()}")
            return
        await asyncio.sleep(0.1)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default="goldfive.db", help="the SQLite store (default ./goldfive.db)")
    parser.add_argument("--calls", default="mcp-calls.jsonl", help="where the demo bank records its calls")
    parser.add_argument("--wait", action="store_true", help="never auto-approve; wait for a person")
    args = parser.parse_args()

    upstream = f"bank={sys.executable} {HERE / 'mcp_demo_server.py'} --calls {args.calls}"
    gateway = StdioServerParameters(
        command=sys.executable,
        args=["-m", "goldfive_core.cli", "mcp", "--db", args.db, "--allow", "read_balance", "--upstream", upstream],
    )
    async with Client(gateway, mode="legacy") as client:
        tools = await client.list_tools()
        print("tools through the gateway:", ", ".join(tool.name for tool in tools.tools))
        balance = await client.call_tool("read_balance", {"account": "checking"})
        print("read_balance (allowed by --allow):", balance.content[0].text)
        print("transfer_funds waits for a person: goldfive pending / goldfive approve ID / goldfive reject ID")
        helper = None if args.wait or sys.stdin.isatty() else asyncio.create_task(approve_when_pending(args.db))
        result = await client.call_tool("transfer_funds", {"amount": 120, "to": "ACME"})
        if helper is not None:
            await helper
        outcome = "refused" if result.is_error else "ran"
        print(f"transfer_funds {outcome}:", " / ".join(block.text for block in result.content))
    calls = await asyncio.to_thread(Path(args.calls).read_text)
    print(f"calls that reached the bank ({args.calls}):", calls.strip().replace("\n", "; "))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
