"""Agents' heartbeats are written together: many agents beating at once cost a few store transactions, not one each."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from server_support import make_server
from store_support import Backend, make_event

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store.users import add_user

AGENTS = 4
RUNS_EACH = 10


def _started(run: str) -> dict[str, Any]:
    event = make_event(run, 0, events_pb2.RunStarted(adapter="callable"))
    return {
        "pid": 1,
        "host": "elsewhere",
        "events": [json_format.MessageToDict(event, preserving_proto_field_name=True)],
    }


async def test_the_beats_of_many_agents_at_once_become_a_few_transactions(backend: Backend, tmp_path: Path) -> None:
    async with make_server(backend, tmp_path) as srv:
        runs: dict[str, list[str]] = {}
        for a in range(AGENTS):
            name = f"bot{a}"
            srv.tokens[name] = add_user(srv.store, name, "agent").token
            runs[name] = [f"run-{a}-{i}" for i in range(RUNS_EACH)]
            for run in runs[name]:
                assert (await srv.post("/api/agent/events", _started(run), user=name)).status_code == 200
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
