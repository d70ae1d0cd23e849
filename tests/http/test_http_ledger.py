"""Agents own their calls: over HTTP each agent user has its own execution ledger; a finished body's "done" is kept.

An agent token reaches the ledger only through a run it owns; a call id it claims or finishes is its
own, never another agent's (whose run it names: 403), and two agents reusing a call id each run their
body once; a run id ``<agent>:<rest>`` is that agent's alone, so no agent takes a run id another will use
(run-id squatting, tried as an attacker). Route level against the real app (``make_server``), then two real
HttpChannel agents against a ``goldfive serve`` subprocess.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from http_support import AGENT_WAIT_MS, site
from server_support import Server, make_server
from store_support import PYTHON, Backend, await_until, make_event

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import ExecutionState
from goldfive_core.store.execution import GuardedResult, run_approved
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.keeper import keeper_for
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
    answer = await server.post("/api/agent/events", body, user=user)
    assert answer.status_code == 200, answer.text


def _claim(run: str) -> dict[str, Any]:
    return {"run_id": run, "pid": 7, "host": "h", "args_digest": "sha256:pay"}


async def test_an_agent_cannot_claim_or_finish_another_agents_call(server: Server) -> None:
    await _start_run(server, "run-bot", "bot")
    # eve, with a made-up run id (it becomes eve's run), claims bot's call id and "finishes" it with a forged result.
    forged = await server.post("/api/agent/ledger/call-1/executing", _claim("run-made-up"), user="eve")
    assert forged.status_code == 200 and forged.json() == {"claimed": True}  # eve's own call-1, nobody else's
    fin = await server.post(
        "/api/agent/ledger/call-1/done", {"run_id": "run-made-up", "result_json": '{"forged":1}'}, user="eve"
    )
    assert fin.status_code == 200
    # bot's ledger does not have it: bot's call-1 was not skipped, it is claimed and runs once.
    look = await server.get("/api/agent/ledger/call-1?run=run-bot", user="bot")
    assert look.status_code == 200 and look.json()["execution"] is None
    mine = await server.post("/api/agent/ledger/call-1/executing", _claim("run-bot"), user="bot")
    assert mine.json() == {"claimed": True}
    # eve naming bot's real run is refused, for a look, a claim and a finish.
    assert (await server.get("/api/agent/ledger/call-1?run=run-bot", user="eve")).status_code == 403
    stolen = await server.post("/api/agent/ledger/call-1/executing", _claim("run-bot"), user="eve")
    assert stolen.status_code == 403 and "another agent" in stolen.json()["error"]
    bad = await server.post("/api/agent/ledger/call-1/done", {"run_id": "run-bot", "result_json": "{}"}, user="eve")
    assert bad.status_code == 403
    ok = await server.post("/api/agent/ledger/call-1/done", {"run_id": "run-bot", "result_json": '{"paid":10}'}, "bot")
    assert ok.status_code == 200
    # What a person sees for bot's call is bot's result; the audit log holds both agents' ledgers.
    row = server.store.execution("call-1", run_id="run-bot")
    assert row is not None and row.state is ExecutionState.DONE and row.result_json == '{"paid":10}'
    assert row.owner == "bot"
    theirs = server.store.execution("call-1", run_id="run-made-up")
    assert theirs is not None and theirs.owner == "eve" and theirs.result_json == '{"forged":1}'
    assert server.store.verify_audit().ok, server.store.verify_audit().problems


async def test_a_finish_must_name_the_run_that_claimed_the_call(server: Server) -> None:
    await _start_run(server, "run-one", "bot")
    await _start_run(server, "run-two", "bot")
    assert (await server.post("/api/agent/ledger/call-2/executing", _claim("run-one"), user="bot")).json()["claimed"]
    other = await server.post("/api/agent/ledger/call-2/done", {"run_id": "run-two", "result_json": "{}"}, user="bot")
    assert other.status_code == 404 and "started no execution" in other.json()["error"]
    nameless = await server.post("/api/agent/ledger/call-2/done", {"result_json": "{}"}, user="bot")
    assert nameless.status_code == 400 and "'run_id'" in nameless.json()["error"]
    unnamed = await server.get("/api/agent/ledger/call-2", user="bot")
    assert unnamed.status_code == 400 and "run" in unnamed.json()["error"]
    row = server.store.execution("call-2", run_id="run-one")
    assert row is not None and row.state is ExecutionState.EXECUTING  # still bot's claim, untouched


async def test_a_store_process_run_cannot_be_named_by_an_agent(server: Server) -> None:
    server.store.append_events(
        [make_event("run-direct", 0, events_pb2.RunStarted(adapter="callable"))], pid=1, host="h"
    )
    refused = await server.post("/api/agent/ledger/call-3/executing", _claim("run-direct"), user="eve")
    assert refused.status_code == 403 and "directly" in refused.json()["error"]
    assert server.store.execution("call-3") is None


# -- run-id squatting: a run id '<agent>:<rest>' is that agent's alone ---------------------------------------------
RUN = "bot:close-2026-12"
"""The run id the victim (agent user ``bot``) chose, known to the attacker before the run starts."""


def _events(run: str, *payloads: Any) -> dict[str, Any]:
    events = [make_event(run, n, p) for n, p in enumerate(payloads)]
    return {
        "pid": 1,
        "host": "h",
        "events": [json_format.MessageToDict(e, preserving_proto_field_name=True) for e in events],
    }


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


# -- two real agents over HTTP reusing a call id -------------------------------------------------------------------
async def _approve(url: str, token: str, target: str, run_id: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        headers = {"Authorization": f"Bearer {token}"}
        for _ in range(300):
            items = (await client.get("/api/approvals", headers=headers)).json()["approvals"]
            if any(a["target_id"] == target and a["run_id"] == run_id for a in items):
                break
            await asyncio.sleep(0.1)
        answer = await client.post(f"/api/approvals/{target}/approve?run={run_id}", headers=headers, json={})
        assert answer.status_code == 200, answer.text


async def test_two_agents_reusing_a_call_id_each_run_their_body_once(backend: Backend, tmp_path: Path) -> None:
    with site(backend, tmp_path) as s:
        s.tokens["eve"] = add_user(backend.open(), "eve", "agent").token
        ran: list[str] = []

        async def one(user: str) -> GuardedResult:
            channel = HttpChannel(s.url, token=s.tokens[user])
            started: asyncio.Queue[str] = asyncio.Queue()

            async def agent(task: Task, tools: AgentTools) -> GuardedResult:
                started.put_nowait(tools.session.run_id)

                async def body(args: Any) -> dict[str, Any]:
                    ran.append(user)
                    return {"paid_by": user}

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
                await _approve(s.url, s.tokens["ana"], "pay-1", await asyncio.wait_for(started.get(), 30))
                return (await asyncio.wait_for(run, 60)).output  # type: ignore[no-any-return]
            finally:
                if not run.done():
                    run.cancel()
                await channel.aclose()

        first = await one("bot")
        second = await one("eve")  # the same call id and arguments, another agent: its own call
        assert (first.status, first.result) == ("ran", {"paid_by": "bot"})
        assert (second.status, second.result) == ("ran", {"paid_by": "eve"}), second.detail
        assert ran == ["bot", "eve"]
        store = backend.open()
        owners = sorted(r.owner for r in store.executions() if r.target_id == "pay-1")
        assert owners == ["bot", "eve"]
        assert store.verify_audit().ok, store.verify_audit().problems


# -- a finished body's end outlasts the server's absence --------------------------------------------------------------
def _did_not_run(backend: Backend, target: str) -> subprocess.CompletedProcess[str]:
    """``goldfive resolve TARGET --did-not-run`` against the store."""
    argv = [PYTHON, "-m", "goldfive_core.cli", "resolve", target, "--did-not-run", "--by", "ann"]
    return subprocess.run(argv, env=backend.env(), capture_output=True, text=True, timeout=60)


def _ledger_and_closing(store: Any, run_id: str) -> list[str]:
    wanted = ("execution_recorded", "run_completed", "run_aborted")
    rows = [r for r in store.audit_rows(limit=100_000) if r.run_id == run_id and r.kind in wanted]
    return [r.event().execution_recorded.state if r.kind == "execution_recorded" else r.kind for r in rows]


async def test_an_http_agent_keeps_done_while_its_server_is_down(backend: Backend, tmp_path: Path) -> None:
    with site(backend, tmp_path) as s:
        serve = s.servers[0]
        ran: list[dict[str, Any]] = []

        def start(channel: HttpChannel, *, stop_server: bool) -> asyncio.Task[Any]:
            async def body(args: Any) -> dict[str, Any]:
                ran.append(dict(args))
                if stop_server:
                    await asyncio.to_thread(serve.stop)  # the server goes away while the body runs
                return {"sent": args["amount"]}

            async def agent(task: Task, tools: AgentTools) -> Any:
                return await run_approved(
                    tools.session,
                    channel.store,
                    call_id="call-k",
                    tool_name="send_money",
                    args={"amount": 5},
                    body=body,
                    timeout_ms=AGENT_WAIT_MS,
                    ledger=channel.ledger,
                )

            return asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("go"))

        first = HttpChannel(s.url, token=s.tokens["bot"], unreachable_after_s=1.0)
        run = start(first, stop_server=True)
        await s.pending("call-k")
        assert (await s.decide("call-k")).status_code == 200
        result = await asyncio.wait_for(run, 60)
        assert result.output.status == "ran" and ran == [{"amount": 5}]
        closing = asyncio.create_task(first.aclose())
        await await_until(lambda: keeper_for(first.store).pending(result.run_id), what="'done' kept")
        assert not closing.done()
        serve.start()  # back on the same port
        await asyncio.wait_for(closing, 60)
        store = backend.open()
        row = store.execution("call-k", run_id=result.run_id)
        assert row is not None and row.state is ExecutionState.DONE and row.result_json == '{"sent":5}'
        assert _ledger_and_closing(store, result.run_id) == ["executing", "done", "run_completed"]
        refused = await asyncio.to_thread(_did_not_run, backend, "call-k")
        assert refused.returncode == 1 and "not in doubt (execution: done)" in refused.stderr, refused
        again = HttpChannel(s.url, token=s.tokens["bot"])
        try:
            replay = await asyncio.wait_for(start(again, stop_server=False), 60)
        finally:
            await again.aclose()
        assert replay.output.status == "already_done" and ran == [{"amount": 5}]


async def test_a_claim_riding_on_an_ack_must_be_well_formed_and_name_the_agent_s_own_run(server: Server) -> None:
    await _start_run(server, "run-bot", "bot")
    ack = {"control_id": "ctl-1", "result": "SUCCESS", "detail": "approved"}

    async def acks(claim: Any, user: str = "eve") -> Any:
        item = {"inbox_id": 999_999, "ack": ack, "claim": claim}
        return await server.post("/api/agent/acks", {"endpoint": "e1", "acks": [item]}, user=user)

    stolen = await acks({"call_id": "call-1", **_claim("run-bot")})
    assert stolen.status_code == 403 and "not one of this agent's" in stolen.json()["error"], stolen.text
    for bad in ("call-1", {"call_id": "", **_claim("run-bot")}, {"call_id": "call-1", **_claim("run-bot"), "pid": -1}):
        refused = await acks(bad, user="bot")
        assert refused.status_code == 400 and "claim" in refused.json()["error"], refused.text
    assert server.store.execution("call-1", run_id="run-bot") is None  # nothing was claimed
    # bot's own run: the ack was not bot's to give (never streamed to it), but the claim stands as /executing's would.
    mine = await acks({"call_id": "call-1", **_claim("run-bot")}, user="bot")
    assert mine.status_code == 200 and mine.json()["claims"] == {"999999": True}, mine.text
    assert server.store.execution("call-1", run_id="run-bot") is not None
