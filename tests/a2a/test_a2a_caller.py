"""The calling side: an ADK agent using RemoteA2aAgent sees its remote task wait for a person, in its own run.

The caller (in this process, ADK's RemoteA2aAgent over the a2a-sdk client, with GoldfivePlugin and
RemoteWaits) calls the payer served over A2A (its own process). The payer's call waits for a person; the
caller's goldfive run records ``remote_approval_waiting`` naming the remote agent, its task and the remote
approval with its inbox link, so the wait shows under the caller's run in the inbox.
"""

from __future__ import annotations

from typing import Any

import pytest
from a2a_support import World
from google.adk.a2a.agent import RemoteA2aAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_adk.a2a import RemoteWaits
from goldfive_core.store import StoreChannel, open_store

pytestmark = [pytest.mark.timeout(120), pytest.mark.filterwarnings("ignore:.*EXPERIMENTAL.*:UserWarning")]


async def test_a_remote_task_waiting_for_a_person_shows_in_the_callers_run(world: World, agents: Any) -> None:
    agent = agents()
    channel = StoreChannel(open_store(str(world.db)))
    plugin = GoldfivePlugin(control=channel, sinks=[channel.sink])
    remote = RemoteA2aAgent(name="remote_payer", agent_card=agent.url + ".well-known/agent-card.json")
    app = App(name="caller", root_agent=remote, plugins=[plugin, RemoteWaits(plugin)])
    runner = Runner(app=app, session_service=InMemorySessionService())
    try:
        session = await runner.session_service.create_session(app_name="caller", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="pay bob")])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
    finally:
        await runner.close()
        await channel.aclose()
    store = open_store(str(world.db))
    (remote_row,) = store.approvals()
    assert remote_row.status == "pending" and world.runs_of_body() == []
    waits = [r for r in store.audit_rows(limit=1000) if r.kind == "remote_approval_waiting"]
    assert len(waits) == 1
    seen = waits[0].event()
    assert seen.run_id != remote_row.run_id  # the caller's own run, not the remote one
    assert seen.session_id == session.id
    wait = seen.remote_approval_waiting
    assert wait.remote_agent == "remote_payer" and wait.state == "TASK_STATE_AUTH_REQUIRED"
    assert wait.approval_id == remote_row.target_id and wait.request_id == remote_row.request_id
    assert wait.inbox_url == f"http://inbox.example/approvals/{remote_row.target_id}"
    assert wait.tool == "transfer" and wait.rule == "require_confirmation" and wait.task_id
