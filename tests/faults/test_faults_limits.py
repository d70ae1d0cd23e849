"""Limits on the agent side: what the model sends is bounded before anyone is asked or anything is stored.

The model controls a Flow A prompt and task id and a tool call's arguments. Over the configured
limits (``GOLDFIVE_LIMIT_*``) the call is refused with a message naming the limit — the model reads
it, nothing is shown to a person, nothing runs — and nesting deep enough to blow the stack is refused
before any JSON is made.
"""

from __future__ import annotations

from typing import Any

import pytest

from goldfive_core import AgentTools, ControlChannel, InMemorySink, Task, wrap
from goldfive_core.store import SqliteStore, run_approved


async def _flow_a(prompt: str, task_id: str = "t-1") -> tuple[dict[str, Any], InMemorySink]:
    sink = InMemorySink()

    async def agent(task: Task, tools: AgentTools) -> Any:
        started = await tools.report_task_started(task_id)
        if "error" in started:
            return started
        return await tools.report_awaiting_approval(prompt, task_id=task_id, timeout_ms=5_000)

    result = await wrap(agent, control=ControlChannel(), sinks=[sink]).run()
    return result.output, sink


async def test_a_flow_a_prompt_over_the_limit_is_refused_and_nobody_is_asked() -> None:
    out, sink = await _flow_a("x" * 70_000)
    assert out["error"].startswith("report_awaiting_approval: prompt is 70000 characters; the limit is 65536")
    assert "GOLDFIVE_LIMIT_MAX_PROMPT_CHARS" in out["error"]
    assert sink.of("approval_requested") == []


async def test_a_task_id_over_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOLDFIVE_LIMIT_MAX_ID_CHARS", "20")
    out, sink = await _flow_a("ok?", task_id="t" * 21)
    assert out["error"] == (
        "report_task_started: task_id is 21 characters; the limit is 20 (GOLDFIVE_LIMIT_MAX_ID_CHARS)"
    )
    assert [e.task_started.task_id for e in sink.of("task_started") if e.task_started.task_id == "t" * 21] == []


async def _flow_b(tmp_path: Any, args: dict[str, Any], **kw: Any) -> tuple[Any, list[Any], InMemorySink]:
    store = SqliteStore(str(tmp_path / "gf.db"))
    ran: list[Any] = []
    sink = InMemorySink()

    async def body(call_args: Any) -> str:
        ran.append(call_args)
        return "sent"

    async def agent(task: Task, tools: AgentTools) -> Any:
        return await run_approved(
            tools.session,
            store,
            call_id=kw.get("call_id", "pay-1"),
            tool_name="send",
            args=args,
            body=body,
            prompt=kw.get("prompt", ""),
            timeout_ms=5_000,
        )

    result = await wrap(agent, control=ControlChannel(), sinks=[sink]).run()
    return result.output, ran, sink


async def test_tool_arguments_over_the_limit_are_refused_before_anyone_is_asked(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOLDFIVE_LIMIT_MAX_ARGS_CHARS", "100")
    out, ran, sink = await _flow_b(tmp_path, {"note": "y" * 200})
    assert out.status == "refused" and ran == [] and sink.of("approval_requested") == []
    assert out.detail.startswith("the call's arguments are 211 characters as JSON; the limit is 100")
    assert "GOLDFIVE_LIMIT_MAX_ARGS_CHARS" in out.detail and "was not run" in out.detail


async def test_deeply_nested_arguments_are_refused_without_recursing(tmp_path: Any) -> None:
    deep: Any = "bottom"
    for _ in range(50_000):  # far past Python's recursion limit: json.dumps would raise RecursionError
        deep = {"d": deep}
    out, ran, sink = await _flow_b(tmp_path, {"x": deep})
    assert out.status == "refused" and ran == [] and sink.of("approval_requested") == []
    assert out.detail.startswith("the call's arguments nests deeper than 64 levels (GOLDFIVE_LIMIT_MAX_JSON_DEPTH)")


async def test_a_prompt_or_call_id_over_the_limit_is_refused(tmp_path: Any) -> None:
    out, ran, _ = await _flow_b(tmp_path, {"a": 1}, prompt="p" * 70_000)
    assert out.status == "refused" and ran == [] and "the approval prompt is 70000 characters" in out.detail
    out, ran, _ = await _flow_b(tmp_path, {"a": 1}, call_id="c" * 300)
    assert out.status == "refused" and ran == [] and "the call id is 300 characters; the limit is 256" in out.detail


async def test_a_bad_limit_variable_does_not_break_the_agent(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOLDFIVE_LIMIT_MAX_ARGS_CHARS", "lots")
    out, _ = await _flow_a("x" * 70_000)
    assert "the limit is 65536" in out["error"]  # the defaults hold
