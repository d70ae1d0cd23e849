"""Deadlines on the connections of ``goldfive serve``: a client that sends nothing, or trickles, is let go.

uvicorn closes a keep-alive connection that stays silent after a response, but it waits forever for a
request's head on a new connection, and any byte a client sends (one header character every few
seconds) restarts its keep-alive timer. :class:`DeadlineProtocol` gives every request head a
deadline of its own: from the moment the connection opens, or the previous response ends, the request
line and headers must be in within ``head_timeout_s``, else the client gets ``408`` and the connection
closes. The body has its deadline in the app (``ServerConfig.body_timeout_s``, see
:mod:`goldfive_core.server.inputs`). And a client that stops reading what it asked for (an event
stream, a big page) holds its connection only ``write_timeout_s``: once the socket's buffers are full
and nothing drains them for that long, the connection is dropped. So each phase of a request is bounded.

A peer that vanishes without closing (its host lost power, a cable pulled) is found by the kernel: every
connection has TCP keepalive (a probe after :data:`KEEPALIVE_IDLE_S` of silence, given up after
:data:`KEEPALIVE_PROBES` unanswered ones :data:`KEEPALIVE_INTERVAL_S` apart) and a TCP user timeout (data
unacknowledged for :data:`TCP_USER_TIMEOUT_S` ends it). An agent's open stream carries its runs' liveness
(:mod:`.heartbeats`), so this is how long a vanished agent host keeps its runs alive: at most about
:data:`TCP_USER_TIMEOUT_S` and a probe interval (Linux ends a connection whose keepalive probes go unanswered
for the user timeout, with or without a ping in flight); an agent process that ends closes its connection at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = [
    "HEAD_TIMEOUT_S",
    "KEEPALIVE_IDLE_S",
    "KEEPALIVE_S",
    "TCP_USER_TIMEOUT_S",
    "WRITE_TIMEOUT_S",
    "DeadlineProtocol",
    "deadline_protocol",
    "keep_probing",
]

logger = logging.getLogger(__name__)

HEAD_TIMEOUT_S = 10.0
"""Longest a client may take to send a request line and headers (408 and the connection closes beyond)."""

KEEPALIVE_S = 5
"""An idle keep-alive connection is closed after this many seconds (uvicorn's ``timeout_keep_alive``)."""

WRITE_TIMEOUT_S = 60.0
"""Longest an answer may sit unread with the socket's buffers full (the connection is dropped beyond)."""

KEEPALIVE_IDLE_S = 5
"""Seconds of silence on a connection before the kernel probes the peer (TCP keepalive)."""
KEEPALIVE_INTERVAL_S = 2
KEEPALIVE_PROBES = 3
TCP_USER_TIMEOUT_S = 20
"""Longest sent data may stay unacknowledged (a ping to a vanished agent host) before the kernel ends the
connection (Linux ``TCP_USER_TIMEOUT``; never above the write timeout)."""


def keep_probing(sock: Any, *, user_timeout_s: float = TCP_USER_TIMEOUT_S) -> None:
    """Turn on TCP keepalive and the user timeout on ``sock`` where the platform has them (else nothing)."""
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    options = [
        (socket.SOL_SOCKET, getattr(socket, "SO_KEEPALIVE", None), 1),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPIDLE", None), KEEPALIVE_IDLE_S),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPINTVL", None), KEEPALIVE_INTERVAL_S),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPCNT", None), KEEPALIVE_PROBES),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_USER_TIMEOUT", None), int(user_timeout_s * 1000)),
    ]
    for level, option, value in options:
        if option is not None:
            try:
                sock.setsockopt(level, option, value)
            except OSError:  # not on this platform or socket: the write timeout still bounds a stuck peer
                continue


def _raw_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """The headers of an answer this module writes itself (not through the app): JSON, nosniff like every answer
    of the app (a browser never sniffs one as script or HTML), and the connection closes after it."""
    return [
        (b"content-type", b"application/json"),
        (b"x-content-type-options", b"nosniff"),
        (b"connection", b"close"),
        (b"content-length", str(len(body)).encode()),
    ]


