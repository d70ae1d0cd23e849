"""A run's steps as its host saw them (model text, tool calls and their results), clipped, for an approver.

An adapter that sees its host's steps (ADK's events, Claude's messages, the MCP gateway's calls) notes each
with :func:`record_step`: kept in memory, the last :data:`STEPS_KEPT` only, which costs next to nothing per step.
When the run asks a person, the steps noted since its last ask go on the run's record first (``RunStep``
events, just before the ``ApprovalRequested``), each clipped to :data:`STEP_TEXT_LIMIT` characters, so the
card can say what led to the request. Never a whole argument or result: those stay with the tool, and the
record holds no more of them than a person reads on a card. A run that never asks records no step.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from ._util import safe_repr, shorten
from .pb.v1 import events_pb2

if TYPE_CHECKING:
    from .session import Session

__all__ = [
    "STEPS_KEPT",
    "STEP_TEXT_LIMIT",
    "USER_TEXT_LIMIT",
    "Step",
    "StepKind",
    "StepLog",
    "clipped_json",
    "record_step",
]

STEP_TEXT_LIMIT = 300
"""Characters of one step's text put on the record."""
USER_TEXT_LIMIT = 1000
"""Characters put on the record of what the person asked (a ``user_text`` step)."""
STEPS_KEPT = 8
"""Steps kept in memory between two asks (the newest); what the person last asked is kept besides."""

_NAME_LIMIT = 200
_ID_LIMIT = 200


class StepKind(StrEnum):
    """What a step was (the ``kind`` of a ``RunStep``)."""

    USER_TEXT = "user_text"
    """What the person asked the agent (a prompt, a new message of the conversation)."""
    MODEL_TEXT = "model_text"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


class Step(NamedTuple):
    """One noted step; ``value`` is text, or what the tool was given or answered (made clipped JSON when recorded)."""

    kind: StepKind
    name: str
    value: object
    call_id: str


def clipped_json(value: object, limit: int = STEP_TEXT_LIMIT) -> str:
    """``value`` as compact JSON (text as itself), clipped to ``limit`` characters; never raises (not JSON: its
    clipped repr)."""
    if isinstance(value, str):
        return shorten(value, limit)
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        text = safe_repr(value, limit)
    return shorten(text, limit)


class StepLog:
    """A run's steps noted since its last ask (the newest :data:`STEPS_KEPT`), and what the person last asked."""

    __slots__ = ("_asked", "_recent")

    def __init__(self) -> None:
        self._recent: deque[Step] = deque(maxlen=STEPS_KEPT)
        self._asked: Step | None = None

    def add(self, step: Step) -> None:
        """Note one step (nothing is serialised or written until the run asks a person)."""
        if step.kind is StepKind.USER_TEXT:
            self._asked = step
        else:
            self._recent.append(step)

    def recent(self) -> tuple[Step, ...]:
        """The steps noted and not yet on the record, oldest first (what the person asked first, when noted)."""
        return ((self._asked,) if self._asked is not None else ()) + tuple(self._recent)

    def flush(self, emit: Callable[[events_pb2.RunStep], object]) -> None:
        """Put the noted steps on the record (``emit`` each as a clipped ``RunStep``), then forget them."""
        steps = self.recent()
        self._asked = None
        self._recent.clear()
        for step in steps:
            limit = USER_TEXT_LIMIT if step.kind is StepKind.USER_TEXT else STEP_TEXT_LIMIT
            emit(
                events_pb2.RunStep(
                    kind=step.kind.value,
                    name=shorten(step.name, _NAME_LIMIT),
                    text=clipped_json(step.value, limit),
                    call_id=shorten(step.call_id, _ID_LIMIT),
                )
            )


def record_step(session: Session, kind: StepKind, *, name: str = "", value: object = "", call_id: str = "") -> None:
    """Note one step of ``session``'s run (put on its record when it next asks a person); empty text is no step."""
    if isinstance(value, str) and kind in (StepKind.MODEL_TEXT, StepKind.USER_TEXT) and not value.strip():
        return
    session.steps.add(Step(kind, name, value, call_id))
