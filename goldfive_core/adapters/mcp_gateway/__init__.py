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
  upstream is forwarded. Resources, resource templates and prompts pass through (prompts named like tools).
* ``tools/call``: an unknown tool or arguments that do not fit the tool's input schema are an error result at
  once (nobody is asked, nothing runs). Otherwise the gate decides: the run's policy (``--policy`` / ``--gate``;
  a tool no rule names asks a person unless ``default="allow"``) allows (forwarded), denies (an ``isError``
  result with the reason) or asks (``ApprovalRequested{kind="tool"}`` with the tool, the arguments, the input
  schema and the client's identity). Approved (edits checked against the input schema) → forwarded upstream
  once, recorded in the execution ledger; rejected → an ``isError`` result with the person's reason; no
  decision in time → an ``isError`` result saying so. While a call waits, a client that gave a
  ``progressToken`` gets ``notifications/progress``; ``notifications/cancelled`` withdraws the request.
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
import dataclasses
import logging
import os
import shlex
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Unpack

from ..._util import canonical_json, new_id, shorten
from ...argschema import check_args, edit_validator, schema_problem
from ...errors import ConfigError, MissingExtraError
from ...inflight import InFlight
from ...lifecycle import RunResult
from ...retry import Backoff
from ...run_state import RunState
from ...steps import StepKind, record_step
from ...supervision import Supervised, Supervision, SupervisionOptions
from ...toolcall import Skip, ToolCall, gate_tool_call

try:
    import anyio
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.session import MessageHandlerFnT
    from mcp.client.streamable_http import streamable_http_client
    from mcp.server.lowlevel import NotificationOptions, Server
    from mcp.shared.message import SessionMessage
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise MissingExtraError("goldfive_core.adapters.mcp_gateway", "mcp") from exc

from .elicit import ELICIT_MODES, AskClient, ElicitAnswerer, ElicitMode
from .http import HttpListen, serve_http
from .input_required import Unanswerable, call_with_input
from .link import Link, UpstreamError, UpstreamGone
from .names import SEPARATOR, warn_policy_names
from .pipe import stdio_upstream
from .stdio import Progress, serve_stdio_streams
from .tasks import TASKS_CAPABILITY, Tasks, TaskState

__all__ = [
    "DEFAULT_RESTARTS",
    "ELICIT_MODES",
    "RESTART_BACKOFF",
    "SEPARATOR",
    "ElicitMode",
    "HttpListen",
    "MCPGateway",
    "Upstream",
]

logger = logging.getLogger(__name__)

_VERSION = "0.1.0"
_CLIENT_INFO = types.Implementation(name="goldfive-mcp-gateway", version=_VERSION)

Default = Literal["ask", "allow"]

DEFAULT_RESTARTS = 3
"""How often ``goldfive mcp`` starts an upstream that died again, by default (``--restarts``)."""

RESTART_BACKOFF = Backoff(first_s=0.2, cap_s=5.0)
"""The delays between an upstream's death and its restarts (the one backoff policy, :mod:`goldfive_core.retry`)."""

_CLOSE_S = 10.0

HELD_LOOK_S = 0.02
"""How often a call that asked for progress looks whether the gate holds it yet (its first progress goes out then)."""

_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # as the MCP SDK's own client: a response stream may stay open


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Upstream:
    """One upstream MCP server: a stdio ``command`` the gateway starts, or a streamable-HTTP ``url``.

    ``name`` prefixes its tools when the gateway fronts several. ``headers_from_env`` (URL only) maps an HTTP
    header to the environment variable holding its value (``{"Authorization": "BANK_AUTH"}``): secrets stay in
    the environment, never on the command line or in the config file.
    """

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    """Extra environment for the command (None: the MCP SDK's default environment)."""
    cwd: str | None = None
    url: str = ""
    headers_from_env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    protocol: str = ""
    """The MCP revision the gateway speaks to it: "" (the initialize handshake, 2025-11-25 and older; the
    default) or ``"2026-07-28"`` (the per-request envelope; stdio only), where a server asks for input with an
    ``input_required`` result (:mod:`.input_required`)."""

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum() or SEPARATOR in self.name:
            raise ConfigError(f"upstream name {self.name!r} must be letters, digits, '-' or '_' (and no {SEPARATOR!r})")
        if bool(self.command) == bool(self.url):
            raise ConfigError(f"upstream {self.name!r} needs a command or a url (one of them)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"upstream {self.name!r}: the url must start with http:// or https://")
        if self.headers_from_env and not self.url:
            raise ConfigError(f"upstream {self.name!r}: headers_from_env is for a url upstream")
        if self.protocol and self.protocol not in MODERN_PROTOCOLS:
            raise ConfigError(
                f"upstream {self.name!r}: protocol must be one of {', '.join(MODERN_PROTOCOLS)} (or none)"
            )
        if self.protocol and self.url:
            raise ConfigError(
                f"upstream {self.name!r}: protocol {self.protocol} is for a stdio upstream in this version"
            )

    @classmethod
    def parse(cls, spec: str) -> Upstream:
        """``NAME=COMMAND ARGS...`` (split like a shell line: quote arguments with spaces) or ``NAME=URL``."""
        name, sep, line = spec.partition("=")
        if not sep:
            raise ConfigError(f"--upstream takes NAME=COMMAND or NAME=URL, got {shorten(spec, 80)!r}")
        if line.strip().startswith(("http://", "https://")):
            return cls(name=name.strip(), url=line.strip())
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise ConfigError(f"upstream {name!r}: cannot split the command: {exc}") from None
        if not words:
            raise ConfigError(f"upstream {name!r} needs a command after '='")
        return cls(name=name.strip(), command=words[0], args=tuple(words[1:]))

    async def transport(self, stack: contextlib.AsyncExitStack, link: Link) -> Any:
        """What the MCP SDK's ``Client`` connects to, with ``link`` on it (an HTTP client closes with ``stack``)."""
        if not self.url:
            return stdio_upstream(link, self.command, self.args, self.env, self.cwd)
        missing = [var for var in self.headers_from_env.values() if var not in os.environ]
        if missing:
            raise ConfigError(f"the environment has no {', '.join(missing)} (headers_from_env)")
        headers = {header: os.environ[var] for header, var in self.headers_from_env.items()}
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=_HTTP_TIMEOUT))
        return link.wrap(streamable_http_client(self.url, http_client=http))


