"""The eight reporting tools: what each does to tasks and events, and the errors a model can act on."""

from __future__ import annotations

from typing import Any

import pytest

from goldfive_core import REPORTING_TOOL_NAMES, TOOL_SPECS, InMemorySink, Session, SteeringConfig, TaskStatus
from goldfive_core.adapters.callable import AgentTools
from goldfive_core.reporting import call_reporting_tool


def _session(*, channel: bool = False) -> tuple[Session, InMemorySink]:
    sink = InMemorySink()
    session = Session(sinks=[sink], config=SteeringConfig(), has_channel=channel)
    session.start_task("root", title="the run")
    return session, sink


async def call(session: Session, name: str, args: Any) -> dict[str, Any]:
    return await call_reporting_tool(session, name, args)


def test_the_eight_tools_and_their_schemas() -> None:
    assert REPORTING_TOOL_NAMES == (
        "report_task_started",
        "report_task_progress",
        "report_task_completed",
        "report_task_failed",
        "report_task_blocked",
        "report_new_work_discovered",
        "report_plan_divergence",
        "report_awaiting_approval",
    )
    for name, spec in TOOL_SPECS.items():
        assert spec.name == name and spec.description
        assert spec.parameters["type"] == "object"
        assert spec.parameters["additionalProperties"] is False
        assert set(spec.parameters["required"]) <= set(spec.parameters["properties"])
    approval = TOOL_SPECS["report_awaiting_approval"].parameters
    assert approval["required"] == ["prompt"]
    assert set(approval["properties"]) == {"prompt", "task_id", "timeout_ms"}
    assert approval["properties"]["timeout_ms"]["type"] == "integer"


INVALID: list[tuple[str, Any, str]] = [
    ("report_task_started", {}, "'task_id' is required"),
    ("report_task_started", {"task_id": "  "}, "'task_id' must not be empty"),
    ("report_task_started", {"task_id": 5}, "'task_id' must be a string, got 5"),
    ("report_task_started", ["task_id"], "arguments must be an object, got list"),
    ("report_task_progress", {"message": "m", "fraction": 1.5}, "'fraction' must be at most 1"),
    ("report_task_progress", {"message": "m", "fraction": -0.1}, "'fraction' must be at least 0"),
    ("report_task_progress", {"message": "m", "fraction": float("nan")}, "'fraction' must be a number"),
    ("report_task_progress", {"message": "m", "fraction": True}, "'fraction' must be a number"),
    ("report_task_progress", {"msg": "m"}, "unknown argument(s) 'msg'; expected: message, task_id, fraction"),
    ("report_task_completed", {"result": 3}, "'result' must be a string"),
    ("report_task_failed", {}, "'reason' is required"),
    ("report_task_failed", {"reason": "x", "recoverable": "no"}, "'recoverable' must be true or false"),
    ("report_task_blocked", {"needed": "x"}, "'blocker' is required"),
    ("report_new_work_discovered", {"description": ""}, "'description' must not be empty"),
    ("report_plan_divergence", None, "'description' is required"),
    ("report_awaiting_approval", {}, "'prompt' is required"),
    ("report_awaiting_approval", {"prompt": "p", "timeout_ms": 1.5}, "'timeout_ms' must be an integer"),
    ("report_awaiting_approval", {"prompt": "p", "timeout_ms": "10"}, "'timeout_ms' must be an integer"),
    ("report_awaiting_approval", {"prompt": "p", "timeout_ms": 10**40}, "'timeout_ms' must be at most"),
    ("report_awaiting_approval", {"prompt": "p", "task_id": "ghost"}, "unknown task_id 'ghost'"),
]


@pytest.mark.parametrize(("name", "args", "message"), INVALID)
async def test_invalid_arguments_return_an_error_the_model_can_act_on(name: str, args: Any, message: str) -> None:
    session, sink = _session(channel=True)
    before = len(sink.events)
    out = await call(session, name, {} if args is None else args)
    assert set(out) == {"error", "tool"}
    assert out["tool"] == name
    assert out["error"].startswith(f"{name}: ")
    assert message in out["error"]
    assert len(sink.events) == before  # nothing happened
    assert session.approvals.statistics().live == 0


async def test_an_unknown_tool_is_named() -> None:
    session, _ = _session()
    out = await call(session, "report_everything", {})
    assert "unknown reporting tool 'report_everything'" in out["error"]
    assert "report_awaiting_approval" in out["error"]


async def test_started_creates_a_child_of_the_current_task_and_makes_it_current() -> None:
    session, sink = _session()
    out = await call(session, "report_task_started", {"task_id": "search", "title": "find flights"})
    assert out == {"ok": True, "task_id": "search", "status": "RUNNING"}
    event = sink.of("task_started")[-1].task_started
    assert (event.task_id, event.title, event.parent_id) == ("search", "find flights", "root")
    assert session.tasks.current is not None and session.tasks.current.id == "search"
    again = await call(session, "report_task_started", {"task_id": "search"})
    assert again["ok"] and len(sink.of("task_started")) == 2  # no duplicate TaskStarted


