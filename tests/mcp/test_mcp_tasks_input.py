"""MCP Tasks' ``input_required`` status: a task-augmented call whose upstream asks the client for input.

With ``--elicit client`` an upstream's question (its ``elicitation/create``, or an ``input_required`` result of MCP
2026-07-28) during a task-augmented ``tools/call`` puts the task in ``input_required``; the client, as the Tasks
revision (2025-11-25) asks, calls ``tasks/result``, which carries the question (``elicitation/create`` naming the
task in ``_meta["io.modelcontextprotocol/related-task"]``); the answer goes upstream and the task works on to its
result. Real ``mcp`` SDK clients (stdio, streamable HTTP) and the real SDK upstream of tests/mcp/elicit_upstream.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcp_http_support import call_as_task, elicit_http_session, get_task, task_result
from mcp_support import elicit_gateway, text

BOOKING = {"restaurant": "Chez Ana"}
ANA = {"name": "Ana", "guests": 4, "seating": "terrace", "vegetarian": True}
RELATED_TASK = "io.modelcontextprotocol/related-task"


class TaskAnswers:
    """An ``elicitation_callback`` that answers ``content`` and keeps what it was asked, and the task's status
    (``tasks/get``) while the question was open."""

    def __init__(self, content: dict[str, Any]) -> None:
        self.content = content
        self.asked: list[types.ElicitRequestFormParams] = []
        self.status_while_asked: list[str] = []
        self.client: Client | None = None

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params)
        if self.client is not None and params.meta:
            task = await get_task(self.client, params.meta[RELATED_TASK]["taskId"])  # type: ignore[index]
            self.status_while_asked.append(task.status)
        return types.ElicitResult(action="accept", content=self.content)


async def until_status(client: Client, task_id: str, *wanted: str) -> types.GetTaskResult:
    """``tasks/get`` until the task's status is one of ``wanted`` (as a client polls at the suggested interval)."""
    for _ in range(300):
        task = await get_task(client, task_id)
        if task.status in wanted:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} never got to {wanted}")


async def until_input_required(client: Client, task_id: str) -> types.GetTaskResult:
    return await until_status(client, task_id, "input_required")


async def a_task_asks_and_is_answered(
    client: Client, answers: TaskAnswers, tool: str, arguments: dict[str, Any]
) -> tuple[types.GetTaskResult, types.CallToolResult, types.GetTaskResult]:
    answers.client = client
    created = await call_as_task(client, tool, arguments)
    assert created.task.status == "working"
    asking = await until_input_required(client, created.task.task_id)
    result = await task_result(client, created.task.task_id)  # carries the question; the callback answers
    return asking, result, await get_task(client, created.task.task_id)


async def test_a_task_whose_upstream_asks_goes_input_required_and_tasks_result_carries_the_question(
    tmp_path: Path,
) -> None:
    answers = TaskAnswers(ANA)
    async with elicit_gateway(tmp_path, "--elicit", "client", elicitation_callback=answers) as gw:
        assert gw.client is not None
        asking, result, done = await a_task_asks_and_is_answered(gw.client, answers, "book_table", BOOKING)
        assert await gw.pending() == []  # nobody was asked through goldfive
    assert asking.status == "input_required" and "tasks/result" in (asking.status_message or "")
    assert answers.status_while_asked == ["input_required"]
    [asked] = answers.asked
    assert asked.message == "Booking at Chez Ana: who is it for, and how many?"
    assert asked.meta is not None and asked.meta[RELATED_TASK] == {"taskId": asking.task_id}  # type: ignore[index]
    assert not result.is_error and "booked Chez Ana for Ana (4)" in text(result)
    assert done.status == "completed"
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "accept", "data": ANA}]


async def test_a_task_whose_upstream_answers_input_required_is_asked_through_tasks_result(tmp_path: Path) -> None:
    answers = TaskAnswers({"reason": "damaged"})
    flags = ("--elicit", "client")
    async with elicit_gateway(tmp_path, *flags, elicitation_callback=answers, protocol="2026-07-28") as gw:
        assert gw.client is not None
        asking, result, done = await a_task_asks_and_is_answered(gw.client, answers, "refund", {"order": "A-7"})
    assert asking.status == "input_required" and answers.status_while_asked == ["input_required"]
    assert not result.is_error and "refund A-7: accept" in text(result) and done.status == "completed"
    assert gw.upstream_calls()[-1]["data"] == {"reason": "damaged"}


async def test_over_http_a_task_whose_upstream_asks_is_answered_on_the_tasks_result_stream(tmp_path: Path) -> None:
    answers = TaskAnswers(ANA)
    async with elicit_http_session(tmp_path, "--elicit", "client", elicitation_callback=answers) as (gw, client):
        asking, result, done = await a_task_asks_and_is_answered(client, answers, "book_table", BOOKING)
    assert asking.status == "input_required" and answers.status_while_asked == ["input_required"]
    assert "booked Chez Ana for Ana (4)" in text(result) and done.status == "completed"
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "accept", "data": ANA}]


async def test_a_task_question_nobody_fetches_is_a_cancel_upstream_and_the_task_works_on(tmp_path: Path) -> None:
    answers = TaskAnswers(ANA)
    flags = ("--elicit", "client", "--approval-timeout", "1")
    async with elicit_gateway(tmp_path, *flags, elicitation_callback=answers) as gw:
        assert gw.client is not None
        created = await call_as_task(gw.client, "book_table", BOOKING)
        asking = await until_input_required(gw.client, created.task.task_id)
        # the client never calls tasks/result: the question's time runs out
        done = await until_status(gw.client, created.task.task_id, "completed", "failed", "cancelled")
        result = await task_result(gw.client, created.task.task_id)
    assert asking.status == "input_required"
    assert done.status == "completed" and "not booked: cancel" in text(result)  # a timeout is a cancel, never decline
    assert answers.asked == []
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "cancel"}]


class AnswersTheSecondTime(TaskAnswers):
    """Never answers the first question (its ``tasks/result`` is given up); answers the next."""

    def __init__(self, content: dict[str, Any]) -> None:
        super().__init__(content)
        self.first = asyncio.Event()

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if not self.first.is_set():
            self.first.set()
            await asyncio.Event().wait()  # until the request it came on is cancelled
        return await super().__call__(context, params)


async def test_a_tasks_result_given_up_hands_its_question_to_the_next(tmp_path: Path) -> None:
    answers = AnswersTheSecondTime(ANA)
    async with elicit_gateway(tmp_path, "--elicit", "client", elicitation_callback=answers) as gw:
        assert gw.client is not None
        created = await call_as_task(gw.client, "book_table", BOOKING)
        await until_input_required(gw.client, created.task.task_id)
        first = asyncio.create_task(task_result(gw.client, created.task.task_id))
        await asyncio.wait_for(answers.first.wait(), 15)
        first.cancel()  # the client gives up on that tasks/result (notifications/cancelled)
        await asyncio.gather(first, return_exceptions=True)
        result = await asyncio.wait_for(task_result(gw.client, created.task.task_id), 30)
    assert "booked Chez Ana for Ana (4)" in text(result)
    assert gw.upstream_calls() == [{"tool": "book_table", "action": "accept", "data": ANA}]
