"""The wire contract: committed gencode is fresh, and Python enums match the proto ones (docs/architecture.md)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from goldfive_core import AckResult, ControlKind, DriftKind, DriftSeverity, TaskStatus
from goldfive_core.pb.v1 import control_pb2, events_pb2, types_pb2

ROOT = Path(__file__).resolve().parents[2]
PB_DIR = ROOT / "goldfive_core" / "pb" / "v1"


@pytest.mark.skipif(
    importlib.util.find_spec("grpc_tools") is None, reason="grpcio-tools (the 'dev' extra) is not installed"
)
def test_committed_gencode_equals_a_fresh_generation(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    fresh = sorted(p.name for p in tmp_path.iterdir() if p.name != "__init__.py")
    committed = sorted(p.name for p in PB_DIR.iterdir() if p.name.endswith(("_pb2.py", "_pb2.pyi")))
    assert fresh == committed
    assert fresh, "the generator wrote nothing"
    stale = [name for name in fresh if (tmp_path / name).read_bytes() != (PB_DIR / name).read_bytes()]
    assert not stale, f"committed gencode differs from a fresh generation: {stale}; run `make proto`"


def test_control_kind_matches_the_proto_enum() -> None:
    proto = {v.name: v.number for v in control_pb2.DESCRIPTOR.enum_types_by_name["ControlKind"].values}
    assert [k.value for k in ControlKind] == [k.name for k in ControlKind]  # values are names
    assert {k.name for k in ControlKind} == set(proto)
    assert proto == {
        "UNSPECIFIED": 0,
        "PAUSE": 1,
        "RESUME": 2,
        "CANCEL": 3,
        "REWIND_TO": 4,
        "STEER": 5,
        "APPROVE": 6,
        "REJECT": 7,
        "STATUS_QUERY": 8,
        "INTERCEPT_TRANSFER": 9,
        "INJECT_MESSAGE": 10,
        "GOLDFIVE_STEER": 11,
        "GOLDFIVE_PAUSE_ESCALATE": 12,
    }
    # Python declaration order follows the wire numbers.
    assert [proto[k.name] for k in ControlKind] == sorted(proto.values())


def test_ack_result_matches_the_proto_enum() -> None:
    proto = {v.name: v.number for v in control_pb2.DESCRIPTOR.enum_types_by_name["AckResult"].values}
    assert proto == {"ACK_RESULT_UNSPECIFIED": 0, "SUCCESS": 1, "FAILURE": 2, "UNSUPPORTED": 3}
    assert {r.value for r in AckResult} == set(proto) - {"ACK_RESULT_UNSPECIFIED"}


def test_drift_enums_match_the_proto_numbers() -> None:
    kinds = {v.name: v.number for v in types_pb2.DESCRIPTOR.enum_types_by_name["DriftKind"].values}
    kinds.pop("DRIFT_KIND_UNSPECIFIED")
    assert {k.name: int(k) for k in DriftKind} == kinds
    assert kinds["HUMAN_INTERVENTION_REQUIRED"] == 37
    severities = {v.name: v.number for v in types_pb2.DESCRIPTOR.enum_types_by_name["DriftSeverity"].values}
    severities.pop("DRIFT_SEVERITY_UNSPECIFIED")
    assert {s.name: int(s) for s in DriftSeverity} == severities == {"INFO": 1, "WARNING": 2, "CRITICAL": 3}


def test_task_status_matches_the_proto_enum() -> None:
    proto = {v.name: v.number for v in types_pb2.DESCRIPTOR.enum_types_by_name["TaskStatus"].values}
    assert {f"TASK_STATUS_{s.name}" for s in TaskStatus} == set(proto) - {"TASK_STATUS_UNSPECIFIED"}


def _fields(message: object) -> dict[str, int]:
    return {f.name: f.number for f in message.DESCRIPTOR.fields}  # type: ignore[attr-defined]


def test_event_field_numbers_are_the_design_ones() -> None:
    event = _fields(events_pb2.Event)
    assert {k: event[k] for k in ("event_id", "run_id", "sequence", "emitted_at", "session_id")} == {
        "event_id": 1,
        "run_id": 2,
        "sequence": 3,
        "emitted_at": 4,
        "session_id": 5,
    }
    assert event["run_started"] == 10
    assert event["drift_detected"] == 20
    assert event["run_completed"] == 21
    assert event["run_aborted"] == 22
    assert event["approval_requested"] == 23
    assert event["approval_granted"] == 24
    assert event["approval_rejected"] == 25
    payload = {f.name for f in events_pb2.Event.DESCRIPTOR.oneofs_by_name["payload"].fields}
    assert {"approval_requested", "approval_granted", "approval_rejected", "drift_detected"} <= payload
    # New kinds of ours start at 26 and nothing sits between 10 and 25 that the contract did not name.
    assert all(n >= 26 or 10 <= n <= 25 for n in (event[name] for name in payload))


def test_approval_payload_field_numbers() -> None:
    requested = _fields(events_pb2.ApprovalRequested)
    assert {k: requested[k] for k in ("target_id", "kind", "prompt", "task_id", "metadata")} == {
        "target_id": 1,
        "kind": 2,
        "prompt": 3,
        "task_id": 4,
        "metadata": 5,
    }
    assert events_pb2.ApprovalRequested.DESCRIPTOR.fields_by_name["metadata"].message_type.GetOptions().map_entry
    for message in (events_pb2.ApprovalGranted, events_pb2.ApprovalRejected):
        fields = _fields(message)
        assert (fields["target_id"], fields["detail"]) == (1, 2)
        assert fields["decided_by"] > 2  # the new field takes a new number


def test_control_event_and_ack_field_numbers() -> None:
    control = _fields(control_pb2.ControlEvent)
    assert {k: control[k] for k in ("id", "issued_at", "target", "kind")} == {
        "id": 1,
        "issued_at": 2,
        "target": 3,
        "kind": 4,
    }
    oneof = {f.name: f.number for f in control_pb2.ControlEvent.DESCRIPTOR.oneofs_by_name["payload"].fields}
    assert oneof == {"steer": 10, "rewind": 11, "approve": 12, "reject": 13, "inject_message": 14}
    for message in (control_pb2.ApprovePayload, control_pb2.RejectPayload):
        fields = _fields(message)
        assert (fields["target_id"], fields["detail"]) == (1, 2)
        assert "decided_by" in fields
    ack = _fields(control_pb2.ControlAck)
    assert {k: ack[k] for k in ("control_id", "result", "detail", "acked_at")} == {
        "control_id": 1,
        "result": 2,
        "detail": 3,
        "acked_at": 4,
    }
    assert control_pb2.ControlAck.DESCRIPTOR.fields_by_name["result"].enum_type.name == "AckResult"
