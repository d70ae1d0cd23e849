"""The canonical reporting tools: one JSON schema and one handler each, shared by every adapter.

Adapters expose :data:`TOOL_SPECS` to their model (ADK FunctionTools, Claude
MCP tools, the callable ``tools`` object) and route calls to
:func:`call_reporting_tool`. Invalid arguments never raise: the model gets an
``{"error": ...}`` dict that says what to fix.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ._util import safe_repr
from .approvals import MAX_TIMEOUT_MS, ApprovalRequest, ApprovalStatus
from .drift import Drift, DriftKind, DriftSeverity
from .errors import ApprovalError, InvalidTransitionError
from .limits import agent_limits, env_name, text_problem
from .pb.v1 import events_pb2
from .session import Session, approval_timeout_drift
from .tasks import Task, TaskStatus

__all__ = ["REPORTING_TOOL_NAMES", "TOOL_SPECS", "ToolSpec", "call_reporting_tool", "validate_args"]

JsonSchema = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class ToolSpec:
    """A reporting tool as a model sees it."""

    name: str
    description: str
    parameters: JsonSchema


def _schema(required: list[str], **props: JsonSchema) -> JsonSchema:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


_TASK_ID = {"type": "string", "description": "The task this is about; defaults to the current task."}

TOOL_SPECS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in [
        ToolSpec(
            "report_task_started",
            "Say you are starting a task (creates it if new; it becomes the current task).",
            _schema(
                ["task_id"],
                task_id={"type": "string", "description": "A short unique id for the task."},
                title={"type": "string", "description": "What the task is, in a few words."},
                parent_id={"type": "string", "description": "The task this one is part of."},
            ),
        ),
        ToolSpec(
            "report_task_progress",
            "Report progress on a task.",
            _schema(
                ["message"],
                message={"type": "string", "description": "What happened since the last report."},
                task_id=_TASK_ID,
                fraction={"type": "number", "minimum": 0, "maximum": 1, "description": "Share done, 0..1."},
            ),
        ),
        ToolSpec(
            "report_task_completed",
            "Say a task is done.",
            _schema([], task_id=_TASK_ID, result={"type": "string", "description": "The outcome, briefly."}),
        ),
        ToolSpec(
            "report_task_failed",
            "Say a task failed. recoverable=false means you cannot go on with it.",
            _schema(
                ["reason"],
                reason={"type": "string"},
                task_id=_TASK_ID,
                recoverable={"type": "boolean", "description": "Whether a retry or another way could work."},
            ),
        ),
        ToolSpec(
            "report_task_blocked",
            "Say a task cannot go on until something outside your control changes.",
            _schema(
                ["blocker"],
                blocker={"type": "string", "description": "What blocks the task."},
                needed={"type": "string", "description": "What would unblock it."},
                task_id=_TASK_ID,
            ),
        ),
        ToolSpec(
            "report_new_work_discovered",
            "Report work you found that the plan did not include.",
            _schema(["description"], description={"type": "string"}, task_id=_TASK_ID),
        ),
        ToolSpec(
            "report_plan_divergence",
            "Say you are departing from the plan, and why.",
            _schema(["description"], description={"type": "string"}, task_id=_TASK_ID),
        ),
        ToolSpec(
            "report_awaiting_approval",
            "Ask a person to approve before you go on. Returns {decision: approve|reject|timeout|unavailable, "
            "detail}. Only proceed on 'approve'.",
            _schema(
                ["prompt"],
                prompt={"type": "string", "description": "What you want to do and why, for the person deciding."},
                task_id=_TASK_ID,
                timeout_ms={
                    "type": "integer",
                    "maximum": MAX_TIMEOUT_MS,
                    "description": "How long to wait for a decision; omit or <= 0 for the default.",
                },
            ),
        ),
    ]
}

REPORTING_TOOL_NAMES: tuple[str, ...] = tuple(TOOL_SPECS)

_PY_TYPES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false"}


def _type_ok(kind: str, value: object) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):  # no float(): a huge int would overflow
        return True
    return math.isfinite(value) and (kind == "number" or value.is_integer())


def _safe_repr(value: object) -> str:
    return safe_repr(value, 60)


def validate_args(name: str, args: object) -> tuple[dict[str, Any] | None, str | None]:
    """Check ``args`` against the tool's schema; returns ``(clean_args, None)`` or ``(None, error)``."""
    spec = TOOL_SPECS[name]
    if not isinstance(args, Mapping):
        return None, f"arguments must be an object, got {type(args).__name__}"
    props: dict[str, JsonSchema] = spec.parameters["properties"]
    unknown = sorted(str(k) for k in args if k not in props)
    if unknown:
        return None, f"unknown argument(s) {', '.join(map(repr, unknown))}; expected: {', '.join(props)}"
    clean: dict[str, Any] = {}
    for key, prop in props.items():
        value = args.get(key)
        if value is None:
            if key in spec.parameters["required"]:
                return None, f"{key!r} is required ({_PY_TYPES[prop['type']]})"
            continue
        if not _type_ok(prop["type"], value):
            return None, f"{key!r} must be {_PY_TYPES[prop['type']]}, got {_safe_repr(value)}"
        not_text = text_problem(value, what=repr(key))
        if not_text:  # a lone surrogate: no event, store or terminal could carry it, so nothing is done with it
            return None, not_text
        if prop["type"] == "integer":
            value = int(value)
        if "minimum" in prop and value < prop["minimum"]:
            return None, f"{key!r} must be at least {prop['minimum']}, got {_safe_repr(value)}"
        if "maximum" in prop and value > prop["maximum"]:
            return None, f"{key!r} must be at most {prop['maximum']}, got {_safe_repr(value)}"
        if key in spec.parameters["required"] and isinstance(value, str) and not value.strip():
            return None, f"{key!r} must not be empty"
        clean[key] = value
    return clean, None


