"""Task-augmented ``tools/call`` (MCP Tasks, revision 2025-11-25): a call that waits for a person, polled by id.

A client that puts ``task`` in a ``tools/call``'s params (``{"task": {"ttl": ...}}``) gets a ``CreateTaskResult``
at once (``status: "working"``) instead of a held request; the call itself (the gate, a person's decision, the
upstream) runs in the background of its client connection. The client polls ``tasks/get`` (``working`` until
it is decided, then ``completed``, or ``failed`` for an ``isError`` result: a rejection with its reason, a
timeout, a denial, an upstream's failure), fetches the ``CallToolResult`` with ``tasks/result`` (which waits
for the end) and may ``tasks/cancel`` a task whose call has not started upstream: its approval request is
withdrawn and the call never runs. When the call's upstream asks the client for input (``--elicit client``), the
task is ``input_required`` until a ``tasks/result`` of the client's carries the question (``elicitation/create``
with ``related-task`` in its ``_meta``) and the client answers; then ``working`` again. Tasks belong to the
connection (one MCP session, one goldfive run) that made them: another session cannot see or cancel them, and they
end with it.

A client that sends no ``task`` gets the held call as before; nothing here changes it.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import mcp_types as types
from mcp import MCPError
from mcp.server.lowlevel import Server
from mcp.shared.message import ServerMessageMetadata

from ..._util import shorten

__all__ = ["MAX_FINISHED", "POLL_INTERVAL_MS", "RELATED_TASK", "TASKS_CAPABILITY", "TaskState", "Tasks"]

logger = logging.getLogger(__name__)

POLL_INTERVAL_MS = 1000
"""How often the gateway suggests a client polls ``tasks/get``."""

MAX_FINISHED = 1000
"""The finished tasks a connection keeps for ``tasks/get`` / ``tasks/result`` (the oldest are forgotten)."""

MAX_WORKING = 1000
"""The tasks a connection may have working at once (one more is refused with an error result)."""

RELATED_TASK = "io.modelcontextprotocol/related-task"

TASKS_CAPABILITY = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(tools=types.TasksToolsCapability(call=types.TasksCallCapability())),
)
"""What the gateway declares in ``initialize``: task-augmented ``tools/call``, ``tasks/list``, ``tasks/cancel``."""

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]


class TaskState:
    """One task: its status, what the call is waiting for, and (once finished) the call's result."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.status: Status = "working"
        self.message = "checking the call"
        self.created = self.updated = _now()
        self.call_id = ""
        """The gateway's id of the call (the approval request's ``goldfive approve`` id), once it has one."""
        self.forwarding = False
        """Set once the gate let the call through: from then on it is the upstream's, and cannot be withdrawn."""
        self.result: dict[str, Any] | None = None
        self.done = asyncio.Event()
        self.runner: asyncio.Task[None] | None = None
        self.questions: list[_Question] = []
        """An upstream's questions for the client, open now (the task is ``input_required`` while there are any)."""
        self.changed = asyncio.Event()
        """Set when a question arrives or is handed back (a ``tasks/result`` waiting to carry one looks again)."""

    def finish(self, status: Status, message: str, result: dict[str, Any] | None) -> None:
        self.status, self.message, self.result, self.updated = status, message, result, _now()
        self.done.set()

    async def ask(self, question: types.ElicitRequestFormParams) -> types.ElicitResult:
        """Put ``question`` to the client (an ``AskClient`` for the task's call): the task is ``input_required``
        until a ``tasks/result`` of the client's carries it and the client answers; then ``working`` again."""
        asked = _Question(question)
        self.questions.append(asked)
        self._input_status()
        self.changed.set()
        try:
            return await asked.answer
        finally:  # answered, or withdrawn (no answer in time, the call ended)
            self.questions.remove(asked)
            self._input_status()

    def _input_status(self) -> None:
        if self.done.is_set():
            return
        status: Status = "input_required" if self.questions else "working"
        if status != self.status:
            self.status, self.updated = status, _now()

    def wire(self) -> dict[str, Any]:
        """The task as the client reads it (``Task``)."""
        return {
            "taskId": self.task_id,
            "status": self.status,
            "statusMessage": self.message,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttl": None,  # a task lives as long as its connection (see MAX_FINISHED)
            "pollInterval": POLL_INTERVAL_MS,
        }


