"""ADK agents served over A2A with goldfive: a gated call is an A2A task waiting for a person.

``a2a_app(app, ...)`` serves an ADK :class:`~google.adk.apps.App` that carries a
:class:`~goldfive_adk.GoldfivePlugin` over A2A, with ADK's own A2A executor (``A2aAgentExecutor``) and
card builder and the ``a2a-sdk`` request handler, JSON-RPC routes and push-notification sender.
:class:`GoldfiveA2aExecutor` is the piece in between; use it directly to wire your own server.

How the task's state follows goldfive (docs/a2a.md has the table):

* A call that needs a person moves the task to ``TASK_STATE_AUTH_REQUIRED``: A2A §7.6 names "an agent
  requiring human approval before a destructive action" for it, the answer comes out of band (from the
  person, in goldfive), and the agent may go on without a client message. ``INPUT_REQUIRED`` would tell the
  caller that *its* next message is the answer, which is exactly what must not happen here. The status
  message names the approval, the request, the rule and the inbox link; the arguments only with
  ``show_args=True``.
* The request that started the task returns there (a blocking ``message/send`` returns the task in
  ``auth-required``); the invocation goes on waiting inside the agent. When a person decides, the task goes
  back to ``WORKING`` and on to ``COMPLETED`` by itself; every change reaches ``tasks/get``, resubscribers and
  the webhooks the client registered.
* While the task waits, a message from the A2A caller to it is never handed to the agent: it cannot approve
  (a ``function_response`` for the call or for ADK's ``adk_request_confirmation``, a text saying yes). It is
  refused, the task stays in ``auth-required`` with the refusal as its status message, and the run records
  ``decision_refused``. The one exception is a decision goldfive's server signed for that exact request
  (``{"goldfive_decision": {...}}`` in a data part, the APPROVE/REJECT payload with its ``signature``),
  checked against the agent's trusted key like any signed decision, and then applied.
* If the agent process dies while the task waits, the in-memory task and invocation die with it; the call
  never ran, and the execution ledger keeps it from running twice (docs/a2a.md, "When the agent dies").
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from goldfive_core._util import now_ms, shorten
from goldfive_core.control import ControlKind, ControlMessage
from goldfive_core.errors import MissingExtraError
from goldfive_core.events import on_record
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.session import Session
from goldfive_core.signing import TrustKey
from goldfive_core.store.trust import verify_decision

try:
    import httpx
    from a2a.helpers.proto_helpers import new_data_part, new_text_part
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.events import Event as A2aEvent
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks import (
        BasePushNotificationSender,
        InMemoryPushNotificationConfigStore,
        InMemoryTaskStore,
        PushNotificationConfigStore,
        TaskStore,
    )
    from a2a.types import (
        Message,
        Part,
        Role,
        Task,
        TaskArtifactUpdateEvent,
        TaskState,
        TaskStatus,
        TaskStatusUpdateEvent,
    )
    from google.adk.a2a.converters.part_converter import convert_a2a_part_to_genai_part
    from google.adk.a2a.executor.a2a_agent_executor import A2aAgentExecutor
    from google.adk.a2a.utils.agent_card_builder import AgentCardBuilder
    from google.adk.agents.base_agent import BaseAgent
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.apps import App
    from google.adk.events import Event as AdkEvent
    from google.adk.plugins import BasePlugin
    from google.adk.runners import Runner
    from google.adk.sessions.in_memory_session_service import InMemorySessionService
    from google.adk.workflow import Workflow
    from google.protobuf import struct_pb2
    from google.protobuf.json_format import MessageToDict
    from starlette.applications import Starlette
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingExtraError("goldfive_adk.a2a (ADK agents over A2A)", "a2a") from exc

from .plugin import GoldfivePlugin

__all__ = ["DECISION_KEY", "METADATA_PREFIX", "GoldfiveA2aExecutor", "RemoteWaits", "a2a_app"]

logger = logging.getLogger(__name__)

DECISION_KEY = "goldfive_decision"
"""A data part ``{"goldfive_decision": {...}}`` carries a goldfive-signed decision in band."""

METADATA_PREFIX = "goldfive/"
"""Keys of the status update's metadata that goldfive sets (``goldfive/approval_id``, ...)."""

