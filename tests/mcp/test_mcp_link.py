"""The gateway's link to an upstream tells "never written" from "lost in flight" from "no answer in time".

The link (goldfive_core.adapters.mcp_gateway.link) on a pipe of the test's own: lines it writes are kept, answers are
fed back as the pipe's reader would. What is checked is what the gateway decides from: the error's ``written``, a
``notifications/cancelled`` for a request given up, and a late answer that is dropped (never passed on).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from goldfive_core.adapters.mcp_gateway.link import Link, UpstreamGone, UpstreamTimeout


class Pipe:
    """What the link wrote (JSON lines) and whether its stdin is closing."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.closing = False
        self.wrote = asyncio.Event()

    def send_line(self, data: bytes) -> None:
        if self.closing:
            raise ConnectionResetError("the upstream's stdin is closed")
        self.lines.append(json.loads(data))
        self.wrote.set()

    async def drain(self) -> None:
        return None

    async def next_line(self, count: int) -> dict[str, Any]:
        while len(self.lines) < count:
            self.wrote.clear()
            await asyncio.wait_for(self.wrote.wait(), 10)
        return self.lines[count - 1]


def _link() -> tuple[Link, Pipe]:
    link, pipe = Link(), Pipe()
    link.attach(pipe.send_line, pipe.drain)
    return link, pipe


async def test_a_request_on_an_ended_link_was_never_written() -> None:
    link, pipe = _link()
    link.end("its process exited")
    with pytest.raises(UpstreamGone) as gone:
        await link.request("tools/call", {"name": "pay"})
    assert gone.value.written is False and pipe.lines == []


async def test_a_write_refused_by_a_closing_pipe_was_never_written() -> None:
    link, pipe = _link()
    pipe.closing = True
    with pytest.raises(UpstreamGone) as gone:
        await link.request("tools/call", {"name": "pay"})
    assert gone.value.written is False


async def test_a_request_whose_link_ends_after_it_was_written_is_lost_in_flight() -> None:
    link, pipe = _link()
    call = asyncio.create_task(link.request("tools/call", {"name": "pay"}))
    await pipe.next_line(1)
    link.end("its process exited")
    with pytest.raises(UpstreamGone) as gone:
        await call
    assert gone.value.written is True


async def test_no_answer_in_time_is_a_timeout_the_upstream_is_told_of_and_its_late_answer_is_dropped() -> None:
    link, pipe = _link()
    with pytest.raises(UpstreamTimeout) as late:
        await link.request("tools/call", {"name": "pay"}, timeout_s=0.05)
    assert late.value.after_s == 0.05
    sent = pipe.lines[0]
    cancel = await pipe.next_line(2)
    assert cancel == {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": sent["id"]}}
    assert link.answer({"jsonrpc": "2.0", "id": sent["id"], "result": {"content": []}})  # taken, not passed on
    assert not link.answer({"jsonrpc": "2.0", "id": sent["id"], "result": {}})  # once


async def test_an_answer_in_time_is_the_result() -> None:
    link, pipe = _link()
    call = asyncio.create_task(link.request("tools/call", {"name": "pay"}, timeout_s=30))
    sent = await pipe.next_line(1)
    assert link.answer({"jsonrpc": "2.0", "id": sent["id"], "result": {"content": [], "isError": False}})
    assert await call == {"content": [], "isError": False}
