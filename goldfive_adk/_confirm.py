"""Flow B helpers: the skip responses a model sees and the check that edited arguments fit a tool."""

from __future__ import annotations

import contextlib
import inspect
import logging
import typing
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool

from goldfive_core.toolcall import SkipReason

from ._compat import AdkCompatError, declaration_of

__all__ = ["SkipReason", "args_schema", "edit_validator", "skip"]

logger = logging.getLogger(__name__)


EditValidator = Callable[[Mapping[str, Any]], "str | None"]

# Parameters ADK fills in itself; a person never edits them (as FunctionTool's own list of ignored ones).
_INJECTED = frozenset({"tool_context", "input_stream"})
_SIMPLE_TYPES: dict[Any, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float), bool: (bool,)}


def skip(tool_name: str, reason: SkipReason, detail: str, **extra: Any) -> dict[str, Any]:
    """The function response ADK hands the model instead of running the tool."""
    return {"skipped": True, "reason": reason, "tool_name": tool_name, "detail": detail, **extra}


def _type_problem(name: str, annotation: Any, value: Any) -> str | None:
    allowed = _SIMPLE_TYPES.get(annotation)
    if allowed is None:
        return None  # anything richer is left to the tool's own validation
    if isinstance(value, bool) and annotation is not bool:
        return f"{name!r} must be {annotation.__name__}, got a boolean"
    if not isinstance(value, allowed):
        return f"{name!r} must be {annotation.__name__}, got {type(value).__name__}"
    return None


def _from_signature(func: Callable[..., Any]) -> EditValidator | None:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # unresolvable string annotations: check names only
        logger.debug("cannot resolve annotations of %r; edited args are checked by name only", func)
        hints = {}
    params: dict[str, inspect.Parameter] = {}
    open_ended = False
    for name, param in signature.parameters.items():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            open_ended = True
            continue
        if param.kind is inspect.Parameter.VAR_POSITIONAL or name in _INJECTED:
            continue
        params[name] = param
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty]

    def validate(edited: Mapping[str, Any]) -> str | None:
        unknown = sorted(str(k) for k in edited if k not in params)
        if unknown and not open_ended:
            takes = ", ".join(params) or "none"
            return f"unknown parameter(s) {', '.join(map(repr, unknown))}; the tool takes: {takes}"
        missing = [n for n in required if n not in edited]
        if missing:
            return f"missing required parameter(s) {', '.join(map(repr, missing))}"
        for key, value in edited.items():
            problem = _type_problem(str(key), hints.get(str(key)), value)
            if problem is not None:
                return problem
        return None

    return validate


def _from_declaration(tool: BaseTool) -> EditValidator | None:
    declaration = declaration_of(tool)  # the schema the model was given; ADK tools all implement it
    if declaration is None:
        return None
    props: set[str]
    required: set[str]
    schema = declaration.parameters_json_schema
    if isinstance(schema, Mapping):
        props = set(schema.get("properties") or {})
        required = set(schema.get("required") or [])
    elif declaration.parameters is not None:
        props = set(declaration.parameters.properties or {})
        required = set(declaration.parameters.required or [])
    else:
        props, required = set(), set()

    def validate(edited: Mapping[str, Any]) -> str | None:
        unknown = sorted(str(k) for k in edited if k not in props)
        if unknown:
            return f"unknown parameter(s) {', '.join(map(repr, unknown))}; the tool takes: {', '.join(sorted(props))}"
        missing = sorted(required - set(edited))
        if missing:
            return f"missing required parameter(s) {', '.join(map(repr, missing))}"
        return None

    return validate


_VALIDATORS: weakref.WeakKeyDictionary[object, EditValidator | None] = weakref.WeakKeyDictionary()
"""A FunctionTool's function (else the tool) → its validator: built once, not per call. Keyed weakly, and the
validator refers to neither, so the cache keeps no tool or function alive."""


def edit_validator(tool: BaseTool) -> EditValidator | None:
    """A check for a person's edited arguments against ``tool``'s parameters; None = edits are refused.

    Made once per function (a FunctionTool's ``func``: reading a signature and its type hints costs ~200 µs)
    or per tool (one described by its declaration). A function or tool that cannot be weakly referenced or
    hashed gets a new validator every time.
    """
    key: object = tool.func if isinstance(tool, FunctionTool) and tool.func is not None else tool
    try:
        return _VALIDATORS[key]
    except Exception:  # not cached yet, or not a usable key (unhashable, not weakly referenceable, odd __eq__)
        pass
    validator = _edit_validator(tool)
    with contextlib.suppress(Exception):
        _VALIDATORS[key] = validator
    return validator


def _edit_validator(tool: BaseTool) -> EditValidator | None:
    if isinstance(tool, FunctionTool) and tool.func is not None:
        return _from_signature(tool.func)
    try:
        return _from_declaration(tool)
    except AdkCompatError:
        raise
    except Exception:
        logger.warning("tool %r has no usable declaration; edited args will be refused", tool.name, exc_info=True)
        return None


_SCHEMAS: weakref.WeakKeyDictionary[BaseTool, dict[str, Any] | None] = weakref.WeakKeyDictionary()


def args_schema(tool: BaseTool) -> dict[str, Any] | None:
    """``tool``'s parameters as JSON Schema — the declaration the model was given — or None.

    Carried on the approval request so a decider outside the agent can refuse an edit that does not
    fit. Unknown parameters are marked as refused (``additionalProperties: false``) where
    :func:`edit_validator` refuses them: always, except for a function taking ``**kwargs``.
    Computed once per tool object.
    """
    try:
        return _SCHEMAS[tool]
    except (KeyError, TypeError):
        pass
    try:
        schema = _declared_schema(tool)
    except AdkCompatError:
        raise
    except Exception:
        logger.debug("tool %r: no declared parameter schema to carry", tool.name, exc_info=True)
        schema = None
    with contextlib.suppress(TypeError):  # not weakly referenceable: computed again next time
        _SCHEMAS[tool] = schema
    return schema


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
        try:
            params = inspect.signature(tool.func).parameters.values()
        except (TypeError, ValueError):
            return None
        open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    if not open_ended:
        schema.setdefault("additionalProperties", False)
    return schema
