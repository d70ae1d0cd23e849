"""A store agent with no GOLDFIVE_AGENT_ID keeps its calls in the ledger its host's app names (issue #27).

Two ADK apps of other names reusing the call id "pay-1" each run their body once; the same app restarted (a new
runner, a new ADK session) still finds its done call done and its in-doubt call in doubt; a row written before this
default existed, in the one shared ledger, still stops the app from running that call again; GOLDFIVE_AGENT_ID
names the ledger instead when set. Real ADK Runner and App, a scripted model, a real store.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from store_support import Backend, await_until

from goldfive_core import Session, SteeringConfig
from goldfive_core._util import args_digest, canonical_json
from goldfive_core.approvals import Principal
from goldfive_core.store import DecideVerdict, ExecutionState, Store, StoreChannel, decide
from goldfive_core.store.execution import StoreLedger
from goldfive_core.toolcall import ToolCall

pytest.importorskip("google.adk")

ARGS: dict[str, Any] = {"amount": 10}
DIGEST = args_digest("pay", ARGS)
ANN = Principal(name="ann", channel="cli")


@pytest.fixture(autouse=True)
def _no_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOLDFIVE_AGENT_ID", raising=False)


class _App:
    """One invocation of ADK app ``name`` whose model calls ``pay(amount=10)`` as ``call_id`` (approved when asked)."""

    def __init__(self, store: Store, name: str, call_id: str = "pay-1") -> None:
        self.store, self.name, self.call_id = store, name, call_id
        self.ran: list[int] = []
        self.told: list[dict[str, Any]] = []

    async def run(self, *, approve: bool = True) -> None:
        from google.adk.agents.llm_agent import LlmAgent
        from google.adk.apps import App
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService
        from google.adk.tools.function_tool import FunctionTool
        from google.genai import types

        from goldfive_adk import GoldfivePlugin
        from goldfive_core.testing import Call, ScriptedModel, SeenRequest

        def answered(seen: SeenRequest) -> str:
            if seen.last_response is not None:
                self.told.append(seen.last_response)
            return "done"

        def pay(amount: int) -> dict[str, Any]:
            """Pay."""
            self.ran.append(amount)
            return {"paid": amount}

        model = ScriptedModel([Call("pay", dict(ARGS), id=self.call_id)], then=answered)
        channel = StoreChannel(self.store)
        config = SteeringConfig(tool_approval_timeout_ms=30_000 if approve else 1)
        plugin = GoldfivePlugin(control=channel, sinks=[channel.sink], config=config)
        agent = LlmAgent(name="payer", model=model, tools=[FunctionTool(pay, require_confirmation=True)])
        app = App(name=self.name, root_agent=agent, plugins=[plugin])
        runner = Runner(app=app, session_service=InMemorySessionService())
        session = await runner.session_service.create_session(app_name=app.name, user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="pay")])

        async def drive() -> None:
            async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
                pass

        task = asyncio.create_task(drive())
        try:
            if approve:
                asked = asyncio.create_task(await_until(lambda: self._pending(), what="the approval request"))
                done, _ = await asyncio.wait({task, asked}, return_when=asyncio.FIRST_COMPLETED)
                if asked in done:
                    result = await asyncio.to_thread(decide, self.store, self.call_id, approve=True, principal=ANN)
                    assert result.verdict is not DecideVerdict.REFUSED, result.detail
                else:
                    asked.cancel()
            await task
        finally:
            await channel.aclose()

    def _pending(self) -> bool:
        return any(r.target_id == self.call_id for r in self.store.approvals())


async def test_two_apps_reusing_a_call_id_each_run_their_body_once(backend: Backend) -> None:
    store = backend.open()
    billing, payroll = _App(store, "billing"), _App(store, "payroll")
    await billing.run()
    await payroll.run()  # another app, the same call id and arguments: its own call, run
    assert (billing.ran, payroll.ran) == ([10], [10])
    owners = sorted((r.owner, r.state) for r in store.executions())
    assert owners == [("app:billing", ExecutionState.DONE), ("app:payroll", ExecutionState.DONE)]
    # Each restarted (a new runner and ADK session, the same App name): done, the recorded result, not run again.
    for name in ("billing", "payroll"):
        again = _App(store, name)
        await again.run(approve=False)
        assert (again.ran, again.told) == ([], [{"paid": 10}])
    assert store.verify_audit().ok, store.verify_audit().problems


async def _died_inside(store: Store, app_name: str, call_id: str) -> None:
    """App ``app_name``'s process claimed ``call_id`` and died inside the body (no "done")."""
    dead = Session(config=SteeringConfig(), has_channel=True, app_name=app_name)
    ledger = StoreLedger(store)
    call = ToolCall(call_id=call_id, tool_name="pay", args=ARGS, prompt="pay?")
    assert (await ledger.lookup(dead, call, DIGEST)).kind == "none"
    assert await ledger.begin(dead, call, DIGEST) is None


