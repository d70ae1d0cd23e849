"""The goldfive ADK plugin: tool confirmation in-process (Flow B), the step gate and run events.

Register one instance on the App: ``App(name=..., root_agent=..., plugins=[GoldfivePlugin(...)])``.

How ADK maps onto goldfive
--------------------------
* **Runs.** One goldfive :class:`~goldfive_core.session.Session` per *active* ADK session:
  ``session_id`` = the ADK session id, ``run_id`` = a new ``run-…`` id. It starts at the first
  callback of an invocation and ends (RunCompleted / RunAborted) when the last invocation running
  in that ADK session ends. Usually that is exactly one ``runner.run_async(...)`` call; the next
  call on the same ADK session is a new goldfive run.
* **Root task.** The run's root task id is the ADK invocation id (``e-<uuid>``) of the invocation
  that started the run; the reporting tools default to it, so it is stable within a run.
* **Controls.** All runs share one :class:`~goldfive_core.routing.ControlRouter` on the plugin's
  channel: APPROVE/REJECT route by ``target_id`` (the function call id); PAUSE, RESUME, STEER,
  CANCEL name a run with ``payload["run_id"]`` or ``payload["session_id"]`` (the ADK session id)
  and without a name apply to every active run.
* **Ending.** ``after_run_callback`` (success, early close, ``abort_signal``) and
  ``on_run_error_callback`` end an invocation. ADK calls neither when the consumer's task is
  cancelled, so the plugin also watches the agent task it sees in ``before_model_callback``:
  when that task is cancelled the invocation ends (RunAborted, status CANCELLED) and every
  approval it held is withdrawn. An invocation cancelled before its first model call is noticed
  when the next invocation of that ADK session starts. ``close()`` (``Runner.close()``) ends
  whatever is left.
* **Resumes.** ADK's native confirm-and-resume and ``run_async(invocation_id=...)`` reuse an
  invocation id; each ``before_run_callback`` starts a new goldfive run all the same.
* **Detaching** (``detach_after``). A call the gate parks (``awaiting_approval``) ends the invocation with
  ADK's own resumable confirmation; a :class:`~goldfive_adk.detach.Resumer` answers it when a person has
  decided, and the resumed call goes through the gate again, where the ledger applies the recorded decision
  (see :mod:`goldfive_adk._detach`).

Short-circuits
--------------
``before_model_callback`` returns an ``LlmResponse`` only when the run was cancelled (it also
sets ``end_invocation``); ``before_tool_callback`` returns a dict (which ADK uses as the tool's
response, so the body never runs) for a rejection, a timeout, a cancelled run or a goldfive
intervention. Everything else returns ``None`` so other plugins and the agent's callbacks run.
ADK 2.13 gives callbacks no public handle on ``InvocationContext.end_invocation``
(``Context.get_invocation_context()`` returns a copy); that and every other private ADK attribute
goes through :mod:`goldfive_adk._compat`, which names the ADK version if one breaks.

Confirmation predicates (``require_confirmation=callable``) are evaluated by the plugin when the
function-call event passes (to keep early decisions) and again in ``before_tool_callback``, on
top of ADK's own two checks: keep them pure and cheap, as ADK already asks.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Unpack

from google.adk.agents.base_agent import BaseAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.llm_agent import LlmAgent
from google.adk.events import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from goldfive_core._util import new_id, shorten
from goldfive_core.errors import RunCancelledError, RunTerminatedError
from goldfive_core.inflight import InFlight
from goldfive_core.lifecycle import SessionSetup
from goldfive_core.session import Guidance, Session
from goldfive_core.steps import Step, StepKind, record_step
from goldfive_core.store.base import Store
from goldfive_core.store.channel import StoreChannel
from goldfive_core.store.sink import StoreSink
from goldfive_core.supervision import Supervised, Supervision, SupervisionOptions
from goldfive_core.toolcall import Proceed, Skip, ToolCall, gate_tool_call, timed_out

from ._asked import ASK_CONFIRMATION, announce_native, announce_native_answer, asked_confirmation, confirm_asked
from ._compat import body_gets_context, confirmation_flag, end_invocation, invocation_is_resumable
from ._confirm import CONFIRMED, skip, tool_params
from ._detach import RESUME_CLAIM, DecisionPendingError, DetachSettings, Parking, Resume
from ._runs import AdkRun

__all__ = ["GoldfivePlugin", "SessionSetup"]

logger = logging.getLogger(__name__)


_ENDED_MEMORY = 1024
_MISSING = object()
_STOPPED = (RunCancelledError, RunTerminatedError)


def _guidance_content(notes: list[Guidance]) -> types.Content:
    lines = [f"- ({note.source}) {note.text}" for note in notes]
    text = "[goldfive] A person overseeing this run says:\n" + "\n".join(lines)
    return types.Content(role="user", parts=[types.Part(text=text)])


def _user_text(ic: InvocationContext) -> str:
    content = ic.user_content
    if content is None or not content.parts:
        return ""
    return " ".join(p.text for p in content.parts if p.text)


def _skipped(tool_name: str, outcome: Skip) -> dict[str, Any]:
    """The function response ADK hands the model instead of running the tool."""
    if outcome.reason == "already_done":  # a replayed call that already ran: its recorded result
        result = outcome.result
        return result if isinstance(result, dict) else {"result": result}
    extra: dict[str, Any] = {"decided_by": outcome.decided_by} if outcome.decided_by else {}
    return skip(tool_name, outcome.reason, outcome.detail, **extra)


class _GoldfiveADKPlugin(Supervised, BasePlugin):
    """goldfive as an ADK plugin (public name: ``GoldfivePlugin``).

    ``control``: the channel a person answers on; ``None`` means nobody can answer, so
    confirmation tools stay with ADK's native flow and ``report_awaiting_approval`` says
    "unavailable". ``sinks`` receive every event of every run. ``config`` defaults to
    ``SteeringConfig.from_env()``; the tool-approval wait is ``effective_tool_approval_timeout_ms``.
    ``ledger`` records approved calls at most once (default: the channel's ledger, e.g. a
    :class:`~goldfive_core.store.StoreChannel`'s store; an in-memory channel has none).
    ``session_setup`` is called with each new Session; the default, like ``wrap()``'s runner, is
    :func:`~goldfive_core.steering.install_default_steering` (the ladder of docs/flows/escalation.md and the built-in
    detectors); ``None`` installs nothing (drift is only emitted).

    ``detach_after`` (seconds; needs a :class:`~goldfive_core.store.StoreChannel` and an App with
    ``ResumabilityConfig(is_resumable=True)``): when nobody has answered a tool confirmation within that
    time (``0`` = at once), the invocation ends the way ADK's own resumable confirmation ends it — an
    ``adk_request_confirmation`` call whose payload names the approval (and ``inbox_url`` with
    ``{approval_id}`` filled in) — and the approval stays pending in the store. A
    :class:`~goldfive_adk.detach.Resumer` in the app's process resumes the invocation when it is decided;
    ``resume_lease_s`` bounds how long one resume may hold a call before another process takes it over.
    ``None`` (the default) waits in-process as before.
    """

    def __init__(
        self,
        *,
        name: str = "goldfive",
        detach_after: float | None = None,
        inbox_url: str = "",
        resume_lease_s: float = 300.0,
        **supervision: Unpack[SupervisionOptions],
    ) -> None:
        super().__init__(name=name)
        control = supervision.get("control")
        self.detach: DetachSettings | None = None
        """How calls are parked while a person decides (None: the wait stays in-process)."""
        self._parking: Parking | None = None
        if detach_after is not None:
            if not isinstance(control, StoreChannel) or not isinstance(control.store, Store):
                raise ValueError(
                    "detach_after needs control=StoreChannel(open_store(...)) over a database (SQLite or "
                    "PostgreSQL): the approval and the parked call must outlive this request "
                    f"(got control={type(control).__name__})"
                )
            self.detach = DetachSettings(after_s=detach_after, inbox_url=inbox_url, lease_s=resume_lease_s)
            self._parking = Parking(self.detach, control.store)
        self.supervision = Supervision(**supervision)
        """The channel, sinks, config, policy (any tool; None: ``GOLDFIVE_POLICY``), labels, set-up and ledger."""
        self._runs: dict[str, AdkRun] = {}
        self._let_through: set[str] = set()
        """Call ids whose tool body goldfive let run (only their own confirmation requests are answered)."""
        self._tools: dict[int, tuple[BaseTool, bool, bool | None]] = {}
        """id(tool) → (the tool, whether its body gets the tool context and so may ask for a confirmation,
        whether it needs confirmation: always, never, or None = ask its predicate per call)."""
        self._in_flight = InFlight()
        """Approved calls whose body runs now (their end recorded, the approver's note handed to the model, a
        resumed parked call's lease settled)."""
        self._ended: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._live: dict[str, AdkRun] = {}
        """Invocation id → its run, for the invocations running now (the callbacks' fast path)."""
        self._policies: dict[tuple[int, str, str], bool | BaseTool] = {}
        """(agent, author, tool name) → needs confirmation: never, always, or evaluate the tool's predicate."""

    # -- public surface ----------------------------------------------------------------
    @property
    def sessions(self) -> list[Session]:
        """The goldfive sessions of the ADK sessions running now."""
        return [run.session for run in self._runs.values()]

    def session_for(self, adk_session_id: str) -> Session | None:
        """The goldfive session of an active ADK session, if it is running."""
        run = self._runs.get(adk_session_id)
        return run.session if run is not None else None

    def reporting_tools(self) -> list[BaseTool]:
        """The goldfive reporting tools (Flow A) bound to this plugin; add them to an agent's ``tools``."""
        from .tools import reporting_tools

        return reporting_tools(self)

    # -- run lifecycle ------------------------------------------------------------------
    def _run_for(self, adk_session_id: str, invocation_id: str, app_name: str) -> AdkRun | None:
        run = self._runs.get(adk_session_id)
        if run is not None:
            if invocation_id in run.invocations:
                self._live[invocation_id] = run
                return run
            if invocation_id in self._ended:
                return None  # a late callback of an invocation that already ended
            run.invocations[invocation_id] = set()
            self._live[invocation_id] = run
            return run
        if invocation_id in self._ended:
            return None
        return self._start(adk_session_id, invocation_id, None, app_name)

    def _start(self, adk_session_id: str, invocation_id: str, ic: InvocationContext | None, app_name: str) -> AdkRun:
        text = _user_text(ic) if ic is not None else ""
        agent = ic.agent.name if ic is not None and ic.agent is not None else "agent"
        handle = self.supervision.new_run(
            adapter="adk",
            root_task_id=invocation_id,
            title=f"ADK invocation of {agent}",
            input=text,
            session_id=adk_session_id,
            on_behalf_of=ic.user_id if ic is not None else "",
            records_steps=True,
            app_name=app_name,  # the App's name: the default ledger of a store agent with no GOLDFIVE_AGENT_ID
        )
        run = AdkRun(adk_session_id=adk_session_id, handle=handle)
        run.invocations[invocation_id] = set()
        self._runs[adk_session_id] = run
        self._live[invocation_id] = run
        handle.open()
        return run

    def _end_invocation(self, adk_session_id: str, invocation_id: str) -> None:
        run = self._runs.get(adk_session_id)
        self._live.pop(invocation_id, None)
        self._ended[invocation_id] = None
        while len(self._ended) > _ENDED_MEMORY:
            self._ended.popitem(last=False)
        if run is None or run.invocations.pop(invocation_id, _MISSING) is _MISSING:
            return
        if not run.invocations:
            self._finish(run)

    def _finish(self, run: AdkRun, reason: str = "") -> None:
        self._runs.pop(run.adk_session_id, None)
        for invocation_id in [i for i, r in self._live.items() if r is run]:
            del self._live[invocation_id]
        aborted = (reason or "the client aborted the invocation") if run.aborted or reason else ""
        detached = ""
        if run.detached:
            detached = f"waits for a person on {', '.join(run.detached)}; the invocation resumes when decided"
        elif run.native_waiting:
            detached = (
                f"waits for a person on {', '.join(run.native_waiting)}: ADK asked the client "
                "(adk_request_confirmation); the answer resumes the invocation as a new run"
            )
        run.handle.close(failed=run.error, cancelled=aborted, detached=detached)

    def _watch(self, run: AdkRun, invocation_id: str) -> None:
        tasks = run.invocations.get(invocation_id)
        task = asyncio.current_task()
        if tasks is None or task is None or task in tasks:
            return
        tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            # ADK calls no plugin hook when the consumer is cancelled; a cancelled agent task is our notice.
            if t.cancelled() and invocation_id in run.invocations:
                run.aborted = True
                self._end_invocation(run.adk_session_id, invocation_id)

        task.add_done_callback(done)

    async def before_run_callback(self, *, invocation_context: InvocationContext) -> types.Content | None:
        """Start (or join) the goldfive run of this ADK session."""
        ic = invocation_context
        # A resumed invocation (ADK's native confirm-and-resume, or run_async(invocation_id=...)) reuses
        # the id of one that already ended: this call is the start of a new goldfive run, not a late callback.
        self._ended.pop(ic.invocation_id, None)
        run = self._runs.get(ic.session.id)
        if run is not None:
            self._drop_dead_invocations(run)
        if ic.session.id not in self._runs:
            joined: AdkRun | None = self._start(ic.session.id, ic.invocation_id, ic, ic.session.app_name)
        else:
            joined = self._run_for(ic.session.id, ic.invocation_id, ic.session.app_name)
        if joined is not None:  # what the person asked this time: the context of the requests it leads to
            record_step(joined.session, StepKind.USER_TEXT, value=_user_text(ic))
        return None

    def _drop_dead_invocations(self, run: AdkRun) -> None:
        # An invocation whose agent tasks are all done yet never reported its end was cancelled where
        # the plugin could not see it; end it before a new invocation joins the run.
        for invocation_id, tasks in list(run.invocations.items()):
            if tasks and all(t.done() for t in tasks):
                run.aborted = True
                self._end_invocation(run.adk_session_id, invocation_id)

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        """The invocation ended (also after an early close or ``abort_signal``)."""
        ic = invocation_context
        run = self._runs.get(ic.session.id)
        if run is not None and ic.is_aborted:
            run.aborted = True
        self._end_invocation(ic.session.id, ic.invocation_id)
        if run is not None and run.detached and ic.session.id not in self._runs:
            await self._flush_store_sinks()

    async def _flush_store_sinks(self) -> None:
        """A detached run's request ends now: its approval must be in the store when the client hears of it."""
        store = self.control.store if isinstance(self.control, StoreChannel) else None
        for sink in self.sinks:
            if isinstance(sink, StoreSink) and sink.store is store and not await asyncio.to_thread(sink.flush, 5.0):
                logger.warning("the store sink did not flush within 5 s; the detached approval shows up later")

    async def on_run_error_callback(self, *, invocation_context: InvocationContext, error: Exception) -> None:
        """The invocation failed; the run ends with RunAborted (FAILED) unless another invocation goes on."""
        ic = invocation_context
        run = self._runs.get(ic.session.id)
        if run is not None and ic.invocation_id in run.invocations:
            pending = _pending_call(error)
            if pending:  # a parked call answered too early: the run still waits for a person
                run.detached.append(pending)
            else:
                run.error = f"the invocation failed: {shorten(repr(error), 500)}"
        self._end_invocation(ic.session.id, ic.invocation_id)

    async def close(self) -> None:
        """End every run still active (``Runner.close()``)."""
        for run in list(self._runs.values()):
            run.invocations.clear()
            self._finish(run, "the runner was closed")

    # -- step boundaries -----------------------------------------------------------------
    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Step gate before a model call; hands the model any queued guidance (STEER text, nudges)."""
        invocation_id = callback_context.invocation_id
        run = self._live.get(invocation_id)
        if run is None:  # the common case skips the slow path
            run = self._run_for(callback_context.session.id, invocation_id, callback_context.session.app_name)
            if run is None:
                return None
        if asyncio.current_task() not in run.invocations[invocation_id]:
            self._watch(run, invocation_id)
        try:
            notes = await run.session.model_step()
        except _STOPPED as exc:
            end_invocation(callback_context)
            text = f"[goldfive] The run was stopped: {exc}"
            return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))
        if notes:
            llm_request.contents.append(_guidance_content(notes))
        return None

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """The tool-call gate (:func:`~goldfive_core.toolcall.gate_tool_call`), translated for ADK."""
        # One function on purpose: this runs before every tool call, and each Python call costs.
        function_call_id = tool_context.function_call_id
        control = self.supervision.control  # the attribute itself: `self.control` is a descriptor's call
        known = self._tools.get(id(tool))
        if known is None:
            known = self._tools[id(tool)] = (tool, body_gets_context(tool), confirmation_flag(tool))
        # The body runs when this returns None: a confirmation it asks for is then ours to ask.
        lets_through = function_call_id if control is not None and known[1] else None
        invocation_id = tool_context.invocation_id
        run = self._live.get(invocation_id)
        if run is None:
            run = self._run_for(tool_context.session.id, invocation_id, tool_context.session.app_name)
            if run is None:
                if lets_through:
                    self._let_through.add(lets_through)
                return None
        flag = known[2]
        name = tool.name
        call_id = function_call_id or new_id("adk")
        run.expected.discard(call_id)
        confirmation = tool_context.tool_confirmation
        if control is None and confirmation is not None:
            announce_native_answer(run.session, call_id, confirmation)  # the client answered ADK
        resume: Resume | None = None
        if self._parking is not None and (confirmation is not None or RESUME_CLAIM.get() is not None):
            # A parked call comes back (the Resumer, or a client answering ADK itself): once its lease is held,
            # it goes through the gate like a replay. The client's `confirmed` flag counts for nothing.
            resume = await self._parking.take_up(tool_context, call_id=call_id, tool_name=name)
            if resume is not None:
                confirmation = tool_context.tool_confirmation = None
        # No channel: ADK's native confirmation stays in charge. A set confirmation: already decided
        # (ADK's native resume, or another plugin).
        needs = resume is not None or (
            control is not None
            and confirmation is None
            and flag is not False  # a tool that never asks is not asked per call (no predicate to run)
            and (flag is True or await tool.check_require_confirmation(tool_args, tool_context) is True)
        )
        params = tool_params(tool) if needs else None
        call = ToolCall(
            call_id=call_id,
            tool_name=name,
            args=tool_args,
            agent=tool_context.agent_name,
            args_schema=params.schema if params is not None else None,
        )
        outcome: Proceed | Skip
        if resume is not None and resume.expired_ms is not None:
            outcome = timed_out(run.session, call, resume.expired_ms)  # nobody decided in time: the gate's answer
        else:
            outcome = await gate_tool_call(
                run.session,
                call,
                needs_person=needs,
                validate_edit=params.check if params is not None else None,
                ledger=self.supervision.ledger,
                detach_after_s=None if self.detach is None else self._detach_after(tool_context),
            )
        on_end = None if resume is None else await self._settle_resume(call_id, resume, outcome)
        if isinstance(outcome, Skip):
            if outcome.stop_run:
                end_invocation(tool_context)
            if outcome.reason == "awaiting_approval" and self._parking is not None:
                parked = await self._parking.park(tool, tool_context, call_id=call_id, run_id=run.session.run_id)
                if parked["reason"] == "awaiting_approval" and call_id not in run.detached:
                    run.detached.append(call_id)
                return parked
            return _skipped(name, outcome)
        if outcome.decision is not None:
            if outcome.edited:
                tool_args.clear()  # in place: ADK passes this same dict on to the tool
                tool_args.update(outcome.args)
            # ADK 2.x re-checks the confirmation after the callbacks; without this it starts its own flow.
            tool_context.tool_confirmation = CONFIRMED
        elif needs:  # a policy rule allowed a call that asks by default: it runs without a person
            tool_context.tool_confirmation = CONFIRMED
        self._in_flight.started(outcome, on_end=on_end)
        if lets_through:
            self._let_through.add(lets_through)
        return None

    def _detach_after(self, tool_context: ToolContext) -> float | None:
        """How long the gate waits before the call is parked (None: the request's own timeout)."""
        if self.detach is None:
            return None
        if not invocation_is_resumable(tool_context):  # ADK could not resume it: wait in-process
            logger.warning(
                "detach_after is set but app %r is not resumable; waiting in-process", tool_context.session.app_name
            )
            return None
        return self.detach.after_s

    async def _settle_resume(
        self, call_id: str, resume: Resume, outcome: Proceed | Skip
    ) -> Callable[[], Awaitable[None]] | None:
        """Settle the resumed call now that its outcome is known; or, when its body runs now, what settles it
        at the body's end (the in-flight record runs it)."""
        parking = self._parking
        assert parking is not None
        if isinstance(outcome, Proceed) and outcome.ledger is not None:
            return lambda: parking.settle(call_id, resume.token, "approved: the tool ran")
        if isinstance(outcome, Skip) and outcome.reason == "awaiting_approval":
            return None  # parked again (a decision for other arguments): park() makes it wait once more
        await parking.settle(call_id, resume.token, outcome.reason if isinstance(outcome, Skip) else "ran")
        return None

    async def after_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, result: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Record an approved call's result (ledger) and hand the model the approver's note; ask the person
        when the tool asked ADK to.

        A tool that called ``tool_context.request_confirmation(...)`` in its body is answered here when a
        channel is bound: the person decides and the tool runs again, confirmed, with the answer (see
        :mod:`goldfive_adk._asked`); the confirmed run's result replaces the first one.
        """
        call_id = tool_context.function_call_id
        note = await self._in_flight.finished(call_id or "", result=result)
        noted = {**result, "goldfive_approval": note} if note and isinstance(result, dict) else None
        if call_id not in self._let_through:
            # goldfive or another plugin answered before the body: whatever was asked, the tool did not ask it.
            return noted
        self._let_through.discard(call_id)
        asked = asked_confirmation(tool_context)
        if asked is None:
            return noted
        run = self._runs.get(tool_context.session.id)
        if run is None:
            return noted  # not a run of ours (a late callback): ADK's own flow asks the client
        current = run.session.tasks.current
        return await confirm_asked(
            run.session,
            tool=tool,
            tool_args=tool_args,
            tool_context=tool_context,
            asked=asked,
            task_id=current.id if current is not None else run.root_task_id,
        )

    async def on_tool_error_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        """Record that an approved call raised (it did run) in the ledger."""
        self._let_through.discard(tool_context.function_call_id or "")
        await self._in_flight.finished(tool_context.function_call_id or "", error=error)
        return None

    # -- events ----------------------------------------------------------------------------
    async def on_event_callback(self, *, invocation_context: InvocationContext, event: Event) -> Event | None:
        """Announce function calls that will need confirmation (early decisions) and report transfers."""
        ic = invocation_context
        run = self._runs.get(ic.session.id)
        if run is None or ic.invocation_id not in run.invocations:
            return None
        transfer = event.actions.transfer_to_agent
        if transfer:
            await run.session.observe_transfer(transfer)
        content = event.content
        if content is None or not content.parts:
            return None
        # The event's model text, tool calls and results noted as the run's steps (an approver's context);
        # inline on purpose: this runs for every event, and each Python call costs.
        steps, author, make = run.session.steps, event.author, tuple.__new__  # make: a Step, no Python __new__
        for part in content.parts:
            if part.function_call is not None:
                asked = part.function_call
                steps.add(make(Step, (StepKind.TOOL_CALL, asked.name or "", asked.args or {}, asked.id or "")))
            elif part.function_response is not None:
                answer = part.function_response
                steps.add(make(Step, (StepKind.TOOL_RESULT, answer.name or "", answer.response, answer.id or "")))
            elif part.text and not part.thought and author != "user":
                steps.add(make(Step, (StepKind.MODEL_TEXT, author, part.text, "")))
        if self.supervision.control is None:
            self._announce_native(run, content.parts)
            return None
        for part in content.parts:
            call = part.function_call
            if call is None or not call.id or not call.name:
                continue
            policy = self._policies.get((id(ic.agent), event.author, call.name), _MISSING)
            if policy is _MISSING:
                policy = self._policy(ic, event.author, call.name)
            # `is False` first: isinstance() on the BaseTool ABC is a Python call, and most tools never ask.
            if policy is True or (
                policy is not False and isinstance(policy, BaseTool) and await self._predicate(policy, ic, call)
            ):
                run.session.expect_approval(call.id)
                run.expected.add(call.id)
        return None

    @staticmethod
    def _announce_native(run: AdkRun, parts: list[types.Part]) -> None:
        """No channel: ADK asks the client itself (``adk_request_confirmation``); report it as ApprovalRequested."""
        for part in parts:
            call = part.function_call
            if call is None or call.name != ASK_CONFIRMATION:
                continue
            current = run.session.tasks.current
            task_id = current.id if current is not None else run.root_task_id
            target_id = announce_native(run.session, call, task_id=task_id)
            if target_id is not None and target_id not in run.native_waiting:
                run.native_waiting.append(target_id)

    def _policy(self, ic: InvocationContext, author: str, tool_name: str) -> bool | BaseTool:
        """Whether calls of ``tool_name`` by ``author`` need confirmation: always, never, or ask the tool."""
        found: BaseTool | None = None
        root = ic.agent.root_agent if isinstance(ic.agent, BaseAgent) else None
        agent = root.find_agent(author) if root is not None else None
        if isinstance(agent, LlmAgent):
            found = next((t for t in agent.tools if isinstance(t, BaseTool) and t.name == tool_name), None)
        policy: bool | BaseTool
        if found is None:
            policy = False
        else:
            flag = confirmation_flag(found)
            policy = found if flag is None else flag
        self._policies[(id(ic.agent), author, tool_name)] = policy
        return policy

    @staticmethod
    async def _predicate(tool: BaseTool, ic: InvocationContext, call: types.FunctionCall) -> bool:
        try:
            context = ToolContext(ic, function_call_id=call.id)
            return await tool.check_require_confirmation(dict(call.args or {}), context) is True
        except Exception:
            # Only an early announcement: before_tool_callback evaluates the predicate again for real.
            logger.warning("require_confirmation predicate of %r failed on %s", tool.name, call.id, exc_info=True)
            return False


def _pending_call(error: BaseException) -> str:
    """The parked call an invocation was refused for (DecisionPendingError, perhaps wrapped), else ""."""
    for exc in (error, error.__cause__, error.__context__):
        if isinstance(exc, DecisionPendingError):
            return exc.target_id
    return ""


GoldfivePlugin = _GoldfiveADKPlugin
"""The public name of the goldfive ADK plugin."""