def _answer_408(seconds: float) -> bytes:
    body = json.dumps({"error": f"the request line and headers did not arrive within {seconds:g} s"}).encode()
    head = b"".join(name + b": " + value + b"\r\n" for name, value in _raw_headers(body))
    return b"HTTP/1.1 408 Request Timeout\r\n" + head + b"\r\n" + body


_NOT_HTTP = json.dumps(
    {"error": "invalid HTTP request: the request line, a header or the body's framing could not be parsed"}
).encode()


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head (:data:`HEAD_TIMEOUT_S`) and on an answer
    nobody reads (:data:`WRITE_TIMEOUT_S`)."""

    head_timeout_s: float = HEAD_TIMEOUT_S
    write_timeout_s: float = WRITE_TIMEOUT_S

    _write_timer: asyncio.TimerHandle | None = None
    _head_timer: asyncio.TimerHandle | None = None
    _head_cycle: object = None
    """The request cycle current when the deadline was armed: a new cycle means the head arrived."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the first request's deadline."""
        super().connection_made(transport)
        keep_probing(transport.get_extra_info("socket"), user_timeout_s=min(TCP_USER_TIMEOUT_S, self.write_timeout_s))
        self._arm()

    def data_received(self, data: bytes) -> None:
        """Feed uvicorn; once a request's head is parsed, its deadline is met."""
        super().data_received(data)
        self._met()

    def on_response_complete(self) -> None:
        """The next request on this connection gets a deadline of its own (armed before a pipelined one starts)."""
        self._arm()
        super().on_response_complete()
        self._met()

    def send_400_response(self, msg: str) -> None:
        """h11 could not parse what the client sent: a JSON 400 with nosniff like every other answer (uvicorn's
        own is plain text without it), then the connection closes."""
        self._disarm()
        events = (
            h11.Response(status_code=400, headers=_raw_headers(_NOT_HTTP), reason=b"Bad Request"),
            h11.Data(data=_NOT_HTTP),
            h11.EndOfMessage(),
        )
        try:  # through h11, so its state agrees: after an answer already under way, no second one can be written
            output = b"".join(self.conn.send(event) or b"" for event in events)
        except h11.LocalProtocolError:
            output = b""  # the answer in flight is cut off: nothing more can be said on this connection
        if output:
            self.transport.write(output)
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """No deadline outlives its connection."""
        self._disarm()
        self._unstick()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        """The socket's buffers are full: the client has that long to read some of them."""
        super().pause_writing()
        if self._write_timer is None:
            self._write_timer = self.loop.call_later(self.write_timeout_s, self._stuck)

    def resume_writing(self) -> None:
        """The client reads again."""
        self._unstick()
        super().resume_writing()

    def _unstick(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _stuck(self) -> None:
        # Even when closing: a closing transport still waits to flush the buffers nobody drains; abort does not.
        self._write_timer = None
        logger.info("dropping a connection whose client read nothing for %g s", self.write_timeout_s)
        self.transport.abort()

    def _arm(self) -> None:
        self._disarm()
        self._head_cycle = self.cycle
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _met(self) -> None:
        if self._head_timer is not None and self.cycle is not self._head_cycle:
            self._disarm()

    def _late(self) -> None:
        self._head_timer = None
        if self.cycle is self._head_cycle and not self.transport.is_closing():
            logger.info("closing a connection whose request head took over %g s", self.head_timeout_s)
            self.transport.write(_answer_408(self.head_timeout_s))
            self.transport.close()


def deadline_protocol(*, head_timeout_s: float, write_timeout_s: float) -> type[DeadlineProtocol]:
    """A :class:`DeadlineProtocol` class with these deadlines (uvicorn builds one instance per connection)."""
    deadlines = {"head_timeout_s": head_timeout_s, "write_timeout_s": write_timeout_s}
    return type("DeadlineProtocol", (DeadlineProtocol,), deadlines)