class _Question:
    """One question of an upstream's for the client, and the client's answer once a ``tasks/result`` carried it."""

    def __init__(self, question: types.ElicitRequestFormParams) -> None:
        self.question = question
        self.answer: asyncio.Future[types.ElicitResult] = asyncio.get_running_loop().create_future()
        self.taken = False
        """A ``tasks/result`` is carrying it now (another one leaves it alone)."""


Deliver = Callable[[types.ElicitRequestFormParams, str], Awaitable[types.ElicitResult]]
"""Sends a task's question as ``elicitation/create`` on a ``tasks/result`` request (its ``related-task`` named);
the client's answer (an error answer raises)."""

INPUT_REQUIRED_MESSAGE = "an MCP server asks for input: call tasks/result to be asked"

Describe = Callable[[TaskState], str]
"""What a working task waits for, in words (``waiting for a person to approve (goldfive approve mcp-…)``)."""


class Tasks:
    """The tasks of one client connection."""

    def __init__(self, describe: Describe) -> None:
        self.describe = describe
        self._tasks: dict[str, TaskState] = {}

    @staticmethod
    def wanted(params: Mapping[str, Any]) -> bool:
        """Whether a ``tools/call``'s params ask for a task (``task: {ttl?}``)."""
        return isinstance(params.get("task"), dict)

    def start(self, call: Callable[[TaskState], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Run ``call`` (one ``tools/call``, its result as JSON) as a task; its ``CreateTaskResult`` as JSON."""
        working = sum(1 for t in self._tasks.values() if not t.done.is_set())
        if working >= MAX_WORKING:  # refused as a plain error result: nothing is asked, nothing runs
            text = f"{MAX_WORKING} tasks of this session are working: this call was not made; wait for some"
            return {"content": [{"type": "text", "text": text}], "isError": True}
        task = TaskState(f"task-{secrets.token_urlsafe(12)}")
        self._tasks[task.task_id] = task
        task.runner = asyncio.ensure_future(self._run(task, call))
        self._forget_old()
        return {"task": task.wire()}

    async def _run(self, task: TaskState, call: Callable[[TaskState], Awaitable[dict[str, Any]]]) -> None:
        try:
            result = await call(task)
        except asyncio.CancelledError:
            if not task.done.is_set():
                task.finish("cancelled", "cancelled: the call was not made", None)
            raise
        except Exception as exc:  # a bug of the gateway's is the client's clear failure, never a task left working
            logger.exception("a task's tools/call failed")
            failed = {"content": [{"type": "text", "text": f"the gateway failed: {type(exc).__name__}"}]}
            task.finish("failed", "the gateway failed", {**failed, "isError": True})
            return
        if result.get("isError"):
            task.finish("failed", _first_text(result), result)
        else:
            task.finish("completed", "done", result)

    def _forget_old(self) -> None:
        finished = [t for t in self._tasks.values() if t.done.is_set()]
        for task in finished[: max(0, len(finished) - MAX_FINISHED)]:
            del self._tasks[task.task_id]

    def _task(self, task_id: str) -> TaskState:
        task = self._tasks.get(task_id)
        if task is None:  # unknown, forgotten, or another session's: the same answer
            raise MCPError(code=types.INVALID_PARAMS, message=f"no task {shorten(task_id, 60)!r} in this session")
        return task

    def _wire(self, task: TaskState) -> dict[str, Any]:
        wire = task.wire()
        if task.status == "working":
            wire["statusMessage"] = self.describe(task)
        elif task.status == "input_required":
            wire["statusMessage"] = INPUT_REQUIRED_MESSAGE
        return wire

    # -- the tasks/* requests ------------------------------------------------------------------------------
    def get(self, task_id: str) -> dict[str, Any]:
        return self._wire(self._task(task_id))

    async def result(self, task_id: str, deliver: Deliver | None = None) -> dict[str, Any]:
        """The call's ``CallToolResult`` once the task finished (waits for it); a cancelled task is an error.

        While it waits, the task's questions for the client are sent with ``deliver`` (on this request: MCP Tasks
        asks a client that sees ``input_required`` to call ``tasks/result``), one at a time."""
        task = self._task(task_id)
        while not task.done.is_set():
            task.changed.clear()
            question = next((q for q in task.questions if not q.taken), None)
            if deliver is not None and question is not None:
                await _carry(task, question, deliver)
                continue
            await _first(task.done, task.changed)
        if task.result is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"task {task_id} was cancelled: the call was not made")
        meta = {**(task.result.get("_meta") or {}), RELATED_TASK: {"taskId": task_id}}
        return {**task.result, "_meta": meta}

    def cancel(self, task_id: str) -> dict[str, Any]:
        """Withdraw a working task's call (its approval request is cancelled; the call never runs)."""
        task = self._task(task_id)
        if task.done.is_set():
            raise MCPError(code=types.INVALID_PARAMS, message=f"task {task_id} is already {task.status}")
        if task.forwarding:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"task {task_id}'s call was let through and is running upstream: wait for its result",
            )
        task.finish("cancelled", "cancelled by the client: the call was not made", None)
        if task.runner is not None:
            task.runner.cancel()
        return task.wire()

    def list(self) -> dict[str, Any]:
        return {"tasks": [self._wire(t) for t in self._tasks.values()]}

    def register(self, server: Server[Any]) -> None:
        """Serve ``tasks/get``, ``tasks/result``, ``tasks/cancel`` and ``tasks/list`` on ``server``."""

        async def get(ctx: Any, params: types.GetTaskRequestParams) -> dict[str, Any]:
            return self.get(params.task_id)

        async def result(ctx: Any, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
            async def deliver(question: types.ElicitRequestFormParams, task_id: str) -> types.ElicitResult:
                wire = question.model_dump(by_alias=True, mode="json", exclude_none=True)
                related = types.ElicitRequestFormParams.model_validate(
                    {**wire, "_meta": {RELATED_TASK: {"taskId": task_id}}}
                )
                answer: types.ElicitResult = await ctx.session.send_request(
                    types.ElicitRequest(params=related),
                    types.ElicitResult,
                    metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
                )
                return answer

            return await self.result(params.task_id, deliver)

        async def cancel(ctx: Any, params: types.CancelTaskRequestParams) -> dict[str, Any]:
            return self.cancel(params.task_id)

        async def listed(ctx: Any, params: types.PaginatedRequestParams) -> dict[str, Any]:
            return self.list()

        server.add_request_handler("tasks/get", types.GetTaskRequestParams, get)
        server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, result)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, cancel)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, listed)

    async def aclose(self) -> None:
        """The connection ended: every working task is cancelled (its approval request withdrawn)."""
        runners = [t.runner for t in self._tasks.values() if t.runner is not None and not t.runner.done()]
        for runner in runners:
            runner.cancel()
        await asyncio.gather(*runners, return_exceptions=True)


