"""A plain callable under ``wrap()`` keeps its calls in the ledger of its own name (issue #27).

A store process with no GOLDFIVE_AGENT_ID used to keep every wrapped callable's calls in the one shared ledger, so
a second callable reusing a call id was skipped and handed the first one's result. Now each callable's runs are its
app's (``app:<module>.<qualname>``, or ``wrap(..., app_name=)``): two callables reusing "pay-1" each run their body
once with their own result, each restarted finds its own call done, and a row of the shared ledger written before the
upgrade still stops a re-run. Real store (SQLite and PostgreSQL), real runner, a person approving on the channel.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import pytest
from store_support import Backend

from goldfive_core import ControlChannel, ControlKind, ControlMessage, Task, wrap
from goldfive_core._util import args_digest, canonical_json
from goldfive_core.adapters.callable import AgentTools
from goldfive_core.errors import ConfigError
from goldfive_core.store import ExecutionState, Store, run_approved
from goldfive_core.testing import AwaitableSink

ARGS: dict[str, Any] = {"amount": 10}
DIGEST = args_digest("pay", ARGS)


@pytest.fixture(autouse=True)
def _no_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOLDFIVE_AGENT_ID", raising=False)


@dataclasses.dataclass
class Host:
    """What one wrapped agent works with: the store, who it is, and whose bodies ran."""

    store: Store
    name: str
    ran: list[str]


async def _pay(task: Task, tools: AgentTools) -> dict[str, Any]:
    host = task.input
    assert isinstance(host, Host)

    async def body(call_args: Mapping[str, Any]) -> dict[str, Any]:
        host.ran.append(host.name)
        return {"paid": call_args["amount"], "by": host.name}

    outcome = await run_approved(
        tools.session, host.store, call_id="pay-1", tool_name="pay", args=ARGS, body=body, timeout_ms=30_000
    )
    return {"status": outcome.status, "result": outcome.result}


async def billing(task: Task, tools: AgentTools) -> dict[str, Any]:
    """One host's agent."""
    return await _pay(task, tools)


async def payroll(task: Task, tools: AgentTools) -> dict[str, Any]:
    """Another host's agent, in the same store, reusing billing's call id."""
    return await _pay(task, tools)


def _owner(fn: Any) -> str:
    return f"app:{fn.__module__}.{fn.__qualname__}"


def _named(module: str, qualname: str) -> Any:
    """The agent under another ``module.qualname`` (as a function of that name elsewhere would be)."""

    @functools.wraps(billing)
    async def agent(task: Task, tools: AgentTools) -> dict[str, Any]:
        return await _pay(task, tools)

    agent.__module__, agent.__qualname__ = module, qualname
    return agent


