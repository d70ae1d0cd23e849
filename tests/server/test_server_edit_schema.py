"""Edit & approve: the server checks edited arguments against the tool's schema the request carries.

A bad edit is refused with 422 and the wrong field named before anything reaches the agent or the store;
a good one is approved and the body runs with it.
"""

from __future__ import annotations

from typing import Any

from server_support import Server, start_task_agent, start_tool_agent
from store_support import make_event

from goldfive_core._util import args_digest, canonical_json
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store.base import HOST

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "amount": {"type": "integer", "minimum": 1},
        "to": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["amount", "to"],
    "additionalProperties": False,
}


async def test_a_bad_edit_is_refused_with_422_naming_the_field_and_changes_nothing(server: Server) -> None:
    agent = start_tool_agent(server.backend, "call-s1", {"amount": 10_000, "to": "ACME"}, args_schema=SCHEMA)
    try:
        card = await server.pending("call-s1")
        assert card["metadata"]["args_schema"] == canonical_json(SCHEMA)  # carried from the agent
        head = server.store.audit_head()
        for edit, field, words in (
            ({"amount": "120", "to": "ACME"}, "amount", "'amount' must be an integer, got string '120'"),
            ({"amount": 120, "to": "ACME", "memo": "x"}, "memo", "'memo' is not a parameter of this tool"),
            ({"amount": 120}, "to", "'to' is required and missing"),
            ({"amount": 0, "to": "ACME"}, "amount", "'amount' must be at least 1"),
            ({"amount": 5, "to": "ACME", "tags": ["a", 7]}, "tags[1]", "'tags[1]' must be a string"),
        ):
            resp = await server.post("/api/approvals/call-s1/approve", {"edited_args": edit})
            assert resp.status_code == 422, resp.text
            body = resp.json()
            assert body["field"] == field and words in body["error"], body
            assert body["result"] == "FAILURE" and body["verdict"] == "invalid"
            assert "transfer_funds's parameters" in body["error"]
        assert server.store.audit_head() == head  # nothing was sent, nothing recorded
        assert server.store.pending_controls() == []
        assert (await server.get("/api/approvals/call-s1")).json()["state"] == "pending"
        assert agent.ran == []
        ok = await server.post(
            "/api/approvals/call-s1/approve",
            {"args_digest": card["args_digest"], "edited_args": {"amount": 120, "to": "ACME Ltd"}},
        )
        assert ok.status_code == 200, ok.text
        assert (await agent.result()).output.status == "ran"
        assert agent.ran == [{"amount": 120, "to": "ACME Ltd"}]
    finally:
        await agent.close()


async def test_a_task_approval_takes_no_edits_and_says_so_at_once(sqlite_server: Server) -> None:
    agent = start_task_agent(sqlite_server.backend, "pay-s2")
    try:
        await sqlite_server.pending("pay-s2")
        resp = await sqlite_server.post("/api/approvals/pay-s2/approve", {"edited_args": {"amount": 1}})
        assert resp.status_code == 422 and "takes no edited arguments" in resp.json()["error"], resp.text
        assert resp.json()["field"] == ""
        assert (await sqlite_server.get("/api/approvals/pay-s2")).json()["state"] == "pending"
    finally:
        await agent.close()


async def test_without_a_schema_any_object_is_passed_on_to_the_agent(sqlite_server: Server) -> None:
    agent = start_tool_agent(sqlite_server.backend, "call-s3", {"amount": 10, "to": "ACME"})
    try:
        card = await sqlite_server.pending("call-s3")
        assert "args_schema" not in card["metadata"]
        resp = await sqlite_server.post("/api/approvals/call-s3/approve", {"edited_args": {"anything": "goes"}})
        assert resp.status_code == 200, resp.text
        assert agent.ran == [] or agent.ran == [{"anything": "goes"}]
        await agent.result()
        assert agent.ran == [{"anything": "goes"}]
    finally:
        await agent.close()


async def test_a_recorded_decision_for_a_stopped_agent_is_checked_too(sqlite_server: Server) -> None:
    srv = sqlite_server
    dead_pid = 2**22 + 4242  # above pid_max: no such process
    req = events_pb2.ApprovalRequested(
        target_id="call-s4",
        kind="tool",
        metadata={
            "tool_name": "transfer_funds",
            "args_json": '{"amount":5,"to":"a"}',
            "args_schema": canonical_json(SCHEMA),
        },
        args_digest=args_digest("transfer_funds", {"amount": 5, "to": "a"}),
    )
    srv.store.append_events(
        [make_event("run-s4", 0, events_pb2.RunStarted(adapter="callable")), make_event("run-s4", 1, req)],
        pid=dead_pid,
        host=HOST,
    )
    await srv.pending("call-s4", state="orphaned")
    resp = await srv.post("/api/approvals/call-s4/approve", {"edited_args": {"amount": 5, "to": 3}})
    assert resp.status_code == 422 and resp.json()["field"] == "to", resp.text
    assert srv.store.find_decision("call-s4") is None
    ok = await srv.post("/api/approvals/call-s4/approve", {"edited_args": {"amount": 4, "to": "a"}})
    assert ok.status_code == 200 and ok.json()["verdict"] == "recorded", ok.text
