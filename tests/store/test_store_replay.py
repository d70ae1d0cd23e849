"""A call replayed after a restart, for every adapter with a ledger: the recorded fate decides, exactly.

Black-box: a decision is recorded through ``decide()`` while no agent runs (as ``goldfive
approve/reject`` does), then a new run replays the call with the same id — the callable agent
through ``run_approved``, ADK through ``GoldfivePlugin(control=StoreChannel(...))``. The tests
assert whether the tool body ran, with which arguments, what the model was told, and what the
store and the ledger say. Each one is written to fail if one safety line is changed (see the
mutation list in ``scripts/mutation.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from store_support import Backend, make_event

from goldfive_core import AgentTools, ControlChannel, InMemorySink, SteeringConfig, Task, wrap
from goldfive_core._util import args_digest, canonical_json
from goldfive_core.approvals import Principal
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import DecideVerdict, ExecutionState, Store, StoreChannel, decide, run_approved

TOOL = "transfer"
ARGS: dict[str, Any] = {"amount": 10}
ANN = Principal(name="ann", channel="cli")


def _orphaned(store: Store, target: str, args: Mapping[str, Any] = ARGS, *, run: str = "run-old") -> None:
    """``target`` was asked for ``transfer(args)`` by a run whose process is gone (it never reported a heartbeat)."""
    request = events_pb2.ApprovalRequested(
        target_id=target,
        kind="tool",
        prompt="transfer?",
        metadata={"tool_name": TOOL, "args_json": canonical_json(dict(args))},
        args_digest=args_digest(TOOL, dict(args)),
        timeout_ms=60_000,
    )
    store.append_events([make_event(run, 1, request)], pid=0, host="elsewhere")


def _record(store: Store, target: str, *, approve: bool, **kw: Any) -> None:
    result = decide(store, target, approve=approve, principal=ANN, reason="recorded offline", **kw)
    assert result.verdict is DecideVerdict.RECORDED, result.detail


# -- the callable agent: run_approved ---------------------------------------------------------------------------
async def _callable_replay(
    store: Store, target: str, *, raises: bool = False, sink: InMemorySink | None = None
) -> tuple[str, Any, list[Any]]:
    """Replay ``transfer(ARGS)`` as ``target`` in a new run; nobody answers a new question (1 ms wait)."""
    ran: list[Any] = []

    async def body(call_args: Mapping[str, Any]) -> dict[str, Any]:
        ran.append(dict(call_args))
        if raises:
            raise RuntimeError("the bank is closed")
        return {"moved": call_args["amount"]}

    async def agent(task: Task, tools: AgentTools) -> Any:
        outcome = await run_approved(
            tools.session, store, call_id=target, tool_name=TOOL, args=ARGS, body=body, timeout_ms=1
        )
        return {"status": outcome.status, "result": outcome.result}

    result = await wrap(agent, control=ControlChannel(), sinks=[sink] if sink else []).run("replay")
    if raises and result.output is None:
        return "raised", None, ran
    assert isinstance(result.output, dict), result
    return str(result.output["status"]), result.output["result"], ran


async def test_callable_a_recorded_rejection_never_runs_the_body(backend: Backend) -> None:
    store = backend.open()
    _orphaned(store, "c-1")
    _record(store, "c-1", approve=False)
    audited = [r.kind for r in store.audit_rows() if r.kind.startswith("approval_")]
    assert audited == ["approval_requested", "approval_rejected"]
    sink = InMemorySink()
    assert await _callable_replay(store, "c-1", sink=sink) == ("reject", None, [])
    assert store.execution("c-1") is None
    assert (len(sink.of("approval_rejected")), len(sink.of("approval_granted"))) == (1, 0)  # announced as it was


async def test_callable_a_recorded_approval_runs_the_body_once(backend: Backend) -> None:
    store = backend.open()
    _orphaned(store, "c-2")
    _record(store, "c-2", approve=True, edited_args={"amount": 7})
    assert await _callable_replay(store, "c-2") == ("ran", {"moved": 7}, [{"amount": 7}])
    assert await _callable_replay(store, "c-2") == ("already_done", {"moved": 7}, [])


async def test_callable_an_approval_recorded_for_other_arguments_is_not_applied(backend: Backend) -> None:
    store = backend.open()
    _orphaned(store, "c-3", {"amount": 9999})
    _record(store, "c-3", approve=True)
    assert await _callable_replay(store, "c-3") == ("timeout", None, [])  # asked again; nobody answered


async def test_callable_a_body_that_raised_is_done_with_its_error_not_in_doubt(backend: Backend) -> None:
    store = backend.open()
    _orphaned(store, "c-4")
    _record(store, "c-4", approve=True)
    status, _, ran = await _callable_replay(store, "c-4", raises=True)
    assert (status, ran) == ("raised", [ARGS])
    ledger = store.execution("c-4")
    assert ledger is not None and ledger.state is ExecutionState.DONE
    assert "the bank is closed" in json.loads(ledger.result_json)["error"]
    status, result, ran = await _callable_replay(store, "c-4")
    assert (status, ran) == ("already_done", [])
    assert "the bank is closed" in result["error"]


# -- ADK: GoldfivePlugin over a StoreChannel ------------------------------------------------------------------------
@pytest.fixture
def adk() -> Any:
    return pytest.importorskip("google.adk")


class _Adk:
    """One ADK run of an agent whose model calls ``transfer(amount=10)`` with the function call id ``target``."""

    def __init__(self, store: Store, target: str, *, raises: bool = False, timeout_ms: int = 60_000) -> None:
        from goldfive_core.testing import Call, ScriptedModel, SeenRequest

        self.ran: list[int] = []
        self.told: list[dict[str, Any]] = []
        self.store = store
        self.raises = raises
        self.timeout_ms = timeout_ms
        told = self.told

        def answered(seen: SeenRequest) -> str:
            if seen.last_response is not None:
                told.append(seen.last_response)
            return "done"

        self.model = ScriptedModel([Call(TOOL, dict(ARGS), id=target)], then=answered)

    async def run(self) -> None:
        from google.adk.agents.llm_agent import LlmAgent
        from google.adk.apps import App
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService
        from google.adk.tools.function_tool import FunctionTool
        from google.genai import types

        from goldfive_adk import GoldfivePlugin

        def transfer(amount: int) -> dict[str, Any]:
            """Move money."""
            self.ran.append(amount)
            if self.raises:
                raise RuntimeError("the bank is closed")
            return {"moved": amount}

        channel = StoreChannel(self.store)
        config = SteeringConfig(tool_approval_timeout_ms=self.timeout_ms)
        plugin = GoldfivePlugin(control=channel, sinks=[channel.sink], config=config)
        agent = LlmAgent(name="ops", model=self.model, tools=[FunctionTool(transfer, require_confirmation=True)])
        app = App(name="replay", root_agent=agent, plugins=[plugin])
        runner = Runner(app=app, session_service=InMemorySessionService())
        session = await runner.session_service.create_session(app_name=app.name, user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="pay bob")])
        try:
            async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
                pass
        finally:
            await channel.aclose()


async def test_adk_a_recorded_rejection_is_skipped_and_the_model_told(backend: Backend, adk: Any) -> None:
    store = backend.open()
    _orphaned(store, "a-1")
    _record(store, "a-1", approve=False)
    run = _Adk(store, "a-1")
    await run.run()
    assert run.ran == []
    assert run.told[0]["skipped"] is True and run.told[0]["reason"] == "user_rejected"
    assert run.told[0]["decided_by"] == "ann"
    assert store.execution("a-1") is None


async def test_adk_a_recorded_approval_runs_once_with_the_recorded_edit(backend: Backend, adk: Any) -> None:
    store = backend.open()
    _orphaned(store, "a-2")
    _record(store, "a-2", approve=True, edited_args={"amount": 7})
    run = _Adk(store, "a-2")
    await run.run()
    # The model is told the result, and (since #9) the approver's recorded reason with it.
    note = "A person (ann) approved this call: recorded offline"
    assert (run.ran, run.told) == ([7], [{"moved": 7, "goldfive_approval": note}])
    again = _Adk(store, "a-2")
    await again.run()
    assert (again.ran, again.told) == ([], [{"moved": 7}])  # the recorded result, not a second transfer


async def test_adk_an_approval_recorded_for_other_arguments_is_not_applied(backend: Backend, adk: Any) -> None:
    store = backend.open()
    _orphaned(store, "a-3", {"amount": 9999})
    _record(store, "a-3", approve=True)
    run = _Adk(store, "a-3", timeout_ms=1)
    await run.run()
    assert run.ran == []
    assert run.told[0]["reason"] == "approval_timeout"  # asked again; nobody answered


async def test_adk_a_recorded_edit_that_does_not_fit_the_tool_never_reaches_it(backend: Backend, adk: Any) -> None:
    store = backend.open()
    _orphaned(store, "a-4")
    _record(store, "a-4", approve=True, edited_args={"amount": "all of it"})
    run = _Adk(store, "a-4")
    await run.run()
    assert run.ran == []
    assert run.told[0]["reason"] == "approval_error"
    assert "recorded edited arguments do not fit" in run.told[0]["detail"]


async def test_adk_a_body_that_raised_is_done_with_its_error_not_in_doubt(backend: Backend, adk: Any) -> None:
    store = backend.open()
    _orphaned(store, "a-5")
    _record(store, "a-5", approve=True)
    run = _Adk(store, "a-5", raises=True)
    with pytest.raises(RuntimeError, match="the bank is closed"):
        await run.run()
    assert run.ran == [10]
    ledger = store.execution("a-5")
    assert ledger is not None and ledger.state is ExecutionState.DONE
    again = _Adk(store, "a-5")
    await again.run()
    assert again.ran == []
    assert "the bank is closed" in again.told[0]["error"] and "skipped" not in again.told[0]


async def test_adk_a_flow_b_timeout_closes_the_record_for_good(backend: Backend, adk: Any) -> None:
    store = backend.open()
    run = _Adk(store, "a-6", timeout_ms=1)
    await run.run()
    assert run.ran == [] and run.told[0]["reason"] == "approval_timeout"
    await_rows = store.approvals_for("a-6")
    assert [r.status for r in await_rows] == ["expired"]
    assert store.approvals() == []  # not listed as waiting
    late = decide(store, "a-6", approve=True, principal=ANN)
    assert late.verdict is DecideVerdict.REFUSED and "is expired" in late.detail
    replay = _Adk(store, "a-6", timeout_ms=1)
    await replay.run()
    assert replay.ran == [] and replay.told[0]["reason"] == "approval_timeout"


class _RaceAfterTheLook:
    """The real store, except that another process of the same agent (its ledger ``owner``) claims ``target`` right
    after this one looked it up."""

    def __init__(self, store: Store, target: str, owner: str) -> None:
        self._store = store
        self._target = target
        self._owner = owner
        self._looked = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def find_decision(self, target_id: str, **kw: Any) -> Any:
        found = self._store.find_decision(target_id, **kw)
        if target_id == self._target and not self._looked:
            self._looked = True
            assert found is not None
            self._store.own_run("run-other", self._owner)
            assert self._store.mark_executing(target_id, run_id="run-other", pid=1, host="other-host")
        return found


async def test_callable_a_body_another_process_claimed_meanwhile_is_not_run(backend: Backend) -> None:
    store = backend.open()
    _orphaned(store, "c-5")
    _record(store, "c-5", approve=True)
    agent = f"{_callable_replay.__module__}.{_callable_replay.__qualname__}.<locals>.agent"  # wrap()'s app name
    racing: Any = _RaceAfterTheLook(store, "c-5", f"app:{agent}")
    status, _, ran = await _callable_replay(racing, "c-5")
    assert (status, ran) == ("in_doubt", [])  # the other process holds it: not run twice
    assert [r.owner for r in store.executions()] == [f"app:{agent}"]  # in the callable's own ledger, not the shared


def test_a_finished_body_cannot_be_resolved_as_not_run(backend: Backend) -> None:
    store = backend.open()
    assert store.mark_executing("c-6", run_id="run-a", pid=1, host="h")
    store.mark_done("c-6", result_json='{"moved":10}')
    assert store.resolve_execution("c-6", ran=False, by="ann") is False
    ledger = store.execution("c-6")
    assert ledger is not None and ledger.state is ExecutionState.DONE  # a replay still returns the result


async def test_adk_a_body_another_process_claimed_meanwhile_is_not_run(backend: Backend, adk: Any) -> None:
    store = backend.open()
    _orphaned(store, "a-7")
    _record(store, "a-7", approve=True)
    racing: Any = _RaceAfterTheLook(store, "a-7", "app:replay")  # the App's name
    run = _Adk(racing, "a-7")
    await run.run()
    assert run.ran == []
    assert run.told[0]["skipped"] is True and run.told[0]["reason"] == "in_doubt"
    assert [r.owner for r in store.executions()] == ["app:replay"]  # in the app's own ledger, not the shared one