RECORD_WAIT_S = 10.0
"""How long an ``auth-required`` update waits for the request to be on record in the store (the sinks'
writes) before it is sent anyway, with a warning: past this the store is out, and its sink keeps retrying."""

_MAX_REFUSED_TEXT = 300
_CLOSED = frozenset({"approval_granted", "approval_rejected", "approval_timed_out", "approval_cancelled"})


def _inbox_link(template: str, approval_id: str) -> str:
    if not template:
        return ""
    return template.replace("{approval_id}", approval_id) if "{approval_id}" in template else template


@dataclasses.dataclass
class _Wait:
    """One call of the task that waits for a person."""

    approval_id: str
    request_id: str
    request_digest: str
    tool: str
    rule: str
    args_digest: str
    expires_at_ms: int
    args_json: str

    def facts(self, inbox: str, *, show_args: bool) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "status": "waiting_for_person",
            "approval_id": self.approval_id,
            "request_id": self.request_id,
            "tool": self.tool,
            "rule": self.rule,
            "args_digest": self.args_digest,
            "inbox_url": inbox,
        }
        if self.expires_at_ms:
            facts["expires_at_ms"] = self.expires_at_ms
        if show_args:
            facts["args_json"] = self.args_json
        return facts


def _wait_of(event: events_pb2.Event) -> _Wait:
    asked = event.approval_requested
    meta = asked.metadata
    return _Wait(
        approval_id=asked.target_id,
        request_id=asked.request_id,
        request_digest=asked.request_digest,
        tool=meta.get("tool_name", ""),
        rule=meta.get("policy_rule", "") or "require_confirmation",
        args_digest=asked.args_digest,
        expires_at_ms=asked.expires_at.ToMilliseconds() if asked.HasField("expires_at") else 0,
        args_json=meta.get("args_json", ""),
    )


def _closing_words(kind: str, event: events_pb2.Event) -> str:
    if kind == "approval_granted":
        by = event.approval_granted.decided_by
        return f"approved{f' by {by}' if by else ''} in goldfive; the call goes on"
    if kind == "approval_rejected":
        by = event.approval_rejected.decided_by
        return f"rejected{f' by {by}' if by else ''} in goldfive; the agent is told why"
    if kind == "approval_timed_out":
        return "nobody decided in time; the agent goes on as the rule says"
    return "the request was withdrawn"


