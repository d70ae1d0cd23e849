"""The gateway under test: ``goldfive mcp`` as a subprocess, driven by the real ``mcp`` SDK client over stdio.

The upstream is the bundled demo server (examples/mcp_demo_server.py), which appends one JSON line per call to
a file: what reached it, and how often. Decisions come from another process: the ``goldfive`` command on the
same SQLite store.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import ElicitationFnT, MessageHandlerFnT

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "mcp_demo_server.py"
ELICIT_UPSTREAM = Path(__file__).with_name("elicit_upstream.py")


class Gateway:
    """One gateway process, its store and the demo upstream's call record."""

    def __init__(self, tmp: Path, client: Client | None, store: Sequence[str] = ()) -> None:
        self.db = tmp / "goldfive.db"
        self.calls = tmp / "calls.jsonl"
        self.client = client
        self.store = tuple(store) or ("--db", str(self.db))
        """The gateway's store, as ``goldfive`` options (``--db tmp/goldfive.db`` unless given: ``--dsn ...``)."""

    def upstream_calls(self) -> list[dict[str, Any]]:
        """What reached the demo server, in order."""
        if not self.calls.exists():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines()]

    async def goldfive(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """The ``goldfive`` command in another process, on the gateway's store."""
        cmd = [sys.executable, "-m", "goldfive_core.cli", *self.store, *argv]
        return await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=60)

    async def pending(self) -> list[dict[str, Any]]:
        if self.store[0] == "--db" and not self.db.exists():  # the gateway has not made its store yet (a client
            # that starts it started late)
            return []
        out = await self.goldfive("pending", "--json")
        assert out.returncode == 0, out.stderr
        items: list[dict[str, Any]] = json.loads(out.stdout)["pending"]
        return items

    async def wait_pending(self) -> dict[str, Any]:
        """The first request a person is asked, once the gateway has opened it (a handshake, not a sleep)."""
        for _ in range(600):
            items = await self.pending()
            if items:
                return items[0]
            await asyncio.sleep(0.05)
        raise AssertionError("no approval request appeared")

    async def wait_no_pending(self) -> None:
        for _ in range(600):
            if not await self.pending():
                return
            await asyncio.sleep(0.05)
        raise AssertionError("the approval request is still pending")

    async def events(self) -> list[dict[str, Any]]:
        """The audit log's events, oldest first (as ``goldfive events --json`` prints them)."""
        out = await self.goldfive("events", "--json", "--limit", "0")
        assert out.returncode == 0, out.stderr
        return [row["event"] for row in json.loads(out.stdout)["events"]]


@contextlib.asynccontextmanager
async def gateway(
    tmp: Path,
    *flags: str,
    upstreams: Sequence[str] = ("bank",),
    message_handler: MessageHandlerFnT | None = None,
    store: Sequence[str] = (),
) -> AsyncIterator[Gateway]:
    """``goldfive mcp --db tmp/goldfive.db --upstream NAME=demo ... flags`` with an SDK client connected to it
    (``message_handler``: the client's, which sees every notification the gateway sends; ``store``: other store
    options than ``--db``, e.g. ``--dsn DSN --schema S``)."""
    gw = Gateway(tmp, None, store)
    argv = ["-m", "goldfive_core.cli", "mcp", *gw.store]
    for name in upstreams:
        argv += ["--upstream", f"{name}={sys.executable} {DEMO} --calls {gw.calls}"]
    params = StdioServerParameters(command=sys.executable, args=[*argv, *flags], cwd=str(ROOT))
    async with Client(params, mode="legacy", message_handler=message_handler) as client:
        gw.client = client
        yield gw


@contextlib.asynccontextmanager
async def elicit_gateway(
    tmp: Path, *flags: str, elicitation_callback: ElicitationFnT | None = None, protocol: str = ""
) -> AsyncIterator[Gateway]:
    """``goldfive mcp`` in front of the booking upstream (tests/mcp/elicit_upstream.py), every call allowed unless
    ``flags`` gate it; the client answers elicitations with ``elicitation_callback`` (None: it declares none).
    ``protocol``: the revision the gateway speaks to the upstream (a ``--config`` file's ``protocol``)."""
    calls = tmp / "calls.jsonl"
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", str(tmp / "goldfive.db"), "--default", "allow"]
    if protocol:
        config = tmp / "gateway.toml"
        words = json.dumps([str(ELICIT_UPSTREAM), "--calls", str(calls)])
        table = f"command = {json.dumps(sys.executable)}\nargs = {words}\nprotocol = {json.dumps(protocol)}\n"
        config.write_text(f"[upstream.bookings]\n{table}")
        argv += ["--config", str(config)]
    else:
        argv += ["--upstream", f"bookings={sys.executable} {ELICIT_UPSTREAM} --calls {calls}"]
    params = StdioServerParameters(command=sys.executable, args=[*argv, *flags], cwd=str(ROOT))
    async with Client(params, mode="legacy", elicitation_callback=elicitation_callback) as client:
        yield Gateway(tmp, client)


def on_tools_changed(seen: asyncio.Event) -> Callable[[object], Awaitable[None]]:
    """An MCP client's message handler that sets ``seen`` on ``notifications/tools/list_changed``."""

    async def handle(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            seen.set()

    return handle


def text(result: Any) -> str:
    """The text an MCP client (and its model) reads from a tool result."""
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


DYING = """
import os
from mcp.server.mcpserver import MCPServer

server = MCPServer("dying")


@server.tool()
def die() -> str:
    os._exit(3)


@server.tool()
def ok() -> str:
    return "fine"


server.run("stdio")
"""
"""An upstream whose ``die`` tool kills its process mid-call."""


GROWING = """
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")


def shiny() -> str:
    return "new"


@server.tool()
async def grow(ctx: Context) -> str:
    server.add_tool(shiny)
    await ctx.session.send_tool_list_changed()
    return "grown"


server.run("stdio")
"""
"""An upstream whose ``grow`` tool adds a tool and announces ``notifications/tools/list_changed``."""
