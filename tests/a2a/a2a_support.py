"""The A2A tests' pieces: the agent served over A2A in its own process, a webhook, an a2a-sdk client.

The world (one goldfive store, a marker file the tool body writes to) is the detach tests' World.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from adk_http_support import World, free_port, wait_until
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

HERE = Path(__file__).parent
REPO = HERE.parent.parent
PYTHON = sys.executable


class Agent:
    """``a2a_agent_proc.py``: the ADK App over A2A, uvicorn on 127.0.0.1, in its own process."""

    def __init__(self, world: World) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.proc = subprocess.Popen(
            [PYTHON, str(HERE / "a2a_agent_proc.py"), str(self.port)],
            env=world.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

        def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"agent exited: {self.proc.stderr.read() if self.proc.stderr else ''}")
            try:
                return httpx.get(self.url + ".well-known/agent-card.json", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        # Its start imports ADK, a2a-sdk and uvicorn: seconds on a quiet machine, past a minute on one at load 12.
        wait_until(up, timeout=120.0, what="the A2A agent to serve its card")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate(timeout=10)


class Webhook:
    """A client's push-notification endpoint on 127.0.0.1: keeps every body (a StreamResponse) it was sent."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.tokens: list[str] = []
        seen = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen.bodies.append(json.loads(self.rfile.read(length) or b"{}"))
                seen.tokens.append(self.headers.get("X-A2A-Notification-Token") or "")
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def states(self) -> list[str]:
        out = []
        for body in self.bodies:
            status = (body.get("statusUpdate") or body.get("task") or {}).get("status") or {}
            if status.get("state"):
                out.append(status["state"])
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.asynccontextmanager
async def a2a_client(url: str, *, streaming: bool = False) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(timeout=60) as http:
        client = await ClientFactory(ClientConfig(streaming=streaming, httpx_client=http)).create_from_url(url)
        try:
            yield client
        finally:
            await client.close()


def user_message(*parts: Part, task: Task | None = None, context_id: str = "", message_id: str = "") -> Message:
    return Message(
        message_id=message_id or f"m-{time.monotonic_ns()}",
        role=Role.ROLE_USER,
        parts=list(parts),
        task_id=task.id if task is not None else "",
        context_id=task.context_id if task is not None else context_id,
    )


def text(value: str) -> Part:
    return Part(text=value)


def data(value: Any, **metadata: Any) -> Part:
    part = Part(data=ParseDict(value, Value()))
    if metadata:
        part.metadata.update(metadata)
    return part


async def send(client: Client, message: Message, *, push: Webhook | None = None, token: str = "") -> Task:
    """A blocking message/send; the task it returns (at an interrupted or terminal state)."""
    config = SendMessageConfiguration()
    if push is not None:
        config.task_push_notification_config.CopyFrom(TaskPushNotificationConfig(url=push.url, token=token))
    found: Task | None = None
    async for response in client.send_message(SendMessageRequest(message=message, configuration=config)):
        if response.HasField("task"):
            found = response.task
    assert found is not None, "message/send answered without a task"
    return found


async def get(client: Client, task_id: str) -> Task:
    return await client.get_task(GetTaskRequest(id=task_id))


async def until_state(client: Client, task_id: str, state: TaskState.ValueType, limit_s: float = 30.0) -> Task:
    import asyncio

    deadline = time.monotonic() + limit_s
    while True:
        task = await get(client, task_id)
        if task.status.state == state:
            return task
        if time.monotonic() > deadline:
            now, wanted = TaskState.Name(task.status.state), TaskState.Name(state)
            raise AssertionError(f"task {task_id} is {now}, never {wanted}")
        await asyncio.sleep(0.05)


def goldfive_facts(task: Task) -> dict[str, Any]:
    """The ``goldfive`` data of the task's status message."""
    for part in task.status.message.parts:
        if part.HasField("data"):
            value = MessageToDict(part.data)
            if isinstance(value, dict) and "goldfive" in value:
                return dict(value["goldfive"])
    raise AssertionError(f"no goldfive data in the status message: {task.status.message}")


def status_text(task: Task) -> str:
    return " ".join(p.text for p in task.status.message.parts if p.HasField("text"))


def artifact_text(task: Task) -> str:
    return " ".join(p.text for a in task.artifacts for p in a.parts if p.HasField("text"))