@dataclasses.dataclass(frozen=True, slots=True)
class _Route:
    """An exposed tool: where it lives, its upstream name and its input schema's checker."""

    upstream: str
    tool: types.Tool
    check: Callable[[Mapping[str, Any]], str | None]
    """A person's edited arguments: a JSON object within the limits that fits the input schema."""
    schema: Mapping[str, Any] | None

    def fits(self, args: Mapping[str, Any]) -> str | None:
        """Why the client's own arguments do not fit the input schema (None: they do)."""
        if self.schema is None:
            return None
        problem = check_args(self.schema, args, tool=self.tool.name, against="input schema")
        return problem.message if problem is not None else None


class _Connections:
    """The connected upstreams and what they offer, under the names the client sees."""

    def __init__(
        self, upstreams: Sequence[Upstream], *, restarts: int = 0, elicit: Callable[[str], Any] | None = None
    ) -> None:
        self.upstreams = {u.name: u for u in upstreams}
        self.elicit = elicit
        """The ``elicitation_callback`` for an upstream's client, by its name (None: the SDK's refusal)."""
        self.clients: dict[str, Client] = {}
        self.links: dict[str, Link] = {}
        """The gateway's own requests (tools/call) on each upstream's transport."""
        self.dead: dict[str, str] = {}
        """Upstreams that failed (to start, or later), with why."""
        self.tools: dict[str, _Route] = {}
        self.prompts: dict[str, tuple[str, types.Prompt]] = {}
        self.resources: dict[str, str] = {}
        self.prefixed = len(upstreams) > 1
        self.on_tools_changed: Callable[[], Awaitable[None]] | None = None
        self.restarts = restarts
        """How often an upstream that died is started again (0: never; its tools are reported unavailable)."""
        self.holders: list[asyncio.Future[None]] = []
        self.closing = False

    def exposed(self, upstream: str, name: str) -> str:
        return f"{upstream}{SEPARATOR}{name}" if self.prefixed else name

    async def connect(self) -> None:
        """Start every upstream, each held by a task of its own; returns once each is up or failed to start."""
        started = []
        for upstream in self.upstreams.values():
            ready = asyncio.Event()
            self.holders.append(asyncio.ensure_future(self._hold(upstream, ready)))
            started.append(ready.wait())
        await asyncio.gather(*started)

    async def close(self) -> None:
        """Stop every upstream (each in the task that started it) and wait for them."""
        self.closing = True
        for link in list(self.links.values()):
            link.end("the gateway closed its connection")
        if not self.holders:
            return
        _, waiting = await asyncio.wait(self.holders, timeout=_CLOSE_S)  # each stops its upstream (a bounded wait)
        for holder in waiting:  # one still starting, or between restarts
            holder.cancel()
        await asyncio.gather(*self.holders, return_exceptions=True)

    async def _hold(self, upstream: Upstream, ready: asyncio.Event) -> None:
        """Keep ``upstream`` connected: one that dies is restarted, at most ``restarts`` times (retry.Backoff)."""
        name = upstream.name
        delays = RESTART_BACKOFF.delays()
        restarted = 0
        while True:
            link = Link()
            up = False
            try:
                async with contextlib.AsyncExitStack() as stack:
                    if upstream.protocol:
                        link.envelope = _envelope(upstream.protocol)
                    client = Client(
                        await upstream.transport(stack, link),
                        mode=upstream.protocol or "legacy",
                        cache=None,
                        client_info=_CLIENT_INFO,
                        message_handler=self._handler(name),
                        elicitation_callback=self.elicit(name) if self.elicit is not None else None,
                    )
                    self.clients[name] = await stack.enter_async_context(client)
                    self.links[name] = link
                    self.dead.pop(name, None)
                    up = True
                    if restarted:  # its tools are back: the client is told the list changed
                        logger.warning("upstream %s restarted (%d of %d)", name, restarted, self.restarts)
                        await self._tools_back()
                    ready.set()
                    await link.ended.wait()
            except Exception as exc:  # a broken upstream: its tools are unavailable, the others serve
                if not up:
                    self.dead[name] = f"did not start: {shorten(str(exc) or type(exc).__name__, 300)}"
                    logger.error("upstream %s %s", name, self.dead[name])
            finally:
                self.clients.pop(name, None)
                if self.links.get(name) is link:
                    del self.links[name]
            ready.set()
            if self.closing or not up:
                return  # one that never started is not retried: its configuration is what is wrong
            if restarted >= self.restarts:
                self.dead[name] = f"{self.dead.get(name, 'stopped answering')}; not restarted again"
                return
            self.dead.setdefault(name, "stopped answering")
            self.dead[name] += "; restarting"
            restarted += 1
            await asyncio.sleep(delays.next())

    async def _tools_back(self) -> None:
        await self.refresh_tools()
        if self.on_tools_changed is not None:
            with contextlib.suppress(Exception):  # advisory: the client lists tools again when it likes
                await self.on_tools_changed()

    def _handler(self, name: str) -> MessageHandlerFnT:
        async def handle(message: Any) -> None:
            if isinstance(message, Exception):
                logger.warning("upstream %s: %s", name, shorten(str(message), 300))
                return
            root = getattr(message, "root", message)
            if isinstance(root, types.ToolListChangedNotification):
                await self.refresh_tools()
                if self.on_tools_changed is not None:
                    await self.on_tools_changed()

        return handle

    async def refresh_tools(self) -> None:
        tools: dict[str, _Route] = {}
        for name, client in list(self.clients.items()):
            try:
                listed = await _all_tools(client)
            except Exception as exc:
                self.lost(name, exc)
                continue
            for tool in listed:
                exposed = self.exposed(name, tool.name)
                schema = tool.input_schema if schema_problem(tool.input_schema) is None else None
                check = edit_validator(schema, tool=exposed, against="input schema")
                tools[exposed] = _Route(name, tool, check, schema)
        self.tools = tools

    def lost(self, name: str, exc: BaseException) -> None:
        self.clients.pop(name, None)
        link = self.links.pop(name, None)
        if link is not None:
            link.end("it stopped answering")  # its holder restarts it (when restarts are left)
        self.dead[name] = f"stopped answering: {shorten(str(exc) or type(exc).__name__, 300)}"
        logger.error("upstream %s %s", name, self.dead[name])

    def client(self, name: str) -> Client | None:
        return self.clients.get(name)

    def link(self, name: str) -> Link | None:
        return self.links.get(name)


