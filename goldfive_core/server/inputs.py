"""What a client sends to ``goldfive serve``, read once: the request body, query integers, and the refusal.

Every route reads its body through :func:`json_body` and its integers through :func:`int_param` /
:func:`seq_param`, so junk is refused the same way everywhere: a body that is too big (413), too slow
(408), not UTF-8, not JSON, nested too deep, holding NaN/Infinity, a number beyond range or a string
that is not text (400), each with a sentence that says what is wrong. The app's exception handler
table turns :class:`ApiError` into ``{"error": ...}`` with its status; nothing here answers a client.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._util import shorten
from ..errors import ApiError
from ..limits import LimitError, parse_json_strict

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = [
    "BODY_TIMEOUT_S",
    "ApiError",
    "int_param",
    "json_body",
    "names_field",
    "only_fields",
    "parse_int",
    "parse_object",
    "refuse_nul",
    "seq_param",
    "text_field",
]

BODY_TIMEOUT_S = 30.0
"""Longest a client may take to send a request's body once its headers arrived (408 beyond)."""

MAX_SEQ = 2**62
"""Largest event seq a client may name (``after``, ``Last-Event-ID``): far beyond any log, within 64 bits."""

_INTEGER = re.compile(r"-?[0-9]{1,19}")
"""ASCII digits only: ``int()`` also takes ``²``-free Unicode digits, ``_`` and spaces, a query must not."""


async def _read(request: Request, *, max_bytes: int, timeout_s: float) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > max_bytes):
        raise ApiError(413, f"the request body is {shorten(declared, 20)} bytes; the limit is {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise ApiError(413, f"the request body is over the limit of {max_bytes} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout_s:g} s ({size} bytes came)") from None
    return b"".join(chunks)


def parse_object(raw: bytes, *, max_depth: int) -> dict[str, Any]:
    """A request body as a JSON object (empty body: ``{}``); :class:`ApiError` 400 for anything else."""
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the request body is not UTF-8 text (byte {exc.start} is not)") from None
    try:
        body = parse_json_strict(text, limit_chars=len(text), limit_depth=max_depth, what="the request body")
    except LimitError as exc:
        raise ApiError(400, f"{exc} (GOLDFIVE_LIMIT_MAX_JSON_DEPTH)") from None
    except ValueError as exc:
        raise ApiError(400, shorten(str(exc), 200)) from None
    if not isinstance(body, dict):
        raise ApiError(400, f"the request body must be a JSON object, got {type(body).__name__}")
    return body


async def json_body(request: Request, *, max_bytes: int, max_depth: int, timeout_s: float) -> dict[str, Any]:
    """Read and parse the body: at most ``max_bytes``, within ``timeout_s``, nested at most ``max_depth``."""
    return parse_object(await _read(request, max_bytes=max_bytes, timeout_s=timeout_s), max_depth=max_depth)


def parse_int(raw: str, what: str, *, low: int, high: int) -> int:
    """``raw`` as an integer in ``[low, high]`` (ASCII digits, optional minus), else :class:`ApiError` 400."""
    if not _INTEGER.fullmatch(raw):
        raise ApiError(400, f"{what} must be an integer, got {shorten(raw, 40)!r}")
    value = int(raw)
    if not low <= value <= high:
        raise ApiError(400, f"{what} must be between {low} and {high}, got {value}")
    return value


def int_param(request: Request, name: str, default: int, *, low: int, high: int) -> int:
    """Query parameter ``name`` as an integer in ``[low, high]``; absent or empty: ``default``."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    return parse_int(raw, f"query parameter {name!r}", low=low, high=high)


def seq_param(request: Request) -> int | None:
    """The event seq to resume after: ``Last-Event-ID``, else ``?after=``; None when neither is given."""
    raw = request.headers.get("last-event-id")
    what = "Last-Event-ID"
    if not raw:
        raw, what = request.query_params.get("after"), "query parameter 'after'"
    if not raw:
        return None
    return parse_int(raw, f"{what} (an event seq)", low=0, high=MAX_SEQ)


def names_field(body: Mapping[str, Any], key: str) -> list[str]:
    """A list of short names in the body (absent = none); 400 for anything else."""
    value = body.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or len(value) > 100:
        raise ApiError(400, f"{key!r} must be a list of names (at most 100)")
    for name in value:
        refuse_nul(key, name)
    return [str(v) for v in value]


def refuse_nul(key: str, value: str) -> None:
    """400 naming ``key`` when a person's text holds NUL: refused, never altered after they sent (and the server
    signed) it. (Text from agents is stored with NUL as ␀ instead, see ``goldfive_core.store``.)"""
    at = value.find("\x00")
    if at >= 0:
        raise ApiError(400, f"{key!r} holds a NUL character (\\u0000, at position {at}), which text may not hold")


def text_field(body: Mapping[str, Any], key: str, *, required: bool = False, limit: int = 4000) -> str:
    """The string at ``key`` ('' when absent and not ``required``), bounded and NUL-free; 400 otherwise."""
    value = body.get(key)
    if value is None:
        if required:
            raise ApiError(400, f"missing {key!r}: a non-empty string is required")
        return ""
    if not isinstance(value, str):
        raise ApiError(400, f"{key!r} must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise ApiError(400, f"{key!r} must not be empty")
    if len(value) > limit:
        raise ApiError(400, f"{key!r} is {len(value)} characters; the limit is {limit}")
    refuse_nul(key, value)
    return value


def only_fields(body: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    """400 naming the fields of ``body`` outside ``allowed``."""
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise ApiError(400, f"unknown field(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}")
