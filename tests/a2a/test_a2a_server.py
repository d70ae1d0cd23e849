"""An ADK App with GoldfivePlugin served over A2A (goldfive_adk.a2a.a2a_app, uvicorn in its own process).

The a2a-sdk client sends a request whose tool call needs a person: the task stops in ``auth-required``
naming the approval; a person decides from another process (the ``goldfive`` command); the task goes back
to ``working`` and completes by itself, seen through ``tasks/get``, a resubscription and the client's
webhook. The tool body runs once on approve and never on reject.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import SubscribeToTaskRequest, TaskState
from a2a_support import (
    Webhook,
    World,
    a2a_client,
    artifact_text,
    free_port,
    get,
    goldfive_facts,
    send,
    status_text,
    text,
    until_state,
    user_message,
    wait_until,
)
from google.protobuf.json_format import MessageToDict

from goldfive_core.signing import load_or_create_signing_key
from goldfive_core.store import open_store

pytestmark = pytest.mark.timeout(120)

AUTH_REQUIRED = TaskState.TASK_STATE_AUTH_REQUIRED
WORKING = TaskState.TASK_STATE_WORKING
COMPLETED = TaskState.TASK_STATE_COMPLETED


async def test_a_gated_call_waits_in_auth_required_and_a_cli_approval_completes_the_task(
    world: World, agents: Any, webhook: Webhook
) -> None:
    agent = agents()
    async with a2a_client(agent.url) as client, a2a_client(agent.url, streaming=True) as streaming:
        task = await send(client, user_message(text("pay bob")), push=webhook, token="tok-1")
        assert task.status.state == AUTH_REQUIRED
        facts = goldfive_facts(task)
        (row,) = open_store(str(world.db)).approvals()
        assert row.status == "pending" and facts["approval_id"] == row.target_id
        assert facts["request_id"] == row.request_id and facts["rule"] == "require_confirmation"
        assert facts["tool"] == "transfer" and facts["status"] == "waiting_for_person"
        assert facts["inbox_url"] == f"http://inbox.example/approvals/{row.target_id}"
        assert "args_json" not in facts  # the operator did not allow the arguments
        said = status_text(task).replace(row.target_id, "").replace(row.request_id, "")  # ids are random hex
        assert "bob" not in said and "10" not in said
        meta = dict(task.status.message.parts[0].metadata) or {}
        assert meta == {}  # the text part is plain; the facts travel in the data part and the update's metadata
        assert "a person decides in goldfive" in status_text(task)
        shown = await get(client, task.id)
        assert shown.status.state == AUTH_REQUIRED
        assert '"bob"' not in json.dumps(MessageToDict(shown))  # nor in ADK's function-call part of the history
        assert world.runs_of_body() == []

        seen: list[Any] = []
        first = asyncio.Event()

        async def follow() -> None:
            async for response in streaming.subscribe(SubscribeToTaskRequest(id=task.id)):
                seen.append(response)
                first.set()

        follower = asyncio.create_task(follow())
        await asyncio.wait_for(first.wait(), 30)  # the resubscription is on (it starts with the task as it is)
        assert seen[0].task.status.state == AUTH_REQUIRED

        decided = await asyncio.to_thread(world.cli, "approve", row.target_id, "--by", "ann")
        assert decided.returncode == 0, decided.stderr

        done = await until_state(client, task.id, COMPLETED)
        assert 'tool said {"sent": 10, "to": "bob"}' in artifact_text(done)
        await asyncio.wait_for(follower, 30)
    states = [r.status_update.status.state for r in seen if r.HasField("status_update")]
    assert states[0] == WORKING and states[-1] == COMPLETED
    working = next(r.status_update for r in seen if r.HasField("status_update"))
    assert working.metadata["goldfive/approval_id"] == row.target_id
    assert "approved by ann" in " ".join(p.text for p in working.status.message.parts)
    assert world.runs_of_body() == [f"bob 10 pid {agent.pid}"]
    hooks = wait_until(lambda: "TASK_STATE_COMPLETED" in webhook.states() and webhook.states(), what="pushes")
    assert "TASK_STATE_AUTH_REQUIRED" in hooks and "TASK_STATE_WORKING" in hooks
    assert hooks.index("TASK_STATE_AUTH_REQUIRED") < len(hooks) - 1 - hooks[::-1].index("TASK_STATE_WORKING")
    assert set(webhook.tokens) == {"tok-1"}


async def test_a_rejection_ends_the_call_with_the_persons_reason_and_the_body_never_runs(
    world: World, agents: Any
) -> None:
    agent = agents()
    async with a2a_client(agent.url) as client:
        task = await send(client, user_message(text("pay bob")))
        assert task.status.state == AUTH_REQUIRED
        approval = goldfive_facts(task)["approval_id"]
        rejected = await asyncio.to_thread(world.cli, "reject", approval, "--reason", "not today")
        assert rejected.returncode == 0, rejected.stderr
        done = await until_state(client, task.id, COMPLETED)
    said = artifact_text(done)
    assert '"reason": "user_rejected"' in said and "not today" in said  # what the model was told
    assert world.runs_of_body() == []


async def test_the_arguments_show_only_when_the_operator_allows_it(world: World, agents: Any) -> None:
    world.extra_env["A2A_SHOW_ARGS"] = "1"
    agent = agents()
    async with a2a_client(agent.url) as client:
        task = await send(client, user_message(text("pay bob")))
    facts = goldfive_facts(task)
    assert facts["args_json"] == '{"amount":10,"to":"bob"}'


def _serve(world: World, key: Path) -> tuple[subprocess.Popen[str], str]:
    """``goldfive serve`` on the same store, in its own process; returns it and its URL once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "goldfive_core.cli", "serve", "--port", str(port), "--key", str(key)],
        env=world.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, "goldfive serve exited"
        try:
            return httpx.get(url + "/api/me", timeout=2).status_code in (200, 401)
        except httpx.TransportError:
            return False

    wait_until(up, what="goldfive serve to answer")
    return proc, url