_ID_ARGS = frozenset({"task_id", "parent_id"})


def _over_limits(args: Mapping[str, Any]) -> str:
    """The first text argument over its limit (ids: max_id_chars; prompts and notes: max_prompt_chars)."""
    limits = agent_limits()
    for key, value in args.items():
        if not isinstance(value, str):
            continue
        field = "max_id_chars" if key in _ID_ARGS else "max_prompt_chars"
        limit = getattr(limits, field)
        if len(value) > limit:
            return f"{key} is {len(value)} characters; the limit is {limit} ({env_name(field)})"
    return ""


def _error(name: str, message: str) -> dict[str, Any]:
    return {"error": f"{name}: {message}", "tool": name}


def _task(session: Session, args: Mapping[str, Any]) -> Task:
    task_id = args.get("task_id")
    if task_id is None:
        current = session.tasks.current
        if current is None:
            raise InvalidTransitionError("there is no current task; pass task_id")
        return current
    task = session.tasks.get(task_id)
    if task is None:
        known = ", ".join(repr(t.id) for t in session.tasks.all()[:10]) or "none"
        raise InvalidTransitionError(f"unknown task_id {task_id!r} (known: {known}); report_task_started creates tasks")
    return task


def _ensure_started(session: Session, task: Task) -> None:
    if task.status is TaskStatus.PENDING:
        session.start_task(task.id)


async def _started(session: Session, args: dict[str, Any]) -> dict[str, Any]:
    task_id = args["task_id"]
    existing = session.tasks.get(task_id)
    if existing is not None and existing.status is TaskStatus.BLOCKED:
        session.tasks.transition(task_id, TaskStatus.RUNNING)
    else:
        parent = args.get("parent_id")
        if parent is None and existing is None and session.tasks.current is not None:
            parent = session.tasks.current.id
        session.start_task(task_id, title=args.get("title", ""), parent_id=parent)
    return {"ok": True, "task_id": task_id, "status": TaskStatus.RUNNING.value}


async def _progress(session: Session, args: dict[str, Any]) -> dict[str, Any]:
    task = _task(session, args)
    _ensure_started(session, task)
    if task.status is TaskStatus.BLOCKED:  # the agent is working on it again
        session.tasks.transition(task.id, TaskStatus.RUNNING)
    if task.status is not TaskStatus.RUNNING:
        raise InvalidTransitionError(f"task {task.id!r} is {task.status.value}; progress goes on running tasks")
    event = events_pb2.TaskProgress(task_id=task.id, message=args["message"])
    if "fraction" in args:
        event.fraction = float(args["fraction"])
    session.events.emit(event)
    return {"ok": True, "task_id": task.id}


async def _completed(session: Session, args: dict[str, Any]) -> dict[str, Any]:
    task = _task(session, args)
    _ensure_started(session, task)
    session.tasks.transition(task.id, TaskStatus.COMPLETED)
    session.events.emit(events_pb2.TaskCompleted(task_id=task.id, result=args.get("result", "")))
    return {"ok": True, "task_id": task.id, "status": TaskStatus.COMPLETED.value}


async def _failed(session: Session, args: dict[str, Any]) -> dict[str, Any]:
    task = _task(session, args)
    _ensure_started(session, task)
    recoverable = bool(args.get("recoverable", True))
    session.tasks.transition(task.id, TaskStatus.FAILED)
    session.events.emit(events_pb2.TaskFailed(task_id=task.id, reason=args["reason"], recoverable=recoverable))
    kind, severity = (
        (DriftKind.TASK_FAILED_RECOVERABLE, DriftSeverity.WARNING)
        if recoverable
        else (DriftKind.TASK_FAILED_FATAL, DriftSeverity.CRITICAL)
    )
    await session.handle_drift(Drift(kind, severity, args["reason"], task_id=task.id))
    return {"ok": True, "task_id": task.id, "status": TaskStatus.FAILED.value}


