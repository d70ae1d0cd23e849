"""The audit log proves itself: every shown column is covered, gaps and a missing head are reported.

Property tests: any single-byte edit of any column of any row, any deletion and any reordering of
gf_audit is detected by ``verify_audit`` (and by ``goldfive audit verify``, exit 1).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_support import PYTHON, Backend, make_event

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import SqliteStore, Store, StoreError

COLUMNS = ("run_id", "sequence", "kind", "event_id", "emitted_at_ms", "body", "prev_hash", "hash")


def _fill(store: Store) -> None:
    for run in ("run-a", "run-b"):
        store.append_events(
            [
                make_event(run, 0, events_pb2.RunStarted(adapter="callable")),
                make_event(run, 1, events_pb2.ApprovalRequested(target_id=f"{run}-x", kind="task", prompt="pay?")),
                make_event(run, 2, events_pb2.ApprovalGranted(target_id=f"{run}-x", decided_by="ann")),
                make_event(run, 3, events_pb2.RunCompleted(summary="done")),
            ],
            pid=1,
            host="h",
        )


def _sql(store: Store, sql: str, params: tuple[object, ...] = ()) -> None:
    store.db.execute(store.db.conn(), sql, params)  # type: ignore[attr-defined]  # the tampering under test


def _flip(value: object, position: int) -> object:
    if isinstance(value, int):
        return value + 1 + position % 7
    raw = bytearray(value if isinstance(value, bytes) else str(value).encode())
    raw[position % len(raw)] ^= 1 << (position % 7)
    if isinstance(value, bytes):
        return bytes(raw)
    return raw.decode("utf-8", "replace")


def test_every_shown_column_is_covered(backend: Backend) -> None:
    store = backend.open()
    _fill(store)
    assert store.verify_audit().ok
    row = store.audit_rows()[2]
    for column, forged in (
        ("run_id", "run-b"),
        ("kind", "run_completed"),
        ("emitted_at_ms", row.emitted_at_ms + 1),
        ("sequence", 7),
        ("event_id", "ev-forged"),
    ):
        fresh = backend.open()
        _sql(fresh, f"UPDATE gf_audit SET {column} = ? WHERE seq = ?", (forged, row.seq))
        report = fresh.verify_audit()
        assert not report.ok and any(column in p for p in report.problems), (column, report.problems)
        _sql(fresh, f"UPDATE gf_audit SET {column} = ? WHERE seq = ?", (getattr(row, column), row.seq))
    assert store.verify_audit().ok


def test_a_missing_head_is_reported_as_tampering_not_a_crash(backend: Backend) -> None:
    store = backend.open()
    _fill(store)
    _sql(store, "DELETE FROM gf_chain_head")
    report = store.verify_audit()
    assert not report.ok and "the chain head row is missing (deleted): tampering" in report.problems[-1]
    cli = subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", "audit", "verify"],
        env=backend.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 1 and "TAMPERED" in cli.stdout and "head row is missing" in cli.stdout
    assert "Traceback" not in cli.stderr
    # Writers refuse to extend a chain without a head, with words that say so (never a TypeError).
    with pytest.raises(StoreError, match="head row is missing"):
        store.append_events([make_event("run-h", 0, events_pb2.RunStarted(adapter="callable"))], pid=1, host="h")


def test_a_gap_in_a_runs_sequence_is_reported(backend: Backend) -> None:
    store = backend.open()
    store.append_events(
        [make_event("run-g", i, events_pb2.TaskProgress(task_id="t", message=str(i))) for i in (0, 1, 4)],
        pid=1,
        host="h",
    )  # events #2 and #3 never reached the store (a writer dropped them)
    report = store.verify_audit()
    assert not report.ok and report.problems == ("run run-g: events #2-#3 are missing before row 3 (a gap)",)


def _tampered(path: Path) -> SqliteStore:
    store = SqliteStore(path)
    _fill(store)
    assert store.verify_audit().ok
    return store


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(row=st.integers(0, 7), column=st.sampled_from(COLUMNS), position=st.integers(0, 10_000))
def test_any_single_byte_edit_is_detected(tmp_path_factory: object, row: int, column: str, position: int) -> None:
    store = _tampered(Path(str(tmp_path_factory.mktemp("edit"))) / "g.db")  # type: ignore[attr-defined]
    target = store.audit_rows()[row]
    original = getattr(target, column)
    forged = _flip(original, position)
    if forged == original:
        return
    _sql(store, f"UPDATE gf_audit SET {column} = ? WHERE seq = ?", (forged, target.seq))
    assert not store.verify_audit().ok


@SETTINGS
@given(row=st.integers(0, 7))
def test_any_deletion_is_detected(tmp_path_factory: object, row: int) -> None:
    store = _tampered(Path(str(tmp_path_factory.mktemp("del"))) / "g.db")  # type: ignore[attr-defined]
    _sql(store, "DELETE FROM gf_audit WHERE seq = ?", (store.audit_rows()[row].seq,))
    assert not store.verify_audit().ok


@SETTINGS
@given(pair=st.lists(st.integers(0, 7), min_size=2, max_size=2, unique=True))
def test_any_reordering_is_detected(tmp_path_factory: object, pair: list[int]) -> None:
    store = _tampered(Path(str(tmp_path_factory.mktemp("swap"))) / "g.db")  # type: ignore[attr-defined]
    rows = store.audit_rows()
    first, second = rows[pair[0]].seq, rows[pair[1]].seq
    _sql(store, "UPDATE gf_audit SET seq = -1 WHERE seq = ?", (first,))
    _sql(store, "UPDATE gf_audit SET seq = ? WHERE seq = ?", (first, second))
    _sql(store, "UPDATE gf_audit SET seq = ? WHERE seq = -1", (second,))
    assert not store.verify_audit().ok


@SETTINGS
@given(keep=st.integers(0, 6))
def test_any_truncation_is_detected_against_the_recorded_head(tmp_path_factory: object, keep: int) -> None:
    store = _tampered(Path(str(tmp_path_factory.mktemp("trunc"))) / "g.db")  # type: ignore[attr-defined]
    _sql(store, "DELETE FROM gf_audit WHERE seq > ?", (store.audit_rows()[keep].seq,))
    assert not store.verify_audit().ok


# -- approval records against the chain ----------------------------------------------------------------

APPROVAL_COLUMNS = (
    "run_id",
    "session_id",
    "target_id",
    "kind",
    "prompt",
    "task_id",
    "tool_name",
    "args_json",
    "args_digest",
    "metadata_json",
    "status",
    "requested_at_ms",
    "expires_at_ms",
    "timeout_ms",
    "decided_by",
    "decision",
    "detail",
    "edited_args_json",
    "decided_via",
    "decided_channel",
)
"""Columns ``pending`` / ``show`` print (all of them, id and signature included: test_faults_audit_tables.py)."""


def _approvals(path: Path) -> Store:
    """Three records made the way agents make them: granted with an edit, rejected, pending; one decided offline."""
    from goldfive_core import args_digest, canonical_json

    store = SqliteStore(path)
    for n, run in enumerate(("run-a", "run-b", "run-c", "run-d")):
        args = {"amount": 10 + n}
        request = events_pb2.ApprovalRequested(
            target_id=f"{run}-pay",
            kind="tool",
            prompt=f"Allow send_money({canonical_json(args)})?",
            task_id="t-1",
            metadata={"tool_name": "send_money", "args_json": canonical_json(args), "agent_name": "ops"},
            args_digest=args_digest("send_money", args),
            timeout_ms=60_000,
        )
        request.expires_at.FromMilliseconds(1_700_000_100_000)
        events = [make_event(run, 0, events_pb2.RunStarted(adapter="callable")), make_event(run, 1, request)]
        if run == "run-a":
            events.append(
                make_event(
                    run,
                    2,
                    events_pb2.ApprovalGranted(
                        target_id=f"{run}-pay",
                        decided_by="ann",
                        detail="ok",
                        edited_args_json='{"amount":3}',
                        channel="cli",
                    ),
                )
            )
        if run == "run-b":
            events.append(
                make_event(run, 2, events_pb2.ApprovalRejected(target_id=f"{run}-pay", decided_by="bob", detail="no"))
            )
        store.append_events(events, pid=1, host="h")
    orphan = store.approvals_for("run-d-pay")[0]
    assert store.decide_in_store(orphan.id, approved=True, detail="fine", decided_by="cy", channel="cli")
    report = store.verify_audit()
    assert report.ok, report.problems
    return store


def _raw_approvals(store: Store) -> list[tuple[object, ...]]:
    sql = "SELECT id, " + ", ".join(APPROVAL_COLUMNS) + " FROM gf_approvals ORDER BY id"
    cur = store.db.execute(store.db.conn(), sql)  # type: ignore[attr-defined]
    return [tuple(r) for r in cur.fetchall()]


def test_approval_records_are_checked_against_the_chain(tmp_path: Path) -> None:
    store = _approvals(tmp_path / "g.db")
    granted = store.approvals_for("run-a-pay")[0]
    for column, forged, why in (
        ("decided_by", "mallory", "decided_by differs from its decision"),
        ("prompt", "Allow send_money({})? verified safe", "prompt differs from its request"),
        ("args_json", '{"amount":1}', "args_json differs from its request"),
        ("edited_args_json", '{"amount":3000}', "edited_args_json differs"),
    ):
        original = getattr(granted, column)
        _sql(store, f"UPDATE gf_approvals SET {column} = ? WHERE id = ?", (forged, granted.id))
        report = store.verify_audit()
        assert not report.ok and any(why in p for p in report.problems), (column, report.problems)
        _sql(store, f"UPDATE gf_approvals SET {column} = ? WHERE id = ?", (original, granted.id))
    pending = store.approvals_for("run-c-pay")[0]
    _sql(
        store,
        "UPDATE gf_approvals SET status = 'granted', decision = 'approve', decided_by = 'ann' WHERE id = ?",
        (pending.id,),
    )
    report = store.verify_audit()
    assert "no decision for it is on the audit log" in " ".join(report.problems), report.problems
    cli = subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", "--db", str(tmp_path / "g.db"), "audit", "verify"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 1 and "no decision for it is on the audit log" in cli.stdout, cli.stdout + cli.stderr


@SETTINGS
@given(row=st.integers(0, 3), column=st.sampled_from(APPROVAL_COLUMNS), position=st.integers(0, 10_000))
def test_any_single_byte_edit_of_an_approval_record_is_detected(
    tmp_path_factory: object, row: int, column: str, position: int
) -> None:
    store = _approvals(Path(str(tmp_path_factory.mktemp("appr"))) / "g.db")  # type: ignore[attr-defined]
    record = _raw_approvals(store)[row]
    original = record[1 + APPROVAL_COLUMNS.index(column)]
    if isinstance(original, str) and not original:
        forged: object = "x"  # an empty column gets a value
    else:
        forged = _flip(original, position)
    if forged == original:
        return
    _sql(store, f"UPDATE gf_approvals SET {column} = ? WHERE id = ?", (forged, record[0]))
    report = store.verify_audit()
    assert not report.ok, (column, original, forged)


@SETTINGS
@given(row=st.integers(0, 3))
def test_any_deleted_or_inserted_approval_record_is_detected(tmp_path_factory: object, row: int) -> None:
    store = _approvals(Path(str(tmp_path_factory.mktemp("appr-del"))) / "g.db")  # type: ignore[attr-defined]
    record = _raw_approvals(store)[row]
    _sql(store, "DELETE FROM gf_approvals WHERE id = ?", (record[0],))
    assert "its record is gone" in " ".join(store.verify_audit().problems)
    columns = ", ".join(APPROVAL_COLUMNS)
    marks = ", ".join("?" for _ in APPROVAL_COLUMNS)
    forged = list(record[1:])
    forged[APPROVAL_COLUMNS.index("target_id")] = "forged-call"
    _sql(
        store,
        f"INSERT INTO gf_approvals ({columns}, decided_at_ms) VALUES ({marks}, 0)",
        tuple(forged),
    )
    assert "has no request on the audit log" in " ".join(store.verify_audit().problems)


def test_a_body_edited_to_an_impossible_timestamp_is_reported_not_a_crash(backend: Backend) -> None:
    """A parseable body whose emitted_at is out of protobuf's range (negative nanos) used to raise ValueError."""
    store = backend.open()
    _fill(store)
    row = store.audit_rows(limit=1)[0]
    event = row.event()
    event.emitted_at.nanos = -5  # protobuf keeps it; converting it to milliseconds raises
    _sql(store, "UPDATE gf_audit SET body = ? WHERE seq = ?", (event.SerializeToString(), row.seq))
    report = store.verify_audit()
    assert not report.ok and any("does not match its hash" in p for p in report.problems), report.problems


