"""The store interface on both backends: schema, approvals from events, the audit chain, inbox, ledger."""

from __future__ import annotations

import itertools
import sqlite3

import pytest
from store_support import Backend, make_event

from goldfive_core.approvals import ApprovalStatus
from goldfive_core.control import AckResult, ControlAck, ControlKind, ControlMessage
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import (
    ExecutionState,
    SchemaVersionError,
    SqliteStore,
    StoreUnavailableError,
)
from goldfive_core.store._schema import MIGRATIONS, SCHEMA_VERSION


def _request(run: str, seq: int, target: str, **kw: object) -> events_pb2.Event:
    return make_event(
        run,
        seq,
        events_pb2.ApprovalRequested(
            target_id=target,
            kind="tool",
            prompt="delete the prod db?",
            metadata={"tool_name": "drop_db", "args_json": '{"name":"prod"}'},
            args_digest="sha256:abc",
            timeout_ms=60_000,
            **kw,  # type: ignore[arg-type]
        ),
    )


def _started(run: str) -> events_pb2.Event:
    return make_event(run, 0, events_pb2.RunStarted(adapter="callable", root_task_id="root"))


def test_fresh_store_has_current_schema(backend: Backend) -> None:
    store = backend.open()
    assert store.schema_version() == SCHEMA_VERSION
    assert backend.open().schema_version() == SCHEMA_VERSION  # reopening migrates nothing


def test_v1_database_is_migrated_and_keeps_its_rows(tmp_path: object, backend: Backend) -> None:
    store = backend.open()
    store.append_events([_started("run-a"), _request("run-a", 1, "call-1")], pid=1, host="h")
    # Rebuild the database as version 1 wrote it: drop what versions 2 to 15 added, set the version back.
    conn = store.db.conn()  # type: ignore[attr-defined]
    conn.execute("DROP TABLE gf_executions")
    for statement in (
        "DROP TABLE gf_users",
        "DROP TABLE gf_web_sessions",
        "DROP INDEX gf_approvals_expiry",
        "ALTER TABLE gf_approvals DROP COLUMN decided_channel",
        "ALTER TABLE gf_approvals DROP COLUMN decision_sig",
        "DROP TABLE gf_outbox",
        "DROP TABLE gf_notify_cursor",
        "DROP TABLE gf_run_owners",
        "DROP INDEX gf_inbox_run",
        "DROP TABLE gf_grants",
        "ALTER TABLE gf_approvals DROP COLUMN quorum_progress",
        "DROP TABLE gf_detached",
        "ALTER TABLE gf_approvals DROP COLUMN original_args_json",
        "ALTER TABLE gf_approvals DROP COLUMN original_args_digest",
        "ALTER TABLE gf_approvals DROP COLUMN request_id",
    ):
        conn.execute(statement)
    conn.execute("UPDATE gf_meta SET value = '1' WHERE key = 'schema_version'")
    assert store.schema_version() == 1

    upgraded = backend.open()
    assert upgraded.schema_version() == SCHEMA_VERSION == MIGRATIONS[-1][0]
    assert [r.target_id for r in upgraded.approvals()] == ["call-1"]
    assert upgraded.mark_executing("call-1", run_id="run-a", pid=1, host="h") is True  # v2 table exists
    assert upgraded.users() == [] and upgraded.approvals()[0].decision_sig == ""  # v3 tables and columns
    assert upgraded.approvals()[0].quorum_progress == ""  # v7
    assert upgraded.detached_runs() == []  # v8 table
    assert (upgraded.approvals()[0].original_args_json, upgraded.approvals()[0].original_args_digest) == ("", "")  # v11
    assert upgraded.approvals()[0].request_id == ""  # v14: a record from before requests had ids has none
    assert upgraded.execution("call-1", run_id="run-a").owner == ""  # type: ignore[union-attr]  # v15: by owner
    assert upgraded.verify_audit().ok


def test_newer_schema_is_refused(backend: Backend) -> None:
    store = backend.open()
    store.db.conn().execute("UPDATE gf_meta SET value = '99' WHERE key = 'schema_version'")  # type: ignore[attr-defined]
    with pytest.raises(SchemaVersionError, match="schema version 99, newer than this goldfive"):
        backend.open()