async def _blocked(session: Session, args: dict[str, Any]) -> dict[str, Any]:
    task = _task(session, args)
    _ensure_started(session, task)
    session.block_task(task.id, args["blocker"], args.get("needed", ""))
    detail = args["blocker"] + (f" (needs: {args['needed']})" if args.get("needed") else "")
    await session.handle_drift(Drift(DriftKind.BLOCKED, DriftSeverity.WARNING, detail, task_id=task.id))
    return {"ok": True, "task_id": task.id, "status": TaskStatus.BLOCKED.value}


async def _new_work(session: Session, args: dict[str, Any]) -> dict[str, Any]:
    task = _task(session, args)
    await session.handle_drift(
        Drift(DriftKind.NEW_WORK_DISCOVERED, DriftSeverity.INFO, args["description"], task_id=task.id)
    )
    return {"ok": True, "task_id": task.id}


async def _divergence(session: Session, args: dict[str, Any]) -> dict[str, Any]:
    task = _task(session, args)
    await session.handle_drift(
        Drift(DriftKind.PLAN_DIVERGENCE, DriftSeverity.WARNING, args["description"], task_id=task.id)
    )
    return {"ok": True, "task_id": task.id}


async def _awaiting_approval(session: Session, args: dict[str, Any]) -> dict[str, Any]:
    if not session.has_channel:
        return {
            "decision": "unavailable",
            "detail": "no person can answer: this run has no control channel. Do not do what needed approval; "
            "choose a safe alternative or stop.",
        }
    task = _task(session, args)
    if task.status.terminal:
        raise InvalidTransitionError(f"task {task.id!r} is {task.status.value}; it cannot wait for approval")
    existing = session.approvals.get(task.id)
    if existing is not None and existing.status is ApprovalStatus.PENDING:
        # Checked before BLOCKED so a duplicate call changes nothing.
        raise InvalidTransitionError(f"task {task.id!r} is already waiting for a decision on an approval request")
    requested = args.get("timeout_ms", 0)
    timeout_ms = min(requested if requested > 0 else session.config.approval_default_timeout_ms, MAX_TIMEOUT_MS)
    prompt = args["prompt"]
    if task.status is TaskStatus.PENDING:
        session.start_task(task.id)
    session.block_task(task.id, "awaiting_approval", prompt)
    request = ApprovalRequest(
        target_id=task.id,
        kind="task",
        prompt=prompt,
        task_id=task.id,
        timeout_ms=timeout_ms,
        keep_open_on_timeout=True,
    )
    try:
        outcome = await session.request_approval(request)
    except ApprovalError as exc:
        raise InvalidTransitionError(str(exc)) from None
    if outcome.decision == "timeout":
        session.emit_drift(approval_timeout_drift(task.id, task.id, timeout_ms))
        return {
            "decision": "timeout",
            "detail": f"no decision within {timeout_ms} ms. Do not proceed as if approved; the request stays open "
            "and a person may still answer it.",
        }
    result: dict[str, Any] = {"decision": outcome.decision, "detail": outcome.detail}
    if outcome.decided_by:
        result["decided_by"] = outcome.decided_by
    if outcome.decision == "cancelled":
        result["detail"] = outcome.detail or "the run was cancelled"
    return result


_HANDLERS: dict[str, Callable[[Session, dict[str, Any]], Awaitable[dict[str, Any]]]] = {
    "report_task_started": _started,
    "report_task_progress": _progress,
    "report_task_completed": _completed,
    "report_task_failed": _failed,
    "report_task_blocked": _blocked,
    "report_new_work_discovered": _new_work,
    "report_plan_divergence": _divergence,
    "report_awaiting_approval": _awaiting_approval,
}


async def call_reporting_tool(session: Session, name: str, args: object) -> dict[str, Any]:
    """Run reporting tool ``name`` for ``session``; bad input returns ``{"error": ...}``, never raises."""
    if not isinstance(name, str) or name not in _HANDLERS:
        return {
            "error": f"unknown reporting tool {_safe_repr(name)}; expected one of: {', '.join(REPORTING_TOOL_NAMES)}"
        }
    clean, problem = validate_args(name, args)
    if clean is None:
        return _error(name, problem or "invalid arguments")
    too_big = _over_limits(clean)
    if too_big:
        return _error(name, too_big)
    try:
        return await _HANDLERS[name](session, clean)
    except InvalidTransitionError as exc:
        return _error(name, str(exc))
