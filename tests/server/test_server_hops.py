"""The thread hops on a decision's way to the tool body, counted: each hop waits for a free thread and a turn of
the event loop, which a busy host makes costly, so the store calls that always run together share one.

* ``POST /api/approvals/ID/approve``: the approval's look-up, the decision's plan and the message posted to the
  agent's inbox run on one thread (were three);
* the agent inbox's hub: the look for new messages and their claims for the streams run on one thread (were two);
* ``POST /api/agent/acks`` with an APPROVE's folded claim: the run's ownership check, the look-up of what the
  endpoint claimed and the commit of the ack with its claim run on one thread (were three);
* ``POST /api/agent/events`` with the event that reports the decision: the run's claim and the decision's delivery
  are checked on one thread (were two), before the append.

Each hop handed to a thread is numbered (the app's ``_run`` and ``ServerThreads.run``); the store calls record the
number of the hop they ran in.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import Server, eventually, start_tool_agent
from store_support import Backend
from test_server_sessions import live

from goldfive_core.server import ServerConfig, create_app
from goldfive_core.server import app as app_module
from goldfive_core.server.threads import ServerThreads
from goldfive_core.signing import load_or_create_signing_key
from goldfive_core.store import agents as owners
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.users import add_user

HOP: contextvars.ContextVar[int] = contextvars.ContextVar("HOP", default=0)
"""The number of the thread hop a store call runs in (0: not in a numbered hop)."""


def _numbered(count: itertools.count[int], fn: Callable[..., Any]) -> Callable[..., Any]:
    hop = next(count)

    def inside(*args: Any, **kwargs: Any) -> Any:
        HOP.set(hop)
        try:
            return fn(*args, **kwargs)
        finally:
            HOP.set(0)

    return inside


def _recorded(calls: list[tuple[str, int]], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append((name, HOP.get()))
        return fn(*args, **kwargs)

    return wrapper


def _recorded_after(calls: list[tuple[str, int]], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """:func:`_recorded`, noted when the call returns (a wait begun before the calls were cleared still counts)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            calls.append((name, HOP.get()))

    return wrapper


