"""Make untrusted text inert for a terminal: escape control characters, shorten long fields visibly.

A model writes Flow A prompts, task ids and tool arguments; printed raw, an
escape sequence can hide part of a request, draw a fake line or retitle the
terminal. :func:`inert` escapes every C0/C1 control character, DEL, and the
Unicode format characters that reorder or hide text (bidi overrides, zero-width
marks), and shortens what is longer than a limit with a marker that says how
much was left out.
"""

from __future__ import annotations

import unicodedata

__all__ = ["inert"]


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _dangerous(ch: str) -> bool:
    code = ord(ch)
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return True
    # Cf (format: bidi overrides, zero-width joiners), Cs (lone surrogates), Co/Cn (private, unassigned),
    # Zl/Zp (line and paragraph separators).
    return unicodedata.category(ch) in ("Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def inert(value: object, limit: int | None = 200) -> str:
    """``value`` as one line of terminal-safe text, at most about ``limit`` characters (None = no limit)."""
    text = value if isinstance(value, str) else str(value)
    cut = ""
    if limit is not None and len(text) > limit:
        cut = f"… [+{len(text) - limit} chars]"
        text = text[:limit]
    if text.isascii() and text.isprintable():
        return text + cut
    return "".join(_escape(ch) if _dangerous(ch) else ch for ch in text) + cut
