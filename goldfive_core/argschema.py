"""A tool's parameter schema, carried with its approval request, and the check of a person's edited arguments.

The agent knows what its tools take (ADK's function declarations, Claude tools' input schemas). The
adapters put that JSON Schema on the request (metadata ``args_schema``, canonical JSON, at most
:data:`MAX_SCHEMA_CHARS`), so whoever decides from outside — ``goldfive serve``, the ``goldfive``
command — can refuse an edit that does not fit before it reaches the agent, and say which field is
wrong. Every adapter checks the edit with the same checker against the same schema (:func:`edit_validator`,
handed to the gate), so the inbox, the command line and the agent never disagree about one edit.

:func:`check_args` understands the part of JSON Schema tools' parameters use (``type``, ``properties``,
``required``, ``additionalProperties``, ``enum``, ``const``, ``items``, ``prefixItems``, ``anyOf`` /
``oneOf`` / ``allOf``, local ``$ref`` (``#/$defs/...``), number and length bounds, ``multipleOf``,
``uniqueItems``, ``minProperties`` / ``maxProperties``, ``dependentRequired``, OpenAPI's ``nullable`` and
upper-case type names). Keywords it does not know are not checked, so it never refuses an edit the whole
schema would take; ``pattern`` is one of them on purpose: a regular expression from an agent's request is
not run by the server (catastrophic backtracking would hold its worker). :func:`schema_problem` tells
whether a schema is readable at all (an adapter's configuration check).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

from ._util import canonical_json, safe_repr, shorten
from .limits import LimitError, Limits, check_json_depth

__all__ = [
    "EDITABLE_KEY",
    "MAX_SCHEMA_CHARS",
    "SCHEMA_KEY",
    "ArgsProblem",
    "ProblemKind",
    "Words",
    "check_args",
    "edit_problem",
    "edit_validator",
    "object_problem",
    "schema_from_metadata",
    "schema_json",
    "schema_problem",
]

MAX_SCHEMA_CHARS = 16_384
"""A larger schema is not carried (the request still goes out; only the agent checks edits then)."""

SCHEMA_KEY = "args_schema"
"""The request metadata key that carries the schema."""

EDITABLE_KEY = "args_editable"
"""The request metadata key that says ``"no"`` when the agent takes no edited arguments for this call."""

_MAX_DEPTH = 32


ProblemKind = Literal["unknown", "missing", "type", "value"]
"""What is wrong: a key the schema does not take, a required key missing, a value of the wrong type, or any
other mismatch (bounds, enum, shape)."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ArgsProblem:
    """Why edited arguments do not fit: the first wrong ``field`` (a path such as ``items[0].sku``) and a sentence."""

    field: str
    message: str
    kind: ProblemKind = "value"
    fields: tuple[str, ...] = ()
    """For ``unknown`` and ``missing``: every field beside ``field`` with the same problem, at the same level."""
    detail: str = ""
    """The sentence without the field and the schema named (``message`` is the whole one)."""

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


def schema_from_metadata(metadata: Mapping[str, str], *, key: str = SCHEMA_KEY) -> dict[str, Any] | None:
    """The schema a request carries (under ``key``), or None (absent, too big, not a JSON object)."""
    text = metadata.get(key, "")
    if not text or len(text) > MAX_SCHEMA_CHARS:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def check_args(
    schema: Mapping[str, Any], args: Mapping[str, Any], *, tool: str = "the tool", against: str = "parameters"
) -> ArgsProblem | None:
    """None when ``args`` fit ``schema``; else the first problem, naming the field (``against``: what the
    message calls the schema, e.g. "input schema")."""
    problem = _check(schema, dict(args), "", 0, _Root(schema))
    if problem is None:
        return None
    field = problem.path
    where = f"{field!r}" if field else "the arguments"
    return ArgsProblem(
        field=field,
        message=f"{where} {problem.text} (checked against {tool}'s {against})",
        kind=problem.kind,
        fields=problem.fields or ((field,) if problem.kind in ("unknown", "missing") else ()),
        detail=problem.text,
    )


