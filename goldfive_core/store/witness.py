"""The audit chain rows a call appended, so that ``goldfive serve`` can vouch for what it wrote itself.

A database writer can rewrite any row after the newest signed checkpoint and recompute the chain and its head;
the next checkpoint would then sign the rewrite. What the server wrote itself (a grant revocation, a refusal,
a ledger change an agent asked for over HTTP, a decision it recorded, its own alarms) it can hold to what it
wrote: :func:`witnessed` runs a store call and returns, with its result, every row the call appended on this
thread (:class:`Appended`: the row's number, event id, kind and the SHA-256 of its body), which the
checkpoint writer keeps until a checkpoint covers them and checks before it signs (see
:meth:`~goldfive_core.store.checkpoint.CheckpointWriter.vouch_events`).

A row is noted when it is inserted, before its transaction commits: a call that retried after a rolled-back
attempt also returns the rows of that attempt, which the checkpoint writer drops when it reads them back.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
from collections.abc import Callable
from typing import ParamSpec, TypeVar

__all__ = ["Appended", "note_appended", "witnessed"]

P = ParamSpec("P")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Appended:
    """One audit chain row as it was appended."""

    seq: int
    event_id: str
    kind: str
    body_sha256: str
    """Hex SHA-256 of the row's body (the event's canonical bytes): what its rewrite changes, wherever it moved."""


_NOTED: contextvars.ContextVar[list[Appended] | None] = contextvars.ContextVar("goldfive_chain_noted", default=None)


def note_appended(seq: int, event_id: str, kind: str, body: bytes) -> None:
    """Called by the chain's writer for every row it inserts: noted when a :func:`witnessed` call is under way."""
    noted = _NOTED.get()
    if noted is not None:
        noted.append(Appended(seq, event_id, kind, hashlib.sha256(body).hexdigest()))


def witnessed(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> tuple[T, tuple[Appended, ...]]:
    """``fn(*args, **kwargs)`` and the rows it appended to the audit chain on this thread, oldest first."""
    outer = _NOTED.get()
    noted: list[Appended] = []
    token = _NOTED.set(noted)
    try:
        result = fn(*args, **kwargs)
    finally:
        _NOTED.reset(token)
        if outer is not None:  # a witnessed call inside another: the outer one sees these rows too
            outer.extend(noted)
    return result, tuple(noted)
