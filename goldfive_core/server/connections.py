"""Deadlines on the connections of ``goldfive serve``: a client that sends nothing, or trickles, is let go.

uvicorn closes a keep-alive connection that stays silent after a response, but it waits forever for a
request's head on a new connection, and any byte a client sends (one header character every few
seconds) restarts its keep-alive timer. :class:`HeadDeadlineProtocol` gives every request head a
deadline of its own: from the moment the connection opens, or the previous response ends, the request
line and headers must be in within ``head_timeout_s``, else the client gets ``408`` and the connection
closes. The body has its deadline in the app (``ServerConfig.body_timeout_s``, see
:mod:`goldfive_core.server.inputs`), so each phase of a request is bounded.
"""

from __future__ import annotations

import asyncio
import json

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HEAD_TIMEOUT_S", "KEEPALIVE_S", "HeadDeadlineProtocol", "head_deadline_protocol"]

HEAD_TIMEOUT_S = 10.0
"""Longest a client may take to send a request line and headers (408 and the connection closes beyond)."""

KEEPALIVE_S = 5
"""An idle keep-alive connection is closed after this many seconds (uvicorn's ``timeout_keep_alive``)."""


def _answer_408(seconds: float) -> bytes:
    body = json.dumps({"error": f"the request line and headers did not arrive within {seconds:g} s"}).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class HeadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head (:data:`HEAD_TIMEOUT_S`)."""

    head_timeout_s: float = HEAD_TIMEOUT_S

    _head_timer: asyncio.TimerHandle | None = None
    _head_cycle: object = None
    """The request cycle current when the deadline was armed: a new cycle means the head arrived."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the first request's deadline."""
        super().connection_made(transport)
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

    def connection_lost(self, exc: Exception | None) -> None:
        """No deadline outlives its connection."""
        self._disarm()
        super().connection_lost(exc)

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
            self.logger.info("closing a connection whose request head took over %g s", self.head_timeout_s)
            self.transport.write(_answer_408(self.head_timeout_s))
            self.transport.close()


def head_deadline_protocol(head_timeout_s: float) -> type[HeadDeadlineProtocol]:
    """A :class:`HeadDeadlineProtocol` class with ``head_timeout_s`` (uvicorn builds one per connection)."""
    return type("HeadDeadlineProtocol", (HeadDeadlineProtocol,), {"head_timeout_s": head_timeout_s})