def _struct(values: Mapping[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(dict(values))
    return out


class _Link:
    """One A2A task whose ADK invocation runs here: its queue, its waits, goldfive's status changes to send."""

    def __init__(self, owner: GoldfiveA2aExecutor, task_id: str, context_id: str, queue: EventQueue) -> None:
        self.owner = owner
        self.task_id = task_id
        self.context_id = context_id
        self.queue = queue
        self.loop = asyncio.get_running_loop()
        self.waiting: dict[str, _Wait] = {}
        self.parked = asyncio.Event()
        """Set when the task first went to auth-required: the request that started it may return."""
        self.ended = False
        self.run: asyncio.Task[None] | None = None
        """The invocation's task (it outlives the request that started it while a person decides)."""
        self._pending: list[tuple[A2aEvent, bool]] = []
        """Status changes to send, each with whether it must wait until the run's events are on record."""
        self._lock = asyncio.Lock()
        self._flushes: set[asyncio.Task[None]] = set()

    # -- goldfive's events, from the plugin's sink (on the loop, or handed over to it) --------------------
    def observe(self, event: events_pb2.Event) -> None:
        kind = event.WhichOneof("payload")
        if kind == "approval_requested" and event.approval_requested.kind == "tool":
            wait = _wait_of(event)
            self.waiting[wait.approval_id] = wait
            self._push(self.owner.waiting_update(self, wait), recorded=True)
        elif kind in _CLOSED:
            target = getattr(event, kind).target_id
            if self.waiting.pop(target, None) is not None and not self.waiting:
                self._push(self.owner.status(self, TaskState.TASK_STATE_WORKING, _closing_words(kind, event), target))

    def _push(self, update: A2aEvent, *, recorded: bool = False) -> None:
        if self.ended:
            return
        self._pending.append((update, recorded))
        task = self.loop.create_task(self.flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def flush(self) -> None:
        """Send goldfive's status changes, in order, before whatever ADK's executor sends next.

        An ``auth-required`` update goes out once the request is on record in the store, so the approval it
        names can be found and decided even if this process dies right after (and the request that started
        the task returns only then).
        """
        async with self._lock:
            while self._pending:
                update, recorded = self._pending.pop(0)
                if recorded and not await on_record(self.owner.plugin.sinks, RECORD_WAIT_S):
                    logger.warning(
                        "A2A task %s: the approval request is not on record after %g s (store out?); "
                        "the caller is told it waits anyway",
                        shorten(self.task_id, 100),
                        RECORD_WAIT_S,
                    )
                await self.queue.enqueue_event(update)
                if recorded:
                    self.parked.set()


class _Ordered(EventQueue):
    """The queue ADK's executor writes to: goldfive's pending status changes go first, so the task's updates
    stay in the order they happened (never a ``working`` after ``completed``)."""

    def __init__(self, link: _Link) -> None:
        self._link = link

    async def enqueue_event(self, event: A2aEvent) -> None:
        await self._link.flush()
        if not self._link.owner.show_args:
            self._link.owner.hide_gated_args(self._link, event)
        await self._link.queue.enqueue_event(event)


class _TaskSink:
    """A goldfive event sink on the plugin: hands each run's approval events to its A2A task."""

    def __init__(self, links: dict[str, _Link]) -> None:
        self._links = links

    def emit(self, event: events_pb2.Event) -> None:
        link = self._links.get(event.session_id)
        if link is None or link.ended:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is link.loop:
            link.observe(event)
        else:  # a decision dispatched from another thread: the task's loop takes it
            copy = events_pb2.Event()
            copy.CopyFrom(event)
            link.loop.call_soon_threadsafe(link.observe, copy)


class GoldfiveA2aExecutor(AgentExecutor):
    """An A2A ``AgentExecutor`` for an ADK runner with a :class:`~goldfive_adk.GoldfivePlugin` (see the module).

    ``runner``: the runner of the App carrying ``plugin`` (``plugin`` defaults to the App's GoldfivePlugin).
    ``inbox_url``: the inbox link shown to the caller, ``{approval_id}`` filled in. ``show_args``: put the
    call's arguments in the status message (off by default: the caller may not be entitled to them).
    ``trust_key``: the key an in-band decision must be signed with (default: the plugin channel's).
    """

    def __init__(
        self,
        *,
        runner: Runner,
        plugin: GoldfivePlugin | None = None,
        inbox_url: str = "",
        show_args: bool = False,
        trust_key: TrustKey | None = None,
    ) -> None:
        super().__init__()
        found = plugin if plugin is not None else _plugin_of(runner)
        self.plugin = found
        self.inbox_url = inbox_url
        self.show_args = show_args
        self.trust_key = trust_key if trust_key is not None else getattr(found.control, "trust_key", None)
        self._adk = A2aAgentExecutor(runner=runner)
        self._links: dict[str, _Link] = {}
        """ADK session id (the A2A context id) → the task running there."""
        self._runs: set[asyncio.Task[None]] = set()
        found.sinks = (*found.sinks, _TaskSink(self._links))

    # -- A2A -------------------------------------------------------------------------------------------------
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the request; return once it is done or waits for a person (the invocation goes on)."""
        task_id, context_id = context.task_id or "", context.context_id or ""
        link = self._links.get(context_id)
        if link is not None and not link.ended and (link.task_id == task_id or _answers(context, link)):
            await self._in_band(context, event_queue, link)
            return
        if link is not None and not link.ended:
            # One invocation per ADK session at a time: a second task would share the waiting run's approvals.
            busy = f"refused: task {link.task_id} of this context is still running; send this in another context"
            await _reject_new_task(context, event_queue, busy)
            return
        link = _Link(self, task_id, context_id, event_queue)
        self._links[context_id] = link
        run = link.run = asyncio.create_task(self._run(link, context))
        self._runs.add(run)
        run.add_done_callback(self._runs.discard)
        parked = asyncio.create_task(link.parked.wait())
        try:
            await asyncio.wait({run, parked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            parked.cancel()
        if run.done():
            await run  # its exception, if any, is the request's

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task: ADK's answer (a ``canceled`` status); a waiting invocation is cancelled with it."""
        link = self._links.get(context.context_id or "")
        await self._adk.cancel(context, event_queue)
        if link is not None and link.task_id == context.task_id:
            link.ended = True
            if link.run is not None:
                link.run.cancel()

    async def aclose(self) -> None:
        """Cancel the invocations still running (the server is shutting down)."""
        for run in list(self._runs):
            run.cancel()
        await asyncio.gather(*self._runs, return_exceptions=True)

    async def _run(self, link: _Link, context: RequestContext) -> None:
        try:
            await self._adk.execute(context, _Ordered(link))
        finally:
            link.ended = True
            if self._links.get(link.context_id) is link:
                del self._links[link.context_id]

    # -- what goldfive tells the caller ---------------------------------------------------------------------
    def status(
        self,
        link: _Link,
        state: TaskState,
        text: str,
        approval_id: str,
        data: Mapping[str, Any] | None = None,
    ) -> TaskStatusUpdateEvent:
        """A status update of ``link``'s task in goldfive's words."""
        parts: list[Part] = [new_text_part(text)]
        if data is not None:
            parts.append(new_data_part({"goldfive": dict(data)}))
        message = Message(
            message_id=f"gf-{approval_id}-{now_ms()}-{state}",
            role=Role.ROLE_AGENT,
            parts=parts,
            task_id=link.task_id,
            context_id=link.context_id,
        )
        status = TaskStatus(state=state, message=message)
        status.timestamp.GetCurrentTime()
        meta = {f"{METADATA_PREFIX}approval_id": approval_id}
        if data is not None:
            meta.update(
                {f"{METADATA_PREFIX}{k}": str(data[k]) for k in ("request_id", "rule", "inbox_url") if k in data}
            )
        return TaskStatusUpdateEvent(
            task_id=link.task_id, context_id=link.context_id, status=status, metadata=_struct(meta)
        )

    def waiting_update(self, link: _Link, wait: _Wait, refused: str = "") -> TaskStatusUpdateEvent:
        """``auth-required``: what waits, for whom, and where a person decides."""
        inbox = _inbox_link(self.inbox_url, wait.approval_id)
        where = f": {inbox}" if inbox else " (goldfive pending, or the inbox)"
        text = f"Approval needed: {wait.tool} (rule {wait.rule!r}); a person decides in goldfive{where}"
        if refused:
            text = f"{refused}. {text}"
        facts = wait.facts(inbox, show_args=self.show_args)
        if refused:
            facts["refused"] = refused
        return self.status(link, TaskState.TASK_STATE_AUTH_REQUIRED, text, wait.approval_id, facts)

    def hide_gated_args(self, link: _Link, event: A2aEvent) -> None:
        """Blank the arguments of calls that wait for a person in ADK's function-call parts (the task history)."""
        session = self.plugin.session_for(link.context_id)
        if session is None:
            return
        for part in _parts_of(event):
            if not part.HasField("data") or part.metadata.fields.get("adk_type") != _FUNCTION_CALL:
                continue
            call = part.data.struct_value
            call_id = call.fields["id"].string_value if "id" in call.fields else ""
            if call_id and "args" in call.fields and session.approvals.knows(call_id):
                call.fields["args"].struct_value.Clear()
                call.fields["args"].struct_value.update({"goldfive": _HIDDEN})

    # -- a message from the caller while the task waits ------------------------------------------------------
    async def _in_band(self, context: RequestContext, event_queue: EventQueue, link: _Link) -> None:
        session = self.plugin.session_for(link.context_id)
        decision = _signed_decision(context)
        wait = next(iter(link.waiting.values()), None)
        if decision is not None and session is not None:
            why = self._apply_signed(session, link, decision)
            if why is None:
                return  # applied: the task's own updates follow (working, then its end)
        else:
            why = (
                "refused: an answer from the A2A caller does not decide a call waiting for a person; "
                "only a decision made in goldfive (or one goldfive's server signed for this request) does"
            )
            if session is not None:
                self._audit_refusal(session, context, wait, why)
        logger.warning("A2A task %s: %s", shorten(link.task_id, 80), why)
        if link.task_id != context.task_id:
            # A new task in the waiting context that tries to answer: it is refused, and ends as such.
            await _reject_new_task(context, event_queue, why)
            return
        if wait is not None:
            await event_queue.enqueue_event(self.waiting_update(link, wait, refused=shorten(why, _MAX_REFUSED_TEXT)))

    def _apply_signed(self, session: Session, link: _Link, decision: Mapping[str, Any]) -> str | None:
        """Apply a signed in-band decision for one of the task's waits; None when applied, else why not."""
        target = decision.get("target_id")
        wait = link.waiting.get(target) if isinstance(target, str) else None
        verdict = decision.get("decision")
        if wait is None or verdict not in ("approve", "reject"):
            why = "refused: the in-band decision names no call this task waits on, or no decision (approve/reject)"
            self._audit_refusal(session, None, next(iter(link.waiting.values()), None), why)
            return why
        record = session.approvals.get(wait.approval_id)
        request = record.request if record is not None else None
        payload = {k: v for k, v in decision.items() if k != "decision"}
        if self.trust_key is None:
            why = "refused: this agent trusts no signing key (GOLDFIVE_TRUST_KEY), so no in-band decision is applied"
            self._audit_refusal(session, None, wait, why)
            return why
        problem = verify_decision(
            self.trust_key,
            payload,
            approved=verdict == "approve",
            run_id=session.run_id,
            request_id=request.request_id if request is not None else "",
            request_digest=request.digest if request is not None else "",
            session=session,
        )
        if problem is not None:
            return f"refused: {problem}; the request stays pending"
        kind = ControlKind.APPROVE if verdict == "approve" else ControlKind.REJECT
        ack = session.dispatch(ControlMessage(kind, {**payload, "channel": payload.get("channel", "a2a")}))
        return None if ack.ok else f"refused: {ack.detail}"

    @staticmethod
    def _audit_refusal(session: Session, context: RequestContext | None, wait: _Wait | None, why: str) -> None:
        caller = ""
        if context is not None and context.call_context is not None and context.call_context.user is not None:
            caller = context.call_context.user.user_name or ""
        session.events.emit(
            events_pb2.DecisionRefused(
                target_id=wait.approval_id if wait is not None else "",
                decision="approve",
                decided_by=shorten(caller or "the A2A caller", 200),
                reason=why,
                channel="a2a",
                request_id=wait.request_id if wait is not None else "",
            )
        )


_FUNCTION_CALL = struct_pb2.Value(string_value="function_call")
_HIDDEN = "hidden: a person approves this call in goldfive (the operator did not allow showing its arguments)"


def _parts_of(event: A2aEvent) -> list[Part]:
    """The message parts an A2A event carries (status message, artifact, a task's history)."""
    if isinstance(event, TaskStatusUpdateEvent):
        return list(event.status.message.parts)
    if isinstance(event, TaskArtifactUpdateEvent):
        return list(event.artifact.parts)
    if isinstance(event, Task):
        return [p for m in (*event.history, event.status.message) for p in m.parts]
    return []


def _plugin_of(runner: Runner) -> GoldfivePlugin:
    plugins = [p for p in runner.plugin_manager.plugins if isinstance(p, GoldfivePlugin)]
    if len(plugins) != 1:
        raise ValueError(f"the runner's app needs exactly one GoldfivePlugin (found {len(plugins)}); pass plugin=")
    return plugins[0]


def _data_parts(context: RequestContext) -> list[Any]:
    message = context.message
    if message is None:
        return []
    return [MessageToDict(p.data) for p in message.parts if p.HasField("data")]


def _signed_decision(context: RequestContext) -> Mapping[str, Any] | None:
    for data in _data_parts(context):
        if isinstance(data, dict) and isinstance(found := data.get(DECISION_KEY), dict):
            decision: dict[str, Any] = _whole_numbers(found)
            return decision
    return None


def _whole_numbers(value: Any) -> Any:
    """protobuf's Value keeps every number as a double: give the integers (signed_at_ms, quorum) back."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


def _answers(context: RequestContext, link: _Link) -> bool:
    """Whether a message in the waiting context tries to answer its call (or ADK's confirmation of it)."""
    if _signed_decision(context) is not None:
        return True
    message = context.message
    if message is None:
        return False
    for part in message.parts:
        converted = convert_a2a_part_to_genai_part(part)
        for genai in converted if isinstance(converted, list) else [converted]:
            response = genai.function_response if genai is not None else None
            if response is not None and (response.id in link.waiting or response.name == "adk_request_confirmation"):
                return True
    return False


async def _reject_new_task(context: RequestContext, event_queue: EventQueue, why: str) -> None:
    task_id, context_id = context.task_id or "", context.context_id or ""
    history = [context.message] if context.message is not None else []
    await event_queue.enqueue_event(
        Task(
            id=task_id, context_id=context_id, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=history
        )
    )
    message = Message(
        message_id=f"gf-refused-{now_ms()}",
        role=Role.ROLE_AGENT,
        parts=[new_text_part(why)],
        task_id=task_id,
        context_id=context_id,
    )
    status = TaskStatus(state=TaskState.TASK_STATE_REJECTED, message=message)
    status.timestamp.GetCurrentTime()
    await event_queue.enqueue_event(TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status))


def a2a_app(
    app: App,
    *,
    url: str,
    runner: Runner | None = None,
    inbox_url: str = "",
    show_args: bool = False,
    task_store: TaskStore | None = None,
    push_config_store: PushNotificationConfigStore | None = None,
    push_client: httpx.AsyncClient | None = None,
    push_url_validator: Callable[[str], Awaitable[bool]] | None = None,
) -> Starlette:
    """A Starlette app serving ``app`` over A2A (JSON-RPC at ``/``, the card at ``/.well-known/agent-card.json``).

    ``url`` is the address the card advertises. The runner defaults to in-memory services. Push
    notifications go to the webhooks clients register (``push_client`` sends them; ``push_url_validator``
    screens their URLs — pass a2a-sdk's ``validate_push_notification_url`` when callers are not trusted).
    """
    the_runner = runner if runner is not None else Runner(app=app, session_service=InMemorySessionService())
    executor = GoldfiveA2aExecutor(runner=the_runner, inbox_url=inbox_url, show_args=show_args)
    tasks = task_store if task_store is not None else InMemoryTaskStore()
    configs = push_config_store if push_config_store is not None else InMemoryPushNotificationConfigStore()
    client = push_client if push_client is not None else httpx.AsyncClient(timeout=10.0)
    sender = BasePushNotificationSender(client, configs, push_url_validator=push_url_validator)

    async def lifespan(web: Starlette) -> AsyncIterator[None]:
        root = app.root_agent
        if not isinstance(root, BaseAgent | Workflow):
            raise TypeError(f"the App's root must be an ADK agent or Workflow, got {type(root).__name__}")
        card = await AgentCardBuilder(agent=root, rpc_url=url).build()
        card.capabilities.streaming = True
        card.capabilities.push_notifications = True
        handler = DefaultRequestHandler(
            agent_executor=executor,
            task_store=tasks,
            agent_card=card,
            push_config_store=configs,
            push_sender=sender,
            push_url_validator=push_url_validator,
        )
        web.routes.extend([*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
        try:
            yield
        finally:
            await handler.aclose()
            await executor.aclose()
            if push_client is None:
                await client.aclose()
            await the_runner.close()

    return Starlette(lifespan=contextlib.asynccontextmanager(lifespan))


_REMOTE_RESPONSE_KEY = "a2a:response"
"""Where ADK's RemoteA2aAgent puts the remote task (as a dict) on each event it yields."""
_MAX_REMOTE_TEXT = 500


def _remote_facts(status: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The goldfive data and the text of a remote task's status message (empty when it has none)."""
    message = status.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    facts: dict[str, Any] = {}
    texts: list[str] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        found = part.get("data")
        if isinstance(found, dict) and isinstance(found.get("goldfive"), dict):
            facts = found["goldfive"]
    return facts, shorten(" ".join(texts), _MAX_REMOTE_TEXT)


class RemoteWaits(BasePlugin):
    """The calling side: a remote A2A task waiting for a person shows in this run's own goldfive events.

    Add it to the App after its :class:`~goldfive_adk.GoldfivePlugin` (``plugins=[plugin, RemoteWaits(plugin)]``).
    When a ``RemoteA2aAgent`` of the App hears that its remote task is ``auth-required`` because of a goldfive
    approval over there, the run records ``RemoteApprovalWaiting`` naming the remote agent, the task, the
    remote approval and its inbox link; the inbox lists it under this run, so approvals down a delegation chain
    are visible from the top. A later state of that task (working, completed) is recorded the same way. The
    remote approval is decided in the remote goldfive; this only shows the wait.
    """

    def __init__(self, plugin: GoldfivePlugin, *, name: str = "goldfive_remote_waits") -> None:
        super().__init__(name=name)
        self.plugin = plugin
        self._waiting: dict[str, str] = {}
        """Remote task id → the remote approval it waits on (to record when it moves on)."""

    async def on_event_callback(self, *, invocation_context: InvocationContext, event: AdkEvent) -> AdkEvent | None:
        """Record a remote task's wait for a person (and its end) on this run."""
        response = (event.custom_metadata or {}).get(_REMOTE_RESPONSE_KEY)
        if not isinstance(response, dict):
            return None
        status = response.get("status")
        task_id = response.get("id")
        if not isinstance(status, dict) or not isinstance(task_id, str):
            return None
        state = str(status.get("state") or "")
        facts, words = _remote_facts(status)
        waiting = state == "TASK_STATE_AUTH_REQUIRED" and bool(facts.get("approval_id"))
        if not waiting and task_id not in self._waiting:
            return None
        session = self.plugin.session_for(invocation_context.session.id)
        if session is None:
            return None
        approval = str(facts.get("approval_id") or "") if waiting else self._waiting.pop(task_id, "")
        if waiting:
            self._waiting[task_id] = approval
        session.events.emit(
            events_pb2.RemoteApprovalWaiting(
                remote_agent=shorten(event.author, 200),
                task_id=shorten(task_id, 200),
                context_id=shorten(str(response.get("contextId") or ""), 200),
                approval_id=shorten(approval, 200),
                request_id=shorten(str(facts.get("request_id") or ""), 200),
                tool=shorten(str(facts.get("tool") or ""), 200),
                rule=shorten(str(facts.get("rule") or ""), 200),
                inbox_url=shorten(str(facts.get("inbox_url") or ""), 2000),
                state=shorten(state, 60),
                text=words,
            )
        )
        return None
