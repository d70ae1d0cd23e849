"""ControlMessage / ControlAck survive the trip through their protobuf messages."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goldfive_core import AckResult, ControlAck, ControlKind, ControlMessage
from goldfive_core.convert import ack_from_proto, ack_to_proto, message_from_proto, message_to_proto
from goldfive_core.pb.v1 import control_pb2

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MIN_MS, MAX_MS = -62_135_596_800_000, 253_402_300_799_999  # the Timestamp range

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
nonempty = st.text(min_size=1, max_size=40)

TYPED = {
    ControlKind.APPROVE: ("target_id", "detail", "decided_by", "args_digest", "edited_args"),
    ControlKind.REJECT: ("target_id", "detail", "decided_by", "args_digest"),
    ControlKind.STEER: ("text",),
    ControlKind.GOLDFIVE_STEER: ("text",),
    ControlKind.INJECT_MESSAGE: ("text",),
    ControlKind.REWIND_TO: ("to",),
}


@st.composite
def messages(draw: st.DrawFn) -> ControlMessage:
    kind = draw(st.sampled_from(list(ControlKind)))
    typed = TYPED.get(kind, ())
    payload: dict[str, Any] = draw(
        st.dictionaries(
            st.text(max_size=12).filter(lambda k: k not in typed and k != "target"), json_values, max_size=4
        )
    )
    if draw(st.booleans()):
        payload["target"] = draw(nonempty)
    for key in typed:
        if key == "edited_args":
            if draw(st.booleans()):
                payload[key] = draw(st.dictionaries(st.text(max_size=8), json_values, max_size=3))
        elif key in ("text", "to"):
            payload[key] = draw(st.text(max_size=40))  # always present on the way back, even when empty
        elif draw(st.booleans()):
            payload[key] = draw(nonempty)  # empty typed strings are the proto default and are omitted
    return ControlMessage(kind, payload, draw(st.text(max_size=30)), draw(st.integers(MIN_MS, MAX_MS)))


@SETTINGS
@given(messages())
def test_control_message_round_trips(msg: ControlMessage) -> None:
    wire = message_to_proto(msg)
    again = control_pb2.ControlEvent.FromString(wire.SerializeToString())
    back = message_from_proto(again)
    assert back == msg
    assert control_pb2.ControlKind.Name(wire.kind) == msg.kind


acks = st.builds(
    ControlAck,
    control_id=st.text(max_size=30),
    result=st.sampled_from(list(AckResult)),
    detail=st.text(max_size=200),
    acked_at_ms=st.integers(MIN_MS, MAX_MS),
    data=st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=4),
)


@SETTINGS
@given(acks)
def test_control_ack_round_trips(ack: ControlAck) -> None:
    wire = ack_to_proto(ack)
    back = ack_from_proto(control_pb2.ControlAck.FromString(wire.SerializeToString()))
    assert back == ack
    assert control_pb2.AckResult.Name(wire.result) == ack.result.value


def test_approve_travels_in_the_typed_payload() -> None:
    msg = ControlMessage(
        ControlKind.APPROVE,
        {"target_id": "t-1", "detail": "ok", "decided_by": "ana", "edited_args": {"b": 1, "a": 2}, "run_id": "r"},
    )
    wire = message_to_proto(msg)
    assert wire.WhichOneof("payload") == "approve"
    assert (wire.approve.target_id, wire.approve.detail, wire.approve.decided_by) == ("t-1", "ok", "ana")
    assert wire.approve.edited_args_json == '{"a":2,"b":1}'
    assert wire.params_json == '{"run_id":"r"}'
    reject = message_to_proto(ControlMessage(ControlKind.REJECT, {"target_id": "t-1", "decided_by": "bo"}))
    assert (reject.WhichOneof("payload"), reject.reject.decided_by) == ("reject", "bo")


@pytest.mark.parametrize(
    "msg",
    [
        ControlMessage("NOT_A_KIND", {}),
        ControlMessage(ControlKind.PAUSE, {"reason": object()}),
        ControlMessage(ControlKind.APPROVE, {"target_id": 7}),
        ControlMessage(ControlKind.PAUSE, {"target": ["run"]}),
        ControlMessage(ControlKind.PAUSE, {1: "non-string key"}),
    ],
)
def test_payloads_the_wire_cannot_carry_raise_value_error(msg: ControlMessage) -> None:
    with pytest.raises(ValueError):
        message_to_proto(msg)


@pytest.mark.parametrize("params", ["[1, 2]", "not json", '"text"'])
def test_malformed_wire_params_raise_value_error(params: str) -> None:
    wire = control_pb2.ControlEvent(id="x", kind=control_pb2.PAUSE, params_json=params)
    with pytest.raises(ValueError):
        message_from_proto(wire)


def test_unknown_wire_numbers_raise_value_error() -> None:
    with pytest.raises(ValueError):
        message_from_proto(control_pb2.ControlEvent(id="x", kind=99))
    with pytest.raises(ValueError):
        ack_from_proto(control_pb2.ControlAck(control_id="x", result=0))
