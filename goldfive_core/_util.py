"""Small helpers shared by the core modules (ids, clocks, canonical JSON)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def fact(*, kw_only: bool = False, slots: bool = True) -> Callable[[type[_T]], type[_T]]:
    """A value that is a fact (a decision, its outcome, an ack): frozen for the type checker, which refuses any
    assignment to its fields, and hashable by them, as a frozen dataclass is.

    At run time it is built as a plain dataclass. A runtime-frozen one sets each field through
    ``object.__setattr__``, and on the path from a person's APPROVE to the tool body, where every value is built
    with the machine's caches cold (the host ran between two approvals), that cost 5-9 us per value, about a fifth
    of goldfive's share of the window (``bench/adk_overhead.py``, part 2b). A plain dataclass stores its fields
    directly.
    """

    def make(cls: type[_T]) -> type[_T]:
        return dataclasses.dataclass(cls, kw_only=kw_only, slots=slots, unsafe_hash=True)

    return make


def new_id(prefix: str) -> str:
    """A short unique id such as ``run-3f2a9c0b1d7e`` (48 random bits)."""
    # os.urandom directly: the same 12 hex digits as uuid4().hex[:12] at a quarter of the cost (one per event).
    return f"{prefix}-{os.urandom(6).hex()}"


def now_ms() -> int:
    """Wall-clock time in milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces); raises TypeError for non-JSON values, ValueError for
    NaN/Infinity and for nesting too deep to encode (never RecursionError)."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except RecursionError:
        raise ValueError("the value nests too deeply to be encoded as JSON") from None


def args_digest(tool_name: str, args: Any) -> str:
    """``sha256:<hex>`` of a tool name and its canonical JSON arguments."""
    body = f"{tool_name}\n{canonical_json(args)}".encode()
    return "sha256:" + hashlib.sha256(body).hexdigest()


def shorten(text: str, limit: int = 200) -> str:
    """Clip a string for use inside an error message."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def safe_repr(value: object, limit: int = 200) -> str:
    """``repr(value)`` clipped for an error message; never raises (a broken ``__repr__``, a huge int)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"<an integer of {value.bit_length()} bits>"  # repr() of a huge int raises ValueError
    try:
        text = repr(value)
    except Exception:
        return f"<a {type(value).__name__} whose repr() failed>"
    return shorten(text, limit)


def env_seconds(name: str, default: float, *, low: float = 0.0, high: float = 3600.0, zero_ok: bool = False) -> float:
    """A duration from environment variable ``name``: ``default`` when unset, or (with a warning naming the
    variable) when it is not a number of seconds in ``(low, high]`` (``[low, high]`` with ``zero_ok``) —
    nan and inf included. A bad setting never stops an agent."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if (low <= value <= high) if zero_ok else (low < value <= high):
        return value
    logging.getLogger("goldfive_core").warning(
        "%s=%r is not %g..%g seconds; using %g", name, shorten(text, 40), low, high, default
    )
    return default


REVIEWER_PREFIX = "reviewer:"
"""How a policy rule's reviewer is named as a decider (``reviewer:<name>``); a person's name never holds a colon."""
