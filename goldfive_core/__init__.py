"""goldfive_core: a person in the loop of AI agents — approvals, escalation, control and events.

Importable with only ``protobuf`` installed; host integrations live in
``goldfive_adk`` and ``goldfive_core.adapters.claude`` behind their extras.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as type checkers and IDEs see them; at run time they load on first use
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

# Where each public name lives. ``import goldfive_core`` loads none of them: a user of the store, the
# CLI or one adapter pays only for what it touches (PEP 562 module __getattr__).
_LAZY: dict[str, str] = {
    "args_digest": "._util",
    "canonical_json": "._util",
    "AgentTools": ".adapters.callable",
    "CallableAdapter": ".adapters.callable",
    "wrap": ".adapters.callable",
    "ApprovalBook": ".approvals",
    "ApprovalOutcome": ".approvals",
    "ApprovalRecord": ".approvals",
    "ApprovalRequest": ".approvals",
    "ApprovalStatus": ".approvals",
    "Decision": ".approvals",
    "Principal": ".approvals",
    "AckResult": ".control",
    "ControlAck": ".control",
    "ControlChannel": ".control",
    "ControlKind": ".control",
    "ControlMessage": ".control",
    "ControlTransport": ".control",
    "DelegationDetector": ".detectors",
    "LoopingToolCallDetector": ".detectors",
    "StepBudgetDetector": ".detectors",
    "Drift": ".drift",
    "DriftKind": ".drift",
    "DriftSeverity": ".drift",
    "InterventionLevel": ".drift",
    "ApprovalError": ".errors",
    "ChannelBusyError": ".errors",
    "ConfigError": ".errors",
    "GoldfiveError": ".errors",
    "InvalidTransitionError": ".errors",
    "MissingExtraError": ".errors",
    "RunCancelledError": ".errors",
    "RunTerminatedError": ".errors",
    "EventEmitter": ".events",
    "EventSink": ".events",
    "InMemorySink": ".events",
    "JsonlSink": ".events",
    "LoggingSink": ".events",
    "DEFAULT_LADDER": ".ladder",
    "LadderRow": ".ladder",
    "RunStatus": ".lifecycle",
    "REPORTING_TOOL_NAMES": ".reporting",
    "TOOL_SPECS": ".reporting",
    "ToolSpec": ".reporting",
    "call_reporting_tool": ".reporting",
    "ControlRouter": ".routing",
    "Adapter": ".runner",
    "Runner": ".runner",
    "RunResult": ".runner",
    "Detector": ".session",
    "Guidance": ".session",
    "Session": ".session",
    "DefaultSteerer": ".steering",
    "SteeringConfig": ".steering",
    "install_default_steering": ".steering",
    "Task": ".tasks",
    "TaskStatus": ".tasks",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
