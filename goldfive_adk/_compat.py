"""Every use of a private ADK attribute, in one place.

goldfive_adk is written against google-adk 2.13 and uses its public API everywhere else
(``callback_context.invocation_id``, ``.session``, ``tool_context.function_call_id``,
``.tool_confirmation``, ``BaseTool.check_require_confirmation``). ADK offers no public way for the
three things below; each shim checks what it touches and raises :class:`AdkCompatError` naming the
installed ADK version when ADK changed underneath it, instead of failing somewhere far away.

* :func:`end_invocation` — a plugin callback cannot end the invocation through the public API
  (``Context.get_invocation_context()`` returns a copy), so CANCEL sets ``end_invocation`` on the
  context's ``_invocation_context``.
* :func:`invocation_is_resumable` — whether ADK can resume the invocation later (the App's
  ``ResumabilityConfig``); callbacks get no public handle on it either.
* :func:`confirmation_flag` — whether a ``FunctionTool`` / ``McpTool`` was built with
  ``require_confirmation=True/False`` or a predicate (``_require_confirmation``), so the plugin can
  announce calls for early decisions without evaluating predicates twice more.
* :func:`body_gets_context` — whether a ``FunctionTool``'s function takes the tool context
  (``_context_param_name``), i.e. whether its body could ask for a confirmation itself.
* :func:`declaration_of` and :class:`DeclaredTool` — a tool's ``FunctionDeclaration`` (the
  parameters the model was given) is ``BaseTool._get_declaration()``; a custom tool provides it by
  overriding that method.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from google.adk.agents.context import Context
from google.adk.tools.base_tool import BaseTool
from google.adk.version import __version__ as ADK_VERSION
from google.genai import types

from goldfive_core.errors import GoldfiveError

__all__ = [
    "ADK_VERSION",
    "AdkCompatError",
    "DeclaredTool",
    "body_gets_context",
    "confirmation_flag",
    "declaration_of",
    "end_invocation",
    "invocation_is_resumable",
]

WRITTEN_FOR = "2.13"


class AdkCompatError(GoldfiveError, RuntimeError):
    """The installed google-adk lacks a private attribute goldfive_adk relies on."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"goldfive_adk cannot use {what} on google-adk {ADK_VERSION} (written for google-adk {WRITTEN_FOR}); "
            "ADK changed a private API goldfive depends on: pin google-adk to a supported version or upgrade goldfive"
        )
        self.what = what


def _require_class_attribute(cls: type, name: str) -> None:
    if not callable(getattr(cls, name, None)):
        raise AdkCompatError(f"{cls.__name__}.{name}()")


# Checked at import: a renamed method would otherwise make ADK ignore DeclaredTool's declaration.
_require_class_attribute(BaseTool, "_get_declaration")


def _invocation(context: Context, needs: str) -> Any:
    ic = getattr(context, "_invocation_context", None)
    if ic is None or not hasattr(ic, needs):
        raise AdkCompatError(f"Context._invocation_context.{needs}")
    return ic


def end_invocation(context: Context) -> None:
    """End the ADK invocation ``context`` belongs to after the current step (what CANCEL needs)."""
    ic = _invocation(context, "end_invocation")
    if not isinstance(ic.end_invocation, bool):
        raise AdkCompatError("Context._invocation_context.end_invocation (a bool)")
    ic.end_invocation = True


def invocation_is_resumable(context: Context) -> bool:
    """Whether ADK can resume the invocation ``context`` belongs to (``App(resumability_config=...)``)."""
    resumable = _invocation(context, "is_resumable").is_resumable
    if not isinstance(resumable, bool):
        raise AdkCompatError("InvocationContext.is_resumable (a bool)")
    return resumable


_MISSING = object()


def confirmation_flag(tool: BaseTool) -> bool | None:
    """``True`` / ``False`` when ``tool`` always / never needs confirmation; ``None``: ask the tool per call.

    A tool that does not override ``check_require_confirmation`` never needs one. ``FunctionTool`` and
    ``McpTool`` keep their constructor argument in ``_require_confirmation`` (a bool or a predicate);
    any other tool is asked per call.
    """
    if type(tool).check_require_confirmation is BaseTool.check_require_confirmation:
        return False
    flag = getattr(tool, "_require_confirmation", _MISSING)
    if flag is _MISSING:
        if _keeps_flag(tool):
            raise AdkCompatError(f"{type(tool).__name__}._require_confirmation")
        return None
    return flag if isinstance(flag, bool) else None


def body_gets_context(tool: BaseTool) -> bool:
    """Whether ``tool``'s body receives the tool context (and so may call ``request_confirmation``).

    A ``FunctionTool`` passes it only to a function with the context parameter ADK detected
    (``_context_param_name``: a ``ToolContext`` annotation, else ``tool_context``); every other
    tool's ``run_async`` receives it.
    """
    from google.adk.tools.function_tool import FunctionTool

    if not isinstance(tool, FunctionTool):
        return True
    name = getattr(tool, "_context_param_name", None)
    if not isinstance(name, str):
        raise AdkCompatError("FunctionTool._context_param_name")
    try:
        return name in inspect.signature(tool.func).parameters
    except (TypeError, ValueError):  # no signature to read: assume it may ask
        return True


def _keeps_flag(tool: BaseTool) -> bool:
    from google.adk.tools.function_tool import FunctionTool

    return isinstance(tool, FunctionTool)


def declaration_of(tool: BaseTool) -> types.FunctionDeclaration | None:
    """The ``FunctionDeclaration`` ``tool`` gives the model (``None`` when it has none)."""
    method: Callable[[], Any] | None = getattr(tool, "_get_declaration", None)
    if method is None:
        raise AdkCompatError(f"{type(tool).__name__}._get_declaration()")
    declaration = method()
    if declaration is not None and not isinstance(declaration, types.FunctionDeclaration):
        raise AdkCompatError(f"{type(tool).__name__}._get_declaration() returning {type(declaration).__name__}")
    return declaration


class DeclaredTool(BaseTool):
    """A ``BaseTool`` that gives ADK its declaration through :meth:`declaration` (a public method)."""

    def declaration(self) -> types.FunctionDeclaration | None:
        """The function declaration the model is given; ``None`` hides the tool from the model."""
        return None

    def _get_declaration(self) -> types.FunctionDeclaration | None:
        return self.declaration()
