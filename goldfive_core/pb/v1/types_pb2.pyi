from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class DriftKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DRIFT_KIND_UNSPECIFIED: _ClassVar[DriftKind]
    TOOL_ERROR: _ClassVar[DriftKind]
    AGENT_REFUSAL: _ClassVar[DriftKind]
    NEW_WORK_DISCOVERED: _ClassVar[DriftKind]
    PLAN_DIVERGENCE: _ClassVar[DriftKind]
    USER_STEER: _ClassVar[DriftKind]
    USER_CANCEL: _ClassVar[DriftKind]
    TASK_FAILED_RECOVERABLE: _ClassVar[DriftKind]
    TASK_FAILED_FATAL: _ClassVar[DriftKind]
    CONTEXT_PRESSURE: _ClassVar[DriftKind]
    BLOCKED: _ClassVar[DriftKind]
    WRONG_AGENT: _ClassVar[DriftKind]
    AGENT_TRANSFER: _ClassVar[DriftKind]
    MODEL_REFUSAL: _ClassVar[DriftKind]
    STOPPED_EARLY: _ClassVar[DriftKind]
    TOO_MANY_STEPS: _ClassVar[DriftKind]
    GOAL_UNREACHABLE: _ClassVar[DriftKind]
    TASK_TIMEOUT: _ClassVar[DriftKind]
    REPEATED_FAILURE: _ClassVar[DriftKind]
    UNEXPECTED_OUTPUT: _ClassVar[DriftKind]
    SCHEMA_VIOLATION: _ClassVar[DriftKind]
    HALLUCINATION_SUSPECTED: _ClassVar[DriftKind]
    SAFETY_CONCERN: _ClassVar[DriftKind]
    RESOURCE_EXHAUSTED: _ClassVar[DriftKind]
    AMBIGUOUS_INTENT: _ClassVar[DriftKind]
    CUSTOM: _ClassVar[DriftKind]
    LOOPING_TOOL_CALL: _ClassVar[DriftKind]
    LOOPING_REASONING: _ClassVar[DriftKind]
    OFF_TOPIC: _ClassVar[DriftKind]
    INTENT_DIVERGENCE: _ClassVar[DriftKind]
    UNCERTAIN_PROGRESS: _ClassVar[DriftKind]
    SELF_REPORTED_STUCK: _ClassVar[DriftKind]
    RUNAWAY_DELEGATION: _ClassVar[DriftKind]
    REFINE_VALIDATION_FAILED: _ClassVar[DriftKind]
    HUMAN_INTERVENTION_REQUIRED: _ClassVar[DriftKind]
    GOAL_DRIFT: _ClassVar[DriftKind]
    LLM_CALL_TIMEOUT: _ClassVar[DriftKind]

class DriftSeverity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DRIFT_SEVERITY_UNSPECIFIED: _ClassVar[DriftSeverity]
    INFO: _ClassVar[DriftSeverity]
    WARNING: _ClassVar[DriftSeverity]
    CRITICAL: _ClassVar[DriftSeverity]

class TaskStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATUS_UNSPECIFIED: _ClassVar[TaskStatus]
    TASK_STATUS_PENDING: _ClassVar[TaskStatus]
    TASK_STATUS_RUNNING: _ClassVar[TaskStatus]
    TASK_STATUS_BLOCKED: _ClassVar[TaskStatus]
    TASK_STATUS_COMPLETED: _ClassVar[TaskStatus]
    TASK_STATUS_FAILED: _ClassVar[TaskStatus]
    TASK_STATUS_CANCELLED: _ClassVar[TaskStatus]
    TASK_STATUS_NOT_NEEDED: _ClassVar[TaskStatus]

class RunStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATUS_UNSPECIFIED: _ClassVar[RunStatus]
    RUN_STATUS_COMPLETED: _ClassVar[RunStatus]
    RUN_STATUS_FAILED: _ClassVar[RunStatus]
    RUN_STATUS_CANCELLED: _ClassVar[RunStatus]
    RUN_STATUS_ABORTED: _ClassVar[RunStatus]
    RUN_STATUS_DETACHED: _ClassVar[RunStatus]
DRIFT_KIND_UNSPECIFIED: DriftKind
TOOL_ERROR: DriftKind
AGENT_REFUSAL: DriftKind
NEW_WORK_DISCOVERED: DriftKind
PLAN_DIVERGENCE: DriftKind
USER_STEER: DriftKind
USER_CANCEL: DriftKind
TASK_FAILED_RECOVERABLE: DriftKind
TASK_FAILED_FATAL: DriftKind
CONTEXT_PRESSURE: DriftKind
BLOCKED: DriftKind
WRONG_AGENT: DriftKind
AGENT_TRANSFER: DriftKind
MODEL_REFUSAL: DriftKind
STOPPED_EARLY: DriftKind
TOO_MANY_STEPS: DriftKind
GOAL_UNREACHABLE: DriftKind
TASK_TIMEOUT: DriftKind
REPEATED_FAILURE: DriftKind
UNEXPECTED_OUTPUT: DriftKind
SCHEMA_VIOLATION: DriftKind
HALLUCINATION_SUSPECTED: DriftKind
SAFETY_CONCERN: DriftKind
RESOURCE_EXHAUSTED: DriftKind
AMBIGUOUS_INTENT: DriftKind
CUSTOM: DriftKind
LOOPING_TOOL_CALL: DriftKind
LOOPING_REASONING: DriftKind
OFF_TOPIC: DriftKind
INTENT_DIVERGENCE: DriftKind
UNCERTAIN_PROGRESS: DriftKind
SELF_REPORTED_STUCK: DriftKind
RUNAWAY_DELEGATION: DriftKind
REFINE_VALIDATION_FAILED: DriftKind
HUMAN_INTERVENTION_REQUIRED: DriftKind
GOAL_DRIFT: DriftKind
LLM_CALL_TIMEOUT: DriftKind
DRIFT_SEVERITY_UNSPECIFIED: DriftSeverity
INFO: DriftSeverity
WARNING: DriftSeverity
CRITICAL: DriftSeverity
TASK_STATUS_UNSPECIFIED: TaskStatus
TASK_STATUS_PENDING: TaskStatus
TASK_STATUS_RUNNING: TaskStatus
TASK_STATUS_BLOCKED: TaskStatus
TASK_STATUS_COMPLETED: TaskStatus
TASK_STATUS_FAILED: TaskStatus
TASK_STATUS_CANCELLED: TaskStatus
TASK_STATUS_NOT_NEEDED: TaskStatus
RUN_STATUS_UNSPECIFIED: RunStatus
RUN_STATUS_COMPLETED: RunStatus
RUN_STATUS_FAILED: RunStatus
RUN_STATUS_CANCELLED: RunStatus
RUN_STATUS_ABORTED: RunStatus
RUN_STATUS_DETACHED: RunStatus