async def test_a_restarted_app_finds_its_in_doubt_call_and_another_app_runs_its_own(backend: Backend) -> None:
    store = backend.open()
    await _died_inside(store, "billing", "pay-1")
    restarted = _App(store, "billing")
    await restarted.run(approve=False)
    assert restarted.ran == [] and restarted.told[0]["reason"] == "in_doubt"  # its own call: never re-run
    payroll = _App(store, "payroll")
    await payroll.run()
    assert payroll.ran == [10]  # not payroll's call
    rows = {r.owner: r.state for r in store.executions()}
    assert rows == {"app:billing": ExecutionState.EXECUTING, "app:payroll": ExecutionState.DONE}


async def test_a_legacy_shared_row_still_stops_a_rerun_after_the_upgrade(backend: Backend) -> None:
    store = backend.open()
    # Written before apps named their ledger: by runs nobody registered (the shared ledger, owner "").
    assert store.mark_executing("pay-1", run_id="run-old-1", pid=1, host="gone", args_digest=DIGEST)
    assert store.mark_executing("pay-2", run_id="run-old-2", pid=1, host="gone", args_digest=DIGEST)
    assert store.mark_done("pay-2", result_json=canonical_json({"paid": 10}), run_id="run-old-2")
    in_doubt, done = _App(store, "billing", "pay-1"), _App(store, "billing", "pay-2")
    await in_doubt.run(approve=False)
    await done.run(approve=False)
    assert (in_doubt.ran, in_doubt.told[0]["reason"]) == ([], "in_doubt")
    assert (done.ran, done.told) == ([], [{"paid": 10}])
    assert sorted(r.owner for r in store.executions()) == ["", ""]  # nothing claimed anew in the app's ledger


async def test_a_legacy_in_doubt_row_loses_a_claim_made_after_the_look(backend: Backend) -> None:
    store = backend.open()
    session = Session(config=SteeringConfig(), has_channel=True, app_name="billing")
    ledger = StoreLedger(store)
    call = ToolCall(call_id="pay-1", tool_name="pay", args=ARGS, prompt="pay?")
    assert (await ledger.lookup(session, call, DIGEST)).kind == "none"
    # An unnamed process of the old version claims it between the look and the claim (a rolling upgrade).
    assert store.mark_executing("pay-1", run_id="run-old", pid=1, host="gone", args_digest=DIGEST)
    refused = await ledger.begin(session, call, DIGEST)
    assert refused is not None and refused.kind == "in_doubt"
    # The same for a call it finished there, recorded with no digest (as rows from before schema 3 are).
    other = ToolCall(call_id="pay-2", tool_name="pay", args=ARGS, prompt="pay?")
    assert (await ledger.lookup(session, other, DIGEST)).kind == "none"
    assert store.mark_executing("pay-2", run_id="run-old", pid=1, host="gone")
    assert store.mark_done("pay-2", result_json=canonical_json({"paid": 10}), run_id="run-old")
    done = await ledger.begin(session, other, DIGEST)
    assert done is not None and (done.kind, done.result) == ("done", {"paid": 10})
    assert [r.owner for r in store.executions()] == ["", ""]


async def test_goldfive_agent_id_names_the_ledger_over_the_app_name(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = backend.open()
    monkeypatch.setenv("GOLDFIVE_AGENT_ID", "ops")
    first = _App(store, "billing")
    await first.run()
    again = _App(store, "payroll")  # another App name, the same identity: its ledger, so done
    await again.run(approve=False)
    assert (first.ran, again.ran, again.told) == ([10], [], [{"paid": 10}])
    assert [r.owner for r in store.executions()] == ["store:ops"]
