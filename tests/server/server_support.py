"""Helpers for the goldfive serve tests: the app over a real store, users, and agents that wait."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from google.protobuf import json_format
from store_support import REPO, Backend, await_until, make_event

from goldfive_core import AgentTools, InMemorySink, Task, wrap
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.runner import RunResult
from goldfive_core.server import ServerConfig, create_app
from goldfive_core.signing import DecisionSigner, TrustKey, load_or_create_signing_key
from goldfive_core.store import Store, StoreChannel
from goldfive_core.store.execution import GuardedResult, run_approved
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.users import add_user

ORIGIN = "http://inbox.test"
LIVE_DEADLINE_S = 20.0
"""How long a live server may take to stop (a stream that should have ended fails there, not forever)."""


@dataclasses.dataclass
class Server:
    backend: Backend
    store: Store
    signer: DecisionSigner
    key_path: Path
    client: httpx.AsyncClient
    tokens: dict[str, str]

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    async def get(self, path: str, user: str = "ana", **kw: Any) -> httpx.Response:
        return await self.client.get(path, headers=self.auth(user), **kw)

    async def post(self, path: str, body: Any = None, user: str = "ana", **kw: Any) -> httpx.Response:
        return await self.client.post(path, headers=self.auth(user), json=body, **kw)

    async def pending(self, target: str, *, state: str = "pending") -> dict[str, Any]:
        """Wait until ``target`` is listed with ``state``; return its JSON."""

        async def look() -> dict[str, Any] | None:
            items = (await self.get(f"/api/approvals?status={state}")).json()["approvals"]
            return next((a for a in items if a["target_id"] == target), None)

        for _ in range(400):
            found = await look()
            if found is not None:
                return found
            await asyncio.sleep(0.025)
        raise AssertionError(f"{target} never listed as {state}")


@contextlib.asynccontextmanager
async def make_server(backend: Backend, tmp_path: Path, *, timeout_s: float = 10.0) -> AsyncIterator[Server]:
    store = backend.open()
    key_path = tmp_path / "keys" / "decision-key.pem"
    signer, _ = load_or_create_signing_key(key_path)
    app = create_app(store, ServerConfig(signer=signer, decide_timeout_s=timeout_s, control_timeout_s=timeout_s))
    tokens = {
        name: add_user(store, name, role).token
        for name, role in (("ana", "approver"), ("vic", "viewer"), ("root", "admin"))
    }
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=ORIGIN) as client:
        yield Server(backend, store, signer, key_path, client, tokens)
    await app.state.api.events.aclose()
    await app.state.api.acks.aclose()


@dataclasses.dataclass
class Agent:
    """A callable agent run in this process over its own StoreChannel (another store object: another 'process')."""

    channel: StoreChannel | HttpChannel
    sink: InMemorySink
    task: asyncio.Task[RunResult]
    ran: list[Mapping[str, Any]]

    async def result(self) -> RunResult:
        return await asyncio.wait_for(self.task, 20)

    async def close(self) -> None:
        if not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        await self.channel.aclose()


# Agents wait long enough that a loaded machine never times a request out before the test decides it; a test
# that ends earlier cancels its agent.
AGENT_WAIT_MS = 120_000


def start_task_agent(backend: Backend, target: str, *, trust: Any = None, timeout_ms: int = AGENT_WAIT_MS) -> Agent:
    """Flow A: the agent asks 'pay?' with task id ``target`` and returns the answer."""
    channel = StoreChannel(backend.open(), trust_key=trust, sweep_interval_s=0.2)
    sink = InMemorySink()

    async def agent(task: Task, tools: AgentTools) -> Any:
        await tools.report_task_started(target)
        return await tools.report_awaiting_approval(f"pay for {target}?", task_id=target, timeout_ms=timeout_ms)

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink, sink]).run("go"))
    return Agent(channel, sink, run, [])


def start_tool_agent(
    backend: Backend,
    call_id: str,
    args: Mapping[str, Any],
    *,
    trust: Any = None,
    tool: str = "transfer_funds",
    args_schema: Mapping[str, Any] | None = None,
    over_http: HttpChannel | None = None,
) -> Agent:
    """A tool call gated by run_approved: the body records the args it ran with. ``over_http``: the agent is on
    that channel (and its ledger) instead of a StoreChannel over ``backend``."""
    channel = over_http or StoreChannel(backend.open(), trust_key=trust, sweep_interval_s=0.2)
    sink = InMemorySink()
    ran: list[Mapping[str, Any]] = []

    async def body(call_args: Mapping[str, Any]) -> str:
        ran.append(dict(call_args))
        return "sent"

    async def agent(task: Task, tools: AgentTools) -> GuardedResult:
        return await run_approved(
            tools.session,
            channel.store,
            call_id=call_id,
            tool_name=tool,
            args=args,
            body=body,
            timeout_ms=AGENT_WAIT_MS,
            trust=channel.trust_key,
            args_schema=args_schema,
            ledger=over_http.ledger if over_http is not None else None,
        )

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink, sink]).run("go"))
    return Agent(channel, sink, run, ran)


async def eventually(check: Callable[[], Awaitable[Any]], what: str, limit_s: float = 10.0) -> Any:
    """Poll an async observable condition with a deadline."""
    deadline = asyncio.get_running_loop().time() + limit_s
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


# -- a real goldfive serve process ------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def goldfive(backend: Backend, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goldfive_core.cli", *args],
        env=backend.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
    )


class Served:
    def __init__(self, proc: subprocess.Popen[str], url: str, lines: list[str]) -> None:
        self.proc, self.url, self.lines = proc, url, lines

    @property
    def admin_token(self) -> str:
        return self.lines[-1]

    @property
    def trust_key(self) -> TrustKey:
        line = next(x for x in self.lines if "GOLDFIVE_TRUST_KEY=" in x)
        return TrustKey.parse(line.split("GOLDFIVE_TRUST_KEY=", 1)[1])


@contextlib.contextmanager
def serve_process(backend: Backend, key: Path, *extra: str, env: Mapping[str, str] | None = None) -> Iterator[Served]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "goldfive_core.cli", "serve", "--port", str(port), "--key", str(key), *extra],
        env={**backend.env(), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        lines = []
        while True:
            line = proc.stdout.readline()
            assert line, f"serve exited early: {proc.stderr.read() if proc.stderr else ''}"
            lines.append(line.rstrip("\n"))
            if line.startswith("gf5_") or "log in with a user's name and token" in line:
                break
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            with contextlib.suppress(httpx.TransportError):
                httpx.get(url + "/api/me", timeout=1)
                break
            time.sleep(0.05)
        yield Served(proc, url, lines)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


__all__ = [
    "ORIGIN",
    "Agent",
    "Server",
    "await_until",
    "eventually",
    "make_server",
    "start_task_agent",
    "start_tool_agent",
]


@contextlib.asynccontextmanager
async def live(app: Any) -> AsyncIterator[str]:
    """``app`` served by uvicorn on 127.0.0.1 in this event loop (streams need a real server); its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, LIVE_DEADLINE_S)


def run_started(run: str) -> dict[str, Any]:
    """The body of ``POST /api/agent/events`` that starts ``run`` (another process's)."""
    event = make_event(run, 0, events_pb2.RunStarted(adapter="callable"))
    events = [json_format.MessageToDict(event, preserving_proto_field_name=True)]
    return {"pid": 1, "host": "elsewhere", "events": events}
