"""goldfive for the Claude Agent SDK: approvals, the step gate and escalation for ``claude_agent_sdk`` agents.

Needs ``pip install 'goldfive[claude]'``. One :class:`GoldfiveClaude` holds the
control channel, sinks and which tools need a person; each conversation runs
in ``async with gf.run(options) as run:``, which owns one goldfive
:class:`~goldfive_core.session.Session` (attached to the channel while it is
open, finished and detached at the end)::

    gf = GoldfiveClaude(control=channel, sinks=[sink], gate_tools=["mcp__shop__refund", "Bash"])
    async with gf.run(ClaudeAgentOptions(mcp_servers={"shop": shop_server})) as run:
        await run.query("Refund order 42")
        async for message in run.receive_response():
            ...
    print(run.result.status)

``run.options`` is the user's options with goldfive merged in (never
replaced): the reporting tools as the in-process MCP server ``goldfive``
(``mcp__goldfive__report_*``; ``report_awaiting_approval`` is Flow A), a
``can_use_tool`` that is the step gate and asks a person for gated tools
(keyed by the SDK's ``tool_use_id``), and hooks. To drive the SDK yourself,
pass ``run.options`` to ``query()`` and wrap its stream in ``run.track()``.

What the model sees: approve runs the call (edited arguments become
``updated_input``); reject denies it with the person's reason; a timeout
denies it with an ``approval_timeout`` message; CANCEL interrupts the client
and denies held calls with ``interrupt=True``. PAUSE and
GOLDFIVE_PAUSE_ESCALATE hold the next tool use until RESUME, STEER or CANCEL.
A steer is handed to the model in place of the next tool use (the call is
denied with the person's words, so nothing runs on the old plan), or, when
the model ends its turn first, through the Stop hook's ``additionalContext``
(the conversation goes on). Ladder nudges and injected messages ride on the
next PostToolUse, Stop or UserPromptSubmit hook; at CANCEL_REINVOKE the
ladder's note replaces the call. Every tool use passes through
``can_use_tool`` (goldfive's PreToolUse hook answers "ask"), so PAUSE and the
detectors also see tools your ``allowed_tools`` let through.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Unpack, cast

from .._util import canonical_json, new_id, shorten
from ..approvals import EditValidator
from ..argschema import edit_validator, schema_problem
from ..control import ControlTransport
from ..errors import ConfigError, MissingExtraError
from ..inflight import InFlight
from ..lifecycle import RunResult, SteererFactoryAlias
from ..reporting import TOOL_SPECS, call_reporting_tool
from ..run_state import RunState, is_over
from ..session import Guidance
from ..steps import StepKind, record_step
from ..supervision import Supervised, Supervision, SupervisionOptions
from ..toolcall import Skip, ToolCall, gate_tool_call

try:
    from claude_agent_sdk import (
        AssistantMessage,
        ClaudeAgentOptions,
        ClaudeSDKClient,
        HookContext,
        HookInput,
        HookJSONOutput,
        HookMatcher,
        McpSdkServerConfig,
        Message,
        PermissionResult,
        PermissionResultAllow,
        PermissionResultDeny,
        ResultMessage,
        SystemMessage,
        TextBlock,
        ToolPermissionContext,
        ToolResultBlock,
        ToolUseBlock,
        Transport,
        UserMessage,
        create_sdk_mcp_server,
        tool,
    )
    from claude_agent_sdk.types import HookEvent
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise MissingExtraError("goldfive_core.adapters.claude", "claude") from exc

from ._claude_fake import FakeClaudeCLI, FakeToolUse
from ._claude_options import GatePredicate, GateSpec, ToolGate, check_server_name, mcp_tool_name, merge_options

__all__ = ["ClaudeRun", "FakeClaudeCLI", "FakeToolUse", "GatePredicate", "GateSpec", "GoldfiveClaude"]

logger = logging.getLogger(__name__)

_SERVER_VERSION = "0.1.0"
_STEP_GATE_REASON = "goldfive: every tool use passes the step gate"


class GoldfiveClaude(Supervised):
    """goldfive for Claude Agent SDK conversations; one :meth:`run` per conversation.

    ``gate_tools``: the tools that need a person's approval, as model-visible
    names (``"Bash"``, ``"mcp__shop__refund"``), ``fnmatch`` patterns
    (``"mcp__shop__*"``), or ``predicate(tool_name, tool_input) -> bool``.
    ``tool_schemas``: JSON Schemas of gated tools' inputs, by tool name; an
    approval with edited arguments is checked against them (any JSON object
    is accepted for tools without one). ``ledger`` records approved tool uses at
    most once (default: the channel's ledger; a replayed tool use that ran or is in
    doubt is denied, never re-run). ``session_setup`` sets up each run's
    steerer and detectors (the intervention ladder), as on :class:`~goldfive_core.runner.Runner`.
    ``app_name``: the stable name of the host's app (each run's :attr:`Session.app_name
    <goldfive_core.session.Session.app_name>`): a store process with no ``GOLDFIVE_AGENT_ID`` keeps its approved
    tool uses in that app's ledger ("": the shared one).
    """

    steerer_factory = SteererFactoryAlias()
    """Deprecated: the old name of :attr:`session_setup`."""

    def __init__(
        self,
        *,
        gate_tools: GateSpec = None,
        tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
        server_name: str = "goldfive",
        app_name: str = "",
        **supervision: Unpack[SupervisionOptions],
    ) -> None:
        control = supervision.get("control")
        if control is not None and not isinstance(control, ControlTransport):
            raise ConfigError(
                f"control must be a ControlChannel (or another ControlTransport) or None, got {type(control).__name__}"
            )
        self.supervision = Supervision(**supervision)
        """The channel, sinks, config, policy (built-in tools such as Bash included), labels, set-up and ledger."""
        self.gate = ToolGate(gate_tools)
        self.tool_schemas = _check_schemas(tool_schemas or {})
        self.server_name = check_server_name(server_name)
        if not isinstance(app_name, str):
            raise ConfigError(f"app_name must be a string, got {type(app_name).__name__}")
        self.app_name = app_name
        """Each run's app name: its approved tool uses' ledger (:func:`~goldfive_core.store.execution.app_owner`)."""

    @property
    def reporting_tools(self) -> list[str]:
        """The reporting tools as the model sees them (``mcp__<server_name>__report_*``)."""
        return [mcp_tool_name(self.server_name, name) for name in TOOL_SPECS]

    def run(
        self,
        options: ClaudeAgentOptions | None = None,
        *,
        transport: Transport | None = None,
        title: str = "",
        task_id: str | None = None,
    ) -> ClaudeRun:
        """A new run (use as ``async with``); raises ConfigError if ``options`` would bypass the gate.

        ``transport`` goes to the ``ClaudeSDKClient`` that :meth:`ClaudeRun.query`
        connects (None = the bundled CLI); ``title`` names the run's root task.
        """
        return ClaudeRun(self, options, transport=transport, title=title, task_id=task_id)


class ClaudeRun:
    """One Claude conversation under goldfive: its Session, the merged options and, once used, a client.

    ``async with`` attaches the session to the control channel and emits
    RunStarted; leaving it disconnects the client, emits RunCompleted or
    RunAborted, finishes the session and detaches it. :attr:`result` then
    says how the run ended.
    """

    def __init__(
        self,
        owner: GoldfiveClaude,
        options: ClaudeAgentOptions | None,
        *,
        transport: Transport | None,
        title: str,
        task_id: str | None,
    ) -> None:
        self._owner = owner
        self._handle = owner.supervision.new_run(
            adapter="claude",
            root_task_id=task_id,
            title=title or "claude run",
            input=title,
            records_steps=True,
            app_name=owner.app_name,
        )
        self.session = self._handle.session
        self.options: ClaudeAgentOptions = merge_options(
            options,
            gate=owner.gate,
            server_name=owner.server_name,
            server=self._reporting_server(),
            can_use_tool=self._can_use_tool,
            hooks=self._hooks(),
        )
        """What to hand to the SDK: the user's options with goldfive's server, callback and hooks added."""
        self.client: ClaudeSDKClient | None = None
        self.last_result: ResultMessage | None = None
        """The latest ResultMessage seen by :meth:`receive_response` / :meth:`track`."""
        self.result: RunResult | None = None
        """How the run ended; set when the ``async with`` block exits."""
        self._transport = transport
        self._reporting = frozenset(owner.reporting_tools)
        self._interrupts: set[asyncio.Task[None]] = set()
        self._entered = False
        self._in_flight = InFlight()
        """Approved tool uses whose body runs now (their end recorded, the approver's note handed to the model)."""

    # -- lifecycle ------------------------------------------------------------------------------------------
    async def __aenter__(self) -> ClaudeRun:
        if self._entered:
            raise RuntimeError(f"run {self.session.run_id} was already started; call gf.run() for a new one")
        self._entered = True
        self._handle.open()
        self.session.on_cancel(self._on_cancel)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        try:
            for task in list(self._interrupts):
                task.cancel()
            await asyncio.gather(*self._interrupts, return_exceptions=True)
            if self.client is not None:
                await self.client.disconnect()
        finally:
            self.client = None  # nothing left to interrupt
            if isinstance(exc, asyncio.CancelledError):
                self.session.cancel("the caller cancelled the run")  # withdraws open approvals, announced once
            self.result = self._finish(exc)

    # -- driving the SDK ----------------------------------------------------------------------------------------
    async def connect(self) -> ClaudeSDKClient:
        """The run's ``ClaudeSDKClient`` (connected on first use, disconnected when the run ends)."""
        if self.client is None:
            client = ClaudeSDKClient(options=self.options, transport=self._transport)
            await client.connect()
            self.client = client
        return self.client

    async def query(self, prompt: str) -> None:
        """Send a prompt; waits while the run is paused, raises RunCancelledError once it was cancelled."""
        await self.session.gate()
        client = await self.connect()
        record_step(self.session, StepKind.USER_TEXT, value=prompt)
        await client.query(prompt)

    async def receive_response(self) -> AsyncIterator[Message]:
        """The client's messages up to and including the next ResultMessage, seen by goldfive on the way."""
        if self.client is None:
            raise RuntimeError("the run has no client yet: call `await run.query(prompt)` first")
        async for message in self.client.receive_response():
            self.note(message)
            yield message

    async def track(self, messages: AsyncIterable[Message]) -> AsyncIterator[Message]:
        """Pass ``messages`` (e.g. ``query(prompt=..., options=run.options)``) through goldfive.

        Without a client there is nothing to interrupt: a CANCEL then denies held
        and later tool uses with ``interrupt=True``, which ends the CLI's turn.
        """
        async for message in messages:
            self.note(message)
            yield message

    def note(self, message: Message) -> None:
        """Let goldfive see one SDK message (session id, tool uses shown to a person, the result)."""
        if isinstance(message, SystemMessage) and message.subtype == "init":
            self._learn_session_id(message.data.get("session_id"))
        elif isinstance(message, ResultMessage):
            self._learn_session_id(message.session_id)
            self.last_result = message
        elif isinstance(message, AssistantMessage):
            for block in message.content:
                if isinstance(block, ToolUseBlock):
                    record_step(self.session, StepKind.TOOL_CALL, name=block.name, value=block.input, call_id=block.id)
                    self._expect(block.id, block.name, block.input)
                elif isinstance(block, TextBlock):
                    record_step(self.session, StepKind.MODEL_TEXT, name="claude", value=block.text)
        elif isinstance(message, UserMessage) and isinstance(message.content, list):
            for item in message.content:
                if isinstance(item, ToolResultBlock):  # an announced call that was never asked about
                    record_step(self.session, StepKind.TOOL_RESULT, value=item.content, call_id=item.tool_use_id)
                    self.session.approvals.forget_expected(item.tool_use_id)

    # -- the permission callback: the tool-call gate ----------------------------------------------------------------
    async def _can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        target_id = context.tool_use_id or new_id("claude")
        gated = tool_name not in self._reporting and self._gated(tool_name, tool_input)
        call = ToolCall(
            call_id=target_id,
            tool_name=tool_name,
            args=tool_input,
            prompt=_prompt(tool_name, tool_input, context.title) if gated else "",
            args_schema=self._owner.tool_schemas.get(tool_name) if gated else None,
        )
        outcome = await gate_tool_call(
            self.session,
            call,
            needs_person=gated,
            validate_edit=self._edit_validator(tool_name) if gated else None,
            ledger=self._owner.ledger,
        )
        if isinstance(outcome, Skip):
            return PermissionResultDeny(message=_denial(tool_name, outcome), interrupt=outcome.stop_run)
        self._in_flight.started(outcome)
        return PermissionResultAllow(updated_input=dict(outcome.args) if outcome.edited else None)

    def _gated(self, tool_name: str, tool_input: Mapping[str, Any]) -> bool:
        try:
            return self._owner.gate.gates(tool_name, tool_input)
        except Exception:
            logger.exception("gate_tools predicate raised on %s; asking a person to be safe", tool_name)
            return True

    def _edit_validator(self, tool_name: str) -> EditValidator:
        # The inbox checks the edit with the same checker against the same schema (carried on the request).
        return edit_validator(self._owner.tool_schemas.get(tool_name), tool=tool_name, against="input schema")

    # -- hooks ----------------------------------------------------------------------------------------------
    def _hooks(self) -> dict[HookEvent, list[HookMatcher]]:
        return {
            "PreToolUse": [HookMatcher(matcher=None, hooks=[self._pre_tool_use])],
            "PostToolUse": [HookMatcher(matcher=None, hooks=[self._post_tool_use])],
            "PostToolUseFailure": [HookMatcher(matcher=None, hooks=[self._post_tool_use_failure])],
            "Stop": [HookMatcher(matcher=None, hooks=[self._stop])],
            "UserPromptSubmit": [HookMatcher(matcher=None, hooks=[self._user_prompt_submit])],
        }

    async def _pre_tool_use(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """Announce a gated call (so an early decision is kept) and send every call to ``can_use_tool``."""
        data = cast("Mapping[str, Any]", hook_input)
        self._learn_session_id(data.get("session_id"))
        tool_name, tool_input = data.get("tool_name"), data.get("tool_input")
        target = tool_use_id or data.get("tool_use_id")
        if isinstance(target, str) and isinstance(tool_name, str) and isinstance(tool_input, Mapping):
            self._expect(target, tool_name, tool_input)
        # "ask" makes the CLI consult can_use_tool even for calls its own rules would allow,
        # so PAUSE holds every tool use and the detectors see every call.
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "ask",
                "permissionDecisionReason": _STEP_GATE_REASON,
            }
        }

    async def _post_tool_use(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        data = cast("Mapping[str, Any]", hook_input)
        call_id = tool_use_id or str(data.get("tool_use_id") or "")
        note = await self._in_flight.finished(call_id, result=data.get("tool_response"))
        return self._deliver("PostToolUse", hook_input, note=note)

    async def _post_tool_use_failure(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        """A failed tool use did run: record it done (with its error) in the ledger."""
        data = cast("Mapping[str, Any]", hook_input)
        call_id = tool_use_id or str(data.get("tool_use_id") or "")
        await self._in_flight.finished(call_id, error=str(data.get("error") or ""))
        return {}

    async def _stop(self, hook_input: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        return self._deliver("Stop", hook_input)

    async def _user_prompt_submit(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        return self._deliver("UserPromptSubmit", hook_input)

    def _deliver(self, event: str, hook_input: HookInput, *, note: str = "") -> HookJSONOutput:
        """Queued guidance (and an approver's note) for the model, as the hook's ``additionalContext``."""
        self._learn_session_id(cast("Mapping[str, Any]", hook_input).get("session_id"))
        if is_over(self.session.state):
            return {}
        notes = self.session.take_guidance()
        parts = [note] if note else []
        if notes:
            parts.append(_guidance_text(notes))
        if not parts:
            return {}
        return cast(
            "HookJSONOutput",
            {"hookSpecificOutput": {"hookEventName": event, "additionalContext": "\n\n".join(parts)}},
        )

    # -- reporting tools --------------------------------------------------------------------------------------
    def _reporting_server(self) -> McpSdkServerConfig:
        tools = [
            tool(spec.name, spec.description, spec.parameters)(self._reporting_handler(spec.name))
            for spec in TOOL_SPECS.values()
        ]
        return create_sdk_mcp_server(self._owner.server_name, version=_SERVER_VERSION, tools=tools)

    def _reporting_handler(self, name: str) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
        async def handle(args: dict[str, Any]) -> dict[str, Any]:
            result = await call_reporting_tool(self.session, name, args)
            return {"content": [{"type": "text", "text": canonical_json(result)}], "is_error": "error" in result}

        return handle

    # -- internals -------------------------------------------------------------------------------------------
    def _expect(self, tool_use_id: str, tool_name: str, tool_input: Mapping[str, Any]) -> None:
        approvals = self.session.approvals
        if tool_name in self._reporting or approvals.knows(tool_use_id) or self.session.state is not RunState.RUNNING:
            return
        if self._gated(tool_name, tool_input):
            approvals.expect(tool_use_id)

    def _learn_session_id(self, session_id: object) -> None:
        if isinstance(session_id, str):
            self.session.adopt_session_id(session_id)

    def _on_cancel(self, reason: str) -> None:
        client = self.client
        if client is None:
            return  # held calls are denied with interrupt=True; nothing else to stop yet
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            logger.warning(
                "run %s cancelled outside the event loop; the client is not interrupted", self.session.run_id
            )
            return
        task = loop.create_task(self._interrupt(client), name=f"goldfive-interrupt-{self.session.run_id}")
        self._interrupts.add(task)
        task.add_done_callback(self._interrupts.discard)

    async def _interrupt(self, client: ClaudeSDKClient) -> None:
        try:
            await client.interrupt()
        except Exception:
            logger.warning("could not interrupt Claude for run %s", self.session.run_id, exc_info=True)

    def _finish(self, exc: BaseException | None) -> RunResult:
        last = self.last_result
        output = last.result if last is not None else None
        failed = f"Claude ended with {last.subtype}" if last is not None and last.is_error else ""
        return self._handle.close(error=exc, failed=failed, output=output, summary=output or "")


def _prompt(tool_name: str, tool_input: Mapping[str, Any], title: str | None) -> str:
    """What the person is asked: what will run (a Bash command, the input of any other tool)."""
    command = tool_input.get("command") if tool_name == "Bash" else None
    if isinstance(command, str):
        what = f"Allow Bash: {shorten(command, 300)}?"
    else:
        try:
            shown = canonical_json(tool_input)
        except (TypeError, ValueError):
            shown = repr(dict(tool_input))
        what = f"Allow {tool_name}({shorten(shown, 300)})?"
    return f"{title} — {what}" if title else what


def _denial(tool_name: str, outcome: Skip) -> str:
    """The message a denied tool use hands the model."""
    reason = outcome.reason
    if reason == "user_rejected":
        by = f" ({outcome.decided_by})" if outcome.decided_by else ""
        return f"A person{by} rejected this {tool_name} call: {outcome.detail}"
    if reason == "goldfive_intervention" and outcome.guidance:
        return f"This {tool_name} call was not run. {_guidance_text(list(outcome.guidance))}"
    if reason in ("goldfive_intervention", "run_cancelled"):
        return outcome.detail
    if reason == "approval_error":
        return f"{tool_name} was not run: {outcome.detail}"
    if reason == "already_done":
        try:
            recorded = canonical_json(outcome.result)
        except (TypeError, ValueError):
            recorded = repr(outcome.result)
        return f"already_done: {outcome.detail}; recorded result: {shorten(recorded, 2000)}"
    return f"{reason}: {outcome.detail}"


def _guidance_text(notes: list[Guidance]) -> str:
    lines = "\n".join(f"- {note.text}" for note in notes)
    return f"Guidance from the people supervising this run (follow it over your earlier plan):\n{lines}"


def _check_schemas(schemas: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    checked = {}
    for name, schema in schemas.items():
        problem = schema_problem(schema)
        if problem is not None:
            raise ConfigError(f"tool_schemas[{name!r}] is not a valid JSON Schema: {problem}")
        checked[name] = dict(schema)
    return checked