async def test_a_decision_through_goldfive_serve_signed_by_its_key_resumes_the_task(
    world: World, agents: Any, tmp_path: Path
) -> None:
    key = tmp_path / "server.key"
    signer, _ = load_or_create_signing_key(key)
    token = world.cli("users", "add", "ana", "--role", "approver").stdout.strip().splitlines()[-1]
    world.extra_env["GOLDFIVE_TRUST_KEY"] = signer.trust_key.text()  # the agent applies only signed decisions
    serve, url = _serve(world, key)
    try:
        agent = agents()
        async with a2a_client(agent.url) as client:
            task = await send(client, user_message(text("pay bob")))
            approval = goldfive_facts(task)["approval_id"]
            unsigned = await asyncio.to_thread(world.cli, "approve", approval, "--by", "mallory")
            assert "refused" in unsigned.stdout + unsigned.stderr  # a local, unsigned decision does not count
            assert (await get(client, task.id)).status.state == AUTH_REQUIRED
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                r = await http.post(
                    f"/api/approvals/{approval}/approve", json={}, headers={"Authorization": f"Bearer {token}"}
                )
            assert r.status_code == 200, r.text
            done = await until_state(client, task.id, COMPLETED)
        assert 'tool said {"sent": 10, "to": "bob"}' in artifact_text(done)
        assert world.runs_of_body() == [f"bob 10 pid {agent.pid}"]
    finally:
        serve.terminate()
        serve.wait(15)


async def test_a_timeout_ends_the_wait_as_the_rule_says_and_the_body_never_runs(world: World, agents: Any) -> None:
    world.extra_env["GOLDFIVE_STEER_TOOL_APPROVAL_TIMEOUT_MS"] = "1500"  # nobody decides within it
    agent = agents()
    async with a2a_client(agent.url) as client:
        task = await send(client, user_message(text("pay bob")))
        assert task.status.state == AUTH_REQUIRED
        done = await until_state(client, task.id, COMPLETED)
    assert '"reason": "approval_timeout"' in artifact_text(done)  # what the model was told
    moved_on = [m for m in done.history if "nobody decided in time" in " ".join(p.text for p in m.parts)]
    assert len(moved_on) == 1
    assert world.runs_of_body() == []
