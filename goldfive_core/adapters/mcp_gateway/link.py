"""The gateway's own requests on an upstream's transport, beside the MCP SDK client's.

The SDK's ``Client`` lists tools, resources and prompts and keeps the session; a ``tools/call`` the gate let
through is sent by :meth:`Link.request` on the same transport, with the tool's arguments and result kept as
JSON (no model of the result is built and re-serialised: the gateway passes it on unchanged). A response whose
id is one of the link's goes to its waiter; every other message goes to the SDK client. The transport's end
(the upstream exited or its connection dropped) fails every request still waiting with :class:`UpstreamGone`.

What a caller can tell apart (the ledger depends on it): :class:`UpstreamGone` with ``written=False`` — the request
never reached the transport (the link had ended, or the write was refused), so nothing of it ran; with
``written=True`` — it was handed to the upstream and its answer was lost (it may or may not have run); and
:class:`UpstreamTimeout` — it was handed over and no answer came within ``timeout_s`` (the upstream is alive but
silent, or hung). The clock stops while the upstream waits on an answer from the gateway (a question it asked,
:meth:`Link.asking`: a person may take minutes), and starts again from zero once that is answered. A request given
up (timed out or cancelled) is cancelled upstream (``notifications/cancelled``) and its late answer dropped.

Two ways onto a transport: a stdio upstream (:mod:`.pipe`) gives the link its pipe (:meth:`Link.attach`), and
the link writes and reads JSON lines on it; any other (streamable HTTP) goes through :meth:`Link.wrap`, and the
link's requests travel as the SDK's messages do.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from ...errors import UpstreamError, UpstreamGone, UpstreamTimeout

__all__ = ["Link", "UpstreamError", "UpstreamGone", "UpstreamTimeout"]

_IDS = itertools.count(1)

_ABANDONED = 256
"""How many given-up request ids a link remembers (their late answers are dropped, not passed to the SDK client)."""

_SendFailed = (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError)


class Link:
    """One upstream transport shared by the SDK client and the gateway's own requests."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._write: Any = None
        self._line: Callable[[bytes], None] | None = None
        self._drain: Callable[[], Awaitable[None]] | None = None
        self._gone: str = ""
        self._abandoned: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._questions = 0
        self._clocks: dict[str, tuple[asyncio.TimerHandle | None, float]] = {}
        """Each waiting request's timer (None while a question is open) and its time, by request id."""
        self.envelope: dict[str, Any] | None = None
        """The ``_meta`` every request of the link's carries (a 2026-07-28 upstream; None: the handshake's)."""
        self.ended = asyncio.Event()
        """Set once the transport ended (the upstream exited, its connection dropped, or the gateway closed it)."""

    def attach(self, send_line: Callable[[bytes], None], drain: Callable[[], Awaitable[None]]) -> None:
        """Send this link's requests as JSON lines with ``send_line`` (the pipe's reader calls :meth:`answer`)."""
        self._line, self._drain = send_line, drain

    @contextlib.asynccontextmanager
    async def wrap(self, inner: AbstractAsyncContextManager[Any]) -> AsyncIterator[Any]:
        """``inner`` (an MCP client transport) as a transport for the SDK client, with the link on it."""
        async with inner as (read, write):
            self._write = write
            to_sdk, from_link = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def pump() -> None:
                try:
                    async with to_sdk:
                        async for item in read:
                            if not self._answered(item):
                                await to_sdk.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                    pass
                finally:
                    self.end("its connection closed")

            async with anyio.create_task_group() as tg:
                tg.start_soon(pump)
                try:
                    yield from_link, write
                finally:
                    self.end("the gateway closed its connection")
                    tg.cancel_scope.cancel()

    def _answered(self, item: object) -> bool:
        if not isinstance(item, SessionMessage):
            return False
        message = item.message
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError) or not isinstance(message.id, str):
            return False
        return self.answer(message.model_dump(by_alias=True, exclude_unset=True))

    @property
    def gone(self) -> bool:
        """Whether the transport ended (nothing more can be sent on it)."""
        return bool(self._gone)

    def answer(self, item: dict[str, Any]) -> bool:
        """Whether ``item`` (a JSON-RPC message as JSON) answers one of the link's requests (its waiter has it, or
        the request was given up and its answer is dropped)."""
        request_id = item.get("id")
        if not isinstance(request_id, str) or "method" in item:
            return False
        waiter = self._waiting.pop(request_id, None)
        if waiter is None:
            if request_id not in self._abandoned:
                return False
            del self._abandoned[request_id]  # the answer to a request given up: dropped
            return True
        if not waiter.done():
            error, result = item.get("error"), item.get("result")
            if isinstance(error, dict):
                code, message = error.get("code"), error.get("message")
                waiter.set_exception(UpstreamError(code if isinstance(code, int) else 0, str(message)))
            elif isinstance(result, dict):
                waiter.set_result(result)
            else:
                waiter.set_exception(UpstreamError(types.INTERNAL_ERROR, "an answer with neither result nor error"))
        return True

    def end(self, why: str) -> None:
        """The transport ended: every request still waiting fails with :class:`UpstreamGone` (``why``)."""
        self._gone = self._gone or why
        self.ended.set()
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            if not waiter.done():
                waiter.set_exception(UpstreamGone(why))

    @contextlib.contextmanager
    def question(self) -> Iterator[None]:
        """While the upstream waits on an answer from the gateway (its ``elicitation/create``): the clocks of the
        link's requests stop, and start again from zero once it is answered."""
        self._questions += 1
        for request_id, (timer, timeout_s) in list(self._clocks.items()):
            if timer is not None:
                timer.cancel()
                self._clocks[request_id] = (None, timeout_s)
        try:
            yield
        finally:
            self._questions -= 1
            if not self._questions:
                for request_id, (_, timeout_s) in list(self._clocks.items()):
                    self._start_clock(request_id, timeout_s)

    def asking(self, answer: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        """``answer`` (the SDK client's callback for a request of the upstream's), the clocks stopped while it runs."""

        async def answered(*args: Any) -> Any:
            with self.question():
                return await answer(*args)

        return answered

    def _start_clock(self, request_id: str, timeout_s: float) -> None:
        """``timeout_s`` from now for ``request_id`` (held while a question of the upstream's is open)."""
        old = self._clocks.get(request_id)
        if old is not None and old[0] is not None:
            old[0].cancel()
        timer = None
        if not self._questions:
            timer = asyncio.get_running_loop().call_later(timeout_s, self._expire, request_id)
        self._clocks[request_id] = (timer, timeout_s)

    def _expire(self, request_id: str) -> None:
        waiter = self._waiting.get(request_id)
        if waiter is not None and not waiter.done():
            waiter.set_exception(_Late())

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        timeout_s: float | None = None,
        on_written: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Send one request and wait for its result, at most ``timeout_s`` seconds of the upstream's own time.

        Raises UpstreamError (its error answer), UpstreamGone (``written`` says whether the request reached the
        upstream), UpstreamTimeout (it did, and no answer came in time: the request is cancelled upstream).
        ``on_written`` is called once the request is handed to the upstream (a caller cancelled later knows it
        may have run there)."""
        if self._gone or (self._write is None and self._line is None):
            raise UpstreamGone(self._gone or "it is not connected", written=False)
        request_id = f"goldfive-{next(_IDS)}"
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        if self.envelope is not None:
            meta = params.get("_meta")
            params = {**params, "_meta": {**(meta if isinstance(meta, dict) else {}), **self.envelope}}
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        written = False

        def handed_over() -> None:
            nonlocal written
            written = True
            if on_written is not None:
                on_written()

        try:
            try:
                await self._send(message, handed_over)
            except _SendFailed as exc:
                raise UpstreamGone("its connection closed", written=written) from exc
            if timeout_s is not None:
                self._start_clock(request_id, timeout_s)
            try:
                return await waiter
            except UpstreamGone as exc:  # the transport ended after the request was handed over: lost in flight
                raise UpstreamGone(str(exc), written=True) from None
            except _Late:
                self._give_up(request_id)
                raise UpstreamTimeout(f"it did not answer within {timeout_s:g} s", after_s=timeout_s or 0.0) from None
        except asyncio.CancelledError:
            if written:  # the client gave up: tell the upstream
                self._give_up(request_id)
            raise
        finally:
            self._waiting.pop(request_id, None)
            clock = self._clocks.pop(request_id, None)
            if clock is not None and clock[0] is not None:
                clock[0].cancel()
            if waiter.done() and not waiter.cancelled():
                waiter.exception()  # an end that came while it was written is this request's answer: retrieved

    def _give_up(self, request_id: str) -> None:
        """Stop waiting for ``request_id``: its late answer is dropped, and the upstream is told (in the background)."""
        self._waiting.pop(request_id, None)
        self._abandoned[request_id] = None
        while len(self._abandoned) > _ABANDONED:
            self._abandoned.popitem(last=False)
        if not self._gone:
            task = asyncio.ensure_future(self._notify_cancelled(request_id))
            _NOTIFYING.add(task)
            task.add_done_callback(_NOTIFYING.discard)

    async def _send(self, message: dict[str, Any], handed_over: Callable[[], None] | None = None) -> None:
        """Write ``message``; ``handed_over`` runs once the transport has it (a failure before: nothing written)."""
        if self._line is not None and self._drain is not None:
            self._line(_json_line(message))  # raises, with nothing written, when the pipe is closing
            if handed_over is not None:
                handed_over()
            await self._drain()
        else:
            await self._write.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))
            if handed_over is not None:
                handed_over()

    async def _notify_cancelled(self, request_id: str) -> None:
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
        with contextlib.suppress(Exception), anyio.CancelScope(shield=True), anyio.move_on_after(1):
            await self._send(note)


class _Late(Exception):
    """A request's clock ran out (its waiter's exception; the request raises UpstreamTimeout)."""


_NOTIFYING: set[asyncio.Task[None]] = set()
"""Cancellations being sent for requests given up (kept until sent: a cancelled caller cannot await them)."""


def _json_line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"
