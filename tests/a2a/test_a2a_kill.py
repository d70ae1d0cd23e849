"""kill -9 of the agent process while its A2A task waits for a person (docs/a2a.md, "When the agent dies").

The task lived in the process (a2a-sdk's in-memory task store), so it goes with it: the restarted agent
answers ``tasks/get`` with "task not found". The call never ran; a decision made meanwhile is only recorded,
and runs nothing in the restarted process. The caller sends the request again, a person is asked again, and
the body runs once.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types import Task, TaskState
from a2a.utils.errors import TaskNotFoundError
from a2a_support import World, a2a_client, artifact_text, get, goldfive_facts, send, text, until_state, user_message

pytestmark = pytest.mark.timeout(150)


async def _asked_then_killed(agents: Any) -> tuple[Task, str]:
    """An agent asked to pay bob answers "auth-required" and is killed -9 at once: its task and approval id."""
    first = agents()
    async with a2a_client(first.url) as client:
        task = await send(client, user_message(text("pay bob")))
        assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
        old = goldfive_facts(task)["approval_id"]
    first.kill9()
    return task, old


async def test_kill_9_while_waiting_loses_the_task_never_runs_the_call_and_a_resend_asks_again(
    world: World, agents: Any
) -> None:
    task, old = await _asked_then_killed(agents)
    decided = await asyncio.to_thread(world.cli, "approve", old, "--by", "ann")
    assert decided.returncode == 0 and decided.stdout.startswith("recorded:"), (decided.stdout, decided.stderr)

    second = agents()
    async with a2a_client(second.url) as client:
        with pytest.raises(TaskNotFoundError):
            await get(client, task.id)
        assert world.runs_of_body() == []  # the old call never ran, not even with its recorded approval

        again = await send(client, user_message(text("pay bob")))
        assert again.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
        new = goldfive_facts(again)["approval_id"]
        assert new != old  # a new call: a person is asked again
        assert (await asyncio.to_thread(world.cli, "approve", new, "--by", "ann")).returncode == 0
        done = await until_state(client, again.id, TaskState.TASK_STATE_COMPLETED)
    assert 'tool said {"sent": 10, "to": "bob"}' in artifact_text(done)
    assert world.runs_of_body() == [f"bob 10 pid {second.pid}"]


async def test_the_caller_hears_of_a_wait_only_once_the_request_is_on_record(world: World, agents: Any) -> None:
    """The store is slow to write the request (1.5 s): the ``auth-required`` answer waits for it, so a
    kill -9 right after the caller heard "approval X" still leaves X for a person to find and decide."""
    world.extra_env["A2A_SLOW_RECORD_S"] = "1.5"
    _, old = await _asked_then_killed(agents)
    listed = await asyncio.to_thread(world.cli, "pending")
    assert old in listed.stdout, (listed.stdout, listed.stderr)
    decided = await asyncio.to_thread(world.cli, "approve", old, "--by", "ann")
    assert decided.returncode == 0 and decided.stdout.startswith("recorded:"), (decided.stdout, decided.stderr)
    assert world.runs_of_body() == []
