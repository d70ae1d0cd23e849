"""CallableAdapter: a plain ``async def agent(task, tools)`` as a goldfive agent, and ``wrap()``."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Unpack

from .._util import new_id
from ..drift import InterventionLevel
from ..reporting import REPORTING_TOOL_NAMES, TOOL_SPECS, ToolSpec, call_reporting_tool
from ..runner import Adapter, Runner
from ..session import Guidance, Session
from ..supervision import RunOptions
from ..tasks import Task
from ..toolcall import Proceed, ToolCall, gate_tool_call

if TYPE_CHECKING:
    pass

__all__ = ["AgentTools", "CallableAdapter", "wrap"]

AgentFn = Callable[[Task, "AgentTools"], Awaitable[Any]]


class AgentTools:
    """What a callable agent gets as ``tools``: the reporting tools plus the step gate.

    Every call passes the step gate first, so a PAUSE holds the agent at its
    next report and a CANCEL ends it there (RunCancelledError).
    """

    def __init__(self, session: Session, task: Task) -> None:
        self.session = session
        self.task = task

    @property
    def specs(self) -> list[ToolSpec]:
        """The reporting tools' schemas (for agents that hand them to a model)."""
        return [TOOL_SPECS[name] for name in REPORTING_TOOL_NAMES]

    async def call(self, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call reporting tool ``name`` with ``args``; bad input returns ``{"error": ...}``."""
        await self.session.gate()
        return await call_reporting_tool(self.session, name, {} if args is None else args)

    async def checkpoint(self) -> list[str]:
        """A step boundary (counts toward the step budget): wait while paused, then return the queued notes."""
        await self.session.gate()
        await self._settle(await self.session.observe_model_call())
        return self.guidance()

    async def before_tool(self, name: str, args: Mapping[str, Any] | None = None) -> bool:
        """Say you are about to run your own tool ``name`` with ``args``; False means do not run it.

        The call goes through the tool-call gate (:func:`~goldfive_core.toolcall.gate_tool_call`):
        the drift detectors see it (e.g. the same call again and again), a paused run holds it, a
        person's waiting steer redirects it. False comes with a note in :meth:`guidance` saying why;
        when the ladder re-invokes the agent this call does not return (the agent is called again),
        and a stopped run raises RunCancelledError / RunTerminatedError.
        """
        call = ToolCall(call_id=new_id("call"), tool_name=name, args={} if args is None else args)
        outcome = await gate_tool_call(self.session, call, needs_person=False)
        if isinstance(outcome, Proceed):
            return True
        if outcome.reason == "run_cancelled":
            await self.session.gate()  # raises the stop the gate saw
        notes = outcome.guidance or (Guidance(text=outcome.detail, source="nudge"),)
        for note in notes:  # handed back through guidance(), as before
            self.session.add_guidance(note.text, note.source, note.control_id)
        return False

    async def _settle(self, level: InterventionLevel) -> None:
        if level >= InterventionLevel.CANCEL_REINVOKE:
            # Yield once so a cancellation the ladder just requested (re-invoke, abort) lands here,
            # before the agent acts on the step.
            await asyncio.sleep(0)
        await self.session.gate()

    def guidance(self) -> list[str]:
        """Notes for the agent (a person's steers, ladder nudges), oldest first; each is returned once."""
        return [note.text for note in self.session.take_guidance()]

    def guidance_notes(self) -> list[Guidance]:
        """Like :meth:`guidance`, with where each note came from."""
        return self.session.take_guidance()

    async def _named(self, name: str, **kwargs: Any) -> dict[str, Any]:
        return await self.call(name, {k: v for k, v in kwargs.items() if v is not None})

    async def report_task_started(
        self, task_id: str, *, title: str | None = None, parent_id: str | None = None
    ) -> dict[str, Any]:
        """Start (or create) a task; it becomes current."""
        return await self._named("report_task_started", task_id=task_id, title=title, parent_id=parent_id)

    async def report_task_progress(
        self, message: str, *, task_id: str | None = None, fraction: float | None = None
    ) -> dict[str, Any]:
        """Report progress."""
        return await self._named("report_task_progress", message=message, task_id=task_id, fraction=fraction)

    async def report_task_completed(self, *, task_id: str | None = None, result: str | None = None) -> dict[str, Any]:
        """Mark a task done."""
        return await self._named("report_task_completed", task_id=task_id, result=result)

    async def report_task_failed(
        self, reason: str, *, task_id: str | None = None, recoverable: bool | None = None
    ) -> dict[str, Any]:
        """Mark a task failed."""
        return await self._named("report_task_failed", reason=reason, task_id=task_id, recoverable=recoverable)

    async def report_task_blocked(
        self, blocker: str, *, needed: str | None = None, task_id: str | None = None
    ) -> dict[str, Any]:
        """Mark a task blocked."""
        return await self._named("report_task_blocked", blocker=blocker, needed=needed, task_id=task_id)

    async def report_new_work_discovered(self, description: str, *, task_id: str | None = None) -> dict[str, Any]:
        """Report unplanned work."""
        return await self._named("report_new_work_discovered", description=description, task_id=task_id)

    async def report_plan_divergence(self, description: str, *, task_id: str | None = None) -> dict[str, Any]:
        """Report leaving the plan."""
        return await self._named("report_plan_divergence", description=description, task_id=task_id)

    async def report_awaiting_approval(
        self, prompt: str, *, task_id: str | None = None, timeout_ms: int | None = None
    ) -> dict[str, Any]:
        """Ask a person; returns ``{"decision": approve|reject|timeout|unavailable|cancelled, "detail": ...}``."""
        return await self._named("report_awaiting_approval", prompt=prompt, task_id=task_id, timeout_ms=timeout_ms)


class CallableAdapter(Adapter):
    """Runs ``async def agent(task, tools)``; its return value is the run's output.

    At ladder level 3 (CANCEL_REINVOKE) the Runner cancels the agent and calls
    it again, up to ``SteeringConfig.max_reinvokes`` times; the corrective note
    is waiting in ``tools.guidance()``.
    """

    name = "callable"
    supports_reinvoke = True  # the agent re-reads its state from tools; a re-run starts with the corrective note

    def __init__(self, fn: AgentFn) -> None:
        if not callable(fn):
            raise TypeError(f"CallableAdapter needs an async callable agent(task, tools), got {type(fn).__name__}")
        self.fn = fn
        self.app_name = _stable_name(fn)

    async def run(self, session: Session, task: Task) -> Any:
        """Call the agent with its task and tools."""
        result = self.fn(task, AgentTools(session, task))
        if not inspect.isawaitable(result):
            raise TypeError(f"agent {self.fn!r} must be async (return an awaitable), got {type(result).__name__}")
        return await result


def _stable_name(fn: object) -> str:
    """A callable's stable name, ``module.qualname`` (its runs' app name, see :attr:`Adapter.app_name`); '' when it
    has none (e.g. a ``functools.partial``)."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or not module or not qualname:
        return ""
    return f"{module}.{qualname}"


def wrap(agent: Adapter | Callable[..., Any], *, app_name: str | None = None, **options: Unpack[RunOptions]) -> Runner:
    """Put ``agent`` under goldfive: an :class:`Adapter`, or ``async def agent(task, tools)``.

    ``options`` are every adapter's (:class:`~goldfive_core.supervision.RunOptions`): ``control``, ``sinks``,
    ``config``, ``policy`` (rules on tool calls, default ``GOLDFIVE_POLICY``), ``labels`` (the runs' labels for
    those rules) and ``session_setup`` (default: the ladder and its detectors; None: emit drift only).
    ``app_name`` names the runs' app, whose ledger a store process with no ``GOLDFIVE_AGENT_ID`` keeps its approved
    calls in (default: the callable's ``module.qualname``, an adapter's :attr:`Adapter.app_name`).
    """
    if isinstance(agent, Adapter):
        adapter = agent
    elif callable(agent):
        adapter = CallableAdapter(agent)
    else:
        raise TypeError(f"wrap() takes an Adapter or an async callable agent(task, tools), got {type(agent).__name__}")
    return Runner(adapter, app_name=app_name, **options)
