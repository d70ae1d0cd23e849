"""ADK's HTTP server in a subprocess (server_proc.py), a small SSE client and the goldfive command."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).parent
REPO = HERE.parent.parent
PYTHON = sys.executable
APP = "detach_app"


def wait_until(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll an observable condition with a deadline; returns its truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class World:
    """One goldfive store, one ADK session database and one marker file shared by every process."""

    def __init__(self, tmp: Path, detach_after: str = "0") -> None:
        self.tmp = tmp
        self.db = tmp / "goldfive.db"
        self.sessions = tmp / "sessions.db"
        self.marker = tmp / "marker"
        self.detach_after = detach_after
        self.hold = tmp / "release"
        """Created to let a held tool body finish (see :meth:`hold_bodies`)."""
        self.passes = tmp / "passes"
        self.passes.mkdir(exist_ok=True)
        self.holding = False
        self.extra_env: dict[str, str] = {}
        """More environment for the processes started from now on (e.g. a short approval timeout)."""

    def hold_bodies(self) -> None:
        """From the next server started on, a tool body waits (after its marker line) until :meth:`release`."""
        self.holding = True

    def release(self) -> None:
        self.hold.touch()

    def resumer_passes(self, pid: int) -> int:
        """How many passes over the store the Resumer of server ``pid`` has finished."""
        path = self.passes / str(pid)
        return len(path.read_text().splitlines()) if path.exists() else 0

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("GOLDFIVE_DSN", None)
        env.pop("DETACH_HOLD", None)
        if self.holding:
            env["DETACH_HOLD"] = str(self.hold)
        env.update(
            GOLDFIVE_DB=str(self.db),
            DETACH_MARKER=str(self.marker),
            DETACH_AFTER=self.detach_after,
            DETACH_PASSES=str(self.passes),
            **self.extra_env,
            PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        )
        return env

    def runs_of_body(self) -> list[str]:
        """One line per time the tool body ran (``bob 10 pid N``)."""
        return self.marker.read_text().splitlines() if self.marker.exists() else []

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PYTHON, "-m", "goldfive_core.cli", *argv], env=self.env(), capture_output=True, text=True, timeout=45
        )


class Server:
    """``get_fast_api_app`` + uvicorn on 127.0.0.1 in its own process, with a Resumer in its lifespan."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [PYTHON, str(HERE / "server_proc.py"), str(self.port), str(world.sessions)],
            env=world.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.client = httpx.Client(base_url=self.url, timeout=30.0)

        def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.proc.stderr.read() if self.proc.stderr else ''}")
            try:
                return self.client.get("/list-apps").status_code == 200
            except httpx.TransportError:
                return False

        wait_until(up, timeout=40.0, what="the ADK server to answer")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def create_session(self, session_id: str) -> None:
        r = self.client.post(f"/apps/{APP}/users/u/sessions/{session_id}", json={})
        assert r.status_code == 200, r.text

    def run_sse(self, session_id: str, message: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
        """POST /run_sse and return every event of the stream (the request ends when the invocation does)."""
        body = {"app_name": APP, "user_id": "u", "session_id": session_id, "new_message": message, **extra}
        with self.client.stream("POST", "/run_sse", json=body) as r:
            assert r.status_code == 200, r.read()
            return [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]

    def session(self, session_id: str) -> dict[str, Any]:
        r = self.client.get(f"/apps/{APP}/users/u/sessions/{session_id}")
        assert r.status_code == 200, r.text
        return dict(r.json())

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.communicate(timeout=10)


def user_text(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def confirmation_answer(confirmation_id: str, confirmed: bool) -> dict[str, Any]:
    """ADK's own resume message: the answer to its ``adk_request_confirmation`` call."""
    response = {"id": confirmation_id, "name": "adk_request_confirmation", "response": {"confirmed": confirmed}}
    return {"role": "user", "parts": [{"functionResponse": response}]}


def parts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for e in events for p in (e.get("content") or {}).get("parts") or []]


def calls(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [p["functionCall"] for p in parts(events) if "functionCall" in p and p["functionCall"]["name"] == name]


def responses(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [
        p["functionResponse"]["response"]
        for p in parts(events)
        if "functionResponse" in p and p["functionResponse"]["name"] == name
    ]


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [p["text"] for p in parts(events) if p.get("text")]