def _number_hops(monkeypatch: pytest.MonkeyPatch) -> None:
    count = itertools.count(1)
    real_run: Callable[..., Awaitable[Any]] = app_module._run
    real_pool_run = ServerThreads.run

    async def run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await real_run(_numbered(count, fn), *args, **kwargs)

    async def pool_run(self: ServerThreads, pool: Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await real_pool_run(self, pool, _numbered(count, fn), *args, **kwargs)

    monkeypatch.setattr(app_module, "_run", run)
    monkeypatch.setattr(ServerThreads, "run", pool_run)


async def test_an_approve_finds_plans_and_posts_in_one_thread_hop(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = start_tool_agent(server.backend, "call-1", {"amount": 10, "to": "ACME"})
    try:
        await server.pending("call-1")
        calls: list[tuple[str, int]] = []
        _number_hops(monkeypatch)
        for name in ("approvals_for", "post_control"):
            monkeypatch.setattr(server.store, name, _recorded(calls, name, getattr(server.store, name)))
        ok = await server.post("/api/approvals/call-1/approve", {})
        assert ok.status_code == 200 and ok.json()["result"] == "SUCCESS", ok.text
        (found,) = [hop for name, hop in calls if name == "approvals_for"]
        (posted,) = [hop for name, hop in calls if name == "post_control"]
        assert found > 0 and posted == found, calls  # the look-up and the post: one hop
        result = (await agent.result()).output
        assert result.status == "ran" and agent.ran == [{"amount": 10, "to": "ACME"}]
    finally:
        await agent.close()


async def test_the_message_is_found_and_claimed_and_its_ack_checked_and_committed_in_one_thread_hop_each(
    sqlite_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = sqlite_backend.open()
    signer, _ = load_or_create_signing_key(tmp_path / "keys" / "decision-key.pem")
    tokens = {name: add_user(store, name, role).token for name, role in (("ana", "approver"), ("bot", "agent"))}
    app = create_app(store, ServerConfig(signer=signer))
    calls: list[tuple[str, int]] = []
    _number_hops(monkeypatch)  # from the start: the hub's wait is a hop begun before the decision
    monkeypatch.setattr(store, "wait_inbox", _recorded_after(calls, "wait_inbox", store.wait_inbox))
    async with live(app) as url:
        agent = start_tool_agent(
            sqlite_backend, "call-h", {"amount": 10}, over_http=HttpChannel(url, token=tokens["bot"])
        )
        try:
            await eventually(lambda: _open(store, "call-h"), "the request in the store")
            calls.clear()
            monkeypatch.setattr(store, "append_events", _recorded(calls, "append_events", store.append_events))
            monkeypatch.setattr(owners, "owned_runs", _recorded(calls, "owned_runs", owners.owned_runs))
            monkeypatch.setattr(owners, "claimed_for", _recorded(calls, "claimed_for", owners.claimed_for))
            monkeypatch.setattr(store, "ack_controls", _recorded(calls, "ack_controls", store.ack_controls))
            claims = _recorded(calls, "claim_for_streams", owners.claim_for_streams)
            monkeypatch.setattr(owners, "claim_for_streams", claims)
            monkeypatch.setattr(owners, "pending_for_runs", _recorded(calls, "pending", owners.pending_for_runs))
            monkeypatch.setattr(owners, "claim_run", _recorded(calls, "claim_run", owners.claim_run))
            reported = _recorded(calls, "decision_delivered", owners.decision_delivered)
            monkeypatch.setattr(owners, "decision_delivered", reported)
            async with httpx.AsyncClient(base_url=url) as person:
                auth = {"Authorization": f"Bearer {tokens['ana']}"}
                answer = await person.post("/api/approvals/call-h/approve", json={}, headers=auth)
            assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
            result = (await agent.result()).output
        finally:
            await agent.close()
    assert result.status == "ran" and agent.ran == [{"amount": 10}]
    (claimed,) = [hop for name, hop in calls if name == "claim_for_streams"]
    # The hub's wake, its look and every stream's claims: one hop.
    assert claimed > 0 and ("pending", claimed) in calls and ("wait_inbox", claimed) in calls, calls
    (acked,) = [hop for name, hop in calls if name == "ack_controls"]
    assert acked > 0 and ("owned_runs", acked) in calls and ("claimed_for", acked) in calls, calls  # one hop
    # The agent's event reporting the decision rides with the ack: the run's claim, the decision's delivery, the
    # append and the ack in one hop, the event committed before the ack is recorded.
    (checked,) = [hop for name, hop in calls if name == "decision_delivered"]
    assert checked == acked and ("claim_run", checked) in calls and ("append_events", acked) in calls, calls
    assert calls.index(("append_events", acked)) < calls.index(("ack_controls", acked)), calls


async def _open(store: Any, target: str) -> bool:
    return any(r.open for r in store.approvals_for(target))


async def test_a_stream_opens_with_one_hop_for_its_runs_and_one_for_what_it_is_owed(
    sqlite_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent failing over in the middle of a burst queues behind the server's acks and claims at each thread hop
    (its runs age meanwhile): its runs are claimed in one hop and what the stream sends first is looked up in one."""
    store = sqlite_backend.open()
    signer, _ = load_or_create_signing_key(tmp_path / "keys" / "decision-key.pem")
    token = add_user(store, "bot", "agent").token
    app = create_app(store, ServerConfig(signer=signer))
    calls: list[tuple[str, int]] = []
    async with live(app) as url:
        _number_hops(monkeypatch)
        monkeypatch.setattr(owners, "claim_run", _recorded(calls, "claim_run", owners.claim_run))
        monkeypatch.setattr(owners, "claimed_for", _recorded(calls, "claimed_for", owners.claimed_for))
        monkeypatch.setattr(owners, "pending_for_runs", _recorded(calls, "pending", owners.pending_for_runs))
        params = {"run": ["bot:r1", "bot:r2", "bot:r3"], "endpoint": "e"}
        async with (
            httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client,
            client.stream("GET", "/api/agent/stream", params=params) as stream,
        ):
            assert stream.status_code == 200
            async for line in stream.aiter_lines():
                if line.startswith(": connected"):
                    break
    claims = {hop for name, hop in calls if name == "claim_run"}
    assert len([name for name, _ in calls if name == "claim_run"]) == 3 and len(claims) == 1, calls
    (owed,) = [hop for name, hop in calls if name == "claimed_for"]
    assert ("pending", owed) in calls and owed not in claims, calls
