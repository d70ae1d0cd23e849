"""The server's inbox watcher for agents (one per process): it closes the runs of agents that died."""

from __future__ import annotations

import asyncio

import pytest
from store_support import Backend, await_until, make_event

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.server import agents


async def test_a_server_with_agents_connected_closes_the_runs_whose_heartbeat_stopped(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agents, "_REAP_EVERY_S", 0.05)
    monkeypatch.setattr(agents, "_WAKE_SLICE_S", 0.05)
    store = backend.open()
    store.stale_after_ms = 300
    for run in ("gone", "alive"):
        store.append_events([make_event(run, 0, events_pb2.RunStarted(adapter="callable"))], pid=1, host="elsewhere")
    hub = agents.InboxHub(store)
    sub = agents._Subscriber("bot", "agent:bot:e", frozenset({"alive"}), asyncio.Queue())
    hub.subscribe(sub)
    try:
        for _ in range(40):  # "alive" keeps heartbeating (as its agent's sink does through the server)
            store.heartbeat(["alive"])
            if store.run("gone").status == "crashed":  # type: ignore[union-attr]
                break
            await asyncio.sleep(0.05)
        await await_until(lambda: store.run("gone").status == "crashed", what="the dead agent's run closed")  # type: ignore[union-attr]
        assert store.run("alive").status == "running"  # type: ignore[union-attr]
    finally:
        await hub.aclose()
