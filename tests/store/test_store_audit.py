"""The audit chain under concurrent writers from several processes, and against any single-byte tampering."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_support import HERE, PYTHON, Backend, make_event

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import SqliteStore
from goldfive_core.store.audit import verify_chain


def test_three_processes_append_at_once_and_the_chain_holds(backend: Backend) -> None:
    backend.open()  # create the schema first
    env = backend.env()
    env["PYTHONPATH"] = str(HERE) + ":" + env["PYTHONPATH"]
    procs = [
        subprocess.Popen(
            [PYTHON, str(HERE / "writer_proc.py"), f"run-{i}", "20", "10"], env=env, stderr=subprocess.PIPE
        )
        for i in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    store = backend.open()
    report = store.verify_audit()
    assert report.ok and report.rows == 600, report
    for i in range(3):  # each writer's events are all there, in its order
        rows = store.audit_rows(run_id=f"run-{i}", limit=1000)
        assert [r.sequence for r in rows] == list(range(200))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(min_value=1, max_value=12), data=st.data())
def test_any_single_byte_change_is_detected(tmp_path: Path, count: int, data: st.DataObject) -> None:
    store = SqliteStore(tmp_path / f"audit-{count}-{data.draw(st.integers(0, 10**9))}.db")
    store.append_events(
        [make_event("run-h", i, events_pb2.TaskProgress(task_id="t", message=f"step {i}")) for i in range(count)],
        pid=1,
        host="h",
    )
    rows = store.audit_rows()
    head = store.db.execute(store.db.conn(), "SELECT seq, hash FROM gf_chain_head").fetchone()  # type: ignore[attr-defined]
    assert verify_chain(rows, head_seq=head[0], head_hash=head[1]).ok
    index = data.draw(st.integers(0, count - 1))
    body = bytearray(rows[index].body)
    pos = data.draw(st.integers(0, len(body) - 1))
    body[pos] ^= data.draw(st.integers(1, 255))
    forged = list(rows)
    forged[index] = type(rows[index])(
        **{**{f: getattr(rows[index], f) for f in rows[index].__slots__}, "body": bytes(body)}
    )
    report = verify_chain(forged, head_seq=head[0], head_hash=head[1])
    assert not report.ok and report.first_bad_seq == rows[index].seq
