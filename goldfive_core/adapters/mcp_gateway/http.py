"""The gateway on streamable HTTP: ``goldfive mcp --http HOST:PORT``, one MCP session = one goldfive run.

Every request to ``/mcp`` is checked before anything else happens, in this order:

1. Host and Origin (the MCP spec's defence against DNS rebinding, with the SDK's own check): on a loopback
   bind the ``Host`` must name a loopback address with the gateway's port (else 421), and an ``Origin`` the
   operator did not allow (``allowed_origins``) is refused (403). A request without ``Origin`` (not a browser)
   passes this step.
2. The bearer token: ``Authorization: Bearer <token>``, compared in constant time; without it or with another
   one the answer is 401 with a JSON-RPC error that says which. The token is never logged.
3. The session: an ``initialize`` POST without ``Mcp-Session-Id`` opens a new session (the MCP SDK's
   ``StreamableHTTPServerTransport``, served by a connection of the gateway's own, which opens its own goldfive
   run and its own upstream connections; any other request without one is 400, and opens nothing); a request
   with one goes to that session's transport, and an unknown id is 404 (the client initializes again).
   ``DELETE``, an idle session (``idle_timeout_s``) or the gateway's stop ends a session, and with it its run.
   A body over 4 MiB is 413.

Only the 2025 handshake revisions are served (a 2026-07-28 per-request ``Mcp-Protocol-Version`` is refused with
400 saying so). The session ids are random (128 bits); the token is the operator's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import ipaddress
import json
import logging
import secrets
import signal
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    RequestBodyLimitMiddleware,
    TransportSecurityMiddleware,
    TransportSecuritySettings,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ...errors import ConfigError

if TYPE_CHECKING:
    from . import MCPGateway

__all__ = ["DEFAULT_MAX_SESSIONS", "HttpListen", "is_loopback", "serve_http"]

logger = logging.getLogger(__name__)

PATH = "/mcp"
DEFAULT_MAX_SESSIONS = 100
"""How many MCP sessions (each a goldfive run with its own upstream connections) the gateway serves at once."""
DEFAULT_IDLE_TIMEOUT_S = 30 * 60.0
MIN_TOKEN_CHARS = 16
MAX_BODY_BYTES = DEFAULT_MAX_REQUEST_BODY_SIZE
"""The longest MCP request the gateway reads (the MCP SDK's default: 4 MiB); a longer one is 413."""
_STOP_GRACE_S = 2


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class HttpListen:
    """Where and how the gateway listens: ``host``/``port`` (0: any free port), the bearer ``token``,
    the browser origins it answers (``allowed_origins``, e.g. ``https://app.example.com``)."""

    host: str
    port: int
    token: str
    allowed_origins: Sequence[str] = ()
    public: bool = False
    """A non-loopback ``host`` is refused unless this is set (plain HTTP: put TLS in front of it)."""
    max_sessions: int = DEFAULT_MAX_SESSIONS
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S

    def __post_init__(self) -> None:
        if len(self.token) < MIN_TOKEN_CHARS:
            raise ConfigError(f"the gateway's bearer token must be at least {MIN_TOKEN_CHARS} characters")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"the port must be in [0, 65535], got {self.port}")
        if not is_loopback(self.host) and not self.public:
            raise ConfigError(
                f"--http {self.host}: the gateway speaks plain HTTP, so its bearer token (and every tool call's "
                "arguments) would cross the network readable; bind 127.0.0.1 (or ::1), or put TLS in front "
                "(a reverse proxy) and pass --http-public"
            )
        if self.max_sessions < 1 or self.idle_timeout_s <= 0:
            raise ConfigError("max_sessions must be >= 1 and idle_timeout_s > 0")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Session:
    def __init__(self, transport: StreamableHTTPServerTransport) -> None:
        self.transport = transport
        self.ready = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


