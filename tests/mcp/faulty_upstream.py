"""An upstream MCP server that fails the ways real ones do, for the gateway's fault tests.

Every call first appends one JSON line to the file named by ``--calls`` — the tool, its ``tag`` and the server's
process id — so a test sees which process got a call, if any, and how often. Then:

* ``ok(tag)`` answers ``fine <tag>``;
* ``die()`` kills its own process mid-call (no answer ever comes);
* ``hang(tag)`` never answers while the process lives; a ``notifications/cancelled`` for it is recorded
  (``{"tool": "hang", "cancelled": true, ...}``);
* ``confirm(tag)`` asks its client a yes/no question (``elicitation/create``) and records the answer;
* ``refund(order)`` asks in the 2026-07-28 way (an ``input_required`` result) and records each round.

``--http PORT`` serves streamable HTTP on 127.0.0.1 instead of stdio; with ``--require-auth-env VAR`` every HTTP
request must carry ``Authorization`` equal to that variable's value, else ``401`` (the refusal is recorded as
``{"refused": "http", "had_auth": bool}``, never the value).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel


class Sure(BaseModel):
    sure: bool


def _append(path: str, record: dict[str, Any]) -> None:
    if path:
        with Path(path).open("a", encoding="utf-8") as out:
            out.write(json.dumps({**record, "pid": os.getpid()}, sort_keys=True) + "\n")


def build(calls: str) -> MCPServer:
    server = MCPServer("goldfive-test-faulty", version="1.0")

    @server.tool(description="Answers at once.")
    def ok(tag: str = "") -> str:
        _append(calls, {"tool": "ok", "tag": tag})
        return f"fine {tag}".strip()

    @server.tool(description="Kills its process mid-call.")
    def die() -> str:
        _append(calls, {"tool": "die"})
        os._exit(3)

    @server.tool(description="Never answers.")
    async def hang(tag: str = "") -> str:
        _append(calls, {"tool": "hang", "tag": tag})
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            _append(calls, {"tool": "hang", "tag": tag, "cancelled": True})
            raise
        return "unreachable"

    @server.tool(description="Asks its client whether it is sure.")
    async def confirm(tag: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Really {tag}?", Sure)
        record: dict[str, Any] = {"tool": "confirm", "tag": tag, "action": answer.action}
        if answer.action == "accept":
            record["sure"] = answer.data.sure
        _append(calls, record)
        return f"confirmed {tag}: {answer.action}"

    reason = {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}

    @server.tool(description="Refund an order; asks why (input_required).")
    async def refund(order: str, ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        answers = ctx.input_responses or {}
        if "why" not in answers:
            _append(calls, {"tool": "refund", "round": 1})
            question = types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=f"Why refund {order}?", requested_schema=reason)
            )
            return types.InputRequiredResult(input_requests={"why": question}, request_state=f"sealed:{order}")
        _append(calls, {"tool": "refund", "round": 2})
        return types.CallToolResult(content=[types.TextContent(text=f"refunded {order}")])

    return server


def _guarded(app: Any, expected: str, calls: str) -> Any:
    """``app`` behind an ``Authorization`` check (HTTP requests only; the lifespan passes)."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"authorization", b"").decode("latin-1")
            if given != expected:
                _append(calls, {"refused": "http", "had_auth": bool(given)})
                body = b'{"error": "unauthorized"}'
                start = {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"content-type", b"application/json")],
                }
                await send(start)
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", default="")
    parser.add_argument("--http", type=int, default=0)
    parser.add_argument("--require-auth-env", default="")
    args = parser.parse_args()
    server = build(args.calls)
    if not args.http:
        server.run("stdio")
        return
    import uvicorn

    app: Any = server.streamable_http_app()
    if args.require_auth_env:
        app = _guarded(app, os.environ[args.require_auth_env], args.calls)
    uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
