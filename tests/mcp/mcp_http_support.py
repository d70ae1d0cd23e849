"""``goldfive mcp --http`` under test: the gateway as a subprocess on 127.0.0.1, the real ``mcp`` SDK client over
streamable HTTP, and the Tasks requests (``tasks/get``, ``tasks/result``, ``tasks/cancel``) the SDK sends.

The MCP SDK 2.3 client has the Tasks types but not the task-augmented ``tools/call`` (it checks every
``tools/call`` result as a ``CallToolResult``): :func:`call_as_task` sends that one request through the SDK
session's own JSON-RPC dispatcher; everything else is the SDK's ordinary client API.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ElicitationFnT, MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp_support import DEMO, ELICIT_UPSTREAM, ROOT, Gateway


class HttpGateway(Gateway):
    """One ``goldfive mcp --http`` process: its URL, its token, its store and the demo upstream's record."""

    def __init__(self, tmp: Path, url: str, token: str, log: Path, process: subprocess.Popen[bytes]) -> None:
        super().__init__(tmp, client=None)  # type: ignore[arg-type]  # each test connects its own clients
        self.url, self.token, self.log, self.process = url, token, log, process

    async def stop(self) -> int:
        """SIGTERM, as a service manager stops it; the gateway's exit status."""
        if self.process.poll() is None:
            self.process.terminate()
        return await asyncio.to_thread(self.process.wait, 30)

    @contextlib.asynccontextmanager
    async def connect(
        self,
        token: str | None = None,
        *,
        elicitation_callback: ElicitationFnT | None = None,
        message_handler: MessageHandlerFnT | None = None,
    ) -> AsyncIterator[Client]:
        """A new MCP session (the SDK's streamable-HTTP client) with the gateway's token (or ``token``)."""
        headers = {"Authorization": f"Bearer {self.token if token is None else token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http:
            transport = streamable_http_client(self.url, http_client=http)
            async with Client(
                transport, mode="legacy", elicitation_callback=elicitation_callback, message_handler=message_handler
            ) as client:
                yield client


@contextlib.asynccontextmanager
async def http_gateway(
    tmp: Path,
    *flags: str,
    upstreams: Sequence[str] = ("bank",),
    control: Sequence[str] | None = None,
    token_env: str = "",
    upstream_specs: Sequence[str] = (),
) -> AsyncIterator[HttpGateway]:
    """``goldfive mcp --db tmp/goldfive.db --http 127.0.0.1:0 --upstream bank=demo ... flags`` until the test ends.

    ``control`` replaces ``--db ...`` (``--url URL --token T`` for a ``goldfive serve``); the token is in a
    token file the gateway makes, or with ``token_env`` in that environment variable (``--http-token-env``).
    ``upstream_specs``: more ``--upstream`` values (``{calls}`` in one is the record file's path)."""
    calls, log, token_file = tmp / "calls.jsonl", tmp / "gateway.log", tmp / "mcp.token"
    argv = [sys.executable, "-m", "goldfive_core.cli", "mcp", *(control or ["--db", str(tmp / "goldfive.db")])]
    env = dict(os.environ)
    if token_env:
        env[token_env] = secrets.token_urlsafe(24)
        argv += ["--http", "127.0.0.1:0", "--http-token-env", token_env]
    else:
        argv += ["--http", "127.0.0.1:0", "--http-token-file", str(token_file)]
    for name in upstreams:
        argv += ["--upstream", f"{name}={sys.executable} {DEMO} --calls {calls}"]
    for spec in upstream_specs:
        argv += ["--upstream", spec.format(calls=calls)]
    process = await asyncio.to_thread(_start, [*argv, *flags], log, env)
    try:
        url = await _listening(process, log)
        token = env[token_env] if token_env else token_file.read_text().strip()
        yield HttpGateway(tmp, url, token, log, process)
    finally:
        if process.poll() is None:
            process.terminate()
        await asyncio.to_thread(process.wait, 30)


@contextlib.asynccontextmanager
async def elicit_http_session(
    tmp: Path, *flags: str, elicitation_callback: ElicitationFnT
) -> AsyncIterator[tuple[HttpGateway, Client]]:
    """``goldfive mcp --http --default allow ... flags`` in front of the booking upstream (tests/mcp/elicit_upstream.py)
    and one session of the SDK client, answering elicitations with ``elicitation_callback``."""
    bookings = f"bookings={sys.executable} {ELICIT_UPSTREAM} --calls {{calls}}"
    async with (
        http_gateway(tmp, "--default", "allow", *flags, upstreams=(), upstream_specs=[bookings]) as gw,
        gw.connect(elicitation_callback=elicitation_callback) as client,
    ):
        yield gw, client


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("w") as err:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err)


async def _listening(process: subprocess.Popen[bytes], log: Path) -> str:
    """The URL the gateway says it listens on (a handshake on its own words, not a sleep)."""
    for _ in range(1200):
        said = await asyncio.to_thread(log.read_text)
        for line in said.splitlines():
            if "listening on " in line:
                return line.split("listening on ", 1)[1].split(";", 1)[0]
        if process.poll() is not None:
            raise AssertionError(f"goldfive mcp --http exited: {said}")
        await asyncio.sleep(0.05)
    raise AssertionError("goldfive mcp --http did not say where it listens")


async def call_as_task(client: Client, name: str, arguments: dict[str, Any]) -> types.CreateTaskResult:
    """A task-augmented ``tools/call`` (MCP Tasks, 2025-11-25): the gateway answers with the task at once."""
    params = {"name": name, "arguments": arguments, "task": {"ttl": 60_000}}
    raw = await client.session._dispatcher.send_raw_request("tools/call", params, {})
    return types.CreateTaskResult.model_validate(raw)


async def get_task(client: Client, task_id: str) -> types.GetTaskResult:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.GetTaskResult)


async def task_result(client: Client, task_id: str) -> types.CallToolResult:
    request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.CallToolResult)


async def cancel_task(client: Client, task_id: str) -> types.CancelTaskResult:
    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.CancelTaskResult)


async def poll_until_done(client: Client, task_id: str) -> types.GetTaskResult:
    """``tasks/get`` until the task is no longer working (as a client polls at the suggested interval)."""
    for _ in range(600):
        task = await get_task(client, task_id)
        if task.status != "working":
            return task
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} is still working")


class ProgressSeen:
    """A ``progress_callback`` that keeps the messages a waiting call sends, and says when the first came."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.first = asyncio.Event()

    async def __call__(self, value: float, total: float | None, message: str | None) -> None:
        self.messages.append(message or "")
        self.first.set()


async def cancel_once_pending(gw: Gateway, client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call ``tool``, and once its approval request is pending give up on it (the SDK sends
    ``notifications/cancelled``); the request as ``goldfive pending`` showed it."""
    call = asyncio.create_task(client.call_tool(tool, arguments))
    request = await gw.wait_pending()
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
    return request
