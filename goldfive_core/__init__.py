"""goldfive_core: a person in the loop of AI agents — approvals, escalation, control and events.

Importable with only ``protobuf`` installed; host integrations live in
``goldfive_adk`` and ``goldfive_core.adapters.claude`` behind their extras.
"""

from __future__ import annotations

from ._util import args_digest, canonical_json
from .adapters.callable import AgentTools, CallableAdapter, wrap
from .approvals import (
    ApprovalBook,
    ApprovalOutcome,
    ApprovalRecord,
    ApprovalRequest,
    ApprovalStatus,
    Decision,
    Principal,
)
from .control import AckResult, ControlAck, ControlChannel, ControlKind, ControlMessage, ControlTransport
from .detectors import DelegationDetector, LoopingToolCallDetector, StepBudgetDetector
from .drift import Drift, DriftKind, DriftSeverity, InterventionLevel
from .errors import (
    ApprovalError,
    ChannelBusyError,
    ConfigError,
    GoldfiveError,
    InvalidTransitionError,
    MissingExtraError,
    RunCancelledError,
    RunTerminatedError,
)
from .events import EventEmitter, EventSink, InMemorySink, JsonlSink, LoggingSink
from .ladder import DEFAULT_LADDER, LadderRow
from .lifecycle import RunStatus
from .reporting import REPORTING_TOOL_NAMES, TOOL_SPECS, ToolSpec, call_reporting_tool
from .routing import ControlRouter
from .runner import Adapter, Runner, RunResult
from .session import Detector, Guidance, Session
from .steering import DefaultSteerer, SteeringConfig, install_default_steering
from .tasks import Task, TaskStatus

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_LADDER",
    "REPORTING_TOOL_NAMES",
    "TOOL_SPECS",
    "AckResult",
    "Adapter",
    "AgentTools",
    "ApprovalBook",
    "ApprovalError",
    "ApprovalOutcome",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalStatus",
    "CallableAdapter",
    "ChannelBusyError",
    "ConfigError",
    "ControlAck",
    "ControlChannel",
    "ControlKind",
    "ControlMessage",
    "ControlRouter",
    "ControlTransport",
    "Decision",
    "DefaultSteerer",
    "DelegationDetector",
    "Detector",
    "Drift",
    "DriftKind",
    "DriftSeverity",
    "EventEmitter",
    "EventSink",
    "GoldfiveError",
    "Guidance",
    "InMemorySink",
    "InterventionLevel",
    "InvalidTransitionError",
    "JsonlSink",
    "LadderRow",
    "LoggingSink",
    "LoopingToolCallDetector",
    "MissingExtraError",
    "Principal",
    "RunCancelledError",
    "RunResult",
    "RunStatus",
    "RunTerminatedError",
    "Runner",
    "Session",
    "StepBudgetDetector",
    "SteeringConfig",
    "Task",
    "TaskStatus",
    "ToolSpec",
    "args_digest",
    "call_reporting_tool",
    "canonical_json",
    "install_default_steering",
    "wrap",
]
