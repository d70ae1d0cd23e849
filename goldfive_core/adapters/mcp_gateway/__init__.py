"""goldfive as an MCP gateway: a person in front of any MCP server's tools, for any MCP client.

Needs ``pip install 'goldfive[mcp]'``. A :class:`MCPGateway` is an MCP server that fronts one or more upstream
MCP servers (each a stdio command or a streamable-HTTP URL, :class:`Upstream`) and puts the core's tool-call
gate between its client and every ``tools/call``; it translates only — the gate, the policy, the ledger and
the in-flight record are the core's (:func:`~goldfive_core.toolcall.gate_tool_call`,
:class:`~goldfive_core.inflight.InFlight`)::

    gateway = MCPGateway([Upstream.parse("bank=python bank_server.py")], control=channel, sinks=[channel.sink])
    await gateway.serve_stdio()  # one client connection = one goldfive run
    await gateway.serve_http(HttpListen(host="127.0.0.1", port=8765, token=token))  # one MCP session = one run

What the client sees:

* ``tools/list``: the upstreams' tools, descriptions and input schemas unchanged. With one upstream the names
  are unchanged; with several every tool is ``NAME__tool`` (so no two can clash). ``listChanged`` from an
  upstream is forwarded. Resources, resource templates, prompts and completions pass through, every page of
  them, with their notifications and subscriptions (:mod:`.passthrough`; prompts named like tools).
* ``tools/call``: an unknown tool or arguments that do not fit the tool's input schema are an error result at
  once (nobody is asked, nothing runs). Otherwise the gate decides: the run's policy (``--policy`` / ``--gate``;
  a tool no rule names asks a person unless ``default="allow"``) allows (forwarded), denies (an ``isError``
  result with the reason) or asks (``ApprovalRequested{kind="tool"}`` with the tool, the arguments, the input
  schema and the client's identity). Approved (edits checked against the input schema) → forwarded upstream
  once, recorded in the execution ledger; rejected → an ``isError`` result with the person's reason; no
  decision in time → an ``isError`` result saying so. While a call waits, a client that gave a
  ``progressToken`` gets ``notifications/progress``; ``notifications/cancelled`` withdraws the request.
  A call let through is sent on its upstream's connection as it is then (:mod:`.forward`): one that never
  reached the upstream is "not sent" (its ledger claim given back), one whose answer was lost or late (the
  upstream's timeout) "may or may not have run" (in doubt in the ledger, never sent again).
* A ``tools/call`` with ``task`` in its params (MCP Tasks) is answered at once with a task the client polls
  (:mod:`.tasks`); ``tasks/cancel`` withdraws a call still waiting.
* An upstream's ``elicitation/create`` (form mode) during a call is asked of a person
  (``ApprovalRequested{kind="input"}``, :mod:`.elicit`): accept with the checked content, decline, or cancel.
  With ``elicit="client"`` (or ``"client-or-decline"``) it is passed on to the client that made the call, when
  that client declared form elicitation (else a person answers, or it is declined). Never the call's approval.
  An ``input_required`` result (MCP 2026-07-28) is answered the same way and the call sent again with the
  answers (:mod:`.input_required`).

On streamable HTTP (:meth:`MCPGateway.serve_http`, :mod:`.http`) every request needs the bearer token, and each
MCP session is a client connection of its own: its own run, its own upstream connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, Unpack

from ..._util import canonical_json, new_id, shorten
from ...errors import ConfigError, MissingExtraError
from ...inflight import InDoubt, InFlight, NotStarted
from ...lifecycle import RunResult
from ...run_state import RunState
from ...steps import StepKind, record_step
from ...supervision import Supervised, Supervision, SupervisionOptions
from ...toolcall import Skip, ToolCall, gate_tool_call

try:
    import anyio
    import mcp_types as types
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.shared.message import SessionMessage
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise MissingExtraError("goldfive_core.adapters.mcp_gateway", "mcp") from exc

from .elicit import ELICIT_MODES, AskClient, ElicitAnswerer, ElicitMode
from .forward import ClientGaveUp, send_call
from .http import HttpListen, serve_http
from .input_required import Unanswerable
from .link import UpstreamError
from .names import warn_policy_names
from .passthrough import PassThrough
from .stdio import Progress, serve_stdio_streams
from .tasks import TASKS_CAPABILITY, Tasks, TaskState
from .upstreams import (
    DEFAULT_RESTARTS,
    DEFAULT_UPSTREAM_TIMEOUT_S,
    MODERN_PROTOCOLS,
    RESTART_BACKOFF,
    SEPARATOR,
    VERSION,
    Connections,
    Route,
    Upstream,
    check_timeout,
)

__all__ = [
    "DEFAULT_RESTARTS",
    "DEFAULT_UPSTREAM_TIMEOUT_S",
    "ELICIT_MODES",
    "MODERN_PROTOCOLS",
    "RESTART_BACKOFF",
    "SEPARATOR",
    "ElicitMode",
    "HttpListen",
    "MCPGateway",
    "Upstream",
]

logger = logging.getLogger(__name__)

Default = Literal["ask", "allow"]

HELD_LOOK_S = 0.02
"""How often a call that asked for progress looks whether the gate holds it yet (its first progress goes out then)."""


class MCPGateway(Supervised):
    """An MCP server in front of ``upstreams``: every ``tools/call`` goes through the tool-call gate.

    ``default``: what a call no policy rule names gets — ``"ask"`` a person (the default: fail closed) or
    ``"allow"``. ``approval_timeout_ms``: how long a call waits for a person (default: the config's tool
    approval timeout). ``progress_every_s``: how often a waiting call sends ``notifications/progress`` (when the
    client asked for progress; 0: never). ``restarts``: how often an upstream that died (after it ran) is started
    again, with :data:`RESTART_BACKOFF` between tries (0: never; its tools are reported unavailable; one that
    never started is not retried). ``elicit``: who answers an upstream's ``elicitation/create`` — ``"person"``
    (through goldfive, the default), ``"client"`` (the MCP client that made the call, when it declared form
    elicitation; else a person) or ``"client-or-decline"`` (that client, else ``decline``) (:mod:`.elicit`).
    ``upstream_timeout_s``: how long an upstream has to answer one request (an upstream's own ``timeout_s``
    overrides it); a call that gets no answer in time is answered with an error saying it may have run.
    ``supervision``: every adapter's options (``control``, ``sinks``,
    ``config``, ``policy``, ``labels``, ``session_setup``, ``ledger``).
    """

    def __init__(
        self,
        upstreams: Iterable[Upstream],
        *,
        default: Default = "ask",
        approval_timeout_ms: int | None = None,
        progress_every_s: float = 10.0,
        restarts: int = DEFAULT_RESTARTS,
        elicit: ElicitMode = "person",
        upstream_timeout_s: float = DEFAULT_UPSTREAM_TIMEOUT_S,
        name: str = "goldfive",
        **supervision: Unpack[SupervisionOptions],
    ) -> None:
        listed = list(upstreams)
        if not listed:
            raise ConfigError("the MCP gateway needs at least one upstream")
        names = [u.name for u in listed]
        if len(set(names)) != len(names):
            raise ConfigError(f"upstream names must differ, got {names}")
        if default not in ("ask", "allow"):
            raise ConfigError(f"default must be 'ask' or 'allow', got {default!r}")
        if progress_every_s < 0:
            raise ConfigError(f"progress_every_s must be >= 0, got {progress_every_s}")
        if elicit not in ELICIT_MODES:
            raise ConfigError(f"elicit must be one of {', '.join(ELICIT_MODES)}, got {elicit!r}")
        if not 0 <= restarts <= 100:
            raise ConfigError(f"restarts must be in [0, 100], got {restarts}")
        check_timeout(upstream_timeout_s, "upstream_timeout_s")
        for upstream in listed:  # a header's variable that is not set is the operator's mistake: said at start
            missing = upstream.missing_env()
            if missing:
                raise ConfigError(
                    f"upstream {upstream.name!r}: headers_from_env names {', '.join(missing)}, which the environment "
                    "does not have (set it, or remove the header)"
                )
        self.supervision = Supervision(**supervision)
        self.upstreams = tuple(listed)
        self.default: Default = default
        self.approval_timeout_ms = approval_timeout_ms
        self.progress_every_s = progress_every_s
        self.restarts = restarts
        self.elicit: ElicitMode = elicit
        self.upstream_timeout_s = upstream_timeout_s
        self.name = name
        self.said_names: set[str] = set()
        """What :func:`~.names.warn_policy_names` said already (once per gateway, not per HTTP session)."""

    async def serve_stdio(self) -> RunResult:
        """Serve one client on this process's stdin/stdout until it disconnects; returns how the run ended."""
        connection = _Connection(self)
        async with serve_stdio_streams(connection.call) as (read_stream, write_stream):
            return await connection.serve(read_stream, write_stream)

    async def serve_http(self, listen: HttpListen, *, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve MCP clients on streamable HTTP (each session its own run) until stopped (:mod:`.http`)."""
        await serve_http(self, listen, on_ready=on_ready)

    async def serve(self, read_stream: Any, write_stream: Any) -> RunResult:
        """Serve one client connection (one goldfive run) over an MCP stream pair until it closes."""
        connection = _Connection(self)
        return await connection.serve(read_stream, write_stream)


class _Connection:
    """One client connection: its goldfive run, its upstream connections, its MCP server."""

    def __init__(self, gateway: MCPGateway) -> None:
        self.gateway = gateway
        self.session_id = new_id("mcp-session")
        self.handle = gateway.supervision.new_run(
            adapter="mcp",
            title=f"MCP gateway ({', '.join(u.name for u in gateway.upstreams)})",
            input=f"MCP client session {self.session_id}",
            session_id=self.session_id,
            records_steps=True,
        )
        self.session = self.handle.session
        self.client_name = "an unnamed MCP client"
        self.elicit = ElicitAnswerer(
            self.session, self._asker, timeout_ms=gateway.approval_timeout_ms, mode=gateway.elicit
        )
        self.upstreams = Connections(
            gateway.upstreams,
            restarts=gateway.restarts,
            timeout_s=gateway.upstream_timeout_s,
            elicit=self.elicit.callback,
        )
        self.passing = PassThrough(self.upstreams)
        """Resources, prompts and completions (:mod:`.passthrough`)."""
        self.in_flight = InFlight()
        self.write_stream: Any = None
        """The stream to the client (the SDK server's), for notifications the gateway sends of its own."""
        self.tasks = Tasks(self._task_waits_for)
        """Task-augmented calls (MCP Tasks): answered at once with a task the client polls."""

    async def serve(self, read_stream: Any, write_stream: Any) -> RunResult:
        server: Server[Any] = Server(
            self.gateway.name,
            version=VERSION,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            **self.passing.handlers(),
        )
        self.tasks.register(server)
        server.middleware.append(self._task_calls)
        self.upstreams.on_tools_changed = self._tools_changed
        self.upstreams.on_notice = self._notify
        self.write_stream = write_stream
        error: BaseException | None = None
        self.handle.open()
        try:
            try:
                await self.upstreams.connect()
                await self.upstreams.refresh_tools()
                named = {name: (route.upstream, route.tool.name) for name, route in self.upstreams.tools.items()}
                warn_policy_names(
                    self.session.policy, named, prefixed=self.upstreams.prefixed, said=self.gateway.said_names
                )
                options = server.create_initialization_options(NotificationOptions(tools_changed=True))
                options.capabilities.tasks = TASKS_CAPABILITY
                self.passing.declare(options.capabilities)
                await server.run(read_stream, write_stream, options)
            finally:
                await self.tasks.aclose()  # a task still waiting is withdrawn with its session
                await self.upstreams.close()
        except BaseException as exc:
            error = exc
            raise
        finally:
            result = self.handle.close(error=_unwrap(error))
        return result

    # -- tools -------------------------------------------------------------------------------------------
    async def list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        tools = [
            route.tool.model_copy(update={"name": name, "execution": _TASKS_OPTIONAL})
            for name, route in self.upstreams.tools.items()
        ]
        return types.ListToolsResult(tools=tools)

    async def _tools_changed(self) -> None:
        await self._notify("notifications/tools/list_changed", None)

    async def _notify(self, method: str, params: dict[str, Any] | None) -> None:
        """A notification of the gateway's own to the client (an upstream's list changed, a resource it watches)."""
        note = types.JSONRPCNotification(jsonrpc="2.0", method=method, params=params)
        await self.write_stream.send(SessionMessage(note))

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        """The SDK server's ``tools/call`` handler (HTTP; stdio answers :meth:`call` beside the SDK server)."""
        progress = None
        if _progress_token(ctx) is not None:

            async def progress(count: int, message: str) -> None:
                await ctx.session.report_progress(count, None, message)

        async def ask(question: types.ElicitRequestFormParams) -> types.ElicitResult:
            answer: types.ElicitResult = await ctx.session.elicit_form(
                question.message, question.requested_schema, ctx.request_id
            )
            return answer

        raw = {"name": params.name, "arguments": params.arguments or {}}
        result = await self.call(raw, _client_params(ctx), progress, ask)
        return types.CallToolResult.model_validate(result)

    async def _task_calls(self, ctx: Any, call_next: Any) -> Any:
        """SDK server middleware: a task-augmented ``tools/call`` is answered with its task (not a CallToolResult)."""
        params = ctx.params
        if ctx.method != "tools/call" or not isinstance(params, Mapping) or not Tasks.wanted(params):
            return await call_next(ctx)
        if getattr(ctx.session, "client_params", None) is None:  # not initialized: the SDK refuses it
            return await call_next(ctx)
        token = _progress_token(ctx)
        progress = self._progress_on_session(token) if isinstance(token, str | int) else None
        return await self.call(dict(params), _client_params(ctx), progress)

    def _progress_on_session(self, token: str | int) -> Progress:
        """``notifications/progress`` for a task on the session's own stream (the request's ended with its task)."""

        async def send(count: int, message: str) -> None:
            params = {"progressToken": token, "progress": count, "message": message}
            note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params=params)
            await self.write_stream.send(SessionMessage(note))

        return send

    async def call(
        self,
        params: dict[str, Any],
        client: dict[str, Any],
        progress: Progress | None,
        ask: AskClient | None = None,
    ) -> dict[str, Any]:
        """One ``tools/call`` (params and result as JSON); with ``task`` in params, its task at once (tasks.py).

        ``ask``: how to put a question to the client while the call runs (a task, polled, has no such channel)."""
        if Tasks.wanted(params):  # its progress token stays valid while the task works; it asks through the task
            return self.tasks.start(
                lambda task: self._call(params, client, progress, task, self.elicit.client_asker(client, task.ask))
            )
        return await self._call(params, client, progress, None, self.elicit.client_asker(client, ask))

    async def _call(
        self,
        params: dict[str, Any],
        client: dict[str, Any],
        progress: Progress | None,
        task: TaskState | None,
        ask: AskClient | None = None,
    ) -> dict[str, Any]:
        """Checked, through the gate, forwarded when let through."""
        name = params.get("name")
        arguments = params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return _refused("tools/call needs a tool name (a string) and arguments (an object); nothing was run")
        route = self.upstreams.tools.get(name)
        if route is None:
            return _refused(self._unknown(name))
        if self.upstreams.link(route.upstream) is None:  # its tools are unavailable: nobody is asked
            return _refused(
                f"{name} was not run: its MCP server {route.upstream!r} {self.upstreams.why_not(route.upstream)}"
            )
        problem = route.fits(arguments)
        if problem is not None:
            return _refused(f"{name} was not run: the arguments do not fit its input schema: {problem}")
        who = self.client_name = _client_name(client)
        call = ToolCall(
            call_id=new_id("mcp"),
            tool_name=name,
            args=arguments,
            prompt=f"Allow {name}({_shown(arguments)})? — asked by {who} over MCP",
            metadata=self._identity(who, route),
            args_schema=route.tool.input_schema,
        )
        record_step(self.session, StepKind.TOOL_CALL, name=name, value=arguments, call_id=call.call_id)
        if task is not None:
            task.call_id = call.call_id
        outcome = await self._gate(call, route, progress)
        if isinstance(outcome, Skip):
            return _refused(_refusal(name, outcome))
        if task is not None:
            task.forwarding = True  # from here the call is the upstream's: tasks/cancel no longer withdraws it

        async def forward(approved: Mapping[str, Any]) -> dict[str, Any]:
            with self.elicit.calling.running(route.upstream, route.tool.name, ask):  # an elicitation names this call
                sent = {"name": route.tool.name, "arguments": dict(approved)}
                try:  # the upstream's link as it is now; an input_required answer is asked and the call sent again
                    return await send_call(
                        self.upstreams,
                        route.upstream,
                        sent,
                        lambda question: self.elicit.answer(route.upstream, question),
                    )
                except Unanswerable as exc:
                    return _refused(f"{name} did not finish in its MCP server {route.upstream!r}: {exc}")

        try:
            result = await self.in_flight.run(outcome, forward)
        except ClientGaveUp:  # recorded (in doubt, or given back): the request ends as the client asked
            raise asyncio.CancelledError from None
        except NotStarted as exc:  # never written upstream: its ledger claim was given back ("released, not run")
            return _refused(
                f"{name} was not sent: {exc}. Nothing of it ran; it can be called again once its MCP server is back"
            )
        except InDoubt as exc:  # written, and its answer lost: in doubt in the ledger, never sent again
            return _refused(
                f"{name} may or may not have run: {exc}. goldfive does not send it again; do not assume it ran or "
                "that it did not — check its effect before calling it again"
            )
        except UpstreamError as exc:  # the upstream's failure is the caller's clear error, never a crash
            return _refused(f"{name} failed in its MCP server {route.upstream!r}: {shorten(str(exc), 500)}")
        record_step(self.session, StepKind.TOOL_RESULT, name=name, value=_said(result), call_id=call.call_id)
        note = outcome.note
        if note:
            content = result.get("content")
            result = {**result, "content": [*(content if isinstance(content, list) else []), _text(note)]}
        return result

    async def _gate(self, call: ToolCall, route: Route, progress: Progress | None) -> Any:
        ticker = None
        if self.gateway.progress_every_s > 0 and progress is not None:
            ticker = asyncio.ensure_future(self._tick(progress, call))
        try:
            return await gate_tool_call(
                self.session,
                call,
                needs_person=self.gateway.default == "ask",
                validate_edit=route.check,
                ledger=self.gateway.ledger,
                timeout_ms=self.gateway.approval_timeout_ms,
            )
        finally:
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker

    async def _tick(self, progress: Progress, call: ToolCall) -> None:
        """``notifications/progress`` while the call waits (for a person, or in a paused run): one as soon as it
        is held, then every ``progress_every_s``; none while the gate is only checking it, nor once it is decided."""
        count = 0
        while True:
            message = self._waiting(call)
            if message is None:
                await asyncio.sleep(HELD_LOOK_S)
                continue
            count += 1
            try:
                await progress(count, message)
            except Exception:  # progress is advisory: a client that went away is found by the call itself
                logger.debug("could not send progress for %s", call.call_id, exc_info=True)
                return
            await asyncio.sleep(self.gateway.progress_every_s)

    def _waiting(self, call: ToolCall) -> str | None:
        """What a held call waits for, in words (its tool's name, never its arguments); None while it is not held."""
        if self.session.approvals.is_open(call.call_id):
            return f"waiting for a person to approve {call.tool_name} (goldfive approve {call.call_id})"
        if self.session.state is RunState.PAUSED:
            return f"held by goldfive: the run is paused; {call.tool_name} runs once it is resumed"
        return None

    def _held(self, call_id: str) -> str:
        """What a task's call that has not run yet waits for, in words."""
        if self.session.approvals.is_open(call_id):
            return f"waiting for a person to approve (goldfive approve {call_id})"
        return f"held by goldfive (run {self.session.state})"

    def _task_waits_for(self, task: TaskState) -> str:
        if task.forwarding:
            return "let through: running in its MCP server"
        return self._held(task.call_id) if task.call_id else "checking the call"

    def _asker(self) -> dict[str, str]:
        return {"mcp_client": self.client_name, "mcp_session": self.session_id}

    def _identity(self, who: str, route: Route) -> dict[str, str]:
        return {
            "mcp_client": who,
            "mcp_session": self.session_id,
            "mcp_upstream": route.upstream,
            "mcp_tool": route.tool.name,
        }

    def _unknown(self, name: str) -> str:
        offered = ", ".join(sorted(self.upstreams.tools)[:20]) or "none"
        dead = "; ".join(f"{n} {why}" for n, why in self.upstreams.dead.items())
        return f"unknown tool {shorten(name, 80)!r}: nothing was run (tools: {offered})" + (
            f"; unavailable upstreams: {dead}" if dead else ""
        )


# -- what the client is told ------------------------------------------------------------------------------
_TASKS_OPTIONAL = types.ToolExecution(task_support="optional")
"""Every tool the gateway offers may be called as a task (the gateway runs the task; the upstream never sees it)."""


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _refused(text: str) -> dict[str, Any]:
    """An ``isError`` CallToolResult (as JSON) with ``text`` for the model."""
    return {"content": [_text(text)], "isError": True}


def _refusal(tool: str, outcome: Skip) -> str:
    """The text of an ``isError`` result for a call the gate did not let through (the model reads it)."""
    reason = outcome.reason
    if reason == "user_rejected":
        by = f" ({outcome.decided_by})" if outcome.decided_by else ""
        return f"A person{by} rejected this {tool} call; it was not run. Their reason: {outcome.detail}"
    if reason == "policy_denied":
        return f"{tool} was not run: goldfive's policy denies it: {outcome.detail}"
    if reason == "goldfive_intervention" and outcome.guidance:
        notes = "\n".join(f"- {note.text}" for note in outcome.guidance)
        return f"{tool} was not run. The people supervising this session say:\n{notes}"
    return f"{tool} was not run ({reason}): {outcome.detail}"


def _client_params(ctx: Any) -> dict[str, Any]:
    """The client's ``initialize`` params as JSON, from the SDK server's session."""
    params = getattr(ctx.session, "client_params", None)
    return params.model_dump(by_alias=True, exclude_none=True) if params is not None else {}


def _said(result: Mapping[str, Any]) -> str:
    """The text of a tool result, as its client's model reads it (for the run's steps)."""
    content = result.get("content")
    parts = content if isinstance(content, list) else []
    return " ".join(str(c.get("text", "")) for c in parts if isinstance(c, dict) and c.get("type") == "text")


def _client_name(client: Mapping[str, Any]) -> str:
    """Who asked, from the client's ``initialize`` params (its name and version are the client's own words)."""
    info = client.get("clientInfo")
    if not isinstance(info, Mapping) or not isinstance(info.get("name"), str):
        return "an unnamed MCP client"
    version = info.get("version")
    return shorten(f"{info['name']} {version if isinstance(version, str) else ''}".strip(), 120)


def _progress_token(ctx: Any) -> object:
    params = ctx.params if isinstance(ctx.params, Mapping) else {}
    meta = params.get("_meta")
    return meta.get("progressToken") if isinstance(meta, Mapping) else None


def _shown(args: Mapping[str, Any]) -> str:
    try:
        return shorten(canonical_json(args), 300)
    except (TypeError, ValueError):
        return "…"


def _unwrap(error: BaseException | None) -> BaseException | None:
    """The run's outcome: a client that hung up (the stream closed) ends the run normally."""
    if error is None or isinstance(error, anyio.EndOfStream | anyio.ClosedResourceError | anyio.BrokenResourceError):
        return None
    return error
