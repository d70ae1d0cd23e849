import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ControlKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNSPECIFIED: _ClassVar[ControlKind]
    PAUSE: _ClassVar[ControlKind]
    RESUME: _ClassVar[ControlKind]
    CANCEL: _ClassVar[ControlKind]
    REWIND_TO: _ClassVar[ControlKind]
    STEER: _ClassVar[ControlKind]
    APPROVE: _ClassVar[ControlKind]
    REJECT: _ClassVar[ControlKind]
    STATUS_QUERY: _ClassVar[ControlKind]
    INTERCEPT_TRANSFER: _ClassVar[ControlKind]
    INJECT_MESSAGE: _ClassVar[ControlKind]
    GOLDFIVE_STEER: _ClassVar[ControlKind]
    GOLDFIVE_PAUSE_ESCALATE: _ClassVar[ControlKind]

class AckResult(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACK_RESULT_UNSPECIFIED: _ClassVar[AckResult]
    SUCCESS: _ClassVar[AckResult]
    FAILURE: _ClassVar[AckResult]
    UNSUPPORTED: _ClassVar[AckResult]
UNSPECIFIED: ControlKind
PAUSE: ControlKind
RESUME: ControlKind
CANCEL: ControlKind
REWIND_TO: ControlKind
STEER: ControlKind
APPROVE: ControlKind
REJECT: ControlKind
STATUS_QUERY: ControlKind
INTERCEPT_TRANSFER: ControlKind
INJECT_MESSAGE: ControlKind
GOLDFIVE_STEER: ControlKind
GOLDFIVE_PAUSE_ESCALATE: ControlKind
ACK_RESULT_UNSPECIFIED: AckResult
SUCCESS: AckResult
FAILURE: AckResult
UNSUPPORTED: AckResult

class SteerPayload(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class RewindPayload(_message.Message):
    __slots__ = ("to",)
    TO_FIELD_NUMBER: _ClassVar[int]
    to: str
    def __init__(self, to: _Optional[str] = ...) -> None: ...

class ApprovePayload(_message.Message):
    __slots__ = ("target_id", "detail", "decided_by", "edited_args_json", "args_digest", "request_id")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    EDITED_ARGS_JSON_FIELD_NUMBER: _ClassVar[int]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    detail: str
    decided_by: str
    edited_args_json: str
    args_digest: str
    request_id: str
    def __init__(self, target_id: _Optional[str] = ..., detail: _Optional[str] = ..., decided_by: _Optional[str] = ..., edited_args_json: _Optional[str] = ..., args_digest: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class RejectPayload(_message.Message):
    __slots__ = ("target_id", "detail", "decided_by", "args_digest", "request_id")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    detail: str
    decided_by: str
    args_digest: str
    request_id: str
    def __init__(self, target_id: _Optional[str] = ..., detail: _Optional[str] = ..., decided_by: _Optional[str] = ..., args_digest: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class InjectMessagePayload(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ControlEvent(_message.Message):
    __slots__ = ("id", "issued_at", "target", "kind", "steer", "rewind", "approve", "reject", "inject_message", "params_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STEER_FIELD_NUMBER: _ClassVar[int]
    REWIND_FIELD_NUMBER: _ClassVar[int]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    INJECT_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    issued_at: _timestamp_pb2.Timestamp
    target: str
    kind: ControlKind
    steer: SteerPayload
    rewind: RewindPayload
    approve: ApprovePayload
    reject: RejectPayload
    inject_message: InjectMessagePayload
    params_json: str
    def __init__(self, id: _Optional[str] = ..., issued_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., target: _Optional[str] = ..., kind: _Optional[_Union[ControlKind, str]] = ..., steer: _Optional[_Union[SteerPayload, _Mapping]] = ..., rewind: _Optional[_Union[RewindPayload, _Mapping]] = ..., approve: _Optional[_Union[ApprovePayload, _Mapping]] = ..., reject: _Optional[_Union[RejectPayload, _Mapping]] = ..., inject_message: _Optional[_Union[InjectMessagePayload, _Mapping]] = ..., params_json: _Optional[str] = ...) -> None: ...

class ControlAck(_message.Message):
    __slots__ = ("control_id", "result", "detail", "acked_at", "data_json")
    CONTROL_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    ACKED_AT_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    control_id: str
    result: AckResult
    detail: str
    acked_at: _timestamp_pb2.Timestamp
    data_json: str
    def __init__(self, control_id: _Optional[str] = ..., result: _Optional[_Union[AckResult, str]] = ..., detail: _Optional[str] = ..., acked_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., data_json: _Optional[str] = ...) -> None: ...
