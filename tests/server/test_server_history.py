"""``GET /api/history``: every closed request as a record, newest first by the time it closed, searchable by
status, tool, agent, decider and time, paged, and exported as JSON Lines and CSV with agents' text inert."""

from __future__ import annotations

import csv
import io
import json

from server_support import Server
from store_support import make_event

from goldfive_core.pb.v1 import events_pb2

T0 = 1_700_000_000_000  # make_event stamps event n at T0 + n ms


def _ask(seq: int, target: str, tool: str, agent: str = "treasurer") -> events_pb2.Event:
    return make_event(
        "run-h",
        seq,
        events_pb2.ApprovalRequested(
            target_id=target,
            kind="tool",
            prompt=f"Allow {tool}?",
            metadata={"tool_name": tool, "args_json": '{"n":1}', "agent_name": agent},
        ),
    )


def _seed(srv: Server) -> None:
    srv.store.append_events(
        [
            make_event("run-h", 0, events_pb2.RunStarted(adapter="callable")),
            _ask(1, "pay-1", "transfer_funds"),
            make_event("run-h", 2, events_pb2.ApprovalGranted(target_id="pay-1", decided_by="ana", detail="ok")),
            _ask(3, "pay-2", "transfer_funds", agent="payroll"),
            make_event(
                "run-h",
                4,
                events_pb2.ApprovalRejected(target_id="pay-2", decided_by="bo", detail='=HYPERLINK("http://x","y")'),
            ),
            _ask(5, "rm-1", "delete_rows"),
            make_event("run-h", 6, events_pb2.ApprovalTimedOut(target_id="rm-1", timeout_ms=1000)),
            _ask(7, "pay-3", "transfer_funds"),
            make_event("run-h", 8, events_pb2.ApprovalGranted(target_id="pay-3", decided_by="ana, bo")),
            _ask(9, "open-1", "transfer_funds"),  # still open: never in the history
        ],
        pid=1,
        host="elsewhere",
    )


async def _ids(srv: Server, query: str = "") -> list[str]:
    answer = await srv.get(f"/api/history{query}")
    assert answer.status_code == 200, answer.text
    return [a["target_id"] for a in answer.json()["approvals"]]


async def test_the_history_lists_closed_requests_newest_first_and_searches_them(server: Server) -> None:
    _seed(server)
    assert await _ids(server) == ["pay-3", "rm-1", "pay-2", "pay-1"]  # expired too; the open one never
    assert await _ids(server, "?status=decided") == ["pay-3", "pay-2", "pay-1"]
    assert await _ids(server, "?status=expired") == ["rm-1"]
    assert await _ids(server, "?tool=delete_rows") == ["rm-1"]
    assert await _ids(server, "?agent=payroll") == ["pay-2"]
    assert await _ids(server, "?decider=bo") == ["pay-3", "pay-2"]  # one of a quorum's deciders counts
    assert await _ids(server, "?decider=an") == []  # a name, not a part of one
    assert await _ids(server, f"?since={T0 + 4}&until={T0 + 7}") == ["rm-1", "pay-2"]
    page = (await server.get("/api/history?limit=2&offset=2")).json()
    assert [a["target_id"] for a in page["approvals"]] == ["pay-2", "pay-1"]
    assert page["total"] == 4 and page["offset"] == 2


async def test_an_export_is_the_same_records_and_a_spreadsheet_never_reads_an_agents_text_as_a_formula(
    server: Server,
) -> None:
    _seed(server)
    lines = (await server.get("/api/history?format=jsonl&status=decided")).text.splitlines()
    assert [json.loads(line)["target_id"] for line in lines] == ["pay-3", "pay-2", "pay-1"]
    answer = await server.get("/api/history?format=csv")
    assert answer.headers["content-type"].startswith("text/csv")
    assert 'filename="goldfive-history.csv"' in answer.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    assert [r["target_id"] for r in rows] == ["pay-3", "rm-1", "pay-2", "pay-1"]
    rejected = rows[2]
    assert rejected["decided_by"] == "bo" and rejected["decision"] == "reject" and rejected["agent"] == "payroll"
    assert rejected["reason"] == '\'=HYPERLINK("http://x","y")'  # inert: a leading quote
    assert rejected["closed_at"] == "2023-11-14T22:13:20.004+00:00"


async def test_bad_history_queries_are_refused_with_words(server: Server) -> None:
    for query, words in (
        ("?status=pending", "unknown status 'pending'"),
        ("?format=xml", "unknown format 'xml'"),
        ("?limit=0", "limit"),
        ("?since=-1", "since"),
    ):
        answer = await server.get(f"/api/history{query}")
        assert answer.status_code == 400 and words in answer.json()["error"], (query, answer.text)
    assert (await server.get("/api/history", user="vic")).status_code == 200  # a viewer may read the record


async def test_refused_decisions_are_records_too_with_who_claimed_what_and_why_not(server: Server) -> None:
    _seed(server)
    # The agent refused a decision it could not verify (on its run's own stream)...
    forged = events_pb2.DecisionRefused(
        target_id="pay-2", decision="approve", decided_by="mallory", reason="signature does not match", channel="web"
    )
    server.store.append_events([make_event("run-h", 10, forged)], pid=1, host="elsewhere")
    # ...and the server refused ana's approval of a request past its deadline (audited by decide()).
    late = await server.post("/api/approvals/rm-1/approve", {})
    assert late.status_code == 409, late.text
    answer = await server.get("/api/history?status=refused")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    records = body["approvals"]
    assert [(r["target_id"], r["decided_by"], r["claimed"]) for r in records] == [
        ("rm-1", "ana", "approve"),
        ("pay-2", "mallory", "approve"),
    ]
    assert body["total"] == 2 and all(r["status"] == "refused" and r["decision"] == "" for r in records)
    assert records[0]["tool_name"] == "delete_rows" and "expired" in records[0]["detail"], records[0]
    assert records[1]["detail"] == "signature does not match" and records[1]["agent"] == "payroll"
    assert await _ids(server, "?status=refused&decider=mallory") == ["pay-2"]
    assert await _ids(server, "?status=refused&tool=delete_rows") == ["rm-1"]
    assert await _ids(server, "?status=refused&limit=1&offset=1") == ["pay-2"]
    assert await _ids(server) == ["pay-3", "rm-1", "pay-2", "pay-1"]  # the closed requests, as before
    rows = list(csv.DictReader(io.StringIO((await server.get("/api/history?status=refused&format=csv")).text)))
    assert [(r["status"], r["decision"], r["decided_by"], r["tool"]) for r in rows] == [
        ("refused", "approve", "ana", "delete_rows"),
        ("refused", "approve", "mallory", "transfer_funds"),
    ]
