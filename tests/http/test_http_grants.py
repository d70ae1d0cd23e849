"""Standing grants over HTTP: an HttpChannel agent reads the grants made in its own runs from ``goldfive serve``
(``GET /api/agent/grants``), so a call a grant allows runs without asking, and a revocation made through the
API stops the next matching call of the live agent. Another agent's token reads none of them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import site
from store_support import Backend, await_until

pytest.importorskip("google.adk")

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import SteeringConfig
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.policy import parse_policy
from goldfive_core.store.agents import claim_run
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.users import add_user
from goldfive_core.testing import Call, ScriptedModel

POLICY = parse_policy(
    """
[[rule]]
name = "payments to acme"
tool = "transfer"
when = "args.to == 'acme'"
action = "ask"
grants = ["run", "session"]
"""
)


async def _pay(channel: HttpChannel, transfer: Any, amounts: list[int]) -> None:
    """One ADK run (session s-1) of an agent with the policy whose model pays acme each of ``amounts``."""
    config = SteeringConfig(approval_default_timeout_ms=60_000)
    plugin = GoldfivePlugin(control=channel, sinks=[channel.sink], config=config, policy=POLICY)
    script: list[Any] = [Call("transfer", {"amount": a, "to": "acme"}) for a in amounts] + ["done"]
    agent = LlmAgent(name="payer", model=ScriptedModel(script), tools=[FunctionTool(transfer)])
    app = App(name="http_grants", root_agent=agent, plugins=[plugin])
    runner = Runner(app=app, session_service=InMemorySessionService())
    await runner.session_service.create_session(app_name=app.name, user_id="u", session_id="s-1")
    message = types.Content(role="user", parts=[types.Part(text="pay")])
    async for _ in runner.run_async(user_id="u", session_id="s-1", new_message=message):
        pass


@pytest.mark.parametrize("trusting", [False, True], ids=["plain", "trusting"])
async def test_a_grant_made_over_the_api_lets_the_next_call_through_until_it_is_revoked(
    backend: Backend, tmp_path: Path, trusting: bool
) -> None:
    store = backend.open()
    eve = add_user(store, "eve", "agent").token  # another agent on the same server
    with site(backend, tmp_path) as s:
        ran: list[int] = []
        revoked: list[dict[str, Any]] = []

        def transfer(amount: int, to: str) -> dict[str, Any]:
            """Move money."""
            ran.append(amount)
            if amount == 20:  # let through by the grant; a person revokes it now, while the run goes on
                channel.sink.flush()
                grants = httpx.get(f"{s.url}/api/grants", headers=s.auth("ana")).json()["grants"]
                [grant] = grants
                answer = httpx.post(
                    f"{s.url}/api/grants/{grant['grant_id']}/revoke", headers=s.auth("ana"), json={"reason": "enough"}
                )
                assert answer.status_code == 200, answer.text
                revoked.append(grant)
            return {"moved": amount}

        channel = HttpChannel(s.url, token=s.tokens["bot"], trust_key=s.servers[0].trust_key if trusting else None)
        run = asyncio.create_task(_pay(channel, transfer, [10, 20, 30]))
        try:
            [first] = await await_until(lambda: store.approvals(), what="the first call's request")
            answer = await s.decide(first.target_id, body={"grant": "run"})
            assert answer.status_code == 200, answer.text
            # The second call runs on the grant; the third asks again: the grant was revoked in between.
            await await_until(lambda: len(store.approvals(open_only=False)) == 2, what="the third call's request")
            [third] = [r for r in store.approvals() if r.open]
            assert third.args_json == '{"amount":30,"to":"acme"}'
            assert ran == [10, 20]

            # The grant is bot's: bot reads it (revoked), eve reads nothing and may not name bot's run.
            async with httpx.AsyncClient(base_url=s.url, timeout=10) as client:
                mine = await client.get("/api/agent/grants", headers=s.auth("bot"))
                assert [(g["grant_id"], g["state"]) for g in mine.json()["grants"]] == [
                    (revoked[0]["grant_id"], "revoked")
                ]
                others = await client.get("/api/agent/grants", headers={"Authorization": f"Bearer {eve}"})
                assert others.status_code == 200 and others.json()["grants"] == []
                named = await client.get(
                    "/api/agent/grants",
                    params={"run": first.run_id},
                    headers={"Authorization": f"Bearer {eve}"},
                )
                assert named.status_code == 403, named.text
                assert "does not own" in named.json()["error"]
                assert "grants" not in named.json()

            rejected = await s.decide(third.target_id, approve=False)
            assert rejected.status_code == 200, rejected.text
            await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
        assert ran == [10, 20]
        assert len(store.approvals(open_only=False)) == 2  # nobody was asked about the second call
        applied = [a.event().policy_applied for a in store.audit_rows() if a.kind == "policy_applied"]
        assert [(p.grant_id, p.args_json) for p in applied] == [(revoked[0]["grant_id"], '{"amount":20,"to":"acme"}')]


@pytest.mark.parametrize("trusting", [False, True], ids=["plain", "trusting"])
async def test_an_agent_trusting_the_servers_key_never_applies_a_grant_row_it_reads_over_http(
    backend: Backend, tmp_path: Path, trusting: bool
) -> None:
    """A grant row is not signed: a database writer could have written one, even in a run the agent owns."""
    store = backend.open()
    assert claim_run(store, "run-old", "bot") is None  # an earlier run of this agent
    forged = events_pb2.GrantCreated(
        grant_id="grant-forged",
        rule="payments to acme",
        tool="transfer",
        granted_by="cfo",
        scope="time",
        created_at_ms=store.clock_ms(),
        expires_at_ms=store.clock_ms() + 3_600_000,
        description="forged",
    )
    event = events_pb2.Event(event_id="ev-forged", run_id="run-old", sequence=0)
    event.grant_created.CopyFrom(forged)
    store.append_events([event], pid=1, host="h")
    with site(backend, tmp_path) as s:
        ran: list[int] = []

        def transfer(amount: int, to: str) -> dict[str, Any]:
            """Move money."""
            ran.append(amount)
            return {"moved": amount}

        channel = HttpChannel(s.url, token=s.tokens["bot"], trust_key=s.servers[0].trust_key if trusting else None)
        run = asyncio.create_task(_pay(channel, transfer, [10]))
        try:
            if trusting:
                [asked] = await await_until(lambda: store.approvals(), what="the call's request")
                assert ran == []
                assert (await s.decide(asked.target_id, approve=False)).status_code == 200
            await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
        # Without a trusted key the agent believes the server's rows (development mode), as over the store.
        assert ran == ([] if trusting else [10])
