"""Run-id squatting: an agent cannot take a run id another agent will use.

A run id ``<agent>:<rest>`` is in that agent's namespace: another agent token naming it (before or after the
run first reaches the server) is refused with 403 on every agent route, so the victim's run starts and runs
as its own and the attacker sees nothing of it. Tried as an attacker, against the real app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from server_support import Server, make_server
from store_support import Backend, make_event

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import ExecutionState
from goldfive_core.store.users import add_user

RUN = "bot:close-2026-12"
"""The run id the victim (agent user ``bot``) chose, known to the attacker before the run starts."""


@pytest.fixture
async def server(backend: Backend, tmp_path: Path) -> AsyncIterator[Server]:
    async with make_server(backend, tmp_path) as srv:
        srv.tokens["bot"] = add_user(srv.store, "bot", "agent").token
        srv.tokens["eve"] = add_user(srv.store, "eve", "agent").token
        yield srv


def _events(run: str, *payloads: Any) -> dict[str, Any]:
    events = [make_event(run, n, p) for n, p in enumerate(payloads)]
    return {
        "pid": 1,
        "host": "h",
        "events": [json_format.MessageToDict(e, preserving_proto_field_name=True) for e in events],
    }


def _claim(run: str) -> dict[str, Any]:
    return {"run_id": run, "pid": 7, "host": "h", "args_digest": "sha256:pay"}


async def _squat(server: Server) -> list[int]:
    """Every way eve could register bot's run id before bot's run reaches the server (the event stream names its
    runs through the same check; a stream that opened would not end, so it is not tried here)."""
    answers = [
        await server.post("/api/agent/events", _events(RUN, events_pb2.RunStarted(adapter="callable")), user="eve"),
        await server.post("/api/agent/ledger/pay-1/executing", _claim(RUN), user="eve"),
        await server.get(f"/api/agent/ledger/pay-1?run={RUN}", user="eve"),
        await server.post("/api/agent/heartbeat", {"run_ids": [RUN]}, user="eve"),
        await server.get(f"/api/agent/runs/{RUN}/decisions", user="eve"),
    ]
    for answer in answers[:1]:
        assert "namespace of agent 'bot'" in answer.json()["error"], answer.text
    return [a.status_code for a in answers]


async def test_an_agent_cannot_take_another_agents_run_id_and_the_victim_runs(server: Server) -> None:
    assert await _squat(server) == [403] * 5
    assert server.store.run(RUN) is None and server.store.execution("pay-1") is None  # nothing of eve's was kept
    # bot's run starts and runs as its own: its request, its claim, its result.
    request = events_pb2.ApprovalRequested(target_id="pay-1", kind="tool", prompt="pay 10?", timeout_ms=60_000)
    started = await server.post(
        "/api/agent/events", _events(RUN, events_pb2.RunStarted(adapter="callable"), request), user="bot"
    )
    assert started.status_code == 200, started.text
    claimed = await server.post("/api/agent/ledger/pay-1/executing", _claim(RUN), user="bot")
    assert claimed.json() == {"claimed": True}
    done = await server.post("/api/agent/ledger/pay-1/done", {"run_id": RUN, "result_json": '{"paid":10}'}, user="bot")
    assert done.status_code == 200, done.text
    row = server.store.execution("pay-1", run_id=RUN)
    assert row is not None and (row.owner, row.state, row.result_json) == ("bot", ExecutionState.DONE, '{"paid":10}')
    # After the run started, eve still sees nothing of it and can write nothing into it.
    assert await _squat(server) == [403] * 5
    rows = server.store.audit_rows(run_id=RUN)
    assert [r.kind for r in rows] == ["run_started", "approval_requested", "execution_recorded", "execution_recorded"]


async def test_an_agent_uses_its_own_namespace_and_ids_without_one_as_before(server: Server) -> None:
    mine = await server.post("/api/agent/events", _events("eve:nightly", events_pb2.RunStarted()), user="eve")
    assert mine.status_code == 200, mine.text
    plain = await server.post("/api/agent/events", _events("run-plain", events_pb2.RunStarted()), user="eve")
    assert plain.status_code == 200, plain.text  # an id without a namespace: first come, first owned
    other = await server.post("/api/agent/ledger/pay-1/executing", _claim("nobody:x"), user="eve")
    assert other.status_code == 403  # a namespace no agent user holds yet is still not eve's
