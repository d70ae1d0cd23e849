"""A stdio upstream: the MCP server process the gateway starts, its pipes read and written on the event loop.

The SDK's ``Client`` sits on it as on any transport (it sends and receives JSON-RPC models); the gateway's own
``tools/call`` requests (:class:`~goldfive_core.adapters.mcp_gateway.link.Link`) are written and read as JSON
lines beside them, so a call through the gateway builds no model of the upstream's result. Started as the SDK
starts one (its safe default environment plus the upstream's ``env``, a process group of its own, stderr to the
gateway's stderr); stopped as the MCP lifecycle says (stdin closed, then SIGTERM to the group, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from .link import Link

__all__ = ["MAX_LINE_BYTES", "stdio_upstream"]

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line the gateway reads from an upstream (a longer one ends the connection)."""

_GRACE_S = 2.0


@contextlib.asynccontextmanager
async def stdio_upstream(
    link: Link, command: str, args: Sequence[str], env: Mapping[str, str] | None, cwd: str | None
) -> AsyncIterator[tuple[Any, Any]]:
    """Start ``command`` and yield the SDK client's (read, write) streams on it; ``link`` sends beside them."""
    process = await asyncio.create_subprocess_exec(
        command,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=get_default_environment() | dict(env or {}),
        cwd=cwd,
        start_new_session=True,
        limit=MAX_LINE_BYTES,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    to_sdk, sdk_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    sdk_writes, from_sdk = anyio.create_memory_object_stream[SessionMessage](0)

    def send_line(data: bytes) -> None:
        if stdin.is_closing():
            raise ConnectionResetError("the upstream's stdin is closed")
        stdin.write(data)

    async def read_lines() -> None:
        try:
            async with to_sdk:
                while True:
                    line = await stdout.readline()
                    if not line:
                        return
                    if not line.strip():
                        continue
                    decoded = _decode(line)
                    if isinstance(decoded, dict) and link.answer(decoded):
                        continue
                    item = _message(decoded) if isinstance(decoded, dict) else decoded
                    await to_sdk.send(item)
        except (ValueError, ConnectionError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            logger.debug("reading the upstream's stdout ended: %s", type(exc).__name__)
        finally:
            link.end("its process exited")

    async def write_lines() -> None:
        async with from_sdk:
            async for session_message in from_sdk:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    send_line(data.encode("utf-8") + b"\n")
                    await stdin.drain()
                except ConnectionError:
                    link.end("its stdin closed")
                    return

    link.attach(send_line, stdin.drain)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_lines)
            tg.start_soon(write_lines)
            try:
                yield sdk_reads, sdk_writes
            finally:
                link.end("the gateway closed its connection")
                with anyio.CancelScope(shield=True):
                    await _stop(process)
                tg.cancel_scope.cancel()
    finally:
        link.end("the gateway closed its connection")


def _decode(line: bytes) -> dict[str, Any] | Exception:
    try:
        value = json.loads(line)
    except ValueError as exc:
        return exc
    return value if isinstance(value, dict) else ValueError("a JSON-RPC message must be an object")


def _message(item: dict[str, Any]) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(item, by_name=False))
    except ValueError as exc:
        return exc


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Close its stdin; if it does not exit within the grace, SIGTERM then SIGKILL its process group."""
    if process.stdin is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(_exited(process), _GRACE_S)
            return
    logger.warning("the upstream process %d is still alive after SIGKILL", process.pid)


async def _exited(process: asyncio.subprocess.Process) -> None:
    # Not process.wait(): it also waits for the pipes' EOF, which a child that inherited them holds open.
    while process.returncode is None:  # noqa: ASYNC110 - the child watcher sets it; there is no event to wait on
        await asyncio.sleep(0.02)
