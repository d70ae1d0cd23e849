"""The gateway's own stdio transport: MCP lines on the process's stdin/stdout, read and written on the event loop.

The MCP SDK's ``stdio_server`` reads and writes through ``anyio.wrap_file``: three thread hops (readline, write,
flush) for every message, about half of what the gateway added to a call that needs no person
(bench/mcp_gateway.py). Here the loop reads and writes the pipes itself. As the SDK's does, it claims the wire:
while serving, fd 0 reads the null device and fd 1 writes to stderr, so nothing else in the process (a stray
``print``, a child that inherits them) can corrupt the MCP stream; both are restored on exit.

``tools/call`` requests are answered here, without the SDK server (its request models, dispatch and result
model cost a millisecond a call): each is handed to the gateway's ``CallTools`` as JSON, in a task of its own,
and its result written back as JSON; ``notifications/cancelled`` for one cancels its task (and, as every
notification, also reaches the SDK server). A call may ask the client a question of its own (``elicitation/create``,
:mod:`.elicit`): sent here under an id of the gateway's, its answer taken here by that id. Everything else
(``initialize``, lists, resources, prompts) is the SDK server's.

When stdin or stdout is not a pipe, socket or terminal (a regular file, the null device), the SDK's transport
serves instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from .elicit import AskClient

__all__ = ["MAX_LINE_BYTES", "CallTools", "Progress", "serve_stdio_streams"]

Progress = Callable[[int, str], Awaitable[None]]
"""Sends ``notifications/progress`` (a count and a message) for the call that asked for progress."""


class CallTools(Protocol):
    """Answers one ``tools/call`` (its params as JSON) with a ``CallToolResult`` as JSON."""

    async def __call__(
        self, params: dict[str, Any], client: dict[str, Any], progress: Progress | None, ask: AskClient | None
    ) -> dict[str, Any]: ...


logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest MCP message the gateway reads from its client (a longer line ends the connection)."""


def _loop_can_serve(fd: int) -> bool:
    """A pipe, a socket or a terminal: what the event loop can watch. Not another character device: the loop
    cannot watch ``/dev/null`` (a client gone before it started, a service's empty stdin), and would wait forever
    for its end; the SDK's transport reads it and ends."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


@contextlib.asynccontextmanager
async def serve_stdio_streams(call_tools: CallTools | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) stream pair an MCP ``Server.run`` takes, on this process's stdin and stdout.

    ``call_tools``: answers ``tools/call`` (None: the SDK server does)."""
    if not (_loop_can_serve(0) and _loop_can_serve(1)):
        async with stdio_server() as streams:
            yield streams
        return
    with _claimed(0, os.O_RDONLY) as wire_in, _claimed(1, os.O_WRONLY) as wire_out:
        async with _pipes(wire_in, wire_out, call_tools) as streams:
            yield streams


@contextlib.contextmanager
def _claimed(fd: int, mode: int) -> Any:
    """A private duplicate of ``fd`` (the wire); ``fd`` itself points elsewhere until exit."""
    if fd == 1:
        sys.stdout.flush()
    private = os.dup(fd)
    diversion = os.open(os.devnull, mode) if fd == 0 else os.dup(2)
    os.dup2(diversion, fd)
    os.close(diversion)
    try:
        yield private
    finally:
        os.dup2(private, fd)
        os.close(private)


@contextlib.asynccontextmanager
async def _pipes(wire_in: int, wire_out: int, call_tools: CallTools | None) -> AsyncIterator[tuple[Any, Any]]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    in_file = os.fdopen(os.dup(wire_in), "rb", buffering=0)
    out_file = os.fdopen(os.dup(wire_out), "wb", buffering=0)
    in_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), in_file)
    out_transport, out_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out_file)
    writer = asyncio.StreamWriter(out_transport, out_protocol, None, loop)
    read_send, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_receive = create_context_streams[SessionMessage](0)
    writes = asyncio.Lock()

    async def write_line(data: bytes) -> None:
        writer.write(data)
        async with writes:
            await writer.drain()

    fast = _FastCalls(call_tools, write_line) if call_tools is not None else None

    async def read_lines() -> None:
        async with read_send:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError) as exc:  # a line over the limit: the stream is lost
                    await read_send.send(ValueError(f"an MCP message over {MAX_LINE_BYTES} bytes: {exc}"))
                    return
                if not line:
                    return
                if not line.strip():
                    continue
                if fast is not None and fast.take_raw(line):
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:  # as the SDK's transport: the server answers a parse error
                    await read_send.send(exc)
                    continue
                if fast is None or not fast.take(message):
                    await read_send.send(SessionMessage(message))

    async def write_lines() -> None:
        async with write_receive:
            async for session_message in write_receive:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await write_line(data.encode("utf-8") + b"\n")
                except ConnectionError:  # the client hung up: the server finds out from its closed stream
                    return

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_lines)
            tg.start_soon(write_lines)
            yield read_stream, write_stream
            tg.cancel_scope.cancel()
    finally:
        if fast is not None:
            await fast.aclose()
        in_transport.close()
        out_transport.close()


