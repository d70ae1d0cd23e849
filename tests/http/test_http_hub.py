"""The server's inbox watcher for agents (one per process): it closes the runs of agents that died."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from store_support import Backend, await_until, make_event

from goldfive_core import ControlKind, ControlMessage
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


def _streams(n: int) -> list[agents._Subscriber]:
    """``n`` agents' streams, agent ``bot<i>`` serving run ``run-<i>``."""
    return [
        agents._Subscriber(f"bot{i}", f"agent:bot{i}:e", frozenset({f"run-{i}"}), asyncio.Queue()) for i in range(n)
    ]


async def test_a_burst_for_many_agents_streams_is_claimed_in_one_transaction(backend: Backend) -> None:
    store = backend.open()
    hub = agents.InboxHub(store)
    subs = _streams(12)
    claims: list[list[tuple[int, str]]] = []  # each call is one transaction
    real = store.claim_controls_for  # type: ignore[attr-defined]

    def counted(pairs: list[tuple[int, str]], **kw: Any) -> list[int]:
        claims.append(list(pairs))
        return real(pairs, **kw)  # type: ignore[no-any-return]

    store.claim_controls_for = counted  # type: ignore[attr-defined]
    try:
        # A burst waits for twelve agents' streams, which connect together (as after a server restart).
        posted = [store.post_control(ControlMessage(ControlKind.CANCEL, {}), run_id=f"run-{i}") for i in range(12)]
        for sub in subs:
            hub.subscribe(sub)
        got = [await asyncio.wait_for(sub.queue.get(), 20) for sub in subs]
        # Every agent's stream got its own message, claimed for its own endpoint ...
        assert [row.id for row in got if row is not None] == posted  # type: ignore[union-attr]
        assert {(i, e) for c in claims for i, e in c} == {(p, s.endpoint) for p, s in zip(posted, subs, strict=True)}
        # ... by one claim for all of them, not one per stream.
        assert len(claims) == 1, [len(c) for c in claims]
    finally:
        await hub.aclose()


async def test_a_message_another_servers_stream_claimed_first_is_not_sent_here(backend: Backend) -> None:
    store = backend.open()
    hub = agents.InboxHub(store)
    subs = _streams(2)
    real = store.claim_controls_for  # type: ignore[attr-defined]
    taken = store.post_control(ControlMessage(ControlKind.CANCEL, {}), run_id="run-0")
    mine = store.post_control(ControlMessage(ControlKind.CANCEL, {}), run_id="run-1")

    def raced(pairs: list[tuple[int, str]], **kw: Any) -> list[int]:
        real([(taken, "agent:bot0:elsewhere")])  # another server's stream of bot0 wins its message first
        return real(pairs, **kw)  # type: ignore[no-any-return]

    store.claim_controls_for = raced  # type: ignore[attr-defined]
    try:
        for sub in subs:
            hub.subscribe(sub)
        got = await asyncio.wait_for(subs[1].queue.get(), 20)
        assert got is not None and got.id == mine
        assert subs[0].queue.empty()  # claimed elsewhere: it went to that stream, not (also) to this one
    finally:
        await hub.aclose()


async def test_a_message_a_killed_server_claimed_late_for_the_same_stream_is_still_sent_here(backend: Backend) -> None:
    """Server A claims a row for an agent's endpoint and is killed before the frame leaves; its claim commits only
    after the agent reconnected here (the look here saw it pending). The row is owed to that endpoint: sent here,
    not stranded as "taken by an agent" until the sender's wait runs out."""
    store = backend.open()
    hub = agents.InboxHub(store)
    sub = _streams(1)[0]
    real = store.claim_controls_for  # type: ignore[attr-defined]
    late = store.post_control(ControlMessage(ControlKind.CANCEL, {}), run_id="run-0")
    other = store.post_control(ControlMessage(ControlKind.CANCEL, {}), run_id="run-0")
    raced: list[int] = []

    def committed_late(pairs: list[tuple[int, str]], **kw: Any) -> list[int]:
        if not raced:
            raced.append(late)
            real([(late, sub.endpoint)])  # the dead server's claim, for this very endpoint, lands first
            real([(other, "agent:bot0:elsewhere")])  # a live stream of another endpoint wins this one
        return real(pairs, **kw)  # type: ignore[no-any-return]

    store.claim_controls_for = committed_late  # type: ignore[attr-defined]
    try:
        hub.subscribe(sub)
        got = await asyncio.wait_for(sub.queue.get(), 20)
        assert raced and got is not None and got.id == late
        await asyncio.sleep(0.2)
        assert sub.queue.empty()  # the other endpoint's claim still wins: it is not sent here too
    finally:
        await hub.aclose()


async def test_a_row_the_streams_own_look_wins_again_after_the_hub_sent_it_is_queued_once(backend: Backend) -> None:
    """A new stream's own look (``deliver``) and the hub's can both win a row for the same endpoint (a claim for the
    same endpoint is won again, so a late claim is not stranded): the stream is sent it once."""
    store = backend.open()
    hub = agents.InboxHub(store)
    sub = _streams(1)[0]
    try:
        hub.subscribe(sub)
        posted = store.post_control(ControlMessage(ControlKind.CANCEL, {}), run_id="run-0")
        row = await asyncio.wait_for(sub.queue.get(), 20)
        assert row is not None and row.id == posted
        await hub.deliver(sub, [row])  # the stream's own look read it pending before the hub claimed it
        assert sub.queue.empty()
        again = store.post_control(ControlMessage(ControlKind.CANCEL, {}), run_id="run-0")
        nxt = await asyncio.wait_for(sub.queue.get(), 20)  # a new row still goes through
        assert nxt is not None and nxt.id == again
    finally:
        await hub.aclose()


async def test_agents_connecting_one_after_another_cost_no_look_at_every_run_each(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet connecting (or moving here from a killed server): each new stream looks for its own runs' messages
    (``open_stream``), so the hub does not look at every run it serves once per new stream — and a message posted
    afterwards still reaches the newest stream (its news wakes the hub)."""
    store = backend.open()
    hub = agents.InboxHub(store)
    looks: list[int] = []
    real = agents._claim_pending

    def counted(store: Any, endpoints: dict[str, str]) -> Any:
        looks.append(len(endpoints))
        return real(store, endpoints)

    monkeypatch.setattr(agents, "_claim_pending", counted)
    subs = _streams(40)
    try:
        hub.subscribe(subs[0])
        await await_until(lambda: looks, what="the first stream's look")
        for sub in subs[1:]:  # the others open one after another while the hub watches
            hub.subscribe(sub)
            await asyncio.sleep(0.01)
        posted = store.post_control(ControlMessage(ControlKind.CANCEL, {}), run_id="run-39")
        got = await asyncio.wait_for(subs[-1].queue.get(), 20)
        assert got is not None and got.id == posted
        # A few (the first stream's, the message's, a commit's or a slice's wake-up), not one per stream.
        assert len(looks) < 10, f"{len(looks)} looks at every run for {len(subs)} streams opening: {looks}"
    finally:
        await hub.aclose()
