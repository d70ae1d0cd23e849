"""``tasks/cancel`` on a task that waits for a person (docs/a2a.md).

The caller gives up: the task ends ``canceled``, the approval request is cancelled and leaves the pending
list, the call never runs, and a person who approves afterwards is told there is nothing to decide.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types import CancelTaskRequest, TaskState
from a2a_support import World, a2a_client, get, goldfive_facts, send, text, user_message, wait_until

from goldfive_core.store import open_store

pytestmark = pytest.mark.timeout(120)


async def test_cancelling_a_waiting_task_withdraws_the_request_and_the_call_never_runs(
    world: World, agents: Any
) -> None:
    agent = agents()
    async with a2a_client(agent.url) as client:
        task = await send(client, user_message(text("pay bob")))
        assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
        approval = goldfive_facts(task)["approval_id"]

        cancelled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        shown = await get(client, task.id)
        assert shown.status.state == TaskState.TASK_STATE_CANCELED

        def closed() -> Any:
            (row,) = open_store(str(world.db)).approvals(open_only=False)
            return row if row.status != "pending" else None

        row = wait_until(closed, what="the request to leave pending")
        assert row.status == "cancelled"
        listed = await asyncio.to_thread(world.cli, "pending")
        assert approval not in listed.stdout

        late = await asyncio.to_thread(world.cli, "approve", approval, "--by", "ann")
        assert late.returncode != 0 and "nothing to decide" in late.stderr
    assert world.runs_of_body() == []
