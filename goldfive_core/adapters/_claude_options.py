"""Which Claude tools need a person's approval, and how goldfive's pieces merge into the user's options.

Private to :mod:`goldfive_core.adapters.claude`; imported only with the ``claude`` extra installed.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, McpSdkServerConfig
from claude_agent_sdk.types import CanUseTool, HookEvent

from ..errors import ConfigError

__all__ = ["GatePredicate", "GateSpec", "ToolGate", "check_server_name", "mcp_tool_name", "merge_options"]

GatePredicate = Callable[[str, Mapping[str, Any]], bool]
"""``predicate(tool_name, tool_input) -> True`` when the call needs a person's approval."""

GateSpec = str | Iterable[str] | GatePredicate | None
"""What to gate: tool names, ``fnmatch`` patterns (``"mcp__shop__*"``), or a predicate over name and input."""

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
_WILDCARDS = frozenset("*?[")


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model sees for an SDK MCP tool (the CLI replaces characters outside ``[A-Za-z0-9_-]``)."""
    return f"mcp__{re.sub(r'[^A-Za-z0-9_-]', '_', server)}__{tool}"


def check_server_name(name: object) -> str:
    """Validate the name of goldfive's reporting MCP server."""
    if not isinstance(name, str) or not _SERVER_NAME.match(name):
        raise ConfigError(
            f"server_name must be letters, digits, '_' or '-' (it becomes mcp__<name>__...), got {name!r}"
        )
    return name


class ToolGate:
    """Decides whether a tool call needs a person's approval."""

    def __init__(self, spec: GateSpec) -> None:
        self.predicate: GatePredicate | None = None
        self.names: tuple[str, ...] = ()
        if spec is None:
            return
        if isinstance(spec, str):
            spec = [spec]
        if callable(spec):
            self.predicate = spec
            return
        if not isinstance(spec, Iterable):
            raise ConfigError(
                f"gate_tools takes tool names, fnmatch patterns or a predicate(name, input), got {type(spec).__name__}"
            )
        names = []
        for entry in spec:
            if not isinstance(entry, str) or not entry.strip():
                raise ConfigError(f"gate_tools entries must be non-empty tool names or patterns, got {entry!r}")
            names.append(entry)
        self.names = tuple(names)

    def gates(self, tool_name: str, tool_input: Mapping[str, Any]) -> bool:
        """True when this call must wait for a person."""
        if self.predicate is not None:
            return bool(self.predicate(tool_name, tool_input))
        return any(fnmatch.fnmatchcase(tool_name, n) if _WILDCARDS & set(n) else tool_name == n for n in self.names)

    def shadowed_by(self, allowed_entry: str) -> bool:
        """True when an ``allowed_tools`` entry would let a gated call skip ``can_use_tool``.

        An entry such as ``"Bash(ls:*)"`` auto-approves part of a tool, which is
        enough to skip the gate for those calls. ``"mcp__srv"`` allows every tool
        of a server. A predicate is probed with the entry's tool name and no input.
        """
        tool = allowed_entry.split("(", 1)[0].strip()
        if not tool:
            return False
        if self.predicate is not None:
            return bool(self.predicate(tool, {}))
        return any(_overlaps(tool, name) for name in self.names)


def _overlaps(allowed: str, gated: str) -> bool:
    if allowed == gated or fnmatch.fnmatchcase(gated, allowed) or fnmatch.fnmatchcase(allowed, gated):
        return True
    # "mcp__shop" allows every tool of server "shop".
    return allowed.startswith("mcp__") and allowed.count("__") == 1 and gated.startswith(allowed + "__")


def _problems(base: ClaudeAgentOptions, gate: ToolGate, server_name: str) -> list[str]:
    problems = []
    if base.can_use_tool is not None:
        problems.append("options.can_use_tool is set: goldfive installs its own permission callback (drop yours)")
    if base.permission_prompt_tool_name:
        problems.append(
            f"options.permission_prompt_tool_name={base.permission_prompt_tool_name!r} would route permission "
            "prompts away from goldfive's can_use_tool (drop it)"
        )
    if base.permission_mode in ("bypassPermissions", "dontAsk"):
        problems.append(
            f"options.permission_mode={base.permission_mode!r} decides tool calls without asking, so no call "
            "could wait for a person (use 'default', 'acceptEdits' or 'plan')"
        )
    shadowing = [entry for entry in base.allowed_tools if gate.shadowed_by(entry)]
    if shadowing:
        problems.append(
            f"options.allowed_tools entries {shadowing!r} auto-approve tools that gate_tools says need a person; "
            "remove them or narrow gate_tools"
        )
    if not isinstance(base.mcp_servers, Mapping):
        problems.append(
            f"options.mcp_servers is a config file path ({str(base.mcp_servers)!r}); pass a dict so goldfive can add "
            "its reporting server beside yours"
        )
    elif server_name in base.mcp_servers:
        problems.append(
            f"options.mcp_servers already has a server named {server_name!r}; pick another GoldfiveClaude(server_name=)"
        )
    return problems


def merge_options(
    base: ClaudeAgentOptions | None,
    *,
    gate: ToolGate,
    server_name: str,
    server: McpSdkServerConfig,
    can_use_tool: CanUseTool,
    hooks: Mapping[HookEvent, Sequence[HookMatcher]],
) -> ClaudeAgentOptions:
    """A copy of ``base`` with goldfive's server, permission callback and hooks added beside the user's.

    Raises ConfigError when ``base`` would let a gated call skip the permission callback.
    """
    base = base if base is not None else ClaudeAgentOptions()
    problems = _problems(base, gate, server_name)
    if problems:
        raise ConfigError("these Claude options would bypass goldfive's approval gate: " + "; ".join(problems))
    assert isinstance(base.mcp_servers, Mapping)  # checked above
    merged_hooks: dict[HookEvent, list[HookMatcher]] = {event: list(ms) for event, ms in (base.hooks or {}).items()}
    for event, matchers in hooks.items():
        merged_hooks.setdefault(event, []).extend(matchers)
    return dataclasses.replace(
        base,
        mcp_servers={**base.mcp_servers, server_name: server},
        can_use_tool=can_use_tool,
        hooks=merged_hooks,
        allowed_tools=list(base.allowed_tools),
    )
