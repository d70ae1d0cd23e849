"""The HTTP API of goldfive serve over a real store: who may do what, what a decision does, bad input."""

from __future__ import annotations

import asyncio

import pytest
from server_support import Server, start_task_agent, start_tool_agent
from store_support import await_until, make_event

from goldfive_core._util import args_digest
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.server import MAX_BODY_BYTES
from goldfive_core.signing import check_decision
from goldfive_core.store import StoreChannel
from goldfive_core.store.base import HOST

ROUTES = [
    ("GET", "/api/me"),
    ("GET", "/api/approvals"),
    ("GET", "/api/approvals/t1"),
    ("POST", "/api/approvals/t1/approve"),
    ("POST", "/api/approvals/t1/reject"),
    ("GET", "/api/runs"),
    ("GET", "/api/runs/r1/events"),
    ("POST", "/api/runs/r1/pause"),
    ("POST", "/api/runs/r1/resume"),
    ("POST", "/api/runs/r1/cancel"),
    ("POST", "/api/runs/r1/steer"),
    ("GET", "/api/audit/verify"),
    ("GET", "/api/events"),
    ("POST", "/api/logout"),
    ("GET", "/api/users"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_nothing_is_served_without_a_login(sqlite_server: Server, method: str, path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer gf5_0000000000000000_" + "x" * 43}, {"Authorization": "Basic abc"}):
        resp = await sqlite_server.client.request(method, path, headers=headers)
        assert resp.status_code == 401, (headers, resp.text)
        assert "error" in resp.json()
    resp = await sqlite_server.client.request(method, path, headers={"Cookie": "goldfive_session=forged.abc"})
    assert resp.status_code == 401


async def test_approve_over_http_resumes_the_agent_and_records_who_and_how(server: Server) -> None:
    agent = start_task_agent(server.backend, "pay-1")
    try:
        card = await server.pending("pay-1")
        assert card["state"] == "pending" and card["prompt"] == "pay for pay-1?" and card["expires_at_ms"] > 0
        resp = await server.post("/api/approvals/pay-1/approve", {"reason": "looks right"})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert (body["result"], body["detail"], body["decided_by"]) == ("SUCCESS", "approved 'pay-1'", "ana")
        result = await agent.result()
        assert result.output == {"decision": "approve", "detail": "looks right", "decided_by": "ana"}
        (granted,) = agent.sink.of("approval_granted")
        assert (granted.approval_granted.decided_by, granted.approval_granted.channel) == ("ana", "api")
        detail = (await server.get("/api/approvals/pay-1")).json()
        assert (detail["state"], detail["decided_by"], detail["decided_channel"], detail["signed"]) == (
            "decided",
            "ana",
            "api",
            True,
        )
        assert "approval_requested" in [e["kind"] for e in detail["events"]]
        # A second decision, from anyone: says who decided, changes nothing.
        again = await server.post("/api/approvals/pay-1/reject", {"reason": "no"}, user="root")
        assert again.status_code == 409
        assert again.json()["error"] == "already decided: 'pay-1' was approved by ana; this decision was not applied"
        assert again.json()["approval"]["decided_at_ms"] > 0
    finally:
        await agent.close()


async def test_decided_by_is_the_login_never_a_client_field(sqlite_server: Server) -> None:
    agent = start_task_agent(sqlite_server.backend, "pay-2")
    try:
        await sqlite_server.pending("pay-2")
        resp = await sqlite_server.post("/api/approvals/pay-2/approve", {"decided_by": "cfo@example.com"})
        assert resp.status_code == 400 and "decided_by" in resp.json()["error"]
        assert (await sqlite_server.get("/api/approvals/pay-2")).json()["state"] == "pending"
        resp = await sqlite_server.post("/api/approvals/pay-2/reject", {"reason": "wrong payee"}, user="root")
        assert resp.status_code == 200
        assert (await agent.result()).output["decided_by"] == "root"
    finally:
        await agent.close()


async def test_a_viewer_cannot_decide_or_control_and_nothing_changes(sqlite_server: Server) -> None:
    agent = start_task_agent(sqlite_server.backend, "pay-3")
    try:
        card = await sqlite_server.pending("pay-3")
        for path, body in (
            ("/api/approvals/pay-3/approve", {}),
            ("/api/approvals/pay-3/reject", {"reason": "x"}),
            (f"/api/runs/{card['run_id']}/cancel", {}),
            (f"/api/runs/{card['run_id']}/steer", {"text": "x"}),
        ):
            resp = await sqlite_server.post(path, body, user="vic")
            assert resp.status_code == 403, resp.text
            assert "viewer" in resp.json()["error"]
        assert (await sqlite_server.get("/api/approvals/pay-3", user="vic")).json()["state"] == "pending"
        assert sqlite_server.store.pending_controls() == []
    finally:
        await agent.close()


async def test_edited_args_and_digest_bind_the_decision_to_the_call(server: Server) -> None:
    agent = start_tool_agent(server.backend, "call-1", {"amount": 10_000, "to": "ACME"})
    try:
        card = await server.pending("call-1")
        assert card["tool_name"] == "transfer_funds" and card["args"] == {"amount": 10_000, "to": "ACME"}
        stale = await server.post(
            "/api/approvals/call-1/approve", {"args_digest": "sha256:" + "0" * 64, "edited_args": {"amount": 1}}
        )
        assert stale.status_code == 409 and "does not match" in stale.json()["error"]
        assert (await server.get("/api/approvals/call-1")).json()["state"] == "pending"
        assert agent.ran == []
        ok = await server.post(
            "/api/approvals/call-1/approve",
            {"args_digest": card["args_digest"], "edited_args": {"amount": 120, "to": "ACME"}},
        )
        assert ok.status_code == 200, ok.text
        result = (await agent.result()).output
        assert result.status == "ran" and agent.ran == [{"amount": 120, "to": "ACME"}]
        after = (await server.get("/api/approvals/call-1")).json()
        assert after["edited_args"] == {"amount": 120, "to": "ACME"}
    finally:
        await agent.close()


async def test_bad_input_gets_a_4xx_that_says_what_is_wrong_and_changes_nothing(sqlite_server: Server) -> None:
    srv = sqlite_server
    agent = start_task_agent(srv.backend, "pay-4")
    try:
        await srv.pending("pay-4")
        head = srv.store.audit_head()
        cases = [
            ("/api/approvals/nope/approve", b"{}", 404, "unknown approval id 'nope'"),
            ("/api/approvals/pay-4/approve", b"{not json", 400, "not valid JSON"),
            ("/api/approvals/pay-4/approve", b"[1]", 400, "must be a JSON object"),
            ("/api/approvals/pay-4/approve", b'{"edited_args": [1]}', 400, "'edited_args' must be a JSON object"),
            ("/api/approvals/pay-4/reject", b"{}", 400, "missing 'reason'"),
            ("/api/approvals/pay-4/reject", b'{"reason": "  "}', 400, "must not be empty"),
            ("/api/approvals/pay-4/reject", b'{"reason": 5}', 400, "'reason' must be a string"),
            ("/api/approvals/pay-4/approve", b'{"x": 1}', 400, "unknown field(s) 'x'"),
            ("/api/approvals/pay-4/approve", b" " * (MAX_BODY_BYTES + 1), 413, "limit"),
            ("/api/runs/nope/steer", b'{"text": "x"}', 404, "unknown run 'nope'"),
        ]
        for path, raw, status, words in cases:
            resp = await srv.client.post(path, content=raw, headers=srv.auth("ana"))
            assert resp.status_code == status, (path, raw[:30], resp.text)
            assert words in resp.json()["error"], resp.text
        for path, status, words in (
            ("/api/approvals?status=weird", 400, "unknown status 'weird'"),
            ("/api/approvals?limit=0", 400, "between 1 and 500"),
            ("/api/approvals?offset=x", 400, "must be an integer"),
            ("/api/approvals/nope", 404, "unknown approval id"),
            ("/api/runs/nope/events", 404, "unknown run"),
            ("/api/nowhere", 404, "no such route"),
        ):
            resp = await srv.get(path)
            assert resp.status_code == status and words in resp.json()["error"], resp.text
        assert srv.store.audit_head() == head
        assert (await srv.get("/api/approvals/pay-4")).json()["state"] == "pending"
    finally:
        await agent.close()


async def test_approvals_filter_sort_by_expiry_and_page_with_a_total(sqlite_server: Server) -> None:
    srv = sqlite_server
    agents = [
        start_tool_agent(srv.backend, f"c{i}", {"n": i}, tool="refund" if i % 2 else "transfer_funds") for i in range(5)
    ]
    try:
        for i in range(5):
            await srv.pending(f"c{i}")
        listed = (await srv.get("/api/approvals")).json()
        assert listed["total"] == 5
        expiries = [a["expires_at_ms"] for a in listed["approvals"]]
        assert expiries == sorted(expiries)
        page = (await srv.get("/api/approvals?limit=2&offset=1")).json()
        assert page["total"] == 5 and [a["target_id"] for a in page["approvals"]] == [
            a["target_id"] for a in listed["approvals"][1:3]
        ]
        refunds = (await srv.get("/api/approvals?tool=refund")).json()
        assert refunds["total"] == 2 and {a["target_id"] for a in refunds["approvals"]} == {"c1", "c3"}
        run = listed["approvals"][0]["run_id"]
        assert (await srv.get(f"/api/approvals?run={run}")).json()["total"] == 1
        assert (await srv.get("/api/approvals?agent=nobody")).json()["total"] == 0
        await srv.post("/api/approvals/c0/reject", {"reason": "no"})
        assert (await srv.get("/api/approvals?status=decided")).json()["total"] == 1
        assert (await srv.get("/api/approvals")).json()["total"] == 4
    finally:
        for agent in agents:
            await agent.close()


async def test_a_request_whose_process_is_gone_is_orphaned_and_a_decision_is_recorded_signed(server: Server) -> None:
    dead_pid = 2**22 + 12345  # above pid_max on Linux: no such process on this host
    req = events_pb2.ApprovalRequested(
        target_id="call-9",
        kind="tool",
        prompt="send?",
        metadata={"tool_name": "transfer_funds", "args_json": '{"amount":5}', "agent_name": "treasurer"},
        args_digest=args_digest("transfer_funds", {"amount": 5}),
    )
    server.store.append_events(
        [make_event("run-dead", 0, events_pb2.RunStarted(adapter="adk")), make_event("run-dead", 1, req)],
        pid=dead_pid,
        host=HOST,
    )
    card = await server.pending("call-9", state="orphaned")
    assert "is gone" in card["orphaned_reason"] and card["agent"] == "treasurer"
    assert (await server.get("/api/approvals?status=orphaned&agent=treasurer")).json()["total"] == 1
    assert (await server.get("/api/approvals")).json()["total"] == 0  # not pending: nobody is waiting live
    resp = await server.post("/api/approvals/call-9/approve", {"edited_args": {"amount": 4}})
    assert resp.status_code == 200 and resp.json()["verdict"] == "recorded", resp.text
    stored = server.store.find_decision("call-9")
    assert stored is not None and stored.decided_by == "ana" and stored.decided_channel == "api"
    fields = dict(
        target_id="call-9",
        run_id="run-dead",
        approved=True,
        edited_args={"amount": 4},
        args_digest=req.args_digest,
        decided_by="ana",
        detail="",
    )
    assert check_decision(server.signer.trust_key, signature=stored.signature, **fields) is None
    assert "does not match" in str(
        check_decision(server.signer.trust_key, signature=stored.signature, **{**fields, "edited_args": {"amount": 9}})
    )


async def test_runs_events_and_run_controls(sqlite_server: Server) -> None:
    srv = sqlite_server
    agent = start_task_agent(srv.backend, "pay-5")
    try:
        card = await srv.pending("pay-5")
        run_id = card["run_id"]
        runs = (await srv.get("/api/runs")).json()
        assert runs["total"] == 1 and runs["runs"][0]["live"] is True
        events = (await srv.get(f"/api/runs/{run_id}/events")).json()
        assert events["events"][0]["kind"] == "run_started"
        assert events["events"][0]["event"]["run_id"] == run_id
        later = (await srv.get(f"/api/runs/{run_id}/events?after={events['next_after']}")).json()
        assert later["events"] == []
        resp = await srv.post(f"/api/runs/{run_id}/steer", {"text": "use the cheaper vendor"})
        assert resp.status_code == 200 and resp.json()["result"] == "SUCCESS", resp.text
        resp = await srv.post(f"/api/runs/{run_id}/cancel", {"reason": "enough"})
        assert resp.status_code == 200 and resp.json()["result"] == "SUCCESS", resp.text
        result = await agent.result()
        assert result.status == "CANCELLED" and agent.sink.of("approval_cancelled")
        gone = await srv.post(f"/api/runs/{run_id}/pause", {})
        assert gone.status_code == 409 and "not running" in gone.json()["error"]
        verify = (await srv.get("/api/audit/verify")).json()
        assert verify["ok"] is True and verify["rows"] > 0
    finally:
        await agent.close()


async def test_a_trusting_agent_applies_the_servers_decision_and_refuses_an_unsigned_one(server: Server) -> None:
    trust = server.signer.trust_key
    agent = start_task_agent(server.backend, "pay-6", trust=trust)
    try:
        card = await server.pending("pay-6")
        # A database writer without the key (the agent's own host, a stray script, the local CLI) tries.
        forger = StoreChannel(server.backend.open())
        from goldfive_core import ControlKind, ControlMessage

        ack = await forger.send(
            ControlMessage(ControlKind.APPROVE, {"target_id": "pay-6", "run_id": card["run_id"], "decided_by": "cfo"})
        )
        assert not ack.ok and "not signed" in ack.detail and "stays pending" in ack.detail
        # A signature copied from another decision does not fit this one.
        other = server.signer.sign(
            __import__("goldfive_core.signing", fromlist=["SignedDecision"]).SignedDecision(
                target_id="pay-6",
                run_id=card["run_id"],
                decision="approve",
                edited_args_json="",
                args_digest="",
                decided_by="ana",
                detail="",
                channel="api",
            )
        )
        ack = await forger.send(
            ControlMessage(
                ControlKind.APPROVE,
                {"target_id": "pay-6", "run_id": card["run_id"], "decided_by": "cfo", "signature": other},
            )
        )
        assert not ack.ok and "does not match" in ack.detail
        refused = agent.sink.of("decision_refused")
        assert [r.decision_refused.decided_by for r in refused] == ["cfo", "cfo"]
        assert (await server.get("/api/approvals/pay-6")).json()["state"] == "pending"
        # The refusals reach the audit log through the agent's event sink, after its FAILURE acks: wait, bounded.
        await await_until(
            lambda: [r.kind for r in server.store.audit_rows(run_id=card["run_id"])].count("decision_refused") == 2,
            what="both refusals on the audit log",
        )
        # The server's own decision is signed and applied.
        resp = await server.post("/api/approvals/pay-6/approve", {"reason": "ok"})
        assert resp.status_code == 200, resp.text
        assert (await agent.result()).output["decision"] == "approve"
    finally:
        await agent.close()


async def test_a_forged_decision_recorded_in_the_store_is_not_replayed_by_a_trusting_agent(
    sqlite_server: Server,
) -> None:
    srv = sqlite_server
    trust = srv.signer.trust_key
    first = start_tool_agent(srv.backend, "call-7", {"amount": 10_000}, trust=trust)
    await srv.pending("call-7")
    first.task.cancel()
    await first.close()
    # Forge: write the decision straight into the store, as a database writer without the key can.
    row = next(r for r in srv.store.approvals_for("call-7"))
    srv.store.db.conn().execute(  # type: ignore[attr-defined]
        "UPDATE gf_approvals SET status='granted', decision='approve', decided_by='cfo', decided_via='store' "
        "WHERE id = ?",
        (row.id,),
    )
    replay = start_tool_agent(srv.backend, "call-7", {"amount": 10_000}, trust=trust)
    try:
        await asyncio.sleep(0)
        refused = await _wait_for_kind(replay, "decision_refused")
        assert refused.decision_refused.decided_by == "cfo" and "not signed" in refused.decision_refused.reason
        assert replay.ran == []
        card = await srv.pending("call-7")  # asked again: a person must decide
        resp = await srv.post("/api/approvals/call-7/approve", {"args_digest": card["args_digest"]})
        assert resp.status_code == 200, resp.text
        assert (await replay.result()).output.status == "ran" and replay.ran == [{"amount": 10_000}]
    finally:
        await replay.close()


async def _wait_for_kind(agent: object, kind: str) -> events_pb2.Event:
    sink = agent.sink  # type: ignore[attr-defined]
    for _ in range(400):
        found = sink.of(kind)
        if found:
            return found[0]  # type: ignore[no-any-return]
        await asyncio.sleep(0.025)
    raise AssertionError(f"no {kind} event")


async def test_audit_verify_over_http_names_a_tampered_row(sqlite_server: Server) -> None:
    srv = sqlite_server
    agent = start_task_agent(srv.backend, "pay-8")
    try:
        await srv.pending("pay-8")
        srv.store.db.conn().execute("UPDATE gf_audit SET body = X'0a00' WHERE seq = 1")  # type: ignore[attr-defined]
        report = (await srv.get("/api/audit/verify", user="vic")).json()
        assert report["ok"] is False and report["first_bad_seq"] == 1
    finally:
        await agent.close()


async def test_a_live_trusting_agent_refuses_a_decision_forged_into_its_approval_row(sqlite_server: Server) -> None:
    srv = sqlite_server
    agent = start_task_agent(srv.backend, "pay-9", trust=srv.signer.trust_key)
    try:
        card = await srv.pending("pay-9")
        srv.store.db.conn().execute(  # type: ignore[attr-defined]
            "UPDATE gf_approvals SET status='granted', decision='approve', decided_by='cfo', decided_via='store', "
            "decided_at_ms=1 WHERE id = ?",
            (card["id"],),
        )
        refused = await _wait_for_kind(agent, "decision_refused")  # found by the channel's sweep
        assert refused.decision_refused.decided_by == "cfo" and "not signed" in refused.decision_refused.reason
        assert not agent.task.done() and not agent.sink.of("approval_granted")
    finally:
        await agent.close()


def test_an_approval_whose_arguments_nest_too_deep_is_still_listed() -> None:
    """Hostile arguments (JSON nested past Python's recursion limit) never break the inbox's list or show."""
    from goldfive_core.approvals import ApprovalStatus
    from goldfive_core.store.base import ApprovalRow
    from goldfive_core.store.views import approval_json

    deep = "[" * 100_000 + "]" * 100_000
    row = ApprovalRow(
        id=1,
        run_id="r",
        session_id="",
        target_id="t",
        kind="tool",
        prompt="p",
        task_id="",
        tool_name="x",
        args_json=deep,
        args_digest="",
        metadata={},
        status=ApprovalStatus.PENDING,
        requested_at_ms=1,
        expires_at_ms=0,
        timeout_ms=0,
        decided_at_ms=0,
        decided_by="",
        decision="",
        detail="",
        edited_args_json=deep,
        decided_via="",
    )
    shown = approval_json(row, liveness="live")
    assert shown["args"] is None and shown["args_json"] == deep and shown["edited_args"] is None


async def test_each_status_filter_lists_the_records_in_that_state_and_an_unknown_one_names_them(server: Server) -> None:
    dead_pid = 2**22 + 12346  # above pid_max on Linux: no such process on this host
    asks = [
        events_pb2.ApprovalRequested(target_id=target, kind="task", prompt=f"{target}?", task_id=target)
        for target in ("call-a", "call-b")
    ]
    events = [make_event("run-gone", 0, events_pb2.RunStarted(adapter="adk"))]
    events += [make_event("run-gone", i + 1, ask) for i, ask in enumerate(asks)]
    server.store.append_events(events, pid=dead_pid, host=HOST)
    await server.pending("call-b", state="orphaned")
    assert (await server.post("/api/approvals/call-b/reject", {"reason": "no"})).status_code == 200
    expected = {
        "pending": [],
        "decided": [("call-b", "decided")],
        "expired": [],
        "cancelled": [],
        "orphaned": [("call-a", "orphaned")],
        "open": [("call-a", "orphaned")],
    }
    for status, items in expected.items():
        listed = (await server.get(f"/api/approvals?status={status}")).json()["approvals"]
        assert [(a["target_id"], a["state"]) for a in listed] == items, status
    refused = await server.get("/api/approvals?status=granted")
    assert refused.status_code == 400
    assert refused.json()["error"] == "unknown status 'granted': use one of " + ", ".join(expected)