async def _run(host: Host, agent: Any, *, approve: bool = True, **wrap_kwargs: Any) -> dict[str, Any]:
    """One run of ``agent`` (a new runner: as after a restart); a person approves when asked."""
    channel, sink = ControlChannel(), AwaitableSink()
    runner = wrap(agent, control=channel, sinks=[sink], **wrap_kwargs)
    run = asyncio.create_task(runner.run(host))
    asked = asyncio.create_task(sink.wait_for("approval_requested"))
    done, _ = await asyncio.wait({run, asked}, return_when=asyncio.FIRST_COMPLETED)
    if asked in done:
        assert approve, "asked again for a call its ledger holds"
        assert (await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": "pay-1"}))).ok
    else:
        asked.cancel()
    result = await run
    assert isinstance(result.output, dict), result
    return result.output


async def test_two_wrapped_callables_reusing_a_call_id_each_run_their_body_once(backend: Backend) -> None:
    store = backend.open()
    ran: list[str] = []
    first = await _run(Host(store, "billing", ran), billing)
    second = await _run(Host(store, "payroll", ran), payroll)  # another callable, the same call id and arguments
    assert first == {"status": "ran", "result": {"paid": 10, "by": "billing"}}
    assert second == {"status": "ran", "result": {"paid": 10, "by": "payroll"}}
    assert ran == ["billing", "payroll"]
    rows = sorted((r.owner, r.state) for r in store.executions())
    assert rows == sorted([(_owner(billing), ExecutionState.DONE), (_owner(payroll), ExecutionState.DONE)])
    # Each restarted (a new runner, a new run): its own call done, its own recorded result, nothing run again.
    for agent, name in ((billing, "billing"), (payroll, "payroll")):
        again = await _run(Host(store, name, ran), agent, approve=False)
        assert again == {"status": "already_done", "result": {"paid": 10, "by": name}}
    assert ran == ["billing", "payroll"]


async def test_app_name_pins_a_callables_ledger(backend: Backend) -> None:
    store = backend.open()
    ran: list[str] = []
    first = await _run(Host(store, "billing", ran), billing, app_name="books")
    # The same app under another function (renamed, moved): the name it was given, so its call is done.
    again = await _run(Host(store, "payroll", ran), payroll, approve=False, app_name="books")
    assert (first["status"], again) == ("ran", {"status": "already_done", "result": {"paid": 10, "by": "billing"}})
    assert [r.owner for r in store.executions()] == ["app:books"]


async def test_a_callable_with_no_stable_name_keeps_the_shared_ledger(backend: Backend) -> None:
    store = backend.open()
    ran: list[str] = []
    nameless = functools.partial(_pay)  # no __qualname__: no name to key a ledger by
    first = await _run(Host(store, "partial", ran), nameless)
    assert first["status"] == "ran"
    assert [r.owner for r in store.executions()] == [""]
    # The shared ledger's row is read by a named callable too: done, not run again.
    again = await _run(Host(store, "billing", ran), billing, approve=False)
    assert again == {"status": "already_done", "result": {"paid": 10, "by": "partial"}}
    assert ran == ["partial"]


async def test_callables_of_one_qualname_in_two_modules_are_two_apps(backend: Backend) -> None:
    store = backend.open()
    ran: list[str] = []
    here, there = _named("shop.billing", "agent"), _named("shop.payroll", "agent")
    assert (await _run(Host(store, "billing", ran), here))["status"] == "ran"
    assert (await _run(Host(store, "payroll", ran), there))["status"] == "ran"
    assert ran == ["billing", "payroll"]
    assert sorted(r.owner for r in store.executions()) == ["app:shop.billing.agent", "app:shop.payroll.agent"]


async def test_a_name_too_long_or_not_printable_keeps_the_shared_ledger(backend: Backend) -> None:
    store = backend.open()
    ran: list[str] = []
    long = await _run(Host(store, "long", ran), _named("shop", "a" * 200))
    assert long["status"] == "ran" and [r.owner for r in store.executions()] == [""]
    bad = await _run(Host(store, "bad", ran), _named("shop", "pay\x1b[2Jer"), approve=False)
    assert bad == {"status": "already_done", "result": {"paid": 10, "by": "long"}}  # the shared ledger's
    assert ran == ["long"]


async def test_a_shared_row_from_before_the_upgrade_still_stops_a_rerun(backend: Backend) -> None:
    store = backend.open()
    # Written by the callable before callables named their ledger: runs nobody registered (owner "").
    assert store.mark_executing("pay-1", run_id="run-old", pid=1, host="gone", args_digest=DIGEST)
    ran: list[str] = []
    in_doubt = await _run(Host(store, "billing", ran), billing, approve=False)
    assert in_doubt["status"] == "in_doubt" and ran == []
    assert store.mark_done("pay-1", result_json=canonical_json({"paid": 10, "by": "old"}), run_id="run-old")
    done = await _run(Host(store, "billing", ran), billing, approve=False)
    assert done == {"status": "already_done", "result": {"paid": 10, "by": "old"}} and ran == []
    assert [r.owner for r in store.executions()] == [""]  # nothing claimed anew in the callable's ledger


def test_an_app_name_that_is_no_string_is_refused_at_once() -> None:
    with pytest.raises(ConfigError, match="app_name must be a string, got int"):
        wrap(billing, app_name=5)  # type: ignore[arg-type]