async def test_progress_defaults_to_the_current_task() -> None:
    session, sink = _session()
    assert await call(session, "report_task_progress", {"message": "half way", "fraction": 0.5}) == {
        "ok": True,
        "task_id": "root",
    }
    (event,) = sink.of("task_progress")
    assert (event.task_progress.task_id, event.task_progress.message) == ("root", "half way")
    assert event.task_progress.HasField("fraction") and event.task_progress.fraction == 0.5
    await call(session, "report_task_progress", {"message": "no fraction"})
    assert not sink.of("task_progress")[-1].task_progress.HasField("fraction")


async def test_completed_defaults_to_the_current_task_and_is_final() -> None:
    session, sink = _session()
    await call(session, "report_task_started", {"task_id": "sub"})
    assert await call(session, "report_task_completed", {"result": "found 3"}) == {
        "ok": True,
        "task_id": "sub",
        "status": "COMPLETED",
    }
    assert sink.of("task_completed")[-1].task_completed.result == "found 3"
    assert session.tasks.current is not None and session.tasks.current.id == "root"
    out = await call(session, "report_task_completed", {"task_id": "sub"})
    assert "cannot go from COMPLETED to COMPLETED" in out["error"]


async def test_progress_on_a_finished_task_is_refused() -> None:
    session, _ = _session()
    await call(session, "report_task_started", {"task_id": "sub"})
    await call(session, "report_task_completed", {})
    out = await call(session, "report_task_progress", {"message": "more", "task_id": "sub"})
    assert "'sub' is COMPLETED" in out["error"]


@pytest.mark.parametrize(
    ("recoverable", "kind", "severity"),
    [
        (None, "TASK_FAILED_RECOVERABLE", "WARNING"),
        (True, "TASK_FAILED_RECOVERABLE", "WARNING"),
        (False, "TASK_FAILED_FATAL", "CRITICAL"),
    ],
)
async def test_failed_emits_the_failure_and_a_drift(recoverable: bool | None, kind: str, severity: str) -> None:
    session, sink = _session()
    args: dict[str, Any] = {"reason": "site down"}
    if recoverable is not None:
        args["recoverable"] = recoverable
    out = await call(session, "report_task_failed", args)
    assert out == {"ok": True, "task_id": "root", "status": "FAILED"}
    failed = sink.of("task_failed")[-1].task_failed
    assert (failed.reason, failed.recoverable) == ("site down", recoverable is not False)
    drift = sink.of("drift_detected")[-1].drift_detected
    from goldfive_core.pb.v1 import types_pb2

    assert types_pb2.DriftKind.Name(drift.kind) == kind
    assert types_pb2.DriftSeverity.Name(drift.severity) == severity
    assert drift.task_id == "root" and drift.detail == "site down"


async def test_blocked_marks_the_task_and_reports_a_drift() -> None:
    session, sink = _session()
    out = await call(session, "report_task_blocked", {"blocker": "no API key", "needed": "a key"})
    assert out == {"ok": True, "task_id": "root", "status": "BLOCKED"}
    blocked = sink.of("task_blocked")[-1].task_blocked
    assert (blocked.blocker, blocked.needed) == ("no API key", "a key")
    assert session.tasks.get("root").status is TaskStatus.BLOCKED  # type: ignore[union-attr]
    assert sink.of("drift_detected")[-1].drift_detected.detail == "no API key (needs: a key)"
    await call(session, "report_task_progress", {"message": "got the key"})
    assert session.tasks.get("root").status is TaskStatus.RUNNING  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("name", "kind", "severity"),
    [("report_new_work_discovered", 3, 1), ("report_plan_divergence", 4, 2)],
)
async def test_discoveries_and_divergences_are_drifts(name: str, kind: int, severity: int) -> None:
    session, sink = _session()
    out = await call(session, name, {"description": "also book a hotel"})
    assert out == {"ok": True, "task_id": "root"}
    drift = sink.of("drift_detected")[-1].drift_detected
    assert (drift.kind, drift.severity, drift.detail, drift.task_id) == (kind, severity, "also book a hotel", "root")


async def test_no_current_task_asks_for_a_task_id() -> None:
    session = Session(config=SteeringConfig())
    out = await call(session, "report_task_progress", {"message": "m"})
    assert "there is no current task; pass task_id" in out["error"]


async def test_agent_tools_methods_and_call_are_the_same_tools() -> None:
    session, sink = _session(channel=False)
    tools = AgentTools(session, session.tasks.get("root"))  # type: ignore[arg-type]
    assert [s.name for s in tools.specs] == list(REPORTING_TOOL_NAMES)
    assert (await tools.report_task_started("a", title="A"))["ok"]
    assert (await tools.call("report_task_progress", {"message": "m"}))["task_id"] == "a"
    assert (await tools.report_task_completed(result="r"))["status"] == "COMPLETED"
    assert (await tools.call("report_task_completed", {"task_id": "nope"}))["error"].startswith("report_task_completed")
    assert (await tools.report_awaiting_approval(prompt="p", timeout_ms=5))["decision"] == "unavailable"
    assert sink.kinds().count("task_started") == 2