class _Front:
    """The ASGI app: checks every request, then hands it to its session's transport."""

    def __init__(self, gateway: MCPGateway, listen: HttpListen, port: int) -> None:
        self.gateway = gateway
        self.listen = listen
        self._token = listen.token.encode("utf-8")
        self._sessions: dict[str, _Session] = {}
        # Loopback: the SDK's DNS-rebinding check (Host and Origin). Public (behind a proxy that owns Host):
        # Origin only, checked here.
        self._security = TransportSecuritySettings(
            enable_dns_rebinding_protection=not listen.public,
            allowed_hosts=_allowed_hosts(listen.host, port),
            allowed_origins=list(listen.allowed_origins),
        )
        self._guard = TransportSecurityMiddleware(self._security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        refused = await self._refusal(request)
        if refused is not None:
            await refused(scope, receive, send)
            return
        session_id = request.headers.get(MCP_SESSION_ID_HEADER)
        if session_id is None:
            await self._open(scope, receive, send)
            return
        session = self._sessions.get(session_id)
        if session is None:
            await _error(404, "no such MCP session (it ended, or expired): initialize a new one")(scope, receive, send)
            return
        await RequestBodyLimitMiddleware(session.transport.handle_request, MAX_BODY_BYTES)(scope, receive, send)
        if session.transport.is_terminated:  # the client ended it (DELETE)
            self._sessions.pop(session_id, None)

    async def _refusal(self, request: Request) -> Response | None:
        """Why this request is not served (None: it is), checked before any session or token is looked at."""
        if request.url.path.rstrip("/") != PATH:
            return _error(404, f"the MCP endpoint is {PATH}")
        guarded = await self._guard.validate_request(request, is_post=request.method == "POST")
        if guarded is not None:
            return guarded
        origin = request.headers.get("origin")
        if self.listen.public and origin and origin not in self.listen.allowed_origins:
            return _error(403, "this browser origin is not allowed (--allow-origin)")
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            versions = ", ".join(HANDSHAKE_PROTOCOL_VERSIONS)
            return _error(400, f"this gateway serves the MCP handshake revisions over HTTP ({versions})")
        return self._unauthorized(request.headers.get("authorization"))

    def _unauthorized(self, header: str | None) -> Response | None:
        scheme, _, given = (header or "").partition(" ")
        if not header or scheme.lower() != "bearer" or not given.strip():
            why = "this MCP gateway needs its bearer token: send 'Authorization: Bearer <token>'"
        elif not hmac.compare_digest(given.strip().encode("utf-8"), self._token):
            why = "the bearer token is not this gateway's"
        else:
            return None
        return _error(401, why, {"WWW-Authenticate": 'Bearer realm="goldfive-mcp"'})

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request without ``Mcp-Session-Id``: an ``initialize`` POST opens a session (its run); nothing else."""
        body = await _body(receive) if scope["method"] == "POST" else b""
        if body is None:
            await _error(413, f"an MCP request is at most {MAX_BODY_BYTES} bytes")(scope, receive, send)
            return
        if not _is_initialize(body):
            refusal = "without an Mcp-Session-Id header only an initialize POST is served (it opens a session)"
            await _error(400, refusal)(scope, receive, send)
            return
        if len(self._sessions) >= self.listen.max_sessions:
            await _error(503, f"{self.listen.max_sessions} MCP sessions are open: end one first")(scope, receive, send)
            return
        transport = StreamableHTTPServerTransport(
            mcp_session_id=secrets.token_hex(16),
            security_settings=self._security,
            idle_timeout=self.listen.idle_timeout_s,
        )
        session_id = transport.mcp_session_id
        assert session_id is not None
        session = _Session(transport)
        self._sessions[session_id] = session
        session.task = asyncio.ensure_future(self._serve(session_id, session))
        await session.ready.wait()
        status = await _status_of(transport.handle_request, scope, _replay(body, receive), send)
        if status is None or status >= 400:  # nothing was established: no session, no run left behind
            await self._end(session_id, session)

    async def _serve(self, session_id: str, session: _Session) -> None:
        """One session's connection (its run) on the transport's streams, until the session ends."""
        transport = session.transport
        try:
            async with transport.connect() as (read_stream, write_stream):
                session.ready.set()
                scope = transport.idle_scope or anyio.CancelScope()
                with scope:
                    await self.gateway.serve(read_stream, write_stream)
                if scope.cancelled_caught:
                    logger.info("MCP session %s… ended idle", session_id[:8])
        except Exception:
            logger.exception("MCP session %s… failed", session_id[:8])
        finally:
            session.ready.set()
            self._sessions.pop(session_id, None)
            if not transport.is_terminated:
                with anyio.CancelScope(shield=True):
                    await transport.terminate()

    async def _end(self, session_id: str, session: _Session) -> None:
        self._sessions.pop(session_id, None)
        with anyio.CancelScope(shield=True):
            await session.transport.terminate()
            if session.task is not None:
                with contextlib.suppress(Exception):
                    await session.task

    async def aclose(self) -> None:
        """End every session (each run closes as its client's would)."""
        for session_id, session in list(self._sessions.items()):
            await self._end(session_id, session)


class _Server(uvicorn.Server):
    """uvicorn's server, ending every MCP session (its run, its waiting calls) before it stops.

    SIGINT and SIGTERM stop it, and the process then ends normally (uvicorn's own handlers raise the signal
    again once stopped, which would end the process before the gateway's channel is closed)."""

    def __init__(self, config: uvicorn.Config, front: _Front) -> None:
        super().__init__(config)
        self._front = front

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.handle_exit, sig, None)
        try:
            yield
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for listener in self.servers:  # no new session while the open ones are ended
            listener.close()
        await self._front.aclose()
        await super().shutdown(sockets)


async def _body(receive: Receive) -> bytes | None:
    """The whole request body (None: over :data:`MAX_BODY_BYTES`)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then whatever the connection says next (a disconnect)."""
    given = False

    async def again() -> Any:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


def _is_initialize(body: bytes) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return isinstance(message, dict) and message.get("method") == "initialize"


def _allowed_hosts(host: str, port: int) -> list[str]:
    names = {host, "127.0.0.1", "localhost", "[::1]"} if is_loopback(host) else {host}
    return [f"{name}:{port}" for name in sorted(names)] + sorted(names)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    """A JSON-RPC error body (no request id) with an HTTP status, as the MCP SDK's transport answers."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600 if status != 401 else -32001, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


async def _status_of(app: Any, scope: Scope, receive: Receive, send: Send) -> int | None:
    status: int | None = None

    async def watch(message: Any) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        await send(message)

    await app(scope, receive, watch)
    return status


def bind(host: str, port: int) -> socket.socket:
    """The listening socket (``port`` 0: a free one), bound before the gateway says where it listens."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve_http(gateway: MCPGateway, listen: HttpListen, *, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve MCP clients on streamable HTTP until stopped (SIGINT/SIGTERM); ``on_ready`` gets the endpoint URL."""
    sock = bind(listen.host, listen.port)
    port = int(sock.getsockname()[1])
    front = _Front(gateway, listen, port)
    config = uvicorn.Config(
        front,
        log_level="warning",
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=_STOP_GRACE_S,
    )
    server = _Server(config, front)
    shown = f"[{listen.host.strip('[]')}]" if ":" in listen.host.strip("[]") else listen.host
    url = f"http://{shown}:{port}{PATH}"
    try:
        if on_ready is not None:
            on_ready(url)
        await server.serve(sockets=[sock])
    finally:
        await front.aclose()
        sock.close()
