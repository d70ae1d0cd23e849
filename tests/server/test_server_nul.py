"""NUL over goldfive serve, on SQLite and PostgreSQL: a model's NUL reaches a person, a person's NUL is a 400.

Before, on PostgreSQL a model's NUL dropped the request, a reason with NUL left the record pending with a 504
and lost the run's later events, and NUL in a path id or a login name was a 500.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from server_support import ORIGIN, Server

pytest.importorskip("google.adk")

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core.store import StoreChannel
from goldfive_core.testing import Call, ScriptedModel

MARK = "\u2400"  # ␀, what a NUL from an agent is stored and shown as


async def test_a_model_call_with_nul_is_asked_decided_over_http_and_audited(server: Server) -> None:
    ran: list[str] = []

    def transfer(memo: str) -> dict[str, Any]:
        """Move money."""
        ran.append(memo)
        return {"moved": memo}

    channel = StoreChannel(server.backend.open(), trust_key=server.signer.trust_key, sweep_interval_s=0.2)
    plugin = GoldfivePlugin(control=channel, sinks=[channel.sink])
    script = ScriptedModel(
        [
            Call("report_task_started", {"task_id": "t\x00pay", "title": "pay\x00"}),
            Call("report_awaiting_approval", {"prompt": "wire 5\x00 EUR?", "task_id": "t\x00pay"}),
            Call("transfer", {"memo": "rent\x00due"}, id="call\x00x"),
            lambda seen: "done\x00, said the tool",
        ]
    )
    agent = LlmAgent(
        name="ops", model=script, tools=[FunctionTool(transfer, require_confirmation=True), *plugin.reporting_tools()]
    )
    app = App(name="nul", root_agent=agent, plugins=[plugin])
    runner = Runner(app=app, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name=app.name, user_id="u")

    async def invoke() -> list[Any]:
        message = types.Content(role="user", parts=[types.Part(text="pay\x00 the rent")])
        return [e async for e in runner.run_async(user_id="u", session_id=session.id, new_message=message)]

    run = asyncio.create_task(invoke())
    try:
        (ask,) = await _listed(server, "task")
        # The model's prompt and task id are asked as the store holds them (NUL as the mark), not dropped.
        assert (ask["prompt"], ask["target_id"]) == (f"wire 5{MARK} EUR?", f"t{MARK}pay")
        refused = await server.post(f"/api/approvals/{ask['target_id']}/reject", {"reason": "not\x00 now"})
        assert refused.status_code == 400 and "'reason'" in refused.json()["error"] and "NUL" in refused.json()["error"]
        assert (await server.get(f"/api/approvals/{ask['target_id']}")).json()["state"] == "pending"  # untouched
        resp = await server.post(f"/api/approvals/{ask['target_id']}/approve", {"reason": "go"})
        assert resp.status_code == 200 and resp.json()["result"] == "SUCCESS", resp.text

        (card,) = await _listed(server, "tool")
        assert card["args"] == {"memo": "rent\x00due"}  # arguments are JSON: kept exactly
        assert card["target_id"] == f"call{MARK}x"  # the call id as stored; the run waits on it by its own id
        resp = await server.post(f"/api/approvals/{card['target_id']}/approve", {"args_digest": card["args_digest"]})
        assert resp.status_code == 200 and resp.json()["result"] == "SUCCESS", resp.text
        await asyncio.wait_for(run, 30)
        assert ran == ["rent\x00due"]  # the body ran once, with the arguments the model sent
        await asyncio.to_thread(channel.sink.flush)
        rows = server.store.audit_rows(run_id=card["run_id"])
        assert [r.kind for r in rows].count("approval_granted") == 2 and rows[-1].kind == "run_completed"
        numbered = [r.sequence for r in rows if r.kind != "execution_recorded"]  # (the ledger's: outside)
        assert numbered == list(range(len(numbered)))  # no gap
        verify = await server.get("/api/audit/verify", user="root")
        assert verify.status_code == 200 and verify.json()["ok"] is True, verify.text
    finally:
        if not run.done():
            run.cancel()
        await channel.aclose()


async def _listed(server: Server, kind: str) -> list[dict[str, Any]]:
    for _ in range(400):
        items = [a for a in (await server.get("/api/approvals")).json()["approvals"] if a["kind"] == kind]
        if items:
            return items
        await asyncio.sleep(0.025)
    raise AssertionError(f"the model's {kind} request never reached the inbox")


async def test_nul_in_a_path_id_a_query_or_a_login_name_is_a_4xx_never_a_500(server: Server) -> None:
    for path in (
        "/api/approvals/t%00x",
        "/api/approvals?run=r%00&tool=t%00&agent=a%00",
        "/api/runs/r%00x/events",
        "/api/audit/events?run=r%00",
    ):
        resp = await server.get(path)
        assert resp.status_code in (200, 404), (path, resp.status_code, resp.text)
    for path, body, field in (
        ("/api/approvals/t%00x/approve", {}, None),
        ("/api/approvals/t%00x/reject", {"reason": "no"}, None),
        ("/api/runs/r%00/steer", {"text": "go"}, None),
        ("/api/runs/r1/steer", {"text": "go\x00left"}, "'text'"),
        ("/api/runs/r1/cancel", {"reason": "stop\x00"}, "'reason'"),
    ):
        resp = await server.post(path, body)
        assert 400 <= resp.status_code < 500, (path, resp.status_code, resp.text)
        if field is not None:
            assert resp.status_code == 400 and field in resp.json()["error"], resp.text
    login = await server.client.post(
        "/api/login", json={"name": "ana\x00", "token": server.tokens["ana"]}, headers={"Origin": ORIGIN}
    )
    assert login.status_code == 400 and "'name'" in login.json()["error"], login.text
    user = await server.post("/api/users", {"name": "eve\x00", "role": "viewer"}, user="root")
    assert user.status_code == 400 and "'name'" in user.json()["error"], user.text
    action = await server.post("/api/users/eve%00/disable", {}, user="root")
    assert 400 <= action.status_code < 500, action.text