def test_approval_records_follow_the_events(backend: Backend) -> None:
    store = backend.open()
    store.append_events(
        [
            _started("run-a"),
            _request("run-a", 1, "call-1"),
            _request("run-a", 2, "call-2"),
            _request("run-a", 3, "call-3"),
            make_event("run-a", 4, events_pb2.ApprovalGranted(target_id="call-1", decided_by="ann", detail="ok")),
            make_event("run-a", 5, events_pb2.ApprovalTimedOut(target_id="call-2", still_open=True, detail="late")),
            make_event("run-a", 6, events_pb2.ApprovalCancelled(target_id="call-3", reason="the run was cancelled")),
        ],
        pid=42,
        host="h",
    )
    rows = {r.target_id: r for r in store.approvals(open_only=False)}
    assert rows["call-1"].status == "granted"
    assert (rows["call-1"].decided_by, rows["call-1"].decision, rows["call-1"].decided_via) == ("ann", "approve", "run")
    assert rows["call-1"].tool_name == "drop_db"
    assert rows["call-1"].args_json == '{"name":"prod"}'
    assert rows["call-1"].args_digest == "sha256:abc"
    assert rows["call-2"].status == "timed_out" and rows["call-2"].open
    assert rows["call-3"].status == "cancelled" and rows["call-3"].detail == "the run was cancelled"
    assert [r.target_id for r in store.approvals()] == ["call-2"]
    run = store.run("run-a")
    assert run is not None and (run.pid, run.host, run.status) == (42, "h", "running")
    store.append_events([make_event("run-a", 7, events_pb2.RunCompleted())], pid=42, host="h")
    assert store.run("run-a").status == "finished"  # type: ignore[union-attr]


def test_audit_chain_verifies_and_detects_tampering(backend: Backend) -> None:
    store = backend.open()
    store.append_events([_started("run-a"), *[_request("run-a", i, f"c{i}") for i in range(1, 6)]], pid=1, host="h")
    report = store.verify_audit()
    assert report.ok and report.rows == 6
    rows = store.audit_rows()
    assert rows[0].prev_hash == "0" * 64
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(rows))
    assert rows[2].event().approval_requested.target_id == "c2"

    # Edit one event's content in place.
    forged = rows[3].event()
    forged.approval_requested.prompt = "harmless"
    conn = store.db.conn()  # type: ignore[attr-defined]
    store.db.execute(conn, "UPDATE gf_audit SET body = ? WHERE seq = ?", (forged.SerializeToString(), rows[3].seq))  # type: ignore[attr-defined]
    bad = store.verify_audit()
    assert not bad.ok and bad.first_bad_seq == rows[3].seq
    assert f"row {rows[3].seq} (approval_requested of run run-a): content does not match its hash" in bad.problems


def test_audit_detects_deleted_and_truncated_rows(backend: Backend) -> None:
    store = backend.open()
    store.append_events([_started("run-a"), *[_request("run-a", i, f"c{i}") for i in range(1, 4)]], pid=1, host="h")
    rows = store.audit_rows()
    conn = store.db.conn()  # type: ignore[attr-defined]
    store.db.execute(conn, "DELETE FROM gf_audit WHERE seq = ?", (rows[-1].seq,))  # type: ignore[attr-defined]
    report = store.verify_audit()
    assert not report.ok and "rows are missing" in report.problems[0]
    store.db.execute(conn, "DELETE FROM gf_audit WHERE seq = ?", (rows[1].seq,))  # type: ignore[attr-defined]
    report = store.verify_audit()
    assert not report.ok and report.first_bad_seq == rows[2].seq
    assert "does not match row before" in report.problems[0]


def test_decision_in_store_is_exactly_once_and_audited(backend: Backend) -> None:
    store, other = backend.open(), backend.open()
    store.append_events([_started("run-a"), _request("run-a", 1, "call-1")], pid=1, host="h")
    row = store.approvals()[0]
    assert store.decide_in_store(row.id, approved=True, detail="go", decided_by="ann") is True
    assert other.decide_in_store(row.id, approved=False, detail="no", decided_by="bob") is False
    decided = store.approvals_for("call-1")[0]
    assert (decided.status, decided.decided_by, decided.decided_via) == ("granted", "ann", "store")
    last = store.audit_rows()[-1].event()
    assert last.approval_granted.decided_by == "ann" and last.sequence == 2 and last.run_id == "run-a"
    assert store.verify_audit().ok

    found = store.find_decision("call-1")
    assert found is not None and found.approved and found.decided_by == "ann" and found.args_digest == "sha256:abc"
    assert store.mark_executing("call-1", run_id="run-b", pid=2, host="h") is True
    assert other.mark_executing("call-1", run_id="run-c", pid=3, host="h") is False  # single use
    assert store.find_decision("call-1") is None
    assert store.execution("call-1").state is ExecutionState.EXECUTING  # type: ignore[union-attr]
    store.mark_done("call-1", result_json='{"ok":true}')
    done = other.execution("call-1")
    assert done is not None and done.state is ExecutionState.DONE and done.result_json == '{"ok":true}'


def test_inbox_claims_once_and_acks(backend: Backend) -> None:
    store, agent_a, agent_b = backend.open(), backend.open(), backend.open()
    msg = ControlMessage(ControlKind.APPROVE, {"target_id": "call-1", "decided_by": "ann"})
    store.post_control(msg, run_id="run-a")
    pending = agent_a.pending_controls()
    assert [(r.control_id, r.run_id, r.kind) for r in pending] == [(msg.id, "run-a", "APPROVE")]
    assert pending[0].message().payload == {"target_id": "call-1", "decided_by": "ann"}
    assert agent_a.claim_controls([pending[0].id], endpoint="a") == [pending[0].id]
    assert agent_b.claim_controls([pending[0].id], endpoint="b") == []
    assert store.get_ack(msg.id) is None
    agent_a.ack_controls([(pending[0].id, ControlAck.success(msg.id, "approved 'call-1'"))])
    ack = store.wait_ack(msg.id, 1.0)
    assert ack is not None and ack.result is AckResult.SUCCESS and ack.detail == "approved 'call-1'"
    assert store.withdraw_control(msg.id) is False

    late = ControlMessage(ControlKind.PAUSE, {})
    store.post_control(late)
    assert store.withdraw_control(late.id) is True
    assert agent_a.pending_controls() == []
    assert store.wait_ack(late.id, 0.01) is None


