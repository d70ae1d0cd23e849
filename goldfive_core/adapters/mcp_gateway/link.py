"""The gateway's own requests on an upstream's transport, beside the MCP SDK client's.

The SDK's ``Client`` lists tools, resources and prompts and keeps the session; a ``tools/call`` the gate let
through is sent by :meth:`Link.request` on the same transport, with the tool's arguments and result kept as
JSON (no model of the result is built and re-serialised: the gateway passes it on unchanged). A response whose
id is one of the link's goes to its waiter; every other message goes to the SDK client. The transport's end
(the upstream exited or its connection dropped) fails every request still waiting with :class:`UpstreamGone`.

Two ways onto a transport: a stdio upstream (:mod:`.pipe`) gives the link its pipe (:meth:`Link.attach`), and
the link writes and reads JSON lines on it; any other (streamable HTTP) goes through :meth:`Link.wrap`, and the
link's requests travel as the SDK's messages do.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from ...errors import UpstreamError, UpstreamGone

__all__ = ["Link", "UpstreamError", "UpstreamGone"]

_IDS = itertools.count(1)


class Link:
    """One upstream transport shared by the SDK client and the gateway's own requests."""

    def __init__(self) -> None:
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._write: Any = None
        self._line: Callable[[bytes], None] | None = None
        self._drain: Callable[[], Awaitable[None]] | None = None
        self._gone: str = ""
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

    def answer(self, item: dict[str, Any]) -> bool:
        """Whether ``item`` (a JSON-RPC message as JSON) answers one of the link's requests (its waiter has it)."""
        request_id = item.get("id")
        if not isinstance(request_id, str) or "method" in item:
            return False
        waiter = self._waiting.pop(request_id, None)
        if waiter is None:
            return False
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

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send one request and wait for its result (raises UpstreamError, UpstreamGone)."""
        if self._gone or (self._write is None and self._line is None):
            raise UpstreamGone(self._gone or "it is not connected")
        request_id = f"goldfive-{next(_IDS)}"
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        if self.envelope is not None:
            meta = params.get("_meta")
            params = {**params, "_meta": {**(meta if isinstance(meta, dict) else {}), **self.envelope}}
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            await self._send(message)
            return await waiter
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError) as exc:
            raise UpstreamGone("its connection closed") from exc
        except asyncio.CancelledError:
            if self._waiting.pop(request_id, None) is not None:  # the client gave up: tell the upstream
                with contextlib.suppress(Exception):
                    await self._notify_cancelled(request_id)
            raise
        finally:
            self._waiting.pop(request_id, None)

    async def _send(self, message: dict[str, Any]) -> None:
        if self._line is not None and self._drain is not None:
            self._line(json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n")
            await self._drain()
        else:
            await self._write.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))

    async def _notify_cancelled(self, request_id: str) -> None:
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}}
        with anyio.CancelScope(shield=True), anyio.move_on_after(1):
            await self._send(note)
