"""The goldfive reporting tools (Flow A) as ADK tools.

Add them to the agents that should report: ``LlmAgent(..., tools=[..., *plugin.reporting_tools()])``
(or ``reporting_tools(plugin)``). The plugin does not install them by itself, so which agents see
them stays visible in the agent's own definition. Each call runs the core handler for the goldfive
run of the caller's ADK session; the task id defaults to that run's root task (the ADK invocation
id that started the run). ``report_awaiting_approval`` is Flow A: it waits for a person and
returns ``{"decision": approve|reject|timeout|unavailable|cancelled, "detail": ...}``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from goldfive_core.reporting import REPORTING_TOOL_NAMES, TOOL_SPECS, ToolSpec, call_reporting_tool

from ._compat import DeclaredTool

if TYPE_CHECKING:
    from .plugin import _GoldfiveADKPlugin

__all__ = ["ReportingTool", "reporting_tools"]


class ReportingTool(DeclaredTool):
    """One goldfive reporting tool, bound to the plugin whose runs it reports into."""

    def __init__(self, spec: ToolSpec, plugin: _GoldfiveADKPlugin) -> None:
        super().__init__(name=spec.name, description=spec.description)
        self.spec = spec
        self.plugin = plugin

    def declaration(self) -> types.FunctionDeclaration:
        """The tool's schema, from the shared goldfive tool spec."""
        return types.FunctionDeclaration(
            name=self.spec.name, description=self.spec.description, parameters_json_schema=self.spec.parameters
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        """Run the core handler for this ADK session's goldfive run; bad input returns ``{"error": ...}``."""
        session = self.plugin.session_for(tool_context.session.id)
        if session is None:
            return {
                "error": f"{self.name}: goldfive is not running for this session; register the plugin with "
                f"App(plugins=[...]) (plugin name {self.plugin.name!r})",
                "tool": self.name,
            }
        return await call_reporting_tool(session, self.name, args)


def reporting_tools(plugin: _GoldfiveADKPlugin) -> list[BaseTool]:
    """Every goldfive reporting tool, bound to ``plugin``, in a stable order."""
    return [ReportingTool(TOOL_SPECS[name], plugin) for name in REPORTING_TOOL_NAMES]
