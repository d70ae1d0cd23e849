"""Agents' heartbeats are written together: many agents beating at once cost a few store transactions, not one each."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from server_support import make_server, run_started
from store_support import Backend, await_until

from goldfive_core.server import auth as auth_mod
from goldfive_core.store.users import add_user, disable_user

AGENTS = 4
RUNS_EACH = 10


async def test_the_beats_of_many_agents_at_once_become_a_few_transactions(backend: Backend, tmp_path: Path) -> None:
    async with make_server(backend, tmp_path) as srv:
        runs: dict[str, list[str]] = {}
        for a in range(AGENTS):
            name = f"bot{a}"
            srv.tokens[name] = add_user(srv.store, name, "agent").token
            runs[name] = [f"run-{a}-{i}" for i in range(RUNS_EACH)]
            for run in runs[name]:
                assert (await srv.post("/api/agent/events", run_started(run), user=name)).status_code == 200
        writes: list[list[str]] = []  # each call of the store's heartbeat is one transaction
        real = srv.store.heartbeat

        def counted(run_ids: Sequence[str]) -> None:
            writes.append(list(run_ids))
            real(run_ids)

        srv.store.heartbeat = counted  # type: ignore[method-assign]
        # Every run's agent beats for it at the same moment, each beat its own request.
        beats = [
            srv.post("/api/agent/heartbeat", {"run_ids": [run]}, user=name)
            for name, mine in runs.items()
            for run in mine
        ]
        answers = await asyncio.gather(*beats)
        assert [(a.status_code, a.json()) for a in answers] == [(200, {"runs": 1})] * (AGENTS * RUNS_EACH)
        # Each answer came after its run was stamped: every run is in a write, and the writes are few.
        assert sorted(run for write in writes for run in write) == sorted(r for mine in runs.values() for r in mine)
        assert len(writes) <= 4, [len(w) for w in writes]
        # An agent still cannot beat for another's run, even once the server knows who owns what.
        refused = await srv.post("/api/agent/heartbeat", {"run_ids": [runs["bot1"][0]]}, user="bot0")
        assert refused.status_code == 403
        assert all(srv.store.liveness_of(srv.store.run(r)).live for mine in runs.values() for r in mine)


async def test_the_token_look_ups_of_many_agents_requests_at_once_are_made_together(
    backend: Backend, tmp_path: Path
) -> None:
    async with make_server(backend, tmp_path) as srv:
        names = [f"bot{a}" for a in range(AGENTS * RUNS_EACH)]
        for name in names:
            srv.tokens[name] = add_user(srv.store, name, "agent").token
            assert (await srv.post("/api/agent/events", run_started(f"run-{name}"), user=name)).status_code == 200
        looked: list[int] = []  # how many tokens each store look-up asked about (one read each)
        one, many = srv.store.user_by_token_id, srv.store.users_by_token_ids

        def by_one(token_id: str) -> Any:
            looked.append(1)
            return one(token_id)

        def by_many(token_ids: Sequence[str]) -> Any:
            looked.append(len(token_ids))
            return many(token_ids)

        srv.store.user_by_token_id = by_one  # type: ignore[method-assign]
        srv.store.users_by_token_ids = by_many  # type: ignore[method-assign]
        disabled = await srv.post("/api/users/bot0/disable", user="root")
        assert disabled.status_code == 200
        looked.clear()
        beats = [srv.post("/api/agent/heartbeat", {"run_ids": [f"run-{name}"]}, user=name) for name in names]
        answers = await asyncio.gather(*beats)
        # Each request was authenticated against the store as it is (the disabled agent is refused) ...
        assert [a.status_code for a in answers] == [401] + [200] * (len(names) - 1)
        # ... by a few reads for all of them, not one read per request.
        assert sum(looked) == len(names) and len(looked) <= 4, looked


async def test_a_token_disabled_while_a_look_up_is_under_way_is_refused_on_the_request_after(
    backend: Backend, tmp_path: Path
) -> None:
    async with make_server(backend, tmp_path) as srv:
        srv.tokens["bot"] = add_user(srv.store, "bot", "agent").token
        assert (await srv.post("/api/agent/events", run_started("run-bot"), user="bot")).status_code == 200
        tokens = srv.client._transport.app.state.api.auth.tokens  # type: ignore[attr-defined]
        entered, release = threading.Event(), threading.Event()
        many = srv.store.users_by_token_ids

        def held(token_ids: Sequence[str]) -> Any:
            rows = many(token_ids)
            if not entered.is_set():  # the first look-up has read the user (still enabled) and is held here
                entered.set()
                release.wait(20)
            return rows

        srv.store.users_by_token_ids = held  # type: ignore[method-assign]
        beat = {"run_ids": ["run-bot"]}
        first = asyncio.create_task(srv.post("/api/agent/heartbeat", beat, user="bot"))
        await asyncio.to_thread(entered.wait, 20)
        disable_user(srv.store, "bot")  # e.g. by another server or the command line
        second = asyncio.create_task(srv.post("/api/agent/heartbeat", beat, user="bot"))
        await await_until(lambda: tokens.waiting == 1, what="the second request's look-up waiting for the next")
        release.set()
        assert (await first).status_code == 200  # it arrived before the disable
        assert (await second).status_code == 401  # it arrived after: not answered by the look-up under way


async def test_agents_already_verified_get_through_while_new_agents_secrets_are_checked(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with make_server(backend, tmp_path) as srv:
        for i in range(6):
            srv.tokens[f"bot{i}"] = add_user(srv.store, f"bot{i}", "agent").token
        assert (await srv.post("/api/agent/events", run_started("run-bot0"), user="bot0")).status_code == 200
        entered, release = threading.Semaphore(0), threading.Event()
        real = auth_mod.verify_token

        def slow(secret: str, stored: str) -> bool:  # the newcomers' checks take long (a fleet failing over)
            entered.release()
            release.wait(20)
            return real(secret, stored)

        monkeypatch.setattr(auth_mod, "verify_token", slow)
        newcomers = [
            asyncio.create_task(srv.post("/api/agent/heartbeat", {"run_ids": []}, user=f"bot{i}")) for i in range(1, 6)
        ]
        try:
            await asyncio.to_thread(entered.acquire, True, 20)
            await asyncio.to_thread(entered.acquire, True, 20)
            # bot0 was verified before: its beat needs no check, so it is not queued behind theirs.
            known = await asyncio.wait_for(srv.post("/api/agent/heartbeat", {"run_ids": ["run-bot0"]}, user="bot0"), 15)
            assert known.status_code == 200
        finally:
            release.set()
        assert [(await n).status_code for n in newcomers] == [200] * 5


async def test_a_beat_is_stamped_while_every_thread_of_the_agent_routes_is_busy(
    backend: Backend, tmp_path: Path
) -> None:
    """A fleet registering at once fills the agent routes' threads with event writes (taking turns on the audit
    chain); the beats of the agents already registered must not wait behind them, or their runs are judged crashed
    while they are alive."""
    from goldfive_core.server.threads import AGENTS as AGENT_ROUTES

    async with make_server(backend, tmp_path) as srv:
        srv.tokens["bot"] = add_user(srv.store, "bot", "agent").token
        assert (await srv.post("/api/agent/events", run_started("run-busy"), user="bot")).status_code == 200
        threads = srv.client._transport.app.state.api.threads  # type: ignore[attr-defined]
        release = threading.Event()
        busy = [threads.pool(AGENT_ROUTES).submit(release.wait, 60) for _ in range(AGENT_ROUTES.threads)]
        try:
            before = srv.store.run("run-busy")
            beat = await asyncio.wait_for(srv.post("/api/agent/heartbeat", {"run_ids": ["run-busy"]}, user="bot"), 30)
            assert (beat.status_code, beat.json()) == (200, {"runs": 1})
            after = srv.store.run("run-busy")
            assert before is not None and after is not None and after.heartbeat_at_ms >= before.heartbeat_at_ms
            assert srv.store.liveness_of(after).live
        finally:
            release.set()
            for done in busy:
                done.result(10)


async def test_the_ownership_look_ups_of_many_agents_beats_at_once_are_made_together(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents failing over from a killed server beat here before their streams open, each naming a run this server
    has not seen: the runs' owners are looked up together (a read per round), not one read each on the thread every
    new stream's stamp waits behind — and an agent still cannot beat for another's run."""
    from goldfive_core.store import agents as owners_mod

    async with make_server(backend, tmp_path) as srv:
        names = [f"bot{a}" for a in range(AGENTS * RUNS_EACH)]
        for name in names:
            srv.tokens[name] = add_user(srv.store, name, "agent").token
            assert (await srv.post("/api/agent/events", run_started(f"run-{name}"), user=name)).status_code == 200
        looked: list[int] = []  # how many runs each store look-up of owners asked about (one read each)
        for fn in ("owned_runs", "owners_of"):
            real = getattr(owners_mod, fn, None)

            def counted(store: Any, *args: Any, _real: Any = real) -> Any:
                looked.append(len(args[-1]))
                return _real(store, *args)

            monkeypatch.setattr(owners_mod, fn, counted, raising=False)
        beats = [srv.post("/api/agent/heartbeat", {"run_ids": [f"run-{name}"]}, user=name) for name in names]
        beats.append(srv.post("/api/agent/heartbeat", {"run_ids": ["run-bot1"]}, user="bot0"))
        answers = await asyncio.gather(*beats)
        assert [a.status_code for a in answers] == [200] * len(names) + [403]
        assert len(looked) <= 4 and sum(looked) <= len(names) + 1, looked  # a few reads, each run asked once
        assert all(srv.store.liveness_of(srv.store.run(f"run-{name}")).live for name in names)  # type: ignore[arg-type]
