"""goldfive_adk: goldfive for Google ADK — one plugin for tool confirmation, reporting tools and the step gate.

Needs the ``adk`` extra (``pip install 'goldfive[adk]'``)::

    plugin = GoldfivePlugin(control=ControlChannel(), sinks=[JsonlSink("events.jsonl")])
    agent = LlmAgent(name="ops", model=..., tools=[FunctionTool(transfer_funds, require_confirmation=True),
                                                  *plugin.reporting_tools()])
    app = App(name="ops", root_agent=agent, plugins=[plugin])
"""

from __future__ import annotations

try:
    import google.adk.plugins  # noqa: F401  (fail here, with the install hint, when the extra is missing)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    from goldfive_core.errors import MissingExtraError

    raise MissingExtraError("goldfive_adk", "adk") from exc

from .plugin import GoldfivePlugin, _GoldfiveADKPlugin  # noqa: F401  (the class behind the public alias)
from .tools import ReportingTool, reporting_tools

__all__ = ["GoldfivePlugin", "ReportingTool", "reporting_tools"]