async def _carry(task: TaskState, question: _Question, deliver: Deliver) -> None:
    """Send one question of ``task``'s on a ``tasks/result`` and hand the client's answer to the call that asked.

    A question withdrawn meanwhile (its time ran out, the call ended) stops the sending; a ``tasks/result`` that
    goes away hands the question back for the next one."""
    question.taken = True
    sending = asyncio.ensure_future(deliver(question.question, task.task_id))
    try:
        await asyncio.wait((sending, question.answer), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        sending.cancel()
        question.taken = False
        task.changed.set()
        raise
    if not sending.done() or question.answer.done():  # withdrawn meanwhile: whatever the client says is no one's
        sending.cancel()
        sending.add_done_callback(_retrieved)
        return
    failed = sending.exception()
    if failed is not None:
        question.answer.set_exception(failed)
    else:
        question.answer.set_result(sending.result())


def _retrieved(sending: asyncio.Future[Any]) -> None:
    """A question's sending that nobody waits for any more: its outcome is read (and dropped), never logged unread."""
    if not sending.cancelled():
        sending.exception()


async def _first(*events: asyncio.Event) -> None:
    """Until one of ``events`` is set."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def _first_text(result: Mapping[str, Any]) -> str:
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text":
            return shorten(str(block.get("text", "")), 300)
    return "the call failed"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
