"""The check of a person's edited arguments is built once per tool, not on every gated call."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import InMemoryRunner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin, _confirm
from goldfive_adk._confirm import edit_validator
from goldfive_core import ControlChannel, ControlKind, ControlMessage
from goldfive_core.testing import AwaitableSink, Call, ScriptedModel


def transfer(amount: int, to: str) -> dict[str, Any]:
    """Send money."""
    return {"sent": amount, "to": to}


def refund(order: str) -> dict[str, Any]:
    """Refund an order."""
    return {"refunded": order}


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every function a validator was built from (reading its signature and type hints)."""
    seen: list[Any] = []
    real = _confirm._from_signature

    def spy(func: Any) -> Any:
        seen.append(func)
        return real(func)

    monkeypatch.setattr(_confirm, "_from_signature", spy)
    return seen


async def test_gated_calls_of_one_tool_build_its_edit_check_once_and_it_still_judges_every_edit(
    built: list[Any],
) -> None:
    channel, sink = ControlChannel(), AwaitableSink()
    ran: list[dict[str, Any]] = []

    def pay(amount: int, to: str) -> dict[str, Any]:
        """Send money."""
        ran.append({"amount": amount, "to": to})
        return {"sent": amount}

    model = ScriptedModel(
        [[Call("pay", {"amount": 5, "to": "bob"})], [Call("pay", {"amount": 6, "to": "bob"})], lambda seen: "done"]
    )
    agent = LlmAgent(name="teller", model=model, tools=[FunctionTool(pay, require_confirmation=True)])
    runner = InMemoryRunner(
        app=App(name="bank", root_agent=agent, plugins=[GoldfivePlugin(control=channel, sinks=[sink])])
    )
    session = await runner.session_service.create_session(app_name="bank", user_id="u")

    async def decide() -> list[str]:
        refusals = []
        for n in (1, 2):
            target = (await sink.wait_for("approval_requested", count=n))[-1].approval_requested.target_id
            bad = {"target_id": target, "edited_args": {"amount": "many", "to": "eve"}}
            ack = await channel.send(ControlMessage(ControlKind.APPROVE, bad), timeout=5)
            refusals.append(ack.detail if not ack.ok else "accepted")
            good = {"target_id": target, "edited_args": {"amount": n, "to": "eve"}}
            assert (await channel.send(ControlMessage(ControlKind.APPROVE, good), timeout=5)).ok
        return refusals

    decider = asyncio.create_task(decide())
    message = types.Content(role="user", parts=[types.Part(text="pay")])
    async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        pass
    refusals = await decider

    assert len(refusals) == 2 and all("'amount' must be int" in r for r in refusals)
    assert ran == [{"amount": 1, "to": "eve"}, {"amount": 2, "to": "eve"}]
    assert built == [pay]  # built for the first gated call only


def test_a_replaced_function_gets_its_own_check() -> None:
    tool = FunctionTool(transfer)
    first = edit_validator(tool)
    assert first is not None and edit_validator(tool) is first
    tool.func = refund
    second = edit_validator(tool)
    assert second is not None and second is not first
    assert second({"order": "o-1"}) is None
    assert "unknown parameter" in (second({"amount": 1, "to": "x"}) or "")


class _Wipe(BaseTool):
    """A tool described by its declaration only (its validator is keyed on the tool itself)."""

    def __init__(self) -> None:
        super().__init__(name="wipe", description="Wipe a disk.")

    def _get_declaration(self) -> types.FunctionDeclaration:
        schema = {"type": "object", "properties": {"disk": {"type": "string"}}, "required": ["disk"]}
        return types.FunctionDeclaration(name="wipe", description="Wipe a disk.", parameters_json_schema=schema)


def test_the_cache_keeps_no_tool_alive() -> None:
    tool = _Wipe()
    check = edit_validator(tool)
    assert check is not None and edit_validator(tool) is check
    assert "missing required parameter(s) 'disk'" in (check({}) or "")
    alive = weakref.ref(tool)
    del tool
    gc.collect()
    assert alive() is None


class _Unhashable:
    """A callable tool function that cannot be a dict key (it defines __eq__ and no __hash__)."""

    def __call__(self, amount: int) -> int:
        return amount

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Unhashable)

    __hash__ = None  # type: ignore[assignment]


def test_an_unhashable_tool_function_is_checked_all_the_same(built: list[Any]) -> None:
    func = _Unhashable()
    tool = FunctionTool(func)  # type: ignore[arg-type]
    for _ in range(2):
        check = edit_validator(tool)
        assert check is not None
        assert check({"amount": 2}) is None
        assert "unknown parameter(s) 'cents'" in (check({"cents": 2}) or "")
    assert built == [func, func]  # no cache for it: built each time, never an error
