"""An agent's open stream carries its runs' liveness: the server stamps them, the agent sends no heartbeats."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import httpx
from server_support import Server, live, make_server, run_started
from store_support import Backend, await_until

from goldfive_core.store.agents import LIVENESS_HEADER, LIVENESS_ON_STREAM
from goldfive_core.store.users import add_user


def _count_writes(srv: Server) -> list[list[str]]:
    """Every heartbeat write the store receives from now on (one transaction each)."""
    writes: list[list[str]] = []
    real = srv.store.heartbeat

    def counted(run_ids: Sequence[str]) -> None:
        writes.append(list(run_ids))
        real(run_ids)

    srv.store.heartbeat = counted  # type: ignore[method-assign]
    return writes


async def test_an_open_agent_stream_keeps_its_runs_alive_without_heartbeat_requests(
    backend: Backend, tmp_path: Path
) -> None:
    async with make_server(backend, tmp_path) as srv:
        app = srv.client._transport.app  # type: ignore[attr-defined]
        liveness = app.state.api.agents.liveness
        liveness.every_s = 0.05
        srv.tokens["bot"] = add_user(srv.store, "bot", "agent").token
        for run in ("run-a", "run-b", "run-other"):
            assert (await srv.post("/api/agent/events", run_started(run), user="bot")).status_code == 200
        srv.store.stale_after_ms = 400
        writes = _count_writes(srv)
        async with live(app) as url, httpx.AsyncClient(base_url=url) as client:
            path = "/api/agent/stream?run=run-a&run=run-b&endpoint=e1"
            async with client.stream("GET", path, headers=srv.auth("bot")) as resp:
                assert resp.status_code == 200
                assert resp.headers[LIVENESS_HEADER] == LIVENESS_ON_STREAM
                # Nobody sends a heartbeat request; the server stamps the stream's runs (and only those) again
                # and again, together: well past the stale threshold they are still alive.
                await await_until(lambda: len(writes) >= 12, what="the server stamping the stream's runs")
                assert all(sorted(w) == ["run-a", "run-b"] for w in writes), writes
                assert srv.store.liveness_of(srv.store.run("run-a")).live  # type: ignore[arg-type]
                assert not srv.store.liveness_of(srv.store.run("run-other")).live  # type: ignore[arg-type]
            # The stream closed: its runs are no longer stamped, and go stale like any run nobody beats for.
            await await_until(
                lambda: not srv.store.liveness_of(srv.store.run("run-a")).live,  # type: ignore[arg-type]
                what="the closed stream's run going stale",
            )


async def test_a_stream_for_another_agents_run_is_refused_and_keeps_nothing_alive(
    backend: Backend, tmp_path: Path
) -> None:
    async with make_server(backend, tmp_path) as srv:
        app = srv.client._transport.app  # type: ignore[attr-defined]
        for name in ("bot", "eve"):
            srv.tokens[name] = add_user(srv.store, name, "agent").token
        assert (await srv.post("/api/agent/events", run_started("run-b"), user="bot")).status_code == 200
        writes = _count_writes(srv)
        async with live(app) as url, httpx.AsyncClient(base_url=url) as client:
            refused = await client.get("/api/agent/stream?run=run-b&endpoint=e1", headers=srv.auth("eve"))
            assert refused.status_code == 403
        assert writes == []
