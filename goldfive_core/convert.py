"""Converters between the Python control types and their protobuf messages.

Typed payload fields (``target_id``, ``detail``, ``decided_by``,
``edited_args``, ``args_digest``, ``text``, ``to``) travel in the matching
proto payload; every other key travels in ``params_json``. Empty strings are
the proto default and are omitted on the way back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from ._util import canonical_json
from .control import AckResult, ControlAck, ControlKind, ControlMessage
from .pb.v1 import control_pb2

__all__ = [
    "ack_from_proto",
    "ack_to_proto",
    "message_from_proto",
    "message_to_proto",
    "timestamp_from_ms",
    "timestamp_to_ms",
]

_TEXT_FIELD = {
    ControlKind.STEER: ("steer", "text"),
    ControlKind.GOLDFIVE_STEER: ("steer", "text"),
    ControlKind.INJECT_MESSAGE: ("inject_message", "text"),
    ControlKind.REWIND_TO: ("rewind", "to"),
}
_APPROVE_KEYS = ("target_id", "detail", "decided_by", "args_digest", "request_id")
_REJECT_KEYS = ("target_id", "detail", "decided_by", "args_digest", "request_id")


def timestamp_from_ms(ms: int) -> Timestamp:
    """A protobuf Timestamp for epoch milliseconds."""
    # Floor division keeps nanos in [0, 1e9) for times before the epoch, as Timestamp requires.
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def timestamp_to_ms(ts: Timestamp) -> int:
    """Epoch milliseconds of a protobuf Timestamp."""
    return int(ts.ToMilliseconds())


def _str_field(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key, "")
    if not isinstance(value, str):
        raise ValueError(f"payload[{key!r}] must be a string, got {type(value).__name__}")
    return value


def _check_keys(value: Any, where: str) -> None:
    # json.dumps would silently turn 1 into "1"; the wire must give back what was sent.
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key {key!r}; JSON objects take string keys")
            _check_keys(item, f"{where}[{key!r}]")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_keys(item, f"{where}[{index}]")


def message_to_proto(msg: ControlMessage) -> control_pb2.ControlEvent:
    """Encode a :class:`ControlMessage`; raises ValueError for payloads the wire cannot carry."""
    if not isinstance(msg.kind, ControlKind):
        raise ValueError(f"unknown control kind {msg.kind!r}")
    if not isinstance(msg.payload, Mapping):
        raise ValueError(f"payload must be a mapping, got {type(msg.payload).__name__}")
    _check_keys(msg.payload, "payload")
    payload = dict(msg.payload)
    event = control_pb2.ControlEvent(
        id=msg.id,
        kind=msg.kind.value,
        target=_str_field(payload, "target"),
    )
    event.issued_at.CopyFrom(timestamp_from_ms(msg.issued_at_ms))
    payload.pop("target", None)
    if msg.kind in (ControlKind.APPROVE, ControlKind.REJECT):
        keys = _APPROVE_KEYS if msg.kind is ControlKind.APPROVE else _REJECT_KEYS
        fields = {key: _str_field(payload, key) for key in keys}
        for key in keys:
            payload.pop(key, None)
        if msg.kind is ControlKind.APPROVE:
            edited = payload.pop("edited_args", None)
            approve = event.approve
            approve.SetInParent()
            for key, value in fields.items():
                setattr(approve, key, value)
            if edited is not None:
                approve.edited_args_json = canonical_json(edited)
        else:
            reject = event.reject
            reject.SetInParent()
            for key, value in fields.items():
                setattr(reject, key, value)
    elif msg.kind in _TEXT_FIELD:
        oneof_name, field_name = _TEXT_FIELD[msg.kind]
        sub = getattr(event, oneof_name)
        sub.SetInParent()
        setattr(sub, field_name, _str_field(payload, field_name))
        payload.pop(field_name, None)
    if payload:
        try:
            event.params_json = canonical_json(payload)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"payload is not JSON-serialisable: {exc}") from exc
    return event


def message_from_proto(event: control_pb2.ControlEvent) -> ControlMessage:
    """Decode a ControlEvent into a :class:`ControlMessage`; raises ValueError for a malformed one."""
    kind = ControlKind(control_pb2.ControlKind.Name(event.kind))
    payload: dict[str, Any] = json.loads(event.params_json) if event.params_json else {}
    if not isinstance(payload, dict):
        raise ValueError(f"params_json must hold a JSON object, got {type(payload).__name__}")
    if event.target:
        payload["target"] = event.target
    which = event.WhichOneof("payload")
    if which in ("approve", "reject"):
        sub = getattr(event, which)
        for key in _APPROVE_KEYS if which == "approve" else _REJECT_KEYS:
            value = getattr(sub, key)
            if value:
                payload[key] = value
        if which == "approve" and event.approve.edited_args_json:
            payload["edited_args"] = json.loads(event.approve.edited_args_json)
    elif which is not None:
        sub = getattr(event, which)
        field_name = "to" if which == "rewind" else "text"
        payload[field_name] = getattr(sub, field_name)
    return ControlMessage(kind, payload, event.id, timestamp_to_ms(event.issued_at))


def ack_to_proto(ack: ControlAck) -> control_pb2.ControlAck:
    """Encode a :class:`ControlAck`."""
    out = control_pb2.ControlAck(
        control_id=ack.control_id,
        result=ack.result.value,
        detail=ack.detail,
    )
    out.acked_at.CopyFrom(timestamp_from_ms(ack.acked_at_ms))
    if ack.data is not None:
        out.data_json = canonical_json(ack.data)
    return out


def ack_from_proto(ack: control_pb2.ControlAck) -> ControlAck:
    """Decode a ControlAck proto."""
    return ControlAck(
        control_id=ack.control_id,
        result=AckResult(control_pb2.AckResult.Name(ack.result)),
        detail=ack.detail,
        acked_at_ms=timestamp_to_ms(ack.acked_at),
        data=json.loads(ack.data_json) if ack.data_json else None,
    )
