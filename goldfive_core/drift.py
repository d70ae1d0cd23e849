"""Drift: what went wrong, how badly, and the intervention levels a steerer can choose."""

from __future__ import annotations

import dataclasses
from enum import IntEnum

from ._util import new_id

__all__ = ["Drift", "DriftKind", "DriftSeverity", "InterventionLevel"]


class DriftKind(IntEnum):
    """Kinds of drift; values are the wire numbers of ``goldfive.v1.DriftKind``."""

    TOOL_ERROR = 1
    AGENT_REFUSAL = 2
    NEW_WORK_DISCOVERED = 3
    PLAN_DIVERGENCE = 4
    USER_STEER = 5
    USER_CANCEL = 6
    TASK_FAILED_RECOVERABLE = 7
    TASK_FAILED_FATAL = 8
    CONTEXT_PRESSURE = 9
    BLOCKED = 10
    WRONG_AGENT = 11
    AGENT_TRANSFER = 12
    MODEL_REFUSAL = 13
    STOPPED_EARLY = 14
    TOO_MANY_STEPS = 15
    GOAL_UNREACHABLE = 16
    TASK_TIMEOUT = 17
    REPEATED_FAILURE = 18
    UNEXPECTED_OUTPUT = 19
    SCHEMA_VIOLATION = 20
    HALLUCINATION_SUSPECTED = 21
    SAFETY_CONCERN = 22
    RESOURCE_EXHAUSTED = 23
    AMBIGUOUS_INTENT = 24
    CUSTOM = 25
    LOOPING_TOOL_CALL = 26
    LOOPING_REASONING = 27
    OFF_TOPIC = 29
    INTENT_DIVERGENCE = 30
    UNCERTAIN_PROGRESS = 31
    SELF_REPORTED_STUCK = 32
    RUNAWAY_DELEGATION = 35
    REFINE_VALIDATION_FAILED = 36
    HUMAN_INTERVENTION_REQUIRED = 37
    GOAL_DRIFT = 38
    LLM_CALL_TIMEOUT = 39


class DriftSeverity(IntEnum):
    """How bad a drift is; values are the wire numbers of ``goldfive.v1.DriftSeverity``."""

    INFO = 1
    WARNING = 2
    CRITICAL = 3


class InterventionLevel(IntEnum):
    """The rungs of the intervention ladder (docs/flows/escalation.md)."""

    OBSERVE = 0
    ABSORB = 1
    NUDGE = 2
    CANCEL_REINVOKE = 3
    PAUSE_ESCALATE = 4
    TERMINATE = 5


@dataclasses.dataclass(frozen=True, kw_only=True)
class _DriftFields:
    task_id: str | None = None
    drift_id: str = dataclasses.field(default_factory=lambda: new_id("drift"))


@dataclasses.dataclass(frozen=True)
class Drift(_DriftFields):
    """One observation that the run is going off track: ``Drift(kind, severity, detail, task_id=...)``."""

    kind: DriftKind
    severity: DriftSeverity
    detail: str = ""