def object_problem(edited: object) -> str | None:
    """Whether ``edited`` can be a call's arguments at all: a JSON object with string keys, within the limits."""
    if not isinstance(edited, Mapping):
        return f"edited arguments must be a JSON object, got {type(edited).__name__}"
    bad = [k for k in edited if not isinstance(k, str)]
    if bad:
        return f"edited arguments must have string keys, got {safe_repr(bad[0], 40)}"
    limits = Limits.from_env()
    try:
        check_json_depth(edited, limits.max_json_depth, what="edited arguments")
        text = canonical_json(dict(edited))
        limits.check_text("edited arguments", text, limits.max_edit_chars)
    except LimitError as exc:
        return str(exc)
    except (TypeError, ValueError) as exc:
        return f"edited arguments are not JSON: {shorten(str(exc), 120)}"
    return None


Words = Callable[[ArgsProblem, Mapping[str, Any]], str]
"""How an adapter words a problem for its host (given the problem and the edited arguments)."""


def edit_validator(
    schema: Mapping[str, Any] | None,
    *,
    tool: str = "the tool",
    against: str = "parameters",
    words: Words | None = None,
) -> Callable[[Mapping[str, Any]], str | None]:
    """The agent's check of a person's edited arguments, for the gate: the one checker of every adapter.

    An edit must be a JSON object (:func:`object_problem`) that fits ``schema`` (:func:`check_args`; with no
    schema any object fits). The same schema travels on the request, so a decider outside the agent refuses
    exactly what this refuses. ``words`` phrases a problem in the adapter's words (default: ``message``).
    """

    def validate(edited: Mapping[str, Any]) -> str | None:
        bad = object_problem(edited)
        if bad is not None or schema is None:
            return bad
        problem = check_args(schema, edited, tool=tool, against=against)
        if problem is None:
            return None
        return problem.message if words is None else words(problem, edited)

    return validate


def schema_problem(schema: object) -> str | None:
    """Why ``schema`` is not a JSON Schema the checker can read (None = it is): bad types, keywords of the
    wrong shape, a pattern that does not compile."""
    return _schema_problem(schema, "", 0)


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
class _Problem(NamedTuple):
    path: str
    text: str
    kind: ProblemKind = "value"
    fields: tuple[str, ...] = ()


class _Root:
    """The whole schema, for local ``$ref`` ("#", "#/$defs/Line", any JSON pointer into it)."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema

    def resolve(self, ref: object) -> Any:
        """The schema ``ref`` points to, or None (not local, or not there: not checked)."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        node: Any = self.schema
        for raw in ref[1:].split("/")[1:] if ref != "#" else []:
            key = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return None
        return node


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


def _check(schema: Any, value: Any, path: str, depth: int, root: _Root) -> _Problem | None:
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return None  # true/false schemas, or nested too deep to be worth checking: the agent checks
    if value is None and schema.get("nullable") is True:
        return None
    kinds = _types(schema)
    if kinds is not None and not any(_is(value, k) for k in kinds):
        want = " or ".join(_TYPE_WORDS[k] for k in kinds)
        return _Problem(path, f"must be {want}, {_got(value)}", "type")
    if "const" in schema and not _same(value, schema["const"]):
        return _Problem(path, f"must be {shorten(safe_repr(schema['const']), 60)}, {_got(value)}")
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and not any(_same(value, option) for option in enum):
        options = ", ".join(shorten(safe_repr(o), 40) for o in enum[:10]) + (", …" if len(enum) > 10 else "")
        return _Problem(path, f"must be one of {options}; {_got(value)}")
    for step in (_bounds, _size):
        problem = step(schema, value, path)
        if problem is not None:
            return problem
    if isinstance(value, Mapping):
        problem = _object(schema, value, path, depth, root)
    elif isinstance(value, list | tuple):
        problem = _array(schema, value, path, depth, root)
    if problem is not None:
        return problem
    if "$ref" in schema:
        problem = _check(root.resolve(schema["$ref"]), value, path, depth + 1, root)
        if problem is not None:
            return problem
    return _combinators(schema, value, path, depth, root)


