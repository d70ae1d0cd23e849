"""The gateway's upstreams: what each is (:class:`Upstream`), and one client connection's links to them.

:class:`Connections` keeps each upstream connected in a task of its own (an upstream that dies is started again,
at most ``restarts`` times, with :data:`RESTART_BACKOFF` between tries), and knows what they offer under the
names the client sees. A call the gate let through asks for the upstream's link *when it is about to be sent*
(:meth:`Connections.live`), never before the gate: a call that waited for a person while its upstream was
restarted goes to the new connection, and waits (bounded) for one being started.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import os
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.session import ElicitationFnT, MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client

from ..._util import shorten
from ...argschema import check_args, edit_validator, schema_problem
from ...errors import ConfigError
from ...retry import Backoff
from .link import Link
from .pipe import stdio_upstream

__all__ = [
    "DEFAULT_RESTARTS",
    "DEFAULT_UPSTREAM_TIMEOUT_S",
    "MODERN_PROTOCOLS",
    "RESTART_BACKOFF",
    "SEPARATOR",
    "Connections",
    "Route",
    "Upstream",
    "all_pages",
    "subscribe",
]

logger = logging.getLogger(__name__)

SEPARATOR = "__"
"""Between an upstream's name and its tool's name when the gateway fronts several upstreams (``bank__pay``)."""

VERSION = "0.1.0"
CLIENT_INFO = types.Implementation(name="goldfive-mcp-gateway", version=VERSION)

DEFAULT_RESTARTS = 3
"""How often ``goldfive mcp`` starts an upstream that died again, by default (``--restarts``)."""

RESTART_BACKOFF = Backoff(first_s=0.2, cap_s=5.0)
"""The delays between an upstream's death and its restarts (the one backoff policy, :mod:`goldfive_core.retry`)."""

DEFAULT_UPSTREAM_TIMEOUT_S = 300.0
"""How long an upstream has to answer a ``tools/call`` the gateway sent it, by default (``--upstream-timeout``; the
MCP SDK's own read timeout on a streamable-HTTP response). Time the upstream spends waiting on a question it asked
(a person answering its elicitation) does not count. Its start-up handshake, lists, resources, prompts and
completions are bounded by the longer of this and the upstream's own timeout (a slow-starting server is not cut
off by a short call timeout)."""

MAX_UPSTREAM_TIMEOUT_S = 7 * 24 * 3600.0

RESTART_WAIT_S = 30.0
"""How long a call let through waits for its upstream to come back when it is being started again (then: not sent)."""

MAX_PAGES = 1000
"""The most pages of one upstream list the gateway reads (a server whose cursor never ends is cut off)."""

MODERN_PROTOCOLS = ("2026-07-28",)
"""The per-request-envelope MCP revisions the gateway can speak to a stdio upstream (``Upstream.protocol``)."""

_CLOSE_S = 10.0

_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # as the MCP SDK's own client: a response stream may stay open


def check_timeout(value: float, what: str) -> float:
    """``value`` as an upstream timeout in seconds: a number in (0, 7 days] (else ConfigError naming ``what``)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{what} must be a number of seconds, got {value!r}")
    if not 0 < value <= MAX_UPSTREAM_TIMEOUT_S:
        raise ConfigError(f"{what} must be in (0, {MAX_UPSTREAM_TIMEOUT_S:g}] seconds, got {value:g}")
    return float(value)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Upstream:
    """One upstream MCP server: a stdio ``command`` the gateway starts, or a streamable-HTTP ``url``.

    ``name`` prefixes its tools when the gateway fronts several. ``headers_from_env`` (URL only) maps an HTTP
    header to the environment variable holding its value (``{"Authorization": "BANK_AUTH"}``): secrets stay in
    the environment, never on the command line or in the config file. ``timeout_s``: how long it has to answer
    one request (None: the gateway's ``upstream_timeout_s``).
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
    timeout_s: float | None = None

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
        if self.timeout_s is not None:
            check_timeout(self.timeout_s, f"upstream {self.name!r}: timeout")

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

    def missing_env(self) -> list[str]:
        """The ``headers_from_env`` variables the environment does not have (each named in the start-up error)."""
        return [var for var in self.headers_from_env.values() if var not in os.environ]

    async def transport(self, stack: contextlib.AsyncExitStack, link: Link) -> Any:
        """What the MCP SDK's ``Client`` connects to, with ``link`` on it (an HTTP client closes with ``stack``)."""
        if not self.url:
            return stdio_upstream(link, self.command, self.args, self.env, self.cwd)
        missing = self.missing_env()
        if missing:
            raise ConfigError(f"the environment has no {', '.join(missing)} (headers_from_env)")
        headers = {header: os.environ[var] for header, var in self.headers_from_env.items()}
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=_HTTP_TIMEOUT))
        return link.wrap(streamable_http_client(self.url, http_client=http))