def test_non_json_payload_is_refused(backend: Backend) -> None:
    from goldfive_core.store import StoreError

    with pytest.raises(StoreError, match="payload is not JSON"):
        backend.open().post_control(ControlMessage(ControlKind.STEER, {"text": object()}))


def test_missing_sqlite_file_is_unavailable_when_not_creating(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "nope.db"
    with pytest.raises(StoreUnavailableError, match="no goldfive store at"):
        SqliteStore(path, create=False)
    assert not path.exists()


def test_sqlite_file_that_is_not_a_database(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(Exception, match="not a database") as info:
        SqliteStore(path)
    assert not isinstance(info.value, sqlite3.Error)  # translated at the boundary


def test_an_applied_decision_is_recorded_with_its_ack(backend: Backend) -> None:
    # If the agent dies right after acking, before its sink writes ApprovalGranted, the record still says so.
    store = backend.open()
    store.append_events(
        [_started("run-a"), _request("run-a", 1, "call-1"), _request("run-a", 2, "call-2")], pid=1, host="h"
    )
    ok = ControlMessage(ControlKind.APPROVE, {"target_id": "call-1", "decided_by": "ann", "edited_args": {"n": 1}})
    refused = ControlMessage(ControlKind.REJECT, {"target_id": "call-2", "decided_by": "bob", "detail": "no"})
    ids = [store.post_control(ok, run_id="run-a"), store.post_control(refused, run_id="run-a")]
    store.claim_controls(ids, endpoint="a")
    store.ack_controls(
        [(ids[0], ControlAck.success(ok.id, "approved 'call-1'")), (ids[1], ControlAck.failure(refused.id, "digest"))]
    )
    rows = {r.target_id: r for r in store.approvals(open_only=False)}
    assert (rows["call-1"].status, rows["call-1"].decided_by, rows["call-1"].edited_args_json) == (
        "granted",
        "ann",
        '{"n":1}',
    )
    assert rows["call-2"].status == "pending"  # a refused decision changes nothing
    found = store.find_decision("call-1")
    assert found is not None and found.approved and found.edited_args == {"n": 1}


def test_sqlite_files_are_created_private(tmp_path: object, caplog: pytest.LogCaptureFixture) -> None:
    import os
    import stat
    from pathlib import Path

    home = Path(str(tmp_path))
    old_umask = os.umask(0o022)  # the usual umask would make a plain create 0644
    try:
        store = SqliteStore(home / "private.db")
        store.append_events([_started("run-p")], pid=1, host="h")
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in home.iterdir() if p.name.startswith("private.db")}
        assert set(modes) == {"private.db", "private.db-wal", "private.db-shm"}
        assert set(modes.values()) == {0o600}, modes
        assert not caplog.records
        # An existing file keeps its mode; a world-readable one is reported.
        shared = home / "shared.db"
        SqliteStore(shared).close()
        shared.chmod(0o644)
        SqliteStore(shared)
        assert stat.S_IMODE(shared.stat().st_mode) == 0o644
        assert any("readable by every local user (mode 644)" in r.getMessage() for r in caplog.records)
    finally:
        os.umask(old_umask)


@pytest.mark.parametrize("kind", [ControlKind.REJECT, ControlKind.APPROVE])
def test_an_applied_decision_is_recorded_as_the_decision_it_was(backend: Backend, kind: ControlKind) -> None:
    """The ack of an applied APPROVE/REJECT writes the record before the run's event does: it must say the same."""
    store = backend.open()
    store.append_events([_started("run-a"), _request("run-a", 1, "call-1")], pid=1, host="h")
    msg = ControlMessage(kind, {"target_id": "call-1", "run_id": "run-a", "detail": "checked", "decided_by": "ana"})
    ident = store.post_control(msg, run_id="run-a")
    assert store.claim_controls([ident], endpoint="agent-1") == [ident]
    store.ack_controls([(ident, ControlAck(msg.id, AckResult.SUCCESS, "applied"))])
    (record,) = store.approvals_for("call-1")
    approved = kind is ControlKind.APPROVE
    assert record.status is (ApprovalStatus.GRANTED if approved else ApprovalStatus.REJECTED)
    assert (record.decided_by, record.detail) == ("ana", "checked")
    decision = store.find_decision("call-1")
    assert decision is not None and decision.approved is approved  # what a replay of the call would apply
