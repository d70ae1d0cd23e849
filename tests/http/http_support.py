"""Helpers for the agents-over-HTTP tests: a real ``goldfive serve`` with an approver and an agent user."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
from server_support import free_port
from store_support import REPO, Backend

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.runner import RunResult
from goldfive_core.store.execution import GuardedResult, run_approved
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.users import add_user

AGENT_WAIT_MS = 120_000


def tool_agent(channel: HttpChannel, call_id: str, ran: list[Any]) -> asyncio.Task[RunResult]:
    """An agent over ``channel`` whose one guarded call ``send_money({"amount": 10})`` (``call_id``) waits for a
    person; its body appends the arguments it ran with to ``ran``."""

    async def body(call_args: Any) -> str:
        ran.append(dict(call_args))
        return "sent"

    async def agent(task: Task, tools: AgentTools) -> GuardedResult:
        return await run_approved(
            tools.session,
            channel.store,
            call_id=call_id,
            tool_name="send_money",
            args={"amount": 10},
            body=body,
            timeout_ms=AGENT_WAIT_MS,
            ledger=channel.ledger,
        )

    return asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("go"))


@dataclasses.dataclass
class Serve:
    """One ``goldfive serve`` subprocess on 127.0.0.1 (restartable on the same port)."""

    backend: Backend
    key: Path
    port: int
    proc: subprocess.Popen[str] | None = None
    trust_key: str = ""
    """The server's GOLDFIVE_TRUST_KEY (agents given it apply only decisions the server signed)."""
    wrapper: tuple[str, ...] = ()
    """A script the server's module runs under (``script -m goldfive_core.cli serve ...``), e.g. a fault's."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        """The server's stderr (its log): a file, never an undrained pipe a chatty server would block on."""
        return self.key.parent.parent / f"serve-{self.port}.log"

    def start(self) -> Serve:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    *self.wrapper,
                    "-m",
                    "goldfive_core.cli",
                    "serve",
                    "--port",
                    str(self.port),
                    "--key",
                    str(self.key),
                ],
                env=self.backend.env(),
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=REPO,
            )
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, f"serve exited early: {self.log.read_text()[-4000:]}"
            if "GOLDFIVE_TRUST_KEY=" in line:
                self.trust_key = line.split("GOLDFIVE_TRUST_KEY=", 1)[1].strip()
            if line.startswith("gf5_") or "log in with a user's name and token" in line:
                break
        # Whatever it prints later is drained, so a full pipe never stalls the server mid-test.
        threading.Thread(target=_drain, args=(self.proc.stdout, self.log), daemon=True).start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                httpx.get(self.url + "/api/me", timeout=1)
                return self
            time.sleep(0.05)
        raise AssertionError("goldfive serve did not answer")

    def kill(self) -> None:
        """SIGKILL: no goodbye to anyone."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


def _drain(out: Any, log: Path) -> None:
    with log.open("a") as sink:
        for line in out:
            sink.write(line)
            sink.flush()


@dataclasses.dataclass
class Site:
    """Servers over one store, with users ana (approver) and bot (agent)."""

    backend: Backend
    servers: list[Serve]
    tokens: dict[str, str]

    @property
    def url(self) -> str:
        return self.servers[0].url

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[user]}"}

    async def pending(self, target: str, *, server: int = 0, limit_s: float = 30.0) -> dict[str, Any]:
        """Wait until ``target`` is listed as pending; return its JSON."""

        async def look() -> dict[str, Any] | None:
            async with httpx.AsyncClient(base_url=self.servers[server].url, timeout=10) as client:
                items = (await client.get("/api/approvals", headers=self.auth("ana"))).json()["approvals"]
            return next((a for a in items if a["target_id"] == target), None)

        return await eventually(look, f"{target} pending", limit_s)

    async def decide(
        self, target: str, *, approve: bool = True, server: int = 0, body: dict[str, Any] | None = None
    ) -> httpx.Response:
        verb = "approve" if approve else "reject"
        async with httpx.AsyncClient(base_url=self.servers[server].url, timeout=60) as client:
            return await client.post(
                f"/api/approvals/{target}/{verb}",
                headers=self.auth("ana"),
                json=body if body is not None else ({} if approve else {"reason": "no"}),
            )


@contextlib.contextmanager
def site(backend: Backend, tmp_path: Path, *, servers: int = 1) -> Iterator[Site]:
    store = backend.open()
    tokens = {name: add_user(store, name, role).token for name, role in (("ana", "approver"), ("bot", "agent"))}
    store.close()
    key = tmp_path / "keys" / "decision-key.pem"
    started = [Serve(backend, key, free_port()).start() for _ in range(servers)]
    try:
        yield Site(backend, started, tokens)
    finally:
        for s in started:
            s.stop()


async def eventually(check: Callable[[], Awaitable[Any]], what: str, limit_s: float = 20.0) -> Any:
    """Poll an async observable condition with a deadline."""
    deadline = asyncio.get_running_loop().time() + limit_s
    while True:
        value = await check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


__all__ = ["AGENT_WAIT_MS", "Serve", "Site", "eventually", "site"]
