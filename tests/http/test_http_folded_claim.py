"""An agent on HTTP claims the right to run an approved body in the APPROVE's ack: one round trip, one commit.

The server writes the ack, the decision and the "executing" claim in one transaction; the agent runs the body
once the server said the claim is its own, and never posts ``/executing`` for it. Under ``kill -9`` of either side
nothing runs twice and no decision is lost: an agent killed while its body runs leaves the call in doubt (never
re-run, and ``goldfive show`` / ``pending`` / ``audit verify`` agree); a server killed while the ack is on its way
gets the ack and the claim again from the reconnecting agent, and the body runs once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import Serve, eventually, site, tool_agent
from store_support import PYTHON, Backend

from goldfive_core.store.http import HttpChannel

AGENT = Path(__file__).with_name("http_agent_proc.py")


def _counting(channel: HttpChannel) -> list[str]:
    """The requests the agent's ledger and sink make (the acks go on the stream's own client)."""
    made: list[str] = []
    request = channel.remote.request

    def counted(method: str, path: str, body: Any = None) -> Any:
        made.append(f"{method} {path.split('?', 1)[0]}")
        return request(method, path, body)

    channel.remote.request = counted  # type: ignore[method-assign]
    return made


def _cli(backend: Backend, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", *argv], env=backend.env(), capture_output=True, text=True, timeout=60
    )


def _ledger_states(backend: Backend, call_id: str) -> list[str]:
    store = backend.open()
    rows = [r for r in store.audit_rows(limit=100_000) if r.kind == "execution_recorded"]
    return [r.event().execution_recorded.state for r in rows if r.event().execution_recorded.target_id == call_id]


async def test_the_approval_s_ack_carries_the_claim_and_the_agent_posts_no_executing(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    with site(sqlite_backend, tmp_path) as s:
        channel = HttpChannel(s.url, token=s.tokens["bot"])
        made = _counting(channel)
        ran: list[Any] = []
        run = tool_agent(channel, "call-f", ran)
        try:
            await s.pending("call-f")
            answer = await s.decide("call-f")
            assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
            result = await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
    assert result.output.status == "ran" and ran == [{"amount": 10}]
    assert not [m for m in made if m.endswith("/executing")], made  # the ack was the claim
    assert _ledger_states(sqlite_backend, "call-f") == ["executing", "done"]
    assert sqlite_backend.open().verify_audit().ok


async def test_an_agent_killed_while_its_body_runs_leaves_the_call_in_doubt_and_it_never_runs_again(
    backend: Backend, tmp_path: Path
) -> None:
    marker = tmp_path / "ran.jsonl"
    with site(backend, tmp_path) as s:
        argv = [sys.executable, str(AGENT), s.url, s.tokens["bot"], "call-d", str(marker)]
        first = await asyncio.create_subprocess_exec(
            *argv, "hang", env=s.backend.env(), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        try:
            await s.pending("call-d")
            answer = await s.decide("call-d")
            assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
            await eventually(lambda: _exists(marker), "the body started")
        finally:
            first.kill()  # SIGKILL while the body runs: claimed in the ack, never finished
            await asyncio.wait_for(first.wait(), 10)
        shown = json.loads(_cli(s.backend, "show", "call-d", "--json").stdout)
        assert shown["status"] == "granted" and shown["decided_by"] == "ana" and shown["execution"] == "executing"
        pending = json.loads(_cli(s.backend, "pending", "--json").stdout)
        assert [d["target_id"] for d in pending["in_doubt"]] == ["call-d"]
        verified = _cli(s.backend, "audit", "verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        again = await asyncio.create_subprocess_exec(
            *argv, env=s.backend.env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(again.communicate(), 60)
        assert again.returncode == 0, err.decode()
        replayed = json.loads(out.decode().strip().splitlines()[-1])
    assert replayed["status"] == "in_doubt", replayed
    # The body started once, and its process had posted no claim of its own: the ack carried it.
    assert marker.read_text().splitlines() == ['{"amount": 10, "executing_posts": 0, "to": "bob"}']


async def _exists(path: Path) -> bool:
    return await asyncio.to_thread(lambda: path.exists() and bool(path.read_text().strip()))


class AckKiller:
    """A relay in front of one ``goldfive serve`` that SIGKILLs it when an agent's ack reaches it.

    ``when="before"``: the ack never reaches the server (killed as it arrives); ``"after"``: the server commits
    it, and is killed before its answer gets back to the agent. Only the first ack is a victim.
    """

    def __init__(self, serve: Serve, *, when: str) -> None:
        self.serve = serve
        self.when = when
        self.killed = threading.Event()
        self._victim = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.serve.port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            acking = threading.Event()
            threading.Thread(target=self._pipe, args=(client, upstream, acking, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, acking, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, acking: threading.Event, upward: bool) -> None:
        try:
            while data := src.recv(65536):
                if upward and not self._victim and b"POST /api/agent/acks" in data:
                    if self.when == "before":
                        self._kill()
                        break
                    acking.set()
                elif not upward and acking.is_set() and not self._victim:
                    self._kill()  # the server answered (it committed): the answer is lost with it
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _kill(self) -> None:
        self._victim = True
        self.serve.kill()
        self.killed.set()

    def close(self) -> None:
        self._listener.close()


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_server_killed_mid_ack_gets_the_ack_and_claim_again_and_the_body_runs_once(
    sqlite_backend: Backend, tmp_path: Path, when: str
) -> None:
    with site(sqlite_backend, tmp_path) as s:
        relay = AckKiller(s.servers[0], when=when)
        channel = HttpChannel(relay.url, token=s.tokens["bot"])
        made = _counting(channel)
        ran: list[Any] = []
        run = tool_agent(channel, f"call-{when}", ran)
        try:
            await s.pending(f"call-{when}")
            with contextlib.suppress(Exception):  # the decider's own wait dies with the server
                await s.decide(f"call-{when}")
            await eventually(lambda: _set(relay.killed), "the server killed mid-ack")
            assert not ran
            s.servers[0].start()  # same port, same database
            result = await asyncio.wait_for(run, 60)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
            relay.close()
        shown = json.loads(_cli(s.backend, "show", f"call-{when}", "--json").stdout)
    assert result.output.status == "ran" and ran == [{"amount": 10}]
    assert shown["status"] == "granted" and shown["decided_by"] == "ana" and shown["execution"] == "done"
    assert not [m for m in made if m.endswith("/executing")], made
    assert _ledger_states(sqlite_backend, f"call-{when}") == ["executing", "done"]
    assert sqlite_backend.open().verify_audit().ok


async def _set(event: threading.Event) -> bool:
    return event.is_set()


async def test_a_claim_the_server_refuses_never_runs_the_body(sqlite_backend: Backend, tmp_path: Path) -> None:
    # Two runs of one agent ask for the same call: the first approved runs it; the second's approval carries a
    # claim the server refuses (the call ran), so its body never runs and the model is given the recorded result.
    with site(sqlite_backend, tmp_path) as s:
        channels = [HttpChannel(s.url, token=s.tokens["bot"]) for _ in range(2)]
        ran: list[Any] = []
        runs = [tool_agent(channel, "call-twice", ran) for channel in channels]
        try:

            async def both_pending() -> list[str]:
                async with httpx.AsyncClient(base_url=s.url, timeout=10) as client:
                    items = (await client.get("/api/approvals", headers=s.auth("ana"))).json()["approvals"]
                found = [a["run_id"] for a in items if a["target_id"] == "call-twice"]
                return found if len(found) == 2 else []

            outcomes = []
            for run_id in await eventually(both_pending, "both runs asking"):
                async with httpx.AsyncClient(base_url=s.url, timeout=60) as client:
                    answer = await client.post(
                        f"/api/approvals/call-twice/approve?run={run_id}", headers=s.auth("ana"), json={}
                    )
                assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
                done, _ = await asyncio.wait(runs, return_when=asyncio.FIRST_COMPLETED, timeout=60)
                outcomes.extend(t.result().output.status for t in done)
                runs = [t for t in runs if t not in done]
        finally:
            for run in runs:
                run.cancel()
            for channel in channels:
                await channel.aclose()
    assert sorted(outcomes) == ["already_done", "ran"] and ran == [{"amount": 10}]
