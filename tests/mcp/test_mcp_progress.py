"""MCP progress while a call waits for a person: real ``mcp`` SDK clients over stdio and streamable HTTP.

A client that puts a ``progressToken`` in a ``tools/call`` (the SDK does when given a ``progress_callback``) is
sent ``notifications/progress`` from the moment the gate holds the call — not one interval later — and then every
``--progress-every`` seconds, naming the tool and the ``goldfive approve`` id, never the arguments; nothing once the
call is decided, and nothing for a call that asked for no progress. A task-augmented call (MCP Tasks) gets its
progress on the same token while the task works. The client's ``message_handler`` sees every notification the
gateway sends (whatever its token), so what is checked is the wire as the client reads it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import mcp_types as types
from mcp import Client
from mcp_http_support import ProgressSeen, get_task, http_gateway, poll_until_done
from mcp_support import gateway, text

TRANSFER = {"amount": 120, "to": "ACME"}
SECRET_PAYEE = "Zanzibar Holdings"


class Wire:
    """A client's ``message_handler``: every ``notifications/progress`` it reads, in order, with its token."""

    def __init__(self) -> None:
        self.progress: list[types.ProgressNotificationParams] = []
        self.changed = asyncio.Event()

    async def __call__(self, message: object) -> None:
        if isinstance(message, types.ProgressNotification):
            self.progress.append(message.params)
            self.changed.set()

    def of(self, token: str | int) -> list[types.ProgressNotificationParams]:
        return [p for p in self.progress if p.progress_token == token]

    async def wait_for(self, token: str | int | None, count: int = 1) -> None:
        """Until ``count`` notifications with ``token`` (None: any) arrived (a handshake with the gateway, not a
        sleep)."""
        async with asyncio.timeout(15):
            while len(self.progress if token is None else self.of(token)) < count:
                self.changed.clear()
                await self.changed.wait()


def approve_id(message: str | None) -> str:
    """The ``goldfive approve`` id a progress message names (``... (goldfive approve mcp-…)``)."""
    assert message is not None and "(goldfive approve " in message, message
    return message.rsplit("(goldfive approve ", 1)[1].rstrip(")")


async def call_as_task_with_progress(client: Client, token: str) -> types.CreateTaskResult:
    """A task-augmented ``tools/call`` (MCP Tasks, 2025-11-25) that asks for progress on ``token``."""
    params = {"name": "transfer_funds", "arguments": TRANSFER, "task": {"ttl": 60_000}}
    params["_meta"] = {"progressToken": token}
    raw = await client.session._dispatcher.send_raw_request("tools/call", params, {})
    return types.CreateTaskResult.model_validate(raw)


async def one_more_held_call(client: Client) -> None:
    """A barrier: one more call, held until its first progress arrives, then given up (``notifications/cancelled``).
    Whatever the gateway sent for earlier calls by then is on the wire before it."""
    seen = ProgressSeen()
    call = asyncio.create_task(client.session.call_tool("transfer_funds", TRANSFER, progress_callback=seen))
    await asyncio.wait_for(seen.first.wait(), 15)
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)


async def test_a_held_call_sends_progress_as_soon_as_it_waits(tmp_path: Path) -> None:
    seen = ProgressSeen()
    async with gateway(tmp_path, "--progress-every", "3600") as gw:  # the next one would come in an hour
        call = asyncio.create_task(gw.client.session.call_tool("transfer_funds", TRANSFER, progress_callback=seen))
        await asyncio.wait_for(seen.first.wait(), 15)  # at the start of the wait, not an interval later
        assert not call.done()
        request_id = approve_id(seen.messages[0])
        assert (await gw.goldfive("approve", request_id, "--by", "ana")).returncode == 0  # the id it names
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error and "sent 120.00 EUR to ACME" in text(result)
    assert seen.messages == [f"waiting for a person to approve transfer_funds (goldfive approve {request_id})"]


