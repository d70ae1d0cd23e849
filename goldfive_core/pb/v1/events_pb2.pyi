import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from goldfive_core.pb.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunStarted(_message.Message):
    __slots__ = ("input", "adapter", "root_task_id", "started_by", "on_behalf_of", "records_steps")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    ADAPTER_FIELD_NUMBER: _ClassVar[int]
    ROOT_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_BY_FIELD_NUMBER: _ClassVar[int]
    ON_BEHALF_OF_FIELD_NUMBER: _ClassVar[int]
    RECORDS_STEPS_FIELD_NUMBER: _ClassVar[int]
    input: str
    adapter: str
    root_task_id: str
    started_by: str
    on_behalf_of: str
    records_steps: bool
    def __init__(self, input: _Optional[str] = ..., adapter: _Optional[str] = ..., root_task_id: _Optional[str] = ..., started_by: _Optional[str] = ..., on_behalf_of: _Optional[str] = ..., records_steps: _Optional[bool] = ...) -> None: ...

class RunStep(_message.Message):
    __slots__ = ("kind", "name", "text", "call_id")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    text: str
    call_id: str
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., text: _Optional[str] = ..., call_id: _Optional[str] = ...) -> None: ...

class RunCompleted(_message.Message):
    __slots__ = ("status", "summary")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    status: _types_pb2.RunStatus
    summary: str
    def __init__(self, status: _Optional[_Union[_types_pb2.RunStatus, str]] = ..., summary: _Optional[str] = ...) -> None: ...

class RunAborted(_message.Message):
    __slots__ = ("reason", "drift_id", "status")
    REASON_FIELD_NUMBER: _ClassVar[int]
    DRIFT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    reason: str
    drift_id: str
    status: _types_pb2.RunStatus
    def __init__(self, reason: _Optional[str] = ..., drift_id: _Optional[str] = ..., status: _Optional[_Union[_types_pb2.RunStatus, str]] = ...) -> None: ...

class TaskStarted(_message.Message):
    __slots__ = ("task_id", "title", "parent_id")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    title: str
    parent_id: str
    def __init__(self, task_id: _Optional[str] = ..., title: _Optional[str] = ..., parent_id: _Optional[str] = ...) -> None: ...

class TaskProgress(_message.Message):
    __slots__ = ("task_id", "message", "fraction")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FRACTION_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    message: str
    fraction: float
    def __init__(self, task_id: _Optional[str] = ..., message: _Optional[str] = ..., fraction: _Optional[float] = ...) -> None: ...

class TaskCompleted(_message.Message):
    __slots__ = ("task_id", "result")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    result: str
    def __init__(self, task_id: _Optional[str] = ..., result: _Optional[str] = ...) -> None: ...

class TaskFailed(_message.Message):
    __slots__ = ("task_id", "reason", "recoverable")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RECOVERABLE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    reason: str
    recoverable: bool
    def __init__(self, task_id: _Optional[str] = ..., reason: _Optional[str] = ..., recoverable: _Optional[bool] = ...) -> None: ...

class TaskBlocked(_message.Message):
    __slots__ = ("task_id", "blocker", "needed")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    BLOCKER_FIELD_NUMBER: _ClassVar[int]
    NEEDED_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    blocker: str
    needed: str
    def __init__(self, task_id: _Optional[str] = ..., blocker: _Optional[str] = ..., needed: _Optional[str] = ...) -> None: ...

