"""goldfive_adk._compat: the only place goldfive touches private ADK attributes; one test per shim."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.adk.version import __version__ as installed_adk
from google.genai import types

from goldfive_adk import _compat
from goldfive_adk._compat import (
    AdkCompatError,
    DeclaredTool,
    body_gets_context,
    confirmation_flag,
    declaration_of,
    end_invocation,
    invocation_is_resumable,
)
from tests.adk.scripted import Harness, call_names

ROOT = Path(__file__).resolve().parents[2]
VERSION_NAMED = f"google-adk {installed_adk}"


def test_no_other_goldfive_module_touches_a_private_adk_attribute() -> None:
    private = re.compile(
        r"\b(?:\w*context|ic|tool|found|declaration|agent|event)\._[a-z]\w*"
        r"|\._get_declaration\b|[\"'](?:_invocation_context|_require_confirmation|_get_declaration)[\"']"
    )
    offenders = []
    for path in [*ROOT.joinpath("goldfive_adk").rglob("*.py"), *ROOT.joinpath("goldfive_core").rglob("*.py")]:
        if path.name == "_compat.py" or "pb" in path.parts:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if private.search(line.split("#", 1)[0]):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


async def test_end_invocation_stops_the_invocation_after_the_current_step() -> None:
    ran: list[str] = []

    def stop_here(tool_context: ToolContext) -> dict[str, Any]:
        """Ends the invocation."""
        ran.append("stop_here")
        end_invocation(tool_context)
        return {"stopped": True}

    h = Harness(tools=[FunctionTool(stop_here)], turns=[[("stop_here", {})], [("stop_here", {})], "never said"])
    events = await h.run(await h.new_session())
    assert ran == ["stop_here"] and len(h.model.requests) == 1  # the model was not called again
    assert call_names(events) == ["stop_here"]


def test_end_invocation_names_the_adk_version_when_the_context_changed() -> None:
    class NoHandle:
        invocation_id = "e-1"

    with pytest.raises(AdkCompatError, match=re.escape(VERSION_NAMED)) as caught:
        end_invocation(NoHandle())  # type: ignore[arg-type]
    assert "Context._invocation_context.end_invocation" in str(caught.value)


@pytest.mark.parametrize("resumable", [False, True])
async def test_invocation_is_resumable_follows_the_app(resumable: bool) -> None:
    from google.adk.apps import App, ResumabilityConfig
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService

    seen: list[bool] = []

    def probe(tool_context: ToolContext) -> dict[str, Any]:
        """Reports whether the invocation can be resumed."""
        seen.append(invocation_is_resumable(tool_context))
        return {}

    h = Harness(tools=[FunctionTool(probe)], turns=[[("probe", {})], "ok"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ResumabilityConfig is experimental
        config = ResumabilityConfig(is_resumable=True) if resumable else None
        app = App(name="compat", root_agent=h.agent, plugins=[h.plugin], resumability_config=config)
    h.app, h.runner = app, Runner(app=app, session_service=InMemorySessionService())
    await h.run(await h.new_session())
    assert seen == [resumable]
    with pytest.raises(AdkCompatError, match=re.escape(VERSION_NAMED)):
        invocation_is_resumable(object())  # type: ignore[arg-type]


def _pay(amount: int) -> dict[str, Any]:
    """Pay."""
    return {"paid": amount}


class _Asks(BaseTool):
    async def check_require_confirmation(self, args: dict[str, Any], tool_context: ToolContext) -> bool:
        return True


def test_confirmation_flag_reads_how_a_tool_was_built() -> None:
    assert confirmation_flag(FunctionTool(_pay, require_confirmation=True)) is True
    assert confirmation_flag(FunctionTool(_pay)) is False
    assert confirmation_flag(FunctionTool(_pay, require_confirmation=lambda amount: amount > 5)) is None
    assert confirmation_flag(BaseTool(name="plain", description="never asks")) is False
    assert confirmation_flag(_Asks(name="custom", description="asks per call")) is None


def test_confirmation_flag_names_the_adk_version_when_function_tool_changed() -> None:
    tool = FunctionTool(_pay, require_confirmation=True)
    del tool._require_confirmation  # what a renamed attribute in a newer ADK looks like
    with pytest.raises(AdkCompatError, match=re.escape(VERSION_NAMED)) as caught:
        confirmation_flag(tool)
    assert "FunctionTool._require_confirmation" in str(caught.value)


def test_body_gets_context_says_whether_a_tool_could_ask_for_a_confirmation_itself() -> None:
    def asks(days: int, tool_context: ToolContext) -> dict[str, Any]:
        """Takes the context by its usual name."""
        return {}

    def asks_by_type(days: int, ctx: ToolContext) -> dict[str, Any]:
        """Takes the context by annotation."""
        return {}

    assert body_gets_context(FunctionTool(asks)) and body_gets_context(FunctionTool(asks_by_type))
    assert not body_gets_context(FunctionTool(_pay))
    assert body_gets_context(_Asks(name="custom", description="its run_async gets the context"))
    tool = FunctionTool(asks)
    del tool._context_param_name
    with pytest.raises(AdkCompatError, match=re.escape(VERSION_NAMED)):
        body_gets_context(tool)


class _Wipe(DeclaredTool):
    def __init__(self) -> None:
        super().__init__(name="wipe", description="Wipe a disk.")

    def declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(
            name="wipe", description="Wipe a disk.", parameters_json_schema={"type": "object", "properties": {}}
        )


def test_declarations_come_from_adk_and_declared_tools_give_theirs() -> None:
    declared = declaration_of(FunctionTool(_pay))
    assert declared is not None and declared.name == "_pay"
    assert declaration_of(_Wipe()) == _Wipe().declaration()
    assert declaration_of(BaseTool(name="bare", description="no schema")) is None


def test_declaration_of_names_the_adk_version_when_the_hook_changed() -> None:
    class Renamed:
        name = "renamed"

    with pytest.raises(AdkCompatError, match=re.escape(VERSION_NAMED)):
        declaration_of(Renamed())  # type: ignore[arg-type]

    class Odd(BaseTool):
        def _get_declaration(self) -> Any:
            return {"name": "odd"}

    with pytest.raises(AdkCompatError, match="returning dict"):
        declaration_of(Odd(name="odd", description="returns a dict"))


def test_the_import_time_check_names_the_adk_version() -> None:
    with pytest.raises(AdkCompatError, match=re.escape(VERSION_NAMED)) as caught:
        _compat._require_class_attribute(object, "_get_declaration")
    assert "object._get_declaration()" in str(caught.value)
