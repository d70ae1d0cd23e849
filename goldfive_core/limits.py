"""Size limits on what crosses a boundary: prompts, ids, tool arguments, edits and control payloads.

The model controls a Flow A prompt, its task id and a tool call's arguments; a
person (or a script) controls an edit. Each is bounded so a hostile or broken
caller cannot fill the store, a terminal or a reviewer's screen. Limits are
refused with a message that names the limit, never clipped silently.

Override with :class:`Limits` directly or with ``GOLDFIVE_LIMIT_<FIELD>``
environment variables (:meth:`Limits.from_env`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError, LimitError

__all__ = [
    "MAX_JSON_INT_DIGITS",
    "LimitError",
    "Limits",
    "agent_limits",
    "check_json_depth",
    "check_json_text",
    "parse_json_strict",
    "text_problem",
]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """How big a prompt, id, argument set, edit or control payload may be."""

    max_prompt_chars: int = 65_536
    """A Flow A prompt or a tool call's prompt."""

    max_id_chars: int = 256
    """A target id, task id, run id or control id."""

    max_args_chars: int = 262_144
    """A tool call's arguments as canonical JSON."""

    max_edit_chars: int = 262_144
    """Edited arguments (``approve --edit``) as canonical JSON."""

    max_json_depth: int = 64
    """Nesting depth of arguments, edits and payloads."""

    max_payload_chars: int = 1_048_576
    """A control message's payload as canonical JSON."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{field.name} must be a positive integer, got {value!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Limits:
        """Defaults, overridden by ``GOLDFIVE_LIMIT_<FIELD>`` (e.g. ``GOLDFIVE_LIMIT_MAX_PROMPT_CHARS``)."""
        env = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(f"GOLDFIVE_LIMIT_{field.name.upper()}")
            if raw is None:
                continue
            try:
                values[field.name] = int(raw)
            except ValueError:
                raise ConfigError(
                    f"GOLDFIVE_LIMIT_{field.name.upper()} must be a positive integer, got {raw!r}"
                ) from None
        return cls(**values)

    def check_text(self, what: str, value: str, limit: int) -> None:
        """Raise :class:`LimitError` when ``value`` is longer than ``limit`` characters."""
        if len(value) > limit:
            raise LimitError(f"{what} is {len(value)} characters; the limit is {limit}")


def agent_limits() -> Limits:
    """The limits an agent enforces on what its model sends (``GOLDFIVE_LIMIT_*``).

    Never raises into the agent's loop: a malformed variable is logged and the defaults are used.
    """
    try:
        return Limits.from_env()
    except ConfigError as exc:
        logger.warning("%s; using the default limits", exc)
        return Limits()


def env_name(field: str) -> str:
    """The variable that overrides a limit (``max_args_chars`` -> ``GOLDFIVE_LIMIT_MAX_ARGS_CHARS``)."""
    return f"GOLDFIVE_LIMIT_{field.upper()}"


def check_json_depth(value: Any, limit: int, *, what: str = "the value") -> None:
    """Raise :class:`LimitError` when a JSON-like value nests deeper than ``limit`` (iteratively; no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            raise LimitError(f"{what} nests deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)


MAX_JSON_INT_DIGITS = 40
"""Longest integer :func:`parse_json_strict` accepts (digits): far beyond any 64-bit value, far below the
interpreter's own 4,300-digit refusal, whose message names a setting instead of the number."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (numbers must be finite)")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"the number {text[:40]} is out of range (numbers must be finite)")
    return value


def _short_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_JSON_INT_DIGITS:
        raise ValueError(f"an integer of {digits} digits is too long (at most {MAX_JSON_INT_DIGITS})")
    return int(text)


def check_json_text(value: Any, *, what: str = "the JSON") -> None:
    """Raise ``ValueError`` when a string or key of a parsed JSON value is not text (a lone surrogate from a
    ``\\ud800`` escape): no store, encoder or terminal can hold it. The message names where it is."""
    problem = text_problem(value, what=what)
    if problem:
        raise ValueError(problem)


def text_problem(value: object, *, what: str) -> str:
    """Why a string in ``value`` (itself, or nested in mappings, lists and tuples, keys too) is not text, naming
    where (``what``, then the path to it); ``""`` when every string is text.

    A Python string can hold a lone surrogate (``"\\ud800"``, from a model's output or a JSON escape); UTF-8,
    protobuf, both stores and the terminals cannot. Every boundary that takes text from a model or a sender
    asks this first and answers in words, instead of failing later in an encoder."""
    # Every control message passes here on its way to a run (an APPROVE while an agent waits): a flat dict of ASCII
    # strings (the common payload) is text at a glance; otherwise an ASCII string is text without encoding it, a dict
    # is a Mapping without the ABC's check, and an ASCII string in a mapping is not pushed to be looked at again.
    if type(value) is dict:
        for key, child in value.items():
            if type(key) is not str or type(child) is not str or not key.isascii() or not child.isascii():
                break
        else:
            return ""
    stack: list[tuple[object, str]] = [(value, "")]
    seen: set[int] = set()  # a container met twice (shared, or a cycle a caller built) is walked once
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and not _is_text(item):
                place = f"{what}: {where!r}" if where else what
                return f"{place} is not text: it holds a lone surrogate (\\ud800-\\udfff), which UTF-8 cannot encode"
        elif type(item) is dict or isinstance(item, Mapping):
            if id(item) in seen:
                continue
            seen.add(id(item))
            for key, child in item.items():
                if isinstance(key, str) and not key.isascii() and not _is_text(key):
                    return f"{what} has a key that is not text: a lone surrogate (\\ud800-\\udfff)"
                if type(child) is not str or not child.isascii():
                    stack.append((child, f"{where}.{key}" if where else str(key)))
        elif isinstance(item, list | tuple) and id(item) in seen:
            continue
        elif isinstance(item, list | tuple):
            seen.add(id(item))
            stack.extend((child, f"{where}[{index}]") for index, child in enumerate(item))
    return ""


def _is_text(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_json_strict(text: str, *, limit_chars: int, limit_depth: int, what: str = "the JSON") -> Any:
    """Parse JSON, refusing NaN/Infinity and numbers beyond a float's range, integers of more than
    :data:`MAX_JSON_INT_DIGITS` digits, strings that are not text (lone surrogates), texts over
    ``limit_chars`` and nesting over ``limit_depth``.

    Raises :class:`LimitError` for a size/depth limit and ``ValueError`` for anything that is not JSON.
    """
    if len(text) > limit_chars:
        raise LimitError(f"{what} is {len(text)} characters; the limit is {limit_chars}")
    # Depth is checked on the text first (brackets outside strings), so json.loads never recurses deeply.
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    if deepest > limit_depth:
        raise LimitError(f"{what} nests deeper than {limit_depth} levels")
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_short_int)
    except RecursionError:  # pragma: no cover - the depth check above comes first
        raise LimitError(f"{what} nests too deeply") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON: {exc}") from None
    except ValueError as exc:  # from the number hooks
        raise ValueError(f"{what}: {exc}") from None
    check_json_text(value, what=what)
    return value
