"""A tool's parameter schema, carried with its approval request, and the check of a person's edited arguments.

The agent knows what its tools take (ADK's function declarations, Claude tools' input schemas). The
adapters put that JSON Schema on the request (metadata ``args_schema``, canonical JSON, at most
:data:`MAX_SCHEMA_CHARS`), so whoever decides from outside — ``goldfive serve``, the ``goldfive``
command — can refuse an edit that does not fit before it reaches the agent, and say which field is
wrong. The agent still checks the edit itself: this is the early, explanatory check, not the guard.

:func:`check_args` understands the part of JSON Schema tools' parameters use (``type``, ``properties``,
``required``, ``additionalProperties``, ``enum``, ``const``, ``items``, ``anyOf`` / ``oneOf`` /
``allOf``, number and length bounds, OpenAPI's ``nullable`` and upper-case type names); keywords it does
not know are not checked (the agent's own check still applies).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from ._util import canonical_json, safe_repr, shorten

__all__ = [
    "EDITABLE_KEY",
    "MAX_SCHEMA_CHARS",
    "SCHEMA_KEY",
    "ArgsProblem",
    "check_args",
    "edit_problem",
    "schema_from_metadata",
    "schema_json",
]

MAX_SCHEMA_CHARS = 16_384
"""A larger schema is not carried (the request still goes out; only the agent checks edits then)."""

SCHEMA_KEY = "args_schema"
"""The request metadata key that carries the schema."""

EDITABLE_KEY = "args_editable"
"""The request metadata key that says ``"no"`` when the agent takes no edited arguments for this call."""

_MAX_DEPTH = 32


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ArgsProblem:
    """Why edited arguments do not fit: the first wrong ``field`` (a path such as ``items[0].sku``) and a sentence."""

    field: str
    message: str

    def __str__(self) -> str:
        return self.message


def schema_json(schema: Mapping[str, Any] | None) -> str:
    """The schema as canonical JSON for the request's metadata; "" when there is none or it is too big."""
    if not isinstance(schema, Mapping) or not schema:
        return ""
    try:
        text = canonical_json(dict(schema))
    except (TypeError, ValueError):
        return ""
    return text if len(text) <= MAX_SCHEMA_CHARS else ""


def schema_from_metadata(metadata: Mapping[str, str]) -> dict[str, Any] | None:
    """The schema a request carries, or None (absent, too big, not a JSON object)."""
    text = metadata.get(SCHEMA_KEY, "")
    if not text or len(text) > MAX_SCHEMA_CHARS:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def check_args(schema: Mapping[str, Any], args: Mapping[str, Any], *, tool: str = "the tool") -> ArgsProblem | None:
    """None when ``args`` fit ``schema``; else the first problem, naming the field."""
    problem = _check(schema, dict(args), "", 0)
    if problem is None:
        return None
    field, text = problem
    where = f"{field!r}" if field else "the arguments"
    return ArgsProblem(field=field, message=f"{where} {text} (checked against {tool}'s parameters)")


def edit_problem(
    kind: str, metadata: Mapping[str, str], edited: Mapping[str, Any], *, tool: str = ""
) -> ArgsProblem | None:
    """What a decider outside the agent can tell about ``edited`` from the request alone (None = nothing wrong seen)."""
    if kind == "task" or metadata.get(EDITABLE_KEY) == "no":
        what = "a task approval" if kind == "task" else f"{tool or 'this tool'}'s approval"
        return ArgsProblem(field="", message=f"{what} takes no edited arguments: approve or reject it as asked")
    schema = schema_from_metadata(metadata)
    if schema is None:
        return None
    return check_args(schema, edited, tool=tool or "the tool")


# -- the checker ---------------------------------------------------------------------------------------------------
_Problem = tuple[str, str]  # (field path, what is wrong with it)

_TYPE_WORDS = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _is(value: Any, kind: str) -> bool:
    actual = _kind_of(value)
    if kind == "number":
        return actual in ("integer", "number") and (actual == "integer" or math.isfinite(value))
    return actual == kind


def _got(value: Any) -> str:
    return f"got {_kind_of(value)} {shorten(safe_repr(value), 60)}"


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _types(schema: Mapping[str, Any]) -> list[str] | None:
    raw = schema.get("type")
    names = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else None
    if names is None:
        return None
    kinds = [n.lower() for n in names if isinstance(n, str) and n.lower() in _TYPE_WORDS]
    if not kinds:
        return None
    if schema.get("nullable") is True and "null" not in kinds:
        kinds.append("null")
    return kinds