def _same(value: Any, option: Any) -> bool:
    """JSON equality: true is not 1 (as it is in Python), 1 is 1.0, and containers compare item by item."""
    if isinstance(value, bool) or isinstance(option, bool):
        return isinstance(value, bool) and isinstance(option, bool) and value == option
    if isinstance(value, Mapping) and isinstance(option, Mapping):
        return value.keys() == option.keys() and all(_same(value[k], option[k]) for k in value)
    if isinstance(value, list | tuple) and isinstance(option, list | tuple):
        return len(value) == len(option) and all(_same(a, b) for a, b in zip(value, option, strict=True))
    if isinstance(value, Mapping | list | tuple) or isinstance(option, Mapping | list | tuple):
        return False
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
    if not _is(value, "number"):
        return None
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
            return _Problem(path, f"must be {words} {bound}, got {shorten(safe_repr(value), 60)}")
    step = schema.get("multipleOf")
    if isinstance(step, int | float) and _is(step, "number") and step > 0 and not _multiple(value, step):
        return _Problem(path, f"must be a multiple of {step}, got {shorten(safe_repr(value), 60)}")
    return None


def _multiple(value: float, step: float) -> bool:
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    quotient = value / step
    return math.isfinite(quotient) and abs(quotient - round(quotient)) < 1e-9


_SIZES = {
    "string": ("minLength", "maxLength", "be {} {} characters long"),
    "array": ("minItems", "maxItems", "have {} {} items"),
    "object": ("minProperties", "maxProperties", "have {} {} keys"),
}


def _size(schema: Mapping[str, Any], value: Any, path: str) -> _Problem | None:
    """The length of a string, the items of an array, the keys of an object, against their bounds."""
    sizes = _SIZES.get(_kind_of(value))
    if sizes is None:
        return None
    low_key, high_key, words = sizes
    low, high = _count(schema, low_key), _count(schema, high_key)
    if low is not None and len(value) < low:
        return _Problem(path, f"must {words.format('at least', low)}, got {len(value)}")
    if high is not None and len(value) > high:
        return _Problem(path, f"must {words.format('at most', high)}, got {len(value)}")
    return None


def _object(schema: Mapping[str, Any], value: Mapping[str, Any], path: str, depth: int, root: _Root) -> _Problem | None:
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    # Keys matching patternProperties are the agent's to judge (no pattern is run here): never "unknown".
    extra = None if isinstance(schema.get("patternProperties"), Mapping) else schema.get("additionalProperties")
    unknown = [str(k) for k in value if str(k) not in props]
    if unknown and extra is False:  # first: a misspelt key is named as such, not as the key it should have been
        takes = ", ".join(sorted(str(p) for p in props)) or "none"
        text = f"is not a parameter of this tool (it takes: {shorten(takes, 300)})"
        return _Problem(_join(path, unknown[0]), text, "unknown", _paths(path, unknown))
    required = schema.get("required")
    missing = [n for n in (required if isinstance(required, list) else []) if isinstance(n, str) and n not in value]
    if missing:
        return _Problem(_join(path, missing[0]), "is required and missing", "missing", _paths(path, missing))
    problem = _needs(schema, value, path)
    if problem is not None:
        return problem
    for key, item in value.items():
        name = str(key)
        sub = props.get(name) if name in props else extra if isinstance(extra, Mapping) else None
        if sub is not None:
            problem = _check(sub, item, _join(path, name), depth + 1, root)
            if problem is not None:
                return problem
    return None


def _paths(path: str, names: list[str]) -> tuple[str, ...]:
    return tuple(_join(path, name) for name in names)


def _needs(schema: Mapping[str, Any], value: Mapping[str, Any], path: str) -> _Problem | None:
    """``dependentRequired``: a key that needs others beside it."""
    needs = schema.get("dependentRequired")
    if not isinstance(needs, Mapping):
        return None
    for key, others in needs.items():
        if key in value and isinstance(others, list):
            gone = [o for o in others if isinstance(o, str) and o not in value]
            if gone:
                return _Problem(_join(path, gone[0]), f"is required with {key!r} and missing", "missing")
    return None


