"""run_approved (the callable agent's guarded call): a person's edit is checked against ``args_schema`` and
the body runs with exactly the arguments that were approved."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from store_support import Backend

from goldfive_core import AckResult, AgentTools, ControlChannel, ControlKind, ControlMessage, InMemorySink, Task, wrap
from goldfive_core.store import run_approved

TOOL = "transfer"
ARGS: dict[str, Any] = {"amount": 10, "to": "bob"}
SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "integer", "maximum": 100}, "to": {"type": "string"}},
    "required": ["amount", "to"],
}


async def _guarded(backend: Backend, target: str, **kw: Any) -> tuple[asyncio.Task[Any], ControlChannel, list[Any]]:
    """A run asking for ``transfer(ARGS)`` as ``target``; returns the run, its channel and what the body got."""
    channel = ControlChannel()
    sink = InMemorySink()
    ran: list[Any] = []
    store = backend.open()

    async def body(call_args: Mapping[str, Any]) -> str:
        ran.append(dict(call_args))
        return "moved"

    async def agent(task: Task, tools: AgentTools) -> Any:
        outcome = await run_approved(tools.session, store, call_id=target, tool_name=TOOL, args=ARGS, body=body, **kw)
        return outcome.status, outcome.args

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[sink]).run())
    await sink.wait_for("approval_requested")
    return run, channel, ran


def approve(target: str, **payload: Any) -> ControlMessage:
    return ControlMessage(ControlKind.APPROVE, {"target_id": target, "decided_by": "ana", **payload})


async def test_an_edit_that_does_not_fit_args_schema_is_refused_and_the_body_waits(sqlite_backend: Backend) -> None:
    run, channel, ran = await _guarded(sqlite_backend, "g-1", args_schema=SCHEMA, timeout_ms=30_000)
    too_much = await channel.send(approve("g-1", edited_args={"amount": 5000, "to": "bob"}))
    assert too_much.result is AckResult.FAILURE and "amount" in too_much.detail and "stays pending" in too_much.detail
    assert ran == [] and not run.done()
    fits = await channel.send(approve("g-1", edited_args={"amount": 50, "to": "bob"}))
    assert fits.ok, fits.detail
    assert (await run).output == ("ran", {"amount": 50, "to": "bob"})
    assert ran == [{"amount": 50, "to": "bob"}]


async def test_without_a_schema_any_object_is_an_edit_and_the_body_gets_it(sqlite_backend: Backend) -> None:
    run, channel, ran = await _guarded(sqlite_backend, "g-2", timeout_ms=30_000)
    ack = await channel.send(approve("g-2", edited_args={"amount": 5000, "to": "carol"}))
    assert ack.ok, ack.detail
    assert (await run).output == ("ran", {"amount": 5000, "to": "carol"})
    assert ran == [{"amount": 5000, "to": "carol"}]