def _check(schema: Any, value: Any, path: str, depth: int) -> _Problem | None:
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return None  # true/false schemas, or nested too deep to be worth checking: the agent checks
    if value is None and schema.get("nullable") is True:
        return None
    kinds = _types(schema)
    if kinds is not None and not any(_is(value, k) for k in kinds):
        want = " or ".join(_TYPE_WORDS[k] for k in kinds)
        return path, f"must be {want}, {_got(value)}"
    if "const" in schema and value != schema["const"]:
        return path, f"must be {shorten(safe_repr(schema['const']), 60)}, {_got(value)}"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and not any(_same(value, option) for option in enum):
        options = ", ".join(shorten(safe_repr(o), 40) for o in enum[:10]) + (", …" if len(enum) > 10 else "")
        return path, f"must be one of {options}; {_got(value)}"
    problem = _bounds(schema, value, path)
    if problem is not None:
        return problem
    if isinstance(value, Mapping):
        problem = _object(schema, value, path, depth)
    elif isinstance(value, list | tuple):
        problem = _array(schema, value, path, depth)
    if problem is not None:
        return problem
    return _combinators(schema, value, path, depth)


def _same(value: Any, option: Any) -> bool:
    if isinstance(value, bool) or isinstance(option, bool):  # True == 1 in Python, not in JSON
        return isinstance(value, bool) and isinstance(option, bool) and value == option
    return bool(value == option)


def _count(schema: Mapping[str, Any], key: str) -> int | None:
    value = schema.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_BOUNDS = (
    ("minimum", "at least"),
    ("maximum", "at most"),
    ("exclusiveMinimum", "more than"),
    ("exclusiveMaximum", "less than"),
)


def _bounds(schema: Mapping[str, Any], value: Any, path: str) -> _Problem | None:
    if _is(value, "number"):
        for key, words in _BOUNDS:
            bound = schema.get(key)
            if not _is(bound, "number"):
                continue
            inside = {
                "minimum": value >= bound,
                "maximum": value <= bound,
                "exclusiveMinimum": value > bound,
                "exclusiveMaximum": value < bound,
            }[key]
            if not inside:
                return path, f"must be {words} {bound}, got {shorten(safe_repr(value), 60)}"
    if isinstance(value, str):
        low, high = _count(schema, "minLength"), _count(schema, "maxLength")
        if low is not None and len(value) < low:
            return path, f"must be at least {low} characters long, got {len(value)}"
        if high is not None and len(value) > high:
            return path, f"must be at most {high} characters long, got {len(value)}"
    return None


def _object(schema: Mapping[str, Any], value: Mapping[str, Any], path: str, depth: int) -> _Problem | None:
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if isinstance(name, str) and name not in value:
            return _join(path, name), "is required and missing"
    extra = schema.get("additionalProperties")
    for key in value:
        name = str(key)
        if name in props:
            continue
        if extra is False:
            takes = ", ".join(sorted(str(p) for p in props)) or "none"
            return _join(path, name), f"is not a parameter of this tool (it takes: {shorten(takes, 300)})"
        if isinstance(extra, Mapping):
            problem = _check(extra, value[key], _join(path, name), depth + 1)
            if problem is not None:
                return problem
    for key, item in value.items():
        sub = props.get(str(key))
        if sub is not None:
            problem = _check(sub, item, _join(path, str(key)), depth + 1)
            if problem is not None:
                return problem
    return None


def _array(schema: Mapping[str, Any], value: list[Any] | tuple[Any, ...], path: str, depth: int) -> _Problem | None:
    low, high = _count(schema, "minItems"), _count(schema, "maxItems")
    if low is not None and len(value) < low:
        return path, f"must have at least {low} items, got {len(value)}"
    if high is not None and len(value) > high:
        return path, f"must have at most {high} items, got {len(value)}"
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            problem = _check(items, item, _join(path, index), depth + 1)
            if problem is not None:
                return problem
    return None


def _combinators(schema: Mapping[str, Any], value: Any, path: str, depth: int) -> _Problem | None:
    for part in schema.get("allOf") or []:
        problem = _check(part, value, path, depth + 1)
        if problem is not None:
            return problem
    for key in ("anyOf", "oneOf"):  # oneOf is checked as anyOf: telling which branch is the agent's business
        options = schema.get(key)
        if not isinstance(options, list) or not options:
            continue
        problems = [_check(option, value, path, depth + 1) for option in options]
        if all(p is not None for p in problems):
            first = problems[0]
            assert first is not None
            if len(problems) == 1:
                return first
            return first[0], f"fits none of the {len(problems)} allowed shapes: {first[1]}"
    return None
