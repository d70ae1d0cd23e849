"""A streaming HttpChannel sends no heartbeat requests to a server that keeps its runs alive; to one that does not
say so (an older server), it heartbeats as before."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from http_support import AGENT_WAIT_MS
from server_support import live, make_server
from store_support import Backend, await_until

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.store.agents import LIVENESS_HEADER
from goldfive_core.store.base import StoreError
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.users import add_user, disable_user


def _without_liveness(app: Any) -> Any:
    """``app`` as an older server answers: its stream does not say it keeps the runs alive."""

    async def older(scope: Any, receive: Any, send: Any) -> None:
        async def strip(message: Any) -> None:
            if message["type"] == "http.response.start":
                name = LIVENESS_HEADER.lower().encode()
                message = {**message, "headers": [(k, v) for k, v in message["headers"] if k.lower() != name]}
            await send(message)

        await app(scope, receive, strip)

    return older


@contextlib.asynccontextmanager
async def _waiting_agent(url: str, token: str) -> AsyncIterator[tuple[HttpChannel, list[str]]]:
    """An agent waiting for an approval over HTTP, its stream connected; the heartbeat requests it sends."""
    channel = HttpChannel(url, token=token)
    sent: list[str] = []
    request = channel.remote.request

    def counted(method: str, path: str, body: Any = None) -> Any:
        if path == "/api/agent/heartbeat":
            sent.append(",".join(body["run_ids"]))
        return request(method, path, body)

    channel.remote.request = counted  # type: ignore[method-assign]

    async def agent(task: Task, tools: AgentTools) -> Any:
        await tools.report_task_started("pay-1")
        return await tools.report_awaiting_approval("pay?", task_id="pay-1", timeout_ms=AGENT_WAIT_MS)

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("go"))
    try:
        await await_until(lambda: channel.connects >= 1, what="the agent's stream connected")
        yield channel, sent
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await channel.aclose()


async def test_a_streaming_agent_sends_no_heartbeats_its_server_keeps_the_run_alive(
    backend: Backend, tmp_path: Path
) -> None:
    async with make_server(backend, tmp_path) as srv, live(srv.client._transport.app) as url:  # type: ignore[attr-defined]
        token = add_user(srv.store, "bot", "agent").token
        async with _waiting_agent(url, token) as (channel, sent):
            runs = await await_until(lambda: channel.remote.streamed, what="the server keeping the run alive")
            before = list(sent)
            await asyncio.to_thread(channel.remote.heartbeat, sorted(runs))  # what the agent's sink does every 5 s
            assert sent == before  # no request: the open stream carries the run's liveness
            (run_id,) = runs
            assert srv.store.liveness_of(srv.store.run(run_id)).live  # type: ignore[arg-type]


async def test_an_agent_heartbeats_as_before_when_its_server_does_not_keep_the_runs_alive(
    backend: Backend, tmp_path: Path
) -> None:
    async with make_server(backend, tmp_path) as srv:
        older = _without_liveness(srv.client._transport.app)  # type: ignore[attr-defined]
        async with live(older) as url:
            token = add_user(srv.store, "bot", "agent").token
            async with _waiting_agent(url, token) as (channel, sent):
                assert channel.remote.streamed == frozenset()
                (run_id,) = [r.run_id for r in srv.store.runs()]
                await asyncio.to_thread(channel.remote.heartbeat, [run_id])
                assert sent[-1] == run_id  # the request went out, as it always did


async def test_an_agent_whose_stream_ended_heartbeats_again(backend: Backend, tmp_path: Path) -> None:
    async with make_server(backend, tmp_path) as srv, live(srv.client._transport.app) as url:  # type: ignore[attr-defined]
        srv.client._transport.app.state.api.sessions.every_s = 0.05  # type: ignore[attr-defined]
        token = add_user(srv.store, "bot", "agent").token
        async with _waiting_agent(url, token) as (channel, sent):
            (run_id,) = await await_until(lambda: channel.remote.streamed, what="the server keeping the run alive")
            disable_user(srv.store, "bot")  # its stream ends (and it cannot reconnect)
            await await_until(lambda: not channel.remote.streamed, what="the agent seeing its stream end")
            before = len(sent)
            with contextlib.suppress(StoreError):  # refused: the token is disabled; what matters is that it asked
                await asyncio.to_thread(channel.remote.heartbeat, [run_id])
            assert sent[before:] == [run_id]
