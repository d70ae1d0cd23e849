"""A small MCP server to put behind ``goldfive mcp``: a pretend bank with a risky tool and a harmless one.

Runs offline over stdio (``python examples/mcp_demo_server.py``); nothing leaves the machine. Every call of
``transfer_funds`` and ``read_balance`` appends one JSON line to the file named by ``--calls`` (or
``MCP_DEMO_CALLS``), so you can see what reached the server and how often::

    goldfive mcp --db demo.db --upstream bank="python examples/mcp_demo_server.py --calls calls.jsonl" \\
        --allow read_balance

See docs/mcp.md for the whole walk-through.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer

BALANCES = {"ACME": 1_000.0, "checking": 5_230.5}


STAMP = False
"""With ``--stamp``, each record also says when the call reached the server (``at``, seconds since the epoch)."""


def _record(path: str, tool: str, args: dict[str, Any]) -> None:
    if not path:
        return
    line: dict[str, Any] = {"tool": tool, "args": args}
    if STAMP:
        line["at"] = time.time()
    with Path(path).open("a", encoding="utf-8") as out:
        out.write(json.dumps(line, sort_keys=True) + "\n")


def build(calls: str) -> MCPServer:
    """The demo server; ``calls`` is the file each call is recorded in ("" = none)."""
    server = MCPServer("goldfive-demo-bank", version="1.0")

    @server.tool(description="Move money from the checking account to a payee. Irreversible.")
    def transfer_funds(amount: float, to: str, currency: str = "EUR") -> str:
        _record(calls, "transfer_funds", {"amount": amount, "to": to, "currency": currency})
        return f"sent {amount:.2f} {currency} to {to}"

    @server.tool(description="Read an account's balance.")
    def read_balance(account: str = "checking") -> str:
        _record(calls, "read_balance", {"account": account})
        if account not in BALANCES:
            return f"no account {account!r} (accounts: {', '.join(sorted(BALANCES))})"
        return f"{account}: {BALANCES[account]:.2f} EUR"

    @server.resource("bank://accounts", description="The accounts this bank knows.")
    def accounts() -> str:
        return ", ".join(sorted(BALANCES))

    @server.prompt(description="Ask for a transfer in words.")
    def pay(payee: str) -> str:
        return f"Please pay {payee} what we owe them."

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", default=os.environ.get("MCP_DEMO_CALLS", ""), help="record each call here")
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    parser.add_argument("--stamp", action="store_true", help="record when each call arrived (bench/mcp_gateway.py)")
    args = parser.parse_args()
    global STAMP
    STAMP = args.stamp
    if args.http:
        build(args.calls).run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        build(args.calls).run("stdio")


if __name__ == "__main__":
    main()
