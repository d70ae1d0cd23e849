"""The ``agent`` role: it writes its own runs and reads their control messages, and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from server_support import Server, make_server
from store_support import Backend, make_event

from goldfive_core import ControlKind, ControlMessage
from goldfive_core.control import ControlAck
from goldfive_core.convert import ack_to_proto
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store.agents import AGENT_ENDPOINT_PREFIX
from goldfive_core.store.users import add_user


@pytest.fixture
async def server(backend: Backend, tmp_path: Path) -> AsyncIterator[Server]:
    async with make_server(backend, tmp_path) as srv:
        srv.tokens["bot"] = add_user(srv.store, "bot", "agent").token
        srv.tokens["eve"] = add_user(srv.store, "eve", "agent").token
        yield srv


def _events(*events: events_pb2.Event) -> dict[str, Any]:
    return {
        "pid": 1,
        "host": "elsewhere",
        "events": [json_format.MessageToDict(e, preserving_proto_field_name=True) for e in events],
    }


def _request(run: str, target: str) -> list[events_pb2.Event]:
    return [
        make_event(run, 0, events_pb2.RunStarted(adapter="callable")),
        make_event(run, 1, events_pb2.ApprovalRequested(target_id=target, kind="task", prompt="pay?")),
    ]


async def test_an_agent_token_cannot_approve_and_the_attempt_is_audited(server: Server) -> None:
    assert (await server.post("/api/agent/events", _events(*_request("run-a", "pay-1")), user="bot")).status_code == 200
    refused = await server.post("/api/approvals/pay-1/approve", {}, user="bot")
    assert refused.status_code == 403
    assert "may not decide" in refused.json()["error"]
    assert (await server.post("/api/approvals/pay-1/reject", {"reason": "x"}, user="bot")).status_code == 403
    assert (await server.post("/api/runs/run-a/cancel", {}, user="bot")).status_code == 403
    # Nothing changed: the request is still pending, for a person.
    row = server.store.approvals_for("pay-1")[0]
    assert row.open and not row.decision
    audit = [r.event() for r in server.store.audit_rows(run_id="goldfive-serve")]
    refusals = [e.decision_refused for e in audit if e.WhichOneof("payload") == "decision_refused"]
    assert [(r.decided_by, r.decision, r.channel) for r in refusals] == [
        ("bot", "approve", "agent"),
        ("bot", "reject", "agent"),
        ("bot", "cancel", "agent"),
    ]
    assert "may not decide" in refusals[0].reason and refusals[0].target_id == "pay-1"
    assert server.store.verify_audit().ok


async def test_an_agent_token_reads_no_inbox_and_people_tokens_use_no_agent_route(server: Server) -> None:
    for path in ("/api/approvals", "/api/runs", "/api/events", "/api/audit/events"):
        assert (await server.get(path, user="bot")).status_code == 403, path
    ok = await server.post("/api/agent/events", _events(*_request("run-p", "t")), user="ana")
    assert ok.status_code == 403 and "may not agent" in ok.json()["error"]
    assert server.store.run("run-p") is None
    assert (await server.client.post("/api/agent/events", json=_events(*_request("r", "t")))).status_code == 401


async def test_an_agent_writes_only_its_own_runs(server: Server) -> None:
    assert (await server.post("/api/agent/events", _events(*_request("run-b", "t-1")), user="bot")).status_code == 200
    later = make_event("run-b", 2, events_pb2.TaskStarted(task_id="x"))
    intruder = await server.post("/api/agent/events", _events(later), user="eve")
    assert intruder.status_code == 403 and "another agent" in intruder.json()["error"]
    stream = await server.get("/api/agent/stream?run=run-b&endpoint=e1", user="eve")
    assert stream.status_code == 403
    hb = await server.post("/api/agent/heartbeat", {"run_ids": ["run-b"]}, user="eve")
    assert hb.status_code == 403
    assert [r.sequence for r in server.store.audit_rows(run_id="run-b")] == [0, 1]


async def test_an_agent_cannot_write_a_decision_nobody_made(server: Server) -> None:
    assert (await server.post("/api/agent/events", _events(*_request("run-c", "pay-9")), user="bot")).status_code == 200
    forged = make_event("run-c", 2, events_pb2.ApprovalGranted(target_id="pay-9", decided_by="alice"))
    answer = await server.post("/api/agent/events", _events(forged), user="bot")
    assert answer.status_code == 403
    assert "cannot make them" in answer.json()["error"]
    row = server.store.approvals_for("pay-9")[0]
    assert row.open and row.decided_by == ""
    assert [r.sequence for r in server.store.audit_rows(run_id="run-c")] == [0, 1]


async def test_malformed_agent_requests_get_clear_errors(server: Server) -> None:
    bad = await server.post("/api/agent/events", {"events": [{"run_id": "r", "no_such_field": 1}]}, user="bot")
    assert bad.status_code == 400 and "events[0] is not an Event" in bad.json()["error"]
    assert (await server.post("/api/agent/events", {"events": []}, user="bot")).status_code == 400
    assert (await server.get("/api/agent/stream?endpoint=e", user="bot")).status_code == 400
    assert (await server.get("/api/agent/stream?run=r&endpoint=bad%20name", user="bot")).status_code == 400
    acks = await server.post("/api/agent/acks", {"endpoint": "e", "acks": [{"inbox_id": "x"}]}, user="bot")
    assert acks.status_code == 400


async def test_goldfive_users_add_makes_an_agent_token_that_works_only_on_agent_routes(
    server: Server, backend: Backend
) -> None:
    from server_support import goldfive

    made = goldfive(backend, "users", "add", "worker-7", "--role", "agent")
    assert made.returncode == 0, made.stderr
    assert "role agent" in made.stdout
    token = made.stdout.strip().splitlines()[-1]
    server.tokens["worker-7"] = token
    ok = await server.post("/api/agent/events", _events(*_request("run-w", "t-w")), user="worker-7")
    assert ok.status_code == 200, ok.text
    assert (await server.post("/api/approvals/t-w/approve", {}, user="worker-7")).status_code == 403


async def test_an_agent_cannot_write_a_standing_grant_or_a_vote_nobody_gave(server: Server) -> None:
    assert (await server.post("/api/agent/events", _events(*_request("run-g", "pay-g")), user="bot")).status_code == 200
    forged = make_event(
        "run-g",
        2,
        events_pb2.GrantCreated(
            grant_id="grant-forged",
            rule="payments",
            tool="transfer_funds",
            granted_by="cfo",
            scope="time",
            target_id="pay-g",
            expires_at_ms=2**40,
        ),
    )
    answer = await server.post("/api/agent/events", _events(forged), user="bot")
    assert answer.status_code == 403 and "cannot make them" in answer.json()["error"]
    vote = make_event("run-g", 2, events_pb2.ApprovalVoted(target_id="pay-g", decided_by="cfo", decision="approve"))
    assert (await server.post("/api/agent/events", _events(vote), user="bot")).status_code == 403
    assert (await server.get("/api/grants?all=1", user="ana")).json()["grants"] == []
    assert [r.sequence for r in server.store.audit_rows(run_id="run-g")] == [0, 1]


_NAMES = {"preserving_proto_field_name": True}


async def test_an_agent_cannot_ack_a_message_another_agents_stream_holds(server: Server) -> None:
    """eve answers a control message claimed by bot's stream (a forged "done" for bot's run): it is ignored, the
    message stays bot's to answer, and bot's own ack is the one the sender gets."""

    assert (await server.post("/api/agent/events", _events(*_request("run-v", "pay-v")), user="bot")).status_code == 200
    msg = ControlMessage(ControlKind.CANCEL, {})
    ident = server.store.post_control(msg, run_id="run-v")
    assert server.store.claim_controls([ident], endpoint=f"{AGENT_ENDPOINT_PREFIX}bot:e1") == [ident]

    def acks(ack: ControlAck, endpoint: str) -> dict[str, Any]:
        return {
            "endpoint": endpoint,
            "acks": [
                {
                    "inbox_id": ident,
                    "ack": json_format.MessageToDict(ack_to_proto(ack), preserving_proto_field_name=True),
                }
            ],
        }

    forged = await server.post(
        "/api/agent/acks", acks(ControlAck.success(msg.id, "cancelled (forged)"), "e1"), user="eve"
    )
    assert forged.status_code == 200 and forged.json()["acked"] == [] and forged.json()["ignored"] == [ident]
    assert server.store.get_ack(msg.id) is None  # nobody answered the sender yet
    assert [r.id for r in server.store.claimed_controls(endpoint=f"{AGENT_ENDPOINT_PREFIX}bot:e1")] == [ident]

    real = await server.post("/api/agent/acks", acks(ControlAck.failure(msg.id, "not running"), "e1"), user="bot")
    assert real.status_code == 200 and real.json()["acked"] == [ident]
    got = server.store.get_ack(msg.id)
    assert got is not None and not got.ok and got.detail == "not running"
