"""Over HTTP: a claim the APPROVE's ack won, then CANCEL before the body starts, is given back ("released, not run").

Route level against the real app: only the run's own agent may give its claim back (another agent's run: 403), and
only a claim whose body never finished. Then a real HttpChannel agent against a ``goldfive serve`` subprocess,
cancelled the moment the approval's ack claimed its call: the server's ledger has no "executing" left, the audit
log says ``released_not_run``, and a new run of the call runs it once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fold_support import install
from google.protobuf import json_format
from http_support import AGENT_WAIT_MS, site
from server_support import Server, make_server
from store_support import Backend, await_until, make_event

from goldfive_core import AgentTools, ControlKind, RunStatus, Task, wrap
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import ExecutionState
from goldfive_core.store.execution import GuardedResult, run_approved
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.users import add_user


@pytest.fixture
async def server(backend: Backend, tmp_path: Path) -> AsyncIterator[Server]:
    async with make_server(backend, tmp_path) as srv:
        srv.tokens["bot"] = add_user(srv.store, "bot", "agent").token
        srv.tokens["eve"] = add_user(srv.store, "eve", "agent").token
        yield srv


async def _start_run(server: Server, run: str, user: str) -> None:
    event = make_event(run, 0, events_pb2.RunStarted(adapter="callable"))
    body = {"pid": 1, "host": "h", "events": [json_format.MessageToDict(event, preserving_proto_field_name=True)]}
    assert (await server.post("/api/agent/events", body, user=user)).status_code == 200


async def test_only_the_runs_own_agent_gives_back_its_unstarted_claim(server: Server) -> None:
    await _start_run(server, "run-bot", "bot")
    claim = {"run_id": "run-bot", "pid": 7, "host": "h", "args_digest": "sha256:pay"}
    assert (await server.post("/api/agent/ledger/call-1/executing", claim, user="bot")).json() == {"claimed": True}
    give_back = {"run_id": "run-bot", "args_digest": "sha256:pay"}
    stolen = await server.post("/api/agent/ledger/call-1/released", give_back, user="eve")
    assert stolen.status_code == 403 and "another agent" in stolen.json()["error"]
    row = server.store.execution("call-1", run_id="run-bot")
    assert row is not None and row.state is ExecutionState.EXECUTING  # bot's claim stands
    bad = await server.post("/api/agent/ledger/call-1/released", {"run_id": "run-bot", "args_digest": 5}, user="bot")
    assert bad.status_code == 400
    mine = await server.post("/api/agent/ledger/call-1/released", give_back, user="bot")
    assert (mine.status_code, mine.json()) == (200, {"released": True})
    assert server.store.execution("call-1", run_id="run-bot") is None
    again = await server.post("/api/agent/ledger/call-1/released", give_back, user="bot")
    assert again.json() == {"released": False}  # nothing left to give back
    assert server.store.verify_audit().ok, server.store.verify_audit().problems


async def test_a_cancel_after_the_acks_claim_releases_it_over_http(backend: Backend, tmp_path: Path) -> None:
    with site(backend, tmp_path) as s:
        ran: list[int] = []

        async def one(then: ControlKind | None) -> tuple[Any, str, int]:
            channel = HttpChannel(s.url, token=s.tokens["bot"])
            claims = install(channel, then) if then is not None else None
            started: asyncio.Queue[str] = asyncio.Queue()

            async def agent(task: Task, tools: AgentTools) -> GuardedResult:
                started.put_nowait(tools.session.run_id)

                async def body(args: Any) -> dict[str, Any]:
                    ran.append(args["amount"])
                    return {"paid": args["amount"]}

                return await run_approved(
                    tools.session,
                    channel.store,
                    call_id="pay-1",
                    tool_name="pay",
                    args={"amount": 10},
                    body=body,
                    timeout_ms=AGENT_WAIT_MS,
                    ledger=channel.ledger,
                )

            run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("go"))
            try:
                run_id = await asyncio.wait_for(started.get(), 30)
                if then is not None:
                    await s.pending("pay-1")
                    assert (await s.decide("pay-1")).status_code == 200
                result = await asyncio.wait_for(run, 60)
                store = backend.open()
                if then is not None:
                    await await_until(lambda: _states(store, run_id)[-1:] == ["released_not_run"], what="release")
                return result, run_id, claims.folded if claims is not None else 0
            finally:
                if not run.done():
                    run.cancel()
                await channel.aclose()

        result, run_id, folded = await one(ControlKind.CANCEL)
        store = backend.open()
        assert folded == 1 and result.status is RunStatus.CANCELLED and ran == []
        assert store.execution("pay-1", run_id=run_id) is None  # nothing left "executing" (in doubt)
        assert _states(store, run_id) == ["executing", "released_not_run"]
        # A new run of bot reusing the call id: ana's approval of the call that never ran is applied, once.
        again, _, _ = await one(None)
        assert (again.output.status, ran) == ("ran", [10]), again.output.detail
        assert store.verify_audit().ok, store.verify_audit().problems


def _states(store: Any, run_id: str) -> list[str]:
    rows = store.audit_rows(run_id=run_id)
    return [r.event().execution_recorded.state for r in rows if r.kind == "execution_recorded"]