class TaskCancelled(_message.Message):
    __slots__ = ("task_id", "reason")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    reason: str
    def __init__(self, task_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DriftDetected(_message.Message):
    __slots__ = ("drift_id", "kind", "severity", "detail", "task_id", "ladder_level")
    DRIFT_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LADDER_LEVEL_FIELD_NUMBER: _ClassVar[int]
    drift_id: str
    kind: _types_pb2.DriftKind
    severity: _types_pb2.DriftSeverity
    detail: str
    task_id: str
    ladder_level: int
    def __init__(self, drift_id: _Optional[str] = ..., kind: _Optional[_Union[_types_pb2.DriftKind, str]] = ..., severity: _Optional[_Union[_types_pb2.DriftSeverity, str]] = ..., detail: _Optional[str] = ..., task_id: _Optional[str] = ..., ladder_level: _Optional[int] = ...) -> None: ...

class ApprovalRequested(_message.Message):
    __slots__ = ("target_id", "kind", "prompt", "task_id", "metadata", "args_digest", "expires_at", "timeout_ms", "request_id", "request_digest")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_DIGEST_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    kind: str
    prompt: str
    task_id: str
    metadata: _containers.ScalarMap[str, str]
    args_digest: str
    expires_at: _timestamp_pb2.Timestamp
    timeout_ms: int
    request_id: str
    request_digest: str
    def __init__(self, target_id: _Optional[str] = ..., kind: _Optional[str] = ..., prompt: _Optional[str] = ..., task_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., args_digest: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., timeout_ms: _Optional[int] = ..., request_id: _Optional[str] = ..., request_digest: _Optional[str] = ...) -> None: ...

class ApprovalGranted(_message.Message):
    __slots__ = ("target_id", "detail", "decided_by", "edited_args_json", "channel", "request_id")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    EDITED_ARGS_JSON_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    detail: str
    decided_by: str
    edited_args_json: str
    channel: str
    request_id: str
    def __init__(self, target_id: _Optional[str] = ..., detail: _Optional[str] = ..., decided_by: _Optional[str] = ..., edited_args_json: _Optional[str] = ..., channel: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ApprovalRejected(_message.Message):
    __slots__ = ("target_id", "detail", "decided_by", "channel", "request_id", "answer")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    detail: str
    decided_by: str
    channel: str
    request_id: str
    answer: str
    def __init__(self, target_id: _Optional[str] = ..., detail: _Optional[str] = ..., decided_by: _Optional[str] = ..., channel: _Optional[str] = ..., request_id: _Optional[str] = ..., answer: _Optional[str] = ...) -> None: ...

class DecisionRefused(_message.Message):
    __slots__ = ("target_id", "decision", "decided_by", "reason", "channel", "request_run_id", "request_id")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    decision: str
    decided_by: str
    reason: str
    channel: str
    request_run_id: str
    request_id: str
    def __init__(self, target_id: _Optional[str] = ..., decision: _Optional[str] = ..., decided_by: _Optional[str] = ..., reason: _Optional[str] = ..., channel: _Optional[str] = ..., request_run_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ApprovalTimedOut(_message.Message):
    __slots__ = ("target_id", "timeout_ms", "still_open", "detail", "expired_by", "channel", "request_id")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    STILL_OPEN_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    EXPIRED_BY_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    timeout_ms: int
    still_open: bool
    detail: str
    expired_by: str
    channel: str
    request_id: str
    def __init__(self, target_id: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., still_open: _Optional[bool] = ..., detail: _Optional[str] = ..., expired_by: _Optional[str] = ..., channel: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ApprovalCancelled(_message.Message):
    __slots__ = ("target_id", "reason")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    reason: str
    def __init__(self, target_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PolicyApplied(_message.Message):
    __slots__ = ("call_id", "tool_name", "rule", "action", "reason", "args_digest", "args_json", "grant_id", "agent")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    ARGS_JSON_FIELD_NUMBER: _ClassVar[int]
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    tool_name: str
    rule: str
    action: str
    reason: str
    args_digest: str
    args_json: str
    grant_id: str
    agent: str
    def __init__(self, call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., rule: _Optional[str] = ..., action: _Optional[str] = ..., reason: _Optional[str] = ..., args_digest: _Optional[str] = ..., args_json: _Optional[str] = ..., grant_id: _Optional[str] = ..., agent: _Optional[str] = ...) -> None: ...

class ReviewerVerdict(_message.Message):
    __slots__ = ("call_id", "tool_name", "rule", "decided_by", "verdict", "reason", "mode", "outcome", "error", "args_digest", "agent", "channel", "elapsed_ms", "task_id")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    tool_name: str
    rule: str
    decided_by: str
    verdict: str
    reason: str
    mode: str
    outcome: str
    error: str
    args_digest: str
    agent: str
    channel: str
    elapsed_ms: int
    task_id: str
    def __init__(self, call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., rule: _Optional[str] = ..., decided_by: _Optional[str] = ..., verdict: _Optional[str] = ..., reason: _Optional[str] = ..., mode: _Optional[str] = ..., outcome: _Optional[str] = ..., error: _Optional[str] = ..., args_digest: _Optional[str] = ..., agent: _Optional[str] = ..., channel: _Optional[str] = ..., elapsed_ms: _Optional[int] = ..., task_id: _Optional[str] = ...) -> None: ...

class ApprovalEscalated(_message.Message):
    __slots__ = ("target_id", "rule", "to", "after_ms")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    rule: str
    to: str
    after_ms: int
    def __init__(self, target_id: _Optional[str] = ..., rule: _Optional[str] = ..., to: _Optional[str] = ..., after_ms: _Optional[int] = ...) -> None: ...

class GrantCreated(_message.Message):
    __slots__ = ("grant_id", "rule", "tool", "granted_by", "scope", "session_id", "args_constraint", "created_at_ms", "expires_at_ms", "target_id", "description", "channel")
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    GRANTED_BY_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ARGS_CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    grant_id: str
    rule: str
    tool: str
    granted_by: str
    scope: str
    session_id: str
    args_constraint: str
    created_at_ms: int
    expires_at_ms: int
    target_id: str
    description: str
    channel: str
    def __init__(self, grant_id: _Optional[str] = ..., rule: _Optional[str] = ..., tool: _Optional[str] = ..., granted_by: _Optional[str] = ..., scope: _Optional[str] = ..., session_id: _Optional[str] = ..., args_constraint: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., expires_at_ms: _Optional[int] = ..., target_id: _Optional[str] = ..., description: _Optional[str] = ..., channel: _Optional[str] = ...) -> None: ...

class GrantRevoked(_message.Message):
    __slots__ = ("grant_id", "revoked_by", "reason", "channel")
    GRANT_ID_FIELD_NUMBER: _ClassVar[int]
    REVOKED_BY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    grant_id: str
    revoked_by: str
    reason: str
    channel: str
    def __init__(self, grant_id: _Optional[str] = ..., revoked_by: _Optional[str] = ..., reason: _Optional[str] = ..., channel: _Optional[str] = ...) -> None: ...

class ApprovalVoted(_message.Message):
    __slots__ = ("target_id", "decided_by", "decision", "progress", "channel", "request_id")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    decided_by: str
    decision: str
    progress: str
    channel: str
    request_id: str
    def __init__(self, target_id: _Optional[str] = ..., decided_by: _Optional[str] = ..., decision: _Optional[str] = ..., progress: _Optional[str] = ..., channel: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class RunPaused(_message.Message):
    __slots__ = ("reason", "paused_by", "channel", "escalated", "drift_id", "drift_kind", "ladder_level", "deadline_at")
    REASON_FIELD_NUMBER: _ClassVar[int]
    PAUSED_BY_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    ESCALATED_FIELD_NUMBER: _ClassVar[int]
    DRIFT_ID_FIELD_NUMBER: _ClassVar[int]
    DRIFT_KIND_FIELD_NUMBER: _ClassVar[int]
    LADDER_LEVEL_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_FIELD_NUMBER: _ClassVar[int]
    reason: str
    paused_by: str
    channel: str
    escalated: bool
    drift_id: str
    drift_kind: str
    ladder_level: int
    deadline_at: _timestamp_pb2.Timestamp
    def __init__(self, reason: _Optional[str] = ..., paused_by: _Optional[str] = ..., channel: _Optional[str] = ..., escalated: _Optional[bool] = ..., drift_id: _Optional[str] = ..., drift_kind: _Optional[str] = ..., ladder_level: _Optional[int] = ..., deadline_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RunResumed(_message.Message):
    __slots__ = ("how", "resumed_by", "channel")
    HOW_FIELD_NUMBER: _ClassVar[int]
    RESUMED_BY_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    how: str
    resumed_by: str
    channel: str
    def __init__(self, how: _Optional[str] = ..., resumed_by: _Optional[str] = ..., channel: _Optional[str] = ...) -> None: ...

class ExecutionRecorded(_message.Message):
    __slots__ = ("target_id", "state", "args_digest", "pid", "host", "result_digest", "resolved_by", "owner")
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RESULT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    target_id: str
    state: str
    args_digest: str
    pid: int
    host: str
    result_digest: str
    resolved_by: str
    owner: str
    def __init__(self, target_id: _Optional[str] = ..., state: _Optional[str] = ..., args_digest: _Optional[str] = ..., pid: _Optional[int] = ..., host: _Optional[str] = ..., result_digest: _Optional[str] = ..., resolved_by: _Optional[str] = ..., owner: _Optional[str] = ...) -> None: ...

class CheckpointRefused(_message.Message):
    __slots__ = ("reason", "signed_seq", "head_seq", "key_id")
    REASON_FIELD_NUMBER: _ClassVar[int]
    SIGNED_SEQ_FIELD_NUMBER: _ClassVar[int]
    HEAD_SEQ_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    signed_seq: int
    head_seq: int
    key_id: str
    def __init__(self, reason: _Optional[str] = ..., signed_seq: _Optional[int] = ..., head_seq: _Optional[int] = ..., key_id: _Optional[str] = ...) -> None: ...

class RemoteApprovalWaiting(_message.Message):
    __slots__ = ("remote_agent", "task_id", "context_id", "approval_id", "request_id", "tool", "rule", "inbox_url", "state", "text")
    REMOTE_AGENT_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_ID_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    INBOX_URL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    remote_agent: str
    task_id: str
    context_id: str
    approval_id: str
    request_id: str
    tool: str
    rule: str
    inbox_url: str
    state: str
    text: str
    def __init__(self, remote_agent: _Optional[str] = ..., task_id: _Optional[str] = ..., context_id: _Optional[str] = ..., approval_id: _Optional[str] = ..., request_id: _Optional[str] = ..., tool: _Optional[str] = ..., rule: _Optional[str] = ..., inbox_url: _Optional[str] = ..., state: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("event_id", "run_id", "sequence", "emitted_at", "session_id", "run_started", "task_started", "task_progress", "task_completed", "task_failed", "task_blocked", "task_cancelled", "drift_detected", "run_completed", "run_aborted", "approval_requested", "approval_granted", "approval_rejected", "approval_timed_out", "approval_cancelled", "decision_refused", "policy_applied", "approval_escalated", "grant_created", "grant_revoked", "approval_voted", "run_paused", "run_resumed", "execution_recorded", "checkpoint_refused", "reviewer_verdict", "remote_approval_waiting", "run_step")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    EMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_STARTED_FIELD_NUMBER: _ClassVar[int]
    TASK_STARTED_FIELD_NUMBER: _ClassVar[int]
    TASK_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TASK_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    TASK_FAILED_FIELD_NUMBER: _ClassVar[int]
    TASK_BLOCKED_FIELD_NUMBER: _ClassVar[int]
    TASK_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    DRIFT_DETECTED_FIELD_NUMBER: _ClassVar[int]
    RUN_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    RUN_ABORTED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_GRANTED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_REJECTED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    DECISION_REFUSED_FIELD_NUMBER: _ClassVar[int]
    POLICY_APPLIED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_ESCALATED_FIELD_NUMBER: _ClassVar[int]
    GRANT_CREATED_FIELD_NUMBER: _ClassVar[int]
    GRANT_REVOKED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_VOTED_FIELD_NUMBER: _ClassVar[int]
    RUN_PAUSED_FIELD_NUMBER: _ClassVar[int]
    RUN_RESUMED_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_RECORDED_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_REFUSED_FIELD_NUMBER: _ClassVar[int]
    REVIEWER_VERDICT_FIELD_NUMBER: _ClassVar[int]
    REMOTE_APPROVAL_WAITING_FIELD_NUMBER: _ClassVar[int]
    RUN_STEP_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    run_id: str
    sequence: int
    emitted_at: _timestamp_pb2.Timestamp
    session_id: str
    run_started: RunStarted
    task_started: TaskStarted
    task_progress: TaskProgress
    task_completed: TaskCompleted
    task_failed: TaskFailed
    task_blocked: TaskBlocked
    task_cancelled: TaskCancelled
    drift_detected: DriftDetected
    run_completed: RunCompleted
    run_aborted: RunAborted
    approval_requested: ApprovalRequested
    approval_granted: ApprovalGranted
    approval_rejected: ApprovalRejected
    approval_timed_out: ApprovalTimedOut
    approval_cancelled: ApprovalCancelled
    decision_refused: DecisionRefused
    policy_applied: PolicyApplied
    approval_escalated: ApprovalEscalated
    grant_created: GrantCreated
    grant_revoked: GrantRevoked
    approval_voted: ApprovalVoted
    run_paused: RunPaused
    run_resumed: RunResumed
    execution_recorded: ExecutionRecorded
    checkpoint_refused: CheckpointRefused
    reviewer_verdict: ReviewerVerdict
    remote_approval_waiting: RemoteApprovalWaiting
    run_step: RunStep
    def __init__(self, event_id: _Optional[str] = ..., run_id: _Optional[str] = ..., sequence: _Optional[int] = ..., emitted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., session_id: _Optional[str] = ..., run_started: _Optional[_Union[RunStarted, _Mapping]] = ..., task_started: _Optional[_Union[TaskStarted, _Mapping]] = ..., task_progress: _Optional[_Union[TaskProgress, _Mapping]] = ..., task_completed: _Optional[_Union[TaskCompleted, _Mapping]] = ..., task_failed: _Optional[_Union[TaskFailed, _Mapping]] = ..., task_blocked: _Optional[_Union[TaskBlocked, _Mapping]] = ..., task_cancelled: _Optional[_Union[TaskCancelled, _Mapping]] = ..., drift_detected: _Optional[_Union[DriftDetected, _Mapping]] = ..., run_completed: _Optional[_Union[RunCompleted, _Mapping]] = ..., run_aborted: _Optional[_Union[RunAborted, _Mapping]] = ..., approval_requested: _Optional[_Union[ApprovalRequested, _Mapping]] = ..., approval_granted: _Optional[_Union[ApprovalGranted, _Mapping]] = ..., approval_rejected: _Optional[_Union[ApprovalRejected, _Mapping]] = ..., approval_timed_out: _Optional[_Union[ApprovalTimedOut, _Mapping]] = ..., approval_cancelled: _Optional[_Union[ApprovalCancelled, _Mapping]] = ..., decision_refused: _Optional[_Union[DecisionRefused, _Mapping]] = ..., policy_applied: _Optional[_Union[PolicyApplied, _Mapping]] = ..., approval_escalated: _Optional[_Union[ApprovalEscalated, _Mapping]] = ..., grant_created: _Optional[_Union[GrantCreated, _Mapping]] = ..., grant_revoked: _Optional[_Union[GrantRevoked, _Mapping]] = ..., approval_voted: _Optional[_Union[ApprovalVoted, _Mapping]] = ..., run_paused: _Optional[_Union[RunPaused, _Mapping]] = ..., run_resumed: _Optional[_Union[RunResumed, _Mapping]] = ..., execution_recorded: _Optional[_Union[ExecutionRecorded, _Mapping]] = ..., checkpoint_refused: _Optional[_Union[CheckpointRefused, _Mapping]] = ..., reviewer_verdict: _Optional[_Union[ReviewerVerdict, _Mapping]] = ..., remote_approval_waiting: _Optional[_Union[RemoteApprovalWaiting, _Mapping]] = ..., run_step: _Optional[_Union[RunStep, _Mapping]] = ...) -> None: ...