MODERN_PROTOCOLS = ("2026-07-28",)
"""The per-request-envelope MCP revisions the gateway can speak to a stdio upstream (``Upstream.protocol``)."""


def _envelope(protocol: str) -> dict[str, Any]:
    """The ``_meta`` a 2026-07-28 request carries: the revision, who asks and what it can answer (form elicitation)."""
    return {
        types.PROTOCOL_VERSION_META_KEY: protocol,
        types.CLIENT_INFO_META_KEY: _CLIENT_INFO.model_dump(by_alias=True, mode="json", exclude_none=True),
        types.CLIENT_CAPABILITIES_META_KEY: {"elicitation": {"form": {}}},
    }


async def _all_tools(client: Client) -> list[types.Tool]:
    """Every page of an upstream's ``tools/list``."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(1000):  # bounded: a server whose cursor never ends is cut off
        page = await client.session.list_tools(
            params=types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        )
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


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
        self.supervision = Supervision(**supervision)
        self.upstreams = tuple(listed)
        self.default: Default = default
        self.approval_timeout_ms = approval_timeout_ms
        self.progress_every_s = progress_every_s
        self.restarts = restarts
        self.elicit: ElicitMode = elicit
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
        self.upstreams = _Connections(gateway.upstreams, restarts=gateway.restarts, elicit=self.elicit.callback)
        self.in_flight = InFlight()
        self.write_stream: Any = None
        """The stream to the client (the SDK server's), for notifications the gateway sends of its own."""
        self.tasks = Tasks(self._task_waits_for)
        """Task-augmented calls (MCP Tasks): answered at once with a task the client polls."""

    async def serve(self, read_stream: Any, write_stream: Any) -> RunResult:
        server: Server[Any] = Server(
            self.gateway.name,
            version=_VERSION,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
            on_list_prompts=self.list_prompts,
            on_get_prompt=self.get_prompt,
        )
        self.tasks.register(server)
        server.middleware.append(self._task_calls)
        self.upstreams.on_tools_changed = self._tools_changed
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
        note = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/tools/list_changed")
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
        link = self.upstreams.link(route.upstream)
        if link is None:
            why = self.upstreams.dead.get(route.upstream, "is not connected")
            return _refused(f"{name} was not run: its MCP server {route.upstream!r} {why}")
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
                try:  # an input_required answer is asked (client or person) and the call sent again with it
                    return await call_with_input(
                        lambda params: link.request("tools/call", params),
                        sent,
                        lambda question: self.elicit.answer(route.upstream, question),
                    )
                except Unanswerable as exc:
                    return _refused(f"{name} did not finish in its MCP server {route.upstream!r}: {exc}")

        try:
            result = await self.in_flight.run(outcome, forward)
        except UpstreamGone as exc:  # later calls say so at once; this one is done, not re-sent
            self.upstreams.lost(route.upstream, exc)
            return _refused(f"{name} failed in its MCP server {route.upstream!r}: it stopped answering ({exc})")
        except UpstreamError as exc:  # the upstream's failure is the caller's clear error, never a crash
            return _refused(f"{name} failed in its MCP server {route.upstream!r}: {shorten(str(exc), 500)}")
        record_step(self.session, StepKind.TOOL_RESULT, name=name, value=_said(result), call_id=call.call_id)
        note = outcome.note
        if note:
            content = result.get("content")
            result = {**result, "content": [*(content if isinstance(content, list) else []), _text(note)]}
        return result

    async def _gate(self, call: ToolCall, route: _Route, progress: Progress | None) -> Any:
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

    def _identity(self, who: str, route: _Route) -> dict[str, str]:
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

    # -- resources and prompts: passed through --------------------------------------------------------------
    async def list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        resources: list[types.Resource] = []
        for name, client in self._serving("resources"):
            listed = await client.session.list_resources()
            for resource in listed.resources:
                self.upstreams.resources[str(resource.uri)] = name
                resources.append(resource)
        return types.ListResourcesResult(resources=resources)

    async def list_resource_templates(
        self, ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        templates: list[types.ResourceTemplate] = []
        for _name, client in self._serving("resources"):
            templates.extend((await client.session.list_resource_templates()).resource_templates)
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        serving = self._serving("resources")
        owner = self.upstreams.resources.get(uri)
        client = self.upstreams.client(owner) if owner else (serving[0][1] if len(serving) == 1 else None)
        if client is None:
            raise _mcp_error(types.INVALID_PARAMS, f"unknown resource {shorten(uri, 120)!r} (list resources first)")
        return await client.session.read_resource(uri)

    async def list_prompts(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        prompts: list[types.Prompt] = []
        for name, client in self._serving("prompts"):
            for prompt in (await client.session.list_prompts()).prompts:
                exposed = self.upstreams.exposed(name, prompt.name)
                self.upstreams.prompts[exposed] = (name, prompt)
                prompts.append(prompt.model_copy(update={"name": exposed}))
        return types.ListPromptsResult(prompts=prompts)

    async def get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        found = self.upstreams.prompts.get(params.name)
        client = self.upstreams.client(found[0]) if found else None
        if found is None or client is None:
            raise _mcp_error(types.INVALID_PARAMS, f"unknown prompt {shorten(params.name, 80)!r} (list prompts first)")
        return await client.session.get_prompt(found[1].name, params.arguments)

    def _serving(self, what: Literal["resources", "prompts"]) -> list[tuple[str, Client]]:
        """The live upstreams that declared ``what``."""
        out = []
        for name, client in self.upstreams.clients.items():
            caps = client.session.server_capabilities
            if caps is not None and getattr(caps, what) is not None:
                out.append((name, client))
        return out


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


def _mcp_error(code: int, message: str) -> Exception:
    from mcp import MCPError

    return MCPError(code=code, message=message)


def _unwrap(error: BaseException | None) -> BaseException | None:
    """The run's outcome: a client that hung up (the stream closed) ends the run normally."""
    if error is None or isinstance(error, anyio.EndOfStream | anyio.ClosedResourceError | anyio.BrokenResourceError):
        return None
    return error