@dataclasses.dataclass(frozen=True, slots=True)
class Route:
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


Notice = Callable[[str, dict[str, Any] | None], Awaitable[None]]
"""Passes a notification (method, params) on to the client."""


class Connections:
    """One client connection's upstreams: connected, restarted, and what they offer under the names the client sees."""

    def __init__(
        self,
        upstreams: Sequence[Upstream],
        *,
        restarts: int = 0,
        timeout_s: float = DEFAULT_UPSTREAM_TIMEOUT_S,
        elicit: Callable[[str], Any] | None = None,
    ) -> None:
        self.upstreams = {u.name: u for u in upstreams}
        self.elicit = elicit
        """The ``elicitation_callback`` for an upstream's client, by its name (None: the SDK's refusal)."""
        self.timeout_s = timeout_s
        self.clients: dict[str, Client] = {}
        self.links: dict[str, Link] = {}
        """The gateway's own requests (tools/call) on each upstream's transport."""
        self.dead: dict[str, str] = {}
        """Upstreams that failed (to start, or later), with why."""
        self.tools: dict[str, Route] = {}
        self.prompts: dict[str, tuple[str, types.Prompt]] = {}
        self.resources: dict[str, str] = {}
        """A resource's URI → the upstream that listed it."""
        self.templates: dict[str, str] = {}
        """A resource template's URI template → the upstream that listed it."""
        self.subscribed: dict[str, set[str]] = {}
        """The resource URIs the client subscribed to, by upstream (subscribed again after a restart)."""
        self.prefixed = len(upstreams) > 1
        self.on_tools_changed: Callable[[], Awaitable[None]] | None = None
        self.on_notice: Notice | None = None
        """Passes an upstream's resources and prompts notifications on to the client."""
        self.restarts = restarts
        """How often an upstream that died is started again (0: never; its tools are reported unavailable)."""
        self.holding: dict[str, asyncio.Task[None]] = {}
        self._changed = asyncio.Event()
        """Set (and replaced) whenever an upstream's link comes or goes."""
        self.closing = False

    def exposed(self, upstream: str, name: str) -> str:
        return f"{upstream}{SEPARATOR}{name}" if self.prefixed else name

    def timeout_of(self, name: str) -> float:
        """How long upstream ``name`` has to answer one request."""
        own = self.upstreams[name].timeout_s
        return own if own is not None else self.timeout_s

    async def connect(self) -> None:
        """Start every upstream, each held by a task of its own; returns once each is up or failed to start."""
        started = []
        for upstream in self.upstreams.values():
            ready = asyncio.Event()
            self.holding[upstream.name] = asyncio.ensure_future(self._hold(upstream, ready))
            started.append(ready.wait())
        await asyncio.gather(*started)

    async def close(self) -> None:
        """Stop every upstream (each in the task that started it) and wait for them."""
        self.closing = True
        for link in list(self.links.values()):
            link.end("the gateway closed its connection")
        holders = list(self.holding.values())
        if not holders:
            return
        _, waiting = await asyncio.wait(holders, timeout=_CLOSE_S)  # each stops its upstream (a bounded wait)
        for holder in waiting:  # one still starting, or between restarts
            holder.cancel()
        await asyncio.gather(*holders, return_exceptions=True)

    async def _hold(self, upstream: Upstream, ready: asyncio.Event) -> None:
        """Keep ``upstream`` connected: one that dies is restarted, at most ``restarts`` times (retry.Backoff)."""
        try:
            await self._keep(upstream, ready)
        finally:
            ready.set()
            self._turned()  # no more links will come: a call waiting for one is told at once

    async def _keep(self, upstream: Upstream, ready: asyncio.Event) -> None:
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
                    elicit = self.elicit(name) if self.elicit is not None else None
                    client = Client(
                        await upstream.transport(stack, link),
                        mode=upstream.protocol or "legacy",
                        cache=None,
                        client_info=CLIENT_INFO,
                        read_timeout_seconds=max(self.timeout_of(name), DEFAULT_UPSTREAM_TIMEOUT_S),
                        message_handler=self._handler(name),
                        elicitation_callback=cast(ElicitationFnT, link.asking(elicit)) if elicit is not None else None,
                    )
                    self.clients[name] = await stack.enter_async_context(client)
                    self.links[name] = link
                    self.dead.pop(name, None)
                    up = True
                    self._turned()
                    if restarted:  # its tools are back: the client is told the list changed
                        logger.warning("upstream %s restarted (%d of %d)", name, restarted, self.restarts)
                        await self._tools_back()
                        await self._subscribe_again(name, self.clients[name])
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
                self._turned()
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

    def _turned(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def live(self, name: str, *, within_s: float, stale: Link | None = None) -> Link | None:
        """Upstream ``name``'s link now (never ``stale``, never one that ended), waiting up to ``within_s`` while it
        is being started again; None: it is gone for good, or did not come back in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        while True:
            link = self.links.get(name)
            if link is not None and link is not stale and not link.gone:
                return link
            holder = self.holding.get(name)
            left = deadline - loop.time()
            if holder is None or holder.done() or self.closing or left <= 0:
                return None
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), left)

    async def _tools_back(self) -> None:
        await self.refresh_tools()
        if self.on_tools_changed is not None:
            with contextlib.suppress(Exception):  # advisory: the client lists tools again when it likes
                await self.on_tools_changed()

    async def _subscribe_again(self, name: str, client: Client) -> None:
        """A restarted upstream is a new session: the client's subscriptions to it are made again."""
        for uri in sorted(self.subscribed.get(name, ())):
            try:
                await subscribe(client, uri)
            except Exception as exc:  # advisory: the client reads the resource when it likes
                logger.warning("upstream %s: subscribing to a resource again failed: %s", name, type(exc).__name__)

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
            elif self.on_notice is not None:
                notice = self._notice(name, root)
                if notice is not None:
                    await self.on_notice(*notice)

        return handle

    def _notice(self, name: str, root: Any) -> tuple[str, dict[str, Any] | None] | None:
        """What of an upstream's notification the client is told (None: nothing)."""
        if isinstance(root, types.ResourceListChangedNotification):
            return "notifications/resources/list_changed", None
        if isinstance(root, types.PromptListChangedNotification):
            return "notifications/prompts/list_changed", None
        if isinstance(root, types.ResourceUpdatedNotification):
            uri = str(root.params.uri)
            if uri in self.subscribed.get(name, ()):  # only what the client subscribed to, through this upstream
                return "notifications/resources/updated", {"uri": uri}
        return None

    async def refresh_tools(self) -> None:
        tools: dict[str, Route] = {}
        for name, client in list(self.clients.items()):
            link = self.links.get(name)
            try:
                listed = await all_pages(client.session.list_tools, "tools")
            except Exception as exc:
                self.lost(name, link, exc)
                continue
            for tool in listed:
                exposed = self.exposed(name, tool.name)
                schema = tool.input_schema if schema_problem(tool.input_schema) is None else None
                check = edit_validator(schema, tool=exposed, against="input schema")
                tools[exposed] = Route(name, tool, check, schema)
        self.tools = tools

    def lost(self, name: str, link: Link | None, exc: BaseException) -> None:
        """``link`` stopped answering: later calls are told at once, and its holder starts the upstream again. A link
        that is no longer the upstream's (a call that began before a restart) changes nothing: the new connection
        is never ended for an old one's fault."""
        if link is None or self.links.get(name) is not link:
            return
        self.clients.pop(name, None)
        del self.links[name]
        link.end("it stopped answering")  # its holder restarts it (when restarts are left)
        self.dead[name] = f"stopped answering: {shorten(str(exc) or type(exc).__name__, 300)}"
        logger.error("upstream %s %s", name, self.dead[name])
        self._turned()

    def client(self, name: str) -> Client | None:
        return self.clients.get(name)

    def link(self, name: str) -> Link | None:
        return self.links.get(name)

    def why_not(self, name: str) -> str:
        """Why upstream ``name`` has no link, in words ("is not connected" when nothing more is known)."""
        return self.dead.get(name, "is not connected")

    def serving(self, what: str) -> list[tuple[str, Client]]:
        """The live upstreams whose capabilities have ``what`` (``resources``, ``prompts``, ``completions``)."""
        out = []
        for name, client in self.clients.items():
            caps = client.session.server_capabilities
            if caps is not None and getattr(caps, what, None) is not None:
                out.append((name, client))
        return out


def _envelope(protocol: str) -> dict[str, Any]:
    """The ``_meta`` a 2026-07-28 request carries: the revision, who asks and what it can answer (form elicitation)."""
    return {
        types.PROTOCOL_VERSION_META_KEY: protocol,
        types.CLIENT_INFO_META_KEY: CLIENT_INFO.model_dump(by_alias=True, mode="json", exclude_none=True),
        types.CLIENT_CAPABILITIES_META_KEY: {"elicitation": {"form": {}}},
    }


async def all_pages(fetch: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    """Every page of an upstream's list: ``fetch`` is its SDK client session's ``list_...`` (it takes ``params=``),
    ``field`` the items of each page (``tools``, ``resources``, ...)."""
    found: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):  # bounded: a server whose cursor never ends is cut off
        page = await fetch(params=types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None)
        found.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return found


async def subscribe(client: Client, uri: str) -> None:
    """``resources/subscribe`` to ``uri``: the 2025 request the gateway speaks (the SDK helper warns of 2026)."""
    params = types.SubscribeRequestParams(uri=uri)
    await client.session.send_request(types.SubscribeRequest(params=params), types.EmptyResult)
