"""A fleet's agents failing over are served at once by a server that never checked their tokens (their pass).

Each ``goldfive serve`` used to check every agent token by scrypt once per process: when a server went away, its
agents reached the others, and each agent's first request there waited for its own check behind everyone else's
(hundreds of agents: tens of seconds on a loaded host). Meanwhile their runs aged past the crash window and were
judged crashed while the agents were alive and connecting: their approvals were no longer delivered. A server now
gives its agents a pass with the stream's answer; another server sharing the key file takes the token on it,
without a check of its own. These tests use real servers: the failing-over agents' new server never finishes a
secret check at all (every check it starts waits, as behind a long queue).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
from google.protobuf import json_format
from http_support import Serve, eventually
from server_support import free_port
from store_support import Backend, await_until, make_event

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store.agents import PASS_HEADER
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.users import add_user, parse_token, rotate_user

HERE = Path(__file__).resolve().parent
AGENTS = 16


@dataclasses.dataclass(eq=False)
class _Agent:
    """One agent as ``HttpChannel`` speaks: its token (and the pass a server gave it), one run, one stream."""

    token: str
    run: str
    proof: str = ""
    connected: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    got: list[str] = dataclasses.field(default_factory=list)
    """The targets of the approvals its stream delivered."""

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **({PASS_HEADER: self.proof} if self.proof else {})}

    async def register(self, client: httpx.AsyncClient, url: str) -> None:
        events = [
            make_event(self.run, 0, events_pb2.RunStarted(adapter="callable")),
            make_event(self.run, 1, events_pb2.ApprovalRequested(target_id=f"{self.run}-pay", kind="task", prompt="?")),
        ]
        body = {"pid": 1, "host": "fleet", "events": [json_format.MessageToDict(e) for e in events]}
        response = await client.post(f"{url}/api/agent/events", json=body, headers=self.headers())
        assert response.status_code == 200, response.text

    async def listen(self, client: httpx.AsyncClient, url: str) -> None:
        """Hold the stream to ``url`` and ack what it delivers, until the server goes away."""
        params = {"run": self.run, "endpoint": self.run}
        with contextlib.suppress(httpx.HTTPError):
            async with client.stream("GET", f"{url}/api/agent/stream", params=params, headers=self.headers()) as resp:
                assert resp.status_code == 200
                self.proof = resp.headers.get(PASS_HEADER, self.proof)
                async for frame in _frames(resp, self.connected):
                    message = frame["message"]
                    self.got.append(message["approve"]["target_id"])
                    ack = {"control_id": message["id"], "result": "SUCCESS", "detail": "approved"}
                    acks = {"endpoint": self.run, "acks": [{"inbox_id": frame["inbox_id"], "ack": ack}]}
                    await client.post(f"{url}/api/agent/acks", json=acks, headers=self.headers())


async def _frames(resp: httpx.Response, connected: asyncio.Event) -> AsyncIterator[dict[str, Any]]:
    """The control frames of an agent stream (its one-line ``data:`` fields); ``connected`` set at its first line."""
    async for line in resp.aiter_lines():
        if line.startswith(": connected"):
            connected.set()
        elif line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))


@contextlib.contextmanager
def _servers(backend: Backend, tmp_path: Path, *wrappers: tuple[str, ...]) -> Iterator[list[Serve]]:
    """One server per ``wrappers`` entry, over one store and one key file."""
    key = tmp_path / "keys" / "decision-key.pem"
    started: list[Serve] = []
    try:
        for wrapper in wrappers:
            started.append(Serve(backend, key, free_port(), wrapper=wrapper).start())
        yield started
    finally:
        for server in started:
            server.stop()


async def _all_connected(agents: list[_Agent], what: str) -> None:
    async def look() -> bool:
        return all(a.connected.is_set() for a in agents)

    await eventually(look, what, 30.0)


async def test_agents_failing_over_to_a_server_whose_secret_checks_are_busy_are_served_at_once(
    backend: Backend, tmp_path: Path
) -> None:
    store = backend.open()
    ana = add_user(store, "ana", "approver").token
    agents = [_Agent(add_user(store, f"bot{i}", "agent").token, f"fleet-{i}") for i in range(AGENTS)]
    store.close()
    busy = (str(HERE / "gated_secrets.py"),)
    with _servers(backend, tmp_path, (), busy, ()) as (home, survivor, decider):
        limits = httpx.Limits(max_connections=4 * AGENTS, max_keepalive_connections=4 * AGENTS)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            await asyncio.gather(*(a.register(client, home.url) for a in agents))
            streams = [asyncio.create_task(a.listen(client, home.url)) for a in agents]
            await _all_connected(agents, "every agent's stream at its first server")
            home.kill()  # its agents all move to the survivor at once
            await asyncio.gather(*streams)
            for agent in agents:
                agent.connected.clear()
            streams = [asyncio.create_task(a.listen(client, survivor.url)) for a in agents]
            try:
                await _all_connected(agents, "every agent served by a server that checked none of their tokens")
                # Their runs stayed alive: a person's approvals are delivered to them, not recorded for a replay.
                answers = await asyncio.gather(
                    *(
                        client.post(
                            f"{decider.url}/api/approvals/{a.run}-pay/approve",
                            json={},
                            headers={"Authorization": f"Bearer {ana}"},
                        )
                        for a in agents
                    )
                )
                assert [r.json().get("verdict") for r in answers] == ["applied"] * AGENTS
                assert [a.got for a in agents] == [[f"{a.run}-pay"] for a in agents]
            finally:
                for stream in streams:
                    stream.cancel()
                await asyncio.gather(*streams, return_exceptions=True)


async def _stream_status(client: httpx.AsyncClient, url: str, agent: _Agent) -> int:
    params = {"run": agent.run, "endpoint": agent.run}
    async with client.stream("GET", f"{url}/api/agent/stream", params=params, headers=agent.headers()) as resp:
        return resp.status_code


async def test_a_pass_is_worth_nothing_without_its_token_nor_after_the_token_is_rotated(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    backend = sqlite_backend  # the pass is the servers' own: the same on either store
    store = backend.open()
    bot = _Agent(add_user(store, "bot", "agent").token, "fleet-0")
    store.close()
    with _servers(backend, tmp_path, (), ()) as (home, other):
        async with httpx.AsyncClient(timeout=60) as client:
            await bot.register(client, home.url)
            listening = asyncio.create_task(bot.listen(client, home.url))
            await _all_connected([bot], "the agent's stream")
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)
            assert bot.proof
            parsed = parse_token(bot.token)
            assert parsed is not None
            # Its token id with another secret, carrying the real token's pass: refused (the pass is bound to it).
            forged = _Agent(f"gf5_{parsed[0]}_{'A' * 43}", bot.run, proof=bot.proof)
            assert await _stream_status(client, other.url, forged) == 401
            store = backend.open()
            rotated = rotate_user(store, "bot").token
            store.close()
            # The old token with its pass, after a rotation: refused.
            assert await _stream_status(client, other.url, bot) == 401
            fresh = _Agent(rotated, bot.run)
            assert await _stream_status(client, other.url, fresh) == 200


async def test_an_http_channel_failing_over_is_served_on_its_pass_by_a_server_whose_secret_checks_are_busy(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    backend = sqlite_backend
    store = backend.open()
    ana = add_user(store, "ana", "approver").token
    bot = add_user(store, "bot", "agent").token
    store.close()
    busy = (str(HERE / "gated_secrets.py"),)
    with _servers(backend, tmp_path, (), busy, ()) as (home, survivor, decider):
        channel = HttpChannel([home.url, survivor.url], token=bot)

        async def agent(task: Task, tools: AgentTools) -> Any:
            await tools.report_task_started("pay-1")
            return await tools.report_awaiting_approval("pay?", task_id="pay-1", timeout_ms=120_000)

        run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("go"))
        try:
            await await_until(lambda: channel.connects >= 1, what="the agent's stream at its first server")
            home.kill()
            await await_until(lambda: channel.connects >= 2, 30.0, "the agent served by the busy survivor")
            async with httpx.AsyncClient(timeout=60) as client:
                answer = await client.post(
                    f"{decider.url}/api/approvals/pay-1/approve", json={}, headers={"Authorization": f"Bearer {ana}"}
                )
            assert answer.json()["verdict"] == "applied"
            result = await asyncio.wait_for(run, 60)
            assert result.output["decision"] == "approve"  # applied to the live run, not recorded for a replay
        finally:
            run.cancel()
            await asyncio.gather(run, return_exceptions=True)
            await channel.aclose()