def test_the_execution_ledger_is_held_to_its_events(backend: Backend) -> None:
    """Every ledger change (claimed, done, settled by a person) is an event; a ledger edit is reported."""
    store = backend.open()
    _fill(store)
    assert store.mark_executing("c-1", run_id="run-a", pid=7, host="h", args_digest="sha256:one")
    store.mark_done("c-1", result_json='{"moved":10}')
    assert store.mark_executing("c-2", run_id="run-a", pid=7, host="h")
    assert store.resolve_execution("c-2", ran=False, by="ann")  # a person: it did not run (the row goes)
    assert store.mark_executing("c-3", run_id="run-b", pid=7, host="h")
    assert store.resolve_execution("c-3", ran=True, by="ann")
    assert store.mark_executing("c-4", run_id="run-b", pid=7, host="h")  # in doubt
    kinds = [r.event().execution_recorded.state for r in store.audit_rows(limit=100) if r.kind == "execution_recorded"]
    assert kinds == ["executing", "done", "executing", "resolved_not_run", "executing", "resolved_ran", "executing"]
    assert store.verify_audit().ok, store.verify_audit().problems
    for sql, params, said in (
        ("UPDATE gf_executions SET state = 'executing' WHERE target_id = ?", ("c-1",), "state"),  # ran -> in doubt
        ("UPDATE gf_executions SET state = 'done' WHERE target_id = ?", ("c-4",), "state"),  # hides a doubt
        ("UPDATE gf_executions SET result_json = '{}' WHERE target_id = ?", ("c-1",), "result_json"),
        ("DELETE FROM gf_executions WHERE target_id = ?", ("c-4",), "gone"),
    ):
        fresh = backend.open()
        before = fresh.execution(str(params[0]))
        _sql(fresh, sql, params)
        report = fresh.verify_audit()
        assert not report.ok and any(said in p for p in report.problems), (sql, report.problems)
        assert before is not None
        _sql(fresh, "DELETE FROM gf_executions WHERE target_id = ?", (before.target_id,))
        _sql(
            fresh,
            "INSERT INTO gf_executions (owner, target_id, run_id, state, started_at_ms, finished_at_ms, result_json, "
            "pid, host, args_digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                before.owner,
                before.target_id,
                before.run_id,
                before.state.value,
                before.started_at_ms,
                before.finished_at_ms,
                before.result_json,
                before.pid,
                before.host,
                before.args_digest,
            ),
        )
        assert fresh.verify_audit().ok
    # A row nobody claimed through the store (inserted), and one settled as not run put back: both reported.
    _sql(
        store,
        "INSERT INTO gf_executions (owner, target_id, run_id, state, started_at_ms, finished_at_ms, result_json, pid, "
        "host, args_digest) VALUES ('', 'c-2', 'run-a', 'done', 5, 6, '{}', 7, 'h', '')",
    )
    problems = store.verify_audit().problems
    assert any("c-2" in p and "settled as not run" in p for p in problems), problems