async def test_progress_names_the_tool_never_the_arguments_and_stops_with_the_result(tmp_path: Path) -> None:
    wire = Wire()
    secret = {"amount": 4321, "to": SECRET_PAYEE}
    async with gateway(tmp_path, "--progress-every", "0.05", message_handler=wire) as gw:
        quiet = asyncio.create_task(gw.client.call_tool("transfer_funds", TRANSFER))  # asks for no progress
        await gw.wait_pending()
        loud = asyncio.create_task(
            gw.client.session.call_tool("transfer_funds", secret, progress_callback=ProgressSeen())
        )
        await wire.wait_for(None)
        (token,) = {p.progress_token for p in wire.progress}  # only the call that asked for progress gets any
        await wire.wait_for(token, 3)  # and again while it waits
        assert (await gw.goldfive("approve", approve_id(wire.progress[0].message), "--by", "ana")).returncode == 0
        result = await asyncio.wait_for(loud, 30)
        sent_by_the_result = len(wire.of(token))
        quiet.cancel()  # the quiet call is given up: still no progress for it
        await asyncio.gather(quiet, return_exceptions=True)
        await one_more_held_call(gw.client)
    assert not result.is_error and f"to {SECRET_PAYEE}" in text(result)
    assert len(wire.of(token)) == sent_by_the_result  # nothing once the call was decided
    loud_progress = wire.of(token)
    assert [p.progress for p in loud_progress] == list(range(1, len(loud_progress) + 1))  # increasing
    assert len({p.message for p in loud_progress}) == 1 and "transfer_funds" in (loud_progress[0].message or "")
    assert not any("Zanzibar" in (p.message or "") or "4321" in (p.message or "") for p in wire.progress)
    assert len({p.progress_token for p in wire.progress}) == 2  # the loud call's and the last held call's only


async def test_a_task_gets_progress_on_its_token_while_it_waits_and_none_once_done(tmp_path: Path) -> None:
    wire = Wire()
    async with gateway(tmp_path, "--progress-every", "0.05", message_handler=wire) as gw:
        created = await call_as_task_with_progress(gw.client, "task-progress")
        assert created.task.status == "working"
        await wire.wait_for("task-progress", 2)  # the task's token stays valid while it works (MCP Tasks)
        assert (await get_task(gw.client, created.task.task_id)).status == "working"
        request_id = approve_id(wire.of("task-progress")[0].message)
        assert (await gw.goldfive("approve", request_id, "--by", "ana")).returncode == 0
        done = await poll_until_done(gw.client, created.task.task_id)
        sent_by_the_end = len(wire.of("task-progress"))
        await one_more_held_call(gw.client)
    assert done.status == "completed"
    assert len(wire.of("task-progress")) == sent_by_the_end  # none after its terminal status
    expected = f"waiting for a person to approve transfer_funds (goldfive approve {request_id})"
    assert {p.message for p in wire.of("task-progress")} == {expected}
    assert gw.upstream_calls() == [{"tool": "transfer_funds", "args": {**TRANSFER, "currency": "EUR"}}]


async def test_over_http_a_held_call_gets_progress_as_soon_as_it_waits(tmp_path: Path) -> None:
    seen = ProgressSeen()
    async with http_gateway(tmp_path, "--progress-every", "3600") as gw, gw.connect() as client:
        call = asyncio.create_task(client.session.call_tool("transfer_funds", TRANSFER, progress_callback=seen))
        await asyncio.wait_for(seen.first.wait(), 15)  # on the call's own response stream, at once
        assert not call.done()
        request_id = approve_id(seen.messages[0])
        assert (await gw.goldfive("approve", request_id, "--by", "ana")).returncode == 0
        result = await asyncio.wait_for(call, 30)
    assert not result.is_error
    assert seen.messages == [f"waiting for a person to approve transfer_funds (goldfive approve {request_id})"]


async def test_over_http_a_task_gets_progress_on_the_session_stream_until_it_is_done(tmp_path: Path) -> None:
    wire = Wire()
    async with http_gateway(tmp_path, "--progress-every", "0.05") as gw, gw.connect(message_handler=wire) as client:
        created = await call_as_task_with_progress(client, "task-progress")
        await wire.wait_for("task-progress", 2)  # the call's response stream ended with its task: the session's
        request_id = approve_id(wire.of("task-progress")[0].message)
        assert (await gw.goldfive("approve", request_id, "--by", "ana")).returncode == 0
        done = await poll_until_done(client, created.task.task_id)
        sent_by_the_end = len(wire.of("task-progress"))
        await one_more_held_call(client)
    assert done.status == "completed"
    assert len(wire.of("task-progress")) == sent_by_the_end
    assert all("transfer_funds" in (p.message or "") and "ACME" not in (p.message or "") for p in wire.progress)
