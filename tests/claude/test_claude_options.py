"""What GoldfiveClaude hands the SDK: merged options, refusal of configurations that would bypass the gate."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, PermissionResultAllow

from goldfive_core import ConfigError
from goldfive_core.adapters.claude import GoldfiveClaude
from tests.claude.claude_support import LOOKUP, REFUND, Harness, converse


def _options(**kwargs: Any) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(**kwargs)


async def _allow(name: str, args: dict[str, Any], ctx: Any) -> PermissionResultAllow:
    return PermissionResultAllow()


@pytest.mark.parametrize(
    ("gate", "options", "needle"),
    [
        ([REFUND], _options(allowed_tools=[REFUND]), "allowed_tools"),
        ([REFUND], _options(allowed_tools=["mcp__shop"]), "allowed_tools"),
        (["mcp__shop__*"], _options(allowed_tools=["mcp__shop__refund"]), "allowed_tools"),
        (["Bash"], _options(allowed_tools=["Bash(ls:*)"]), "allowed_tools"),
        (lambda name, args: name == "Bash", _options(allowed_tools=["Bash"]), "allowed_tools"),
        ([REFUND], _options(permission_mode="bypassPermissions"), "bypassPermissions"),
        ([REFUND], _options(permission_mode="dontAsk"), "dontAsk"),
        ([REFUND], _options(can_use_tool=_allow), "can_use_tool"),
        ([REFUND], _options(permission_prompt_tool_name="mcp__x__ask"), "permission_prompt_tool_name"),
        ([REFUND], _options(mcp_servers={"goldfive": {"type": "stdio", "command": "x"}}), "already has a server"),
        ([REFUND], _options(mcp_servers="/etc/mcp.json"), "config file path"),
    ],
)
def test_options_that_would_shadow_the_gate_are_refused(gate: Any, options: ClaudeAgentOptions, needle: str) -> None:
    gf = GoldfiveClaude(gate_tools=gate)
    with pytest.raises(ConfigError, match="bypass goldfive's approval gate") as info:
        gf.run(options)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"gate_tools": [""]}, "gate_tools"),
        ({"gate_tools": 3}, "gate_tools"),
        ({"server_name": "gold five"}, "server_name"),
        ({"tool_schemas": {REFUND: {"type": 12}}}, "not a valid JSON Schema"),
        ({"control": "channel"}, "ControlChannel"),
    ],
)
def test_bad_goldfive_configuration_is_refused(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        GoldfiveClaude(**kwargs)


def test_unrelated_allowed_tools_and_modes_are_fine() -> None:
    gf = GoldfiveClaude(gate_tools=[REFUND, "Bash"])
    run = gf.run(_options(allowed_tools=["Read", LOOKUP, "Grep(*)"], permission_mode="acceptEdits"))
    assert run.options.permission_mode == "acceptEdits"


@pytest.mark.filterwarnings("ignore::claude_agent_sdk.CanUseToolShadowedWarning")
async def test_user_hooks_servers_and_allowed_tools_are_merged_not_replaced(h: Harness) -> None:
    seen: list[str] = []

    async def user_hook(hook_input: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        seen.append(f"user saw {hook_input['tool_name']}")
        return {}

    base = h.options(
        allowed_tools=[LOOKUP], hooks={"PreToolUse": [HookMatcher(matcher="mcp__shop__.*", hooks=[user_hook])]}
    )
    snapshot = dataclasses.replace(base, hooks={k: list(v) for k, v in (base.hooks or {}).items()})
    run = h.gf.run(base, transport=h.cli)
    merged = run.options
    assert set(merged.mcp_servers) == {"shop", "goldfive"}  # type: ignore[arg-type]
    assert merged.allowed_tools == [LOOKUP]
    assert merged.hooks is not None and merged.hooks["PreToolUse"][0].hooks == [user_hook]
    assert {"PreToolUse", "PostToolUse", "Stop", "UserPromptSubmit"} <= set(merged.hooks)
    assert base.hooks == snapshot.hooks and set(base.mcp_servers) == {"shop"}  # type: ignore[arg-type]
    assert base.can_use_tool is None

    async def script() -> None:
        use = await h.cli.use_tool("toolu_M", LOOKUP, {"order_id": "5"})
        assert use.ran
        await h.cli.result()

    h.cli.auto_allow = frozenset(merged.allowed_tools)  # the CLI's allow rule for lookup
    async with run:
        await converse(run, h.cli, "look up", script)
    assert seen == [f"user saw {LOOKUP}"]
    # goldfive's PreToolUse "ask" still sends the allowed call through the step gate
    assert any(f.get("response", {}).get("request_id") == "perm-toolu_M" for f in h.cli.written)
    assert h.shop.lookups == [{"order_id": "5"}]
    registered = h.cli.initialize_request
    assert registered is not None and len(registered["hooks"]["PreToolUse"]) == 2


def test_reporting_tools_have_model_visible_names() -> None:
    gf = GoldfiveClaude(server_name="gf")
    assert "mcp__gf__report_awaiting_approval" in gf.reporting_tools and len(gf.reporting_tools) == 8


def _python(code: str) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=60)


def test_goldfive_core_never_imports_the_sdk_and_the_adapter_says_how_to_install_it() -> None:
    done = _python(
        "import sys\n"
        "import goldfive_core, goldfive_core.adapters\n"
        "assert 'claude_agent_sdk' not in sys.modules, 'goldfive_core imported the SDK'\n"
        "sys.modules['claude_agent_sdk'] = None\n"
        "try:\n"
        "    import goldfive_core.adapters.claude\n"
        "except ImportError as exc:\n"
        "    from goldfive_core import MissingExtraError\n"
        "    assert isinstance(exc, MissingExtraError), type(exc)\n"
        "    print(exc)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'goldfive[claude]'" in done.stdout


async def test_the_same_options_drive_query_too(h: Harness) -> None:
    from claude_agent_sdk import query

    async def cli_side() -> None:
        await h.cli.next_prompt()
        await h.cli.system_init()
        use = await h.cli.use_tool("toolu_Q", LOOKUP, {"order_id": "3"})
        assert use.ran
        await h.cli.result("done")

    async with h.gf.run(h.options(), title="via query()") as run, asyncio.timeout(10), asyncio.TaskGroup() as tg:
        tg.create_task(cli_side())
        messages = [m async for m in run.track(query(prompt="look up 3", options=run.options, transport=h.cli))]
    assert type(messages[-1]).__name__ == "ResultMessage"
    assert h.shop.lookups == [{"order_id": "3"}]
    assert run.result is not None and run.result.output == "done" and run.session.session_id == "sess-claude-1"


def test_the_public_names_are_pinned() -> None:
    from goldfive_core.adapters import claude

    assert claude.__all__ == sorted(claude.__all__)
    assert claude.__all__ == [
        "ClaudeRun",
        "FakeClaudeCLI",
        "FakeToolUse",
        "GatePredicate",
        "GateSpec",
        "GoldfiveClaude",
    ]


async def test_a_run_is_entered_once(h: Harness) -> None:
    run = h.run()
    async with run:
        pass
    with pytest.raises(RuntimeError, match="already started"):
        async with run:
            pass
    assert run.result is not None and run.result.status == "COMPLETED"


def test_steerer_factory_is_the_deprecated_name_of_session_setup() -> None:
    from goldfive_core.adapters.claude import GoldfiveClaude

    def setup(session: object, channel: object) -> None:
        return None

    gf = GoldfiveClaude(session_setup=setup)
    with pytest.warns(DeprecationWarning, match=r"GoldfiveClaude\.steerer_factory is deprecated; use session_setup"):
        assert gf.steerer_factory is setup
    with pytest.warns(DeprecationWarning):
        gf.steerer_factory = None
    assert gf.session_setup is None