def _array(
    schema: Mapping[str, Any], value: list[Any] | tuple[Any, ...], path: str, depth: int, root: _Root
) -> _Problem | None:
    if schema.get("uniqueItems") is True:
        for index, item in enumerate(value):
            if any(_same(item, earlier) for earlier in value[:index]):
                return _Problem(_join(path, index), f"repeats an earlier item; the items must be unique, {_got(item)}")
    prefix = schema.get("prefixItems")
    prefix = prefix if isinstance(prefix, list) else []
    items = schema.get("items")
    for index, item in enumerate(value):
        sub = prefix[index] if index < len(prefix) else items if isinstance(items, Mapping) else None
        if sub is None and items is False and index >= len(prefix):
            return _Problem(_join(path, index), f"is one item too many (at most {len(prefix)})")
        problem = _check(sub, item, _join(path, index), depth + 1, root)
        if problem is not None:
            return problem
    return None


def _combinators(schema: Mapping[str, Any], value: Any, path: str, depth: int, root: _Root) -> _Problem | None:
    for part in schema.get("allOf") or []:
        problem = _check(part, value, path, depth + 1, root)
        if problem is not None:
            return problem
    # oneOf is checked as anyOf: a branch whose keywords are not all checked here could fit when it does not,
    # and "more than one fits" would then refuse an edit the whole schema takes.
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if not isinstance(options, list) or not options:
            continue
        problems = [_check(option, value, path, depth + 1, root) for option in options]
        if all(p is not None for p in problems):
            first = problems[0]
            assert first is not None
            if len(problems) == 1:
                return first
            return _Problem(first.path, f"fits none of the {len(problems)} allowed shapes: {first.text}")
    return None


# -- is it a schema at all -----------------------------------------------------------------------------------------
_SUBSCHEMA = ("additionalProperties", "items", "not", "if", "then", "else", "contains", "propertyNames")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def _schema_problem(schema: object, where: str, depth: int) -> str | None:
    if isinstance(schema, bool) or depth > _MAX_DEPTH:
        return None
    if not isinstance(schema, Mapping):
        return f"{where or 'the schema'} must be an object or a boolean, got {shorten(safe_repr(schema), 60)}"
    at = where or "the top level"
    problem = _keyword_problem(schema, at)
    if problem is not None:
        return problem
    for key in _SUBSCHEMA:
        if key in schema and (problem := _schema_problem(schema[key], f"{where}/{key}", depth + 1)):
            return problem
    for key in _SCHEMA_MAPS:
        if key in schema:
            sub = schema[key]
            if not isinstance(sub, Mapping):
                return f"{key!r} at {at} must be an object of schemas"
            for name, part in sub.items():
                if problem := _schema_problem(part, f"{where}/{key}/{name}", depth + 1):
                    return problem
    for key in _SCHEMA_LISTS:
        if key in schema:
            parts = schema[key]
            if not isinstance(parts, list) or (key != "prefixItems" and not parts):
                return f"{key!r} at {at} must be a non-empty array of schemas"
            for index, part in enumerate(parts):
                if problem := _schema_problem(part, f"{where}/{key}/{index}", depth + 1):
                    return problem
    return None


def _keyword_problem(schema: Mapping[str, Any], at: str) -> str | None:
    kind = schema.get("type")
    names = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) and kind else None
    if "type" in schema and (names is None or not all(isinstance(n, str) and n in _TYPE_WORDS for n in names)):
        return f"'type' at {at} must be one of {', '.join(_TYPE_WORDS)} (or a list of them), got {safe_repr(kind, 60)}"
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(n, str) for n in required):
        return f"'required' at {at} must be an array of strings, got {safe_repr(required, 60)}"
    if "enum" in schema and not isinstance(schema["enum"], list):
        return f"'enum' at {at} must be an array, got {safe_repr(schema['enum'], 60)}"
    for key in _COUNTS:
        if key in schema and not (_count(schema, key) is not None and schema[key] >= 0):
            return f"{key!r} at {at} must be a whole number of at least 0, got {safe_repr(schema[key], 60)}"
    for key in _NUMBERS:
        if key in schema and not _is(schema[key], "number"):
            return f"{key!r} at {at} must be a number, got {safe_repr(schema[key], 60)}"
    if "$ref" in schema and not isinstance(schema["$ref"], str):
        return f"'$ref' at {at} must be a string, got {safe_repr(schema['$ref'], 60)}"
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except (TypeError, re.error) as exc:
            return f"'pattern' at {at} is not a regular expression ({exc})"
    return None
