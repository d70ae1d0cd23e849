"""The audit log proves itself: every shown column is covered, gaps and a missing head are reported.

Property tests: any single-byte edit of any column of any row, any deletion and any reordering of
gf_audit is detected by ``verify_audit`` (and by ``goldfive audit verify``, exit 1).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_support import PYTHON, Backend, make_event

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import SqliteStore, Store

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
    store._exec(store._conn(), sql, params)  # type: ignore[attr-defined]  # the tampering under test


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