class _FastCalls:
    """The ``tools/call`` requests answered beside the SDK server, by request id."""

    def __init__(self, call_tools: CallTools, write_line: Callable[[bytes], Awaitable[None]]) -> None:
        self.call_tools = call_tools
        self.write_line = write_line
        self.client: dict[str, Any] | None = None
        """The client's ``initialize`` params (its info and capabilities), once it sent them."""
        self.tasks: dict[Any, asyncio.Task[None]] = {}
        self.asked: dict[str, asyncio.Future[dict[str, Any]]] = {}
        """The gateway's own requests to the client, waiting for its answer, by their id."""

    def take_raw(self, line: bytes) -> bool:
        """Whether ``line`` is a ``tools/call`` handled here (read as JSON, no model built)."""
        if self.client is None or b'"tools/call"' not in line:
            return False
        try:
            request = json.loads(line)
        except ValueError:
            return False  # the SDK server answers the parse error
        if not isinstance(request, dict) or request.get("method") != "tools/call" or request.get("jsonrpc") != "2.0":
            return False
        request_id, params = request.get("id"), request.get("params")
        if not isinstance(request_id, str | int) or isinstance(request_id, bool) or not isinstance(params, dict):
            return False  # malformed: the SDK server says so
        if request_id in self.tasks:
            return False
        self.tasks[request_id] = asyncio.ensure_future(self._answer(request_id, params))
        return True

    def take(self, message: types.JSONRPCMessage) -> bool:
        """Takes the answers to the gateway's own requests; watches what the SDK server gets: the client's
        ``initialize``, and cancellations of calls answered here."""
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            waiter = self.asked.get(message.id) if isinstance(message.id, str) else None
            if waiter is None:
                return False
            if not waiter.done():
                if isinstance(message, types.JSONRPCError):
                    waiter.set_exception(MCPError.from_error_data(message.error))
                else:
                    waiter.set_result(dict(message.result))
            return True
        if isinstance(message, types.JSONRPCNotification):
            if message.method == "notifications/cancelled" and message.params:
                task = self.tasks.get(message.params.get("requestId"))
                if task is not None:
                    task.cancel()
        elif isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
            self.client = dict(message.params or {})
        return False

    async def _answer(self, request_id: str | int, params: dict[str, Any]) -> None:
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        progress = self._progress(token) if isinstance(token, str | int) else None
        try:
            result = await self.call_tools(params, self.client or {}, progress, self.elicit)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": result}
        except asyncio.CancelledError:
            return  # a cancelled request gets no answer (MCP: notifications/cancelled)
        except Exception as exc:  # a bug of the gateway's is the client's clear error, never a dropped request
            logger.exception("answering tools/call failed")
            error = {"code": types.INTERNAL_ERROR, "message": f"the gateway failed: {type(exc).__name__}"}
            reply = {"jsonrpc": "2.0", "id": request_id, "error": error}
        finally:
            self.tasks.pop(request_id, None)
        with contextlib.suppress(ConnectionError):
            await self.write_line(_line(reply))

    async def elicit(self, question: types.ElicitRequestFormParams) -> types.ElicitResult:
        """``elicitation/create`` to the client; its answer (an error answer raises ``MCPError``)."""
        request_id = f"goldfive-{next(_ASKED)}"
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.asked[request_id] = waiter
        params = question.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            await self.write_line(
                _line({"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create", "params": params})
            )
            return types.ElicitResult.model_validate(await waiter, by_name=False)
        finally:
            self.asked.pop(request_id, None)

    def _progress(self, token: str | int) -> Progress:
        async def send(count: int, message: str) -> None:
            params = {"progressToken": token, "progress": count, "message": message}
            await self.write_line(_line({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}))

        return send

    async def aclose(self) -> None:
        for waiter in self.asked.values():
            waiter.cancel()
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


_ASKED = itertools.count(1)


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"
