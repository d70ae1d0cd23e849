"""Text as a goldfive store holds it: NUL (U+0000) becomes ``␀`` (U+2400 SYMBOL FOR NULL).

PostgreSQL ``TEXT`` cannot hold NUL, so every store keeps it as ``␀`` (SQLite too, so both hold the
same; see :mod:`goldfive_core.store`). An id a model names (a task id) is taken in this form from the
start, so the id a person sees and decides on is the id the run waits on.
"""

from __future__ import annotations

__all__ = ["NUL_MARK", "storable"]

NUL_MARK = "\u2400"
"""What a NUL (U+0000) is stored and shown as: ``␀``, visible in a terminal and a browser alike."""


def storable(text: str) -> str:
    """``text`` as a store holds it (every NUL replaced by :data:`NUL_MARK`)."""
    return text.replace("\x00", NUL_MARK) if "\x00" in text else text
