"""Flow B helpers: the skip responses a model sees, the confirmation an approved call carries, and a tool's parameter
schema with argschema's check of edits."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from pydantic import ConfigDict

from goldfive_core.argschema import ArgsProblem, Words
from goldfive_core.argschema import edit_validator as edit_check
from goldfive_core.toolcall import SkipReason

from ._compat import AdkCompatError, declaration_of

__all__ = ["CONFIRMED", "SkipReason", "args_schema", "edit_validator", "skip", "tool_params"]

logger = logging.getLogger(__name__)


EditValidator = Callable[[Mapping[str, Any]], "str | None"]


class _Confirmed(ToolConfirmation):
    """A ToolConfirmation nobody can change (ADK's own is a mutable pydantic model)."""

    model_config = ConfigDict(frozen=True)


CONFIRMED: ToolConfirmation = _Confirmed(confirmed=True)
"""What an approved call's tool context carries, so ADK's own confirmation check lets its body run. One instance
for every call: validating a new ToolConfirmation cost ~9 us between an APPROVE and the body (pydantic, caches cold),
and it cannot be changed by a body or a plugin that holds it (frozen)."""


def skip(tool_name: str, reason: SkipReason, detail: str, **extra: Any) -> dict[str, Any]:
    """The function response ADK hands the model instead of running the tool."""
    return {"skipped": True, "reason": reason, "tool_name": tool_name, "detail": detail, **extra}


_PY_NAMES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


def _adk_words(schema: Mapping[str, Any]) -> Words:
    """argschema's problems in the words the ADK plugin has always used (the model and the acks read them)."""
    raw = schema.get("properties")
    props: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}

    def words(problem: ArgsProblem, edited: Mapping[str, Any]) -> str:
        top = problem.field in props or (problem.kind == "unknown" and problem.field in edited)
        if not top:  # a nested problem: argschema's own words
            return problem.message
        if problem.kind == "unknown":
            listed = ", ".join(map(repr, sorted(problem.fields)))
            return f"unknown parameter(s) {listed}; the tool takes: {', '.join(props) or 'none'}"
        if problem.kind == "missing":
            return f"missing required parameter(s) {', '.join(map(repr, problem.fields))}"
        declared = props[problem.field]
        want = _PY_NAMES.get(str(declared.get("type"))) if isinstance(declared, Mapping) else None
        if problem.kind != "type" or want is None:
            return problem.message
        value = edited.get(problem.field)
        return (
            f"{problem.field!r} must be {want}, got {'a boolean' if isinstance(value, bool) else type(value).__name__}"
        )

    return words


def _from_signature(func: Callable[..., Any]) -> bool | None:
    """Whether ``func`` takes ``**kwargs`` (then parameters it does not name are its own to judge); None when
    it has no readable signature (edits are refused)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


@dataclasses.dataclass(frozen=True, slots=True)
class _Params:
    schema: dict[str, Any] | None
    """The declaration the model was given, as JSON Schema (carried on the request)."""
    check: EditValidator | None
    """argschema's check of an edit against that same schema (None: edits are refused)."""


_PARAMS: weakref.WeakKeyDictionary[object, _Params] = weakref.WeakKeyDictionary()
"""A FunctionTool's function (else the tool) → its schema and check: built once, not per call. Keyed weakly, and
the value refers to neither, so the cache keeps no tool or function alive."""


def tool_params(tool: BaseTool) -> _Params:
    """``tool``'s parameter schema and the check of edits against it, made once per function (a FunctionTool's
    ``func``: reading its declaration costs) or per tool. A function or tool that cannot be weakly referenced or
    hashed gets them anew every time."""
    key: object = tool.func if isinstance(tool, FunctionTool) and tool.func is not None else tool
    try:
        return _PARAMS[key]
    except Exception:  # not cached yet, or not a usable key (unhashable, not weakly referenceable, odd __eq__)
        pass
    params = _build(tool)
    with contextlib.suppress(Exception):
        _PARAMS[key] = params
    return params


def edit_validator(tool: BaseTool) -> EditValidator | None:
    """The check of a person's edited arguments against ``tool``'s parameters (argschema); None = edits are refused."""
    return tool_params(tool).check


def args_schema(tool: BaseTool) -> dict[str, Any] | None:
    """``tool``'s parameters as JSON Schema — the declaration the model was given — or None.

    Carried on the approval request so a decider outside the agent refuses exactly the edits the agent refuses
    (both check with :func:`goldfive_core.argschema.check_args` against it). Unknown parameters are refused
    (``additionalProperties: false``), except for a function taking ``**kwargs``.
    """
    return tool_params(tool).schema


def _build(tool: BaseTool) -> _Params:
    try:
        schema = _declared_schema(tool)
    except AdkCompatError:
        raise
    except Exception:
        logger.warning("tool %r has no usable declaration; edited args will be refused", tool.name, exc_info=True)
        return _Params(schema=None, check=None)
    if schema is None:
        return _Params(schema=None, check=None)
    return _Params(schema=schema, check=edit_check(schema, tool=tool.name, words=_adk_words(schema)))


def _declared_schema(tool: BaseTool) -> dict[str, Any] | None:
    declaration = declaration_of(tool)
    if declaration is None:
        return None
    schema: dict[str, Any]
    if isinstance(declaration.parameters_json_schema, Mapping):
        schema = dict(declaration.parameters_json_schema)
    elif declaration.parameters is not None:
        schema = declaration.parameters.json_schema.model_dump(mode="json", exclude_none=True)
    else:
        schema = {"type": "object", "properties": {}}
    open_ended = False
    if isinstance(tool, FunctionTool) and tool.func is not None:
        takes_kwargs = _from_signature(tool.func)
        if takes_kwargs is None:
            return None
        open_ended = takes_kwargs
    if not open_ended:
        schema.setdefault("additionalProperties", False)
    return schema
