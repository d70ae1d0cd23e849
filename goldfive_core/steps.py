"""A run's steps as its host saw them (model text, tool calls and their results), clipped, for an approver.

An adapter that sees its host's steps (ADK's events, Claude's messages, the MCP gateway's calls) records each
with :func:`record_step`: a ``RunStep`` event on the run's record, at most :data:`STEP_TEXT_LIMIT` characters
of text, so the card of a later request can say what led to it. Never a whole argument or result: those stay
with the tool, and the audit log holds no more of them than a person would read on a card.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import TYPE_CHECKING

from ._util import safe_repr, shorten
from .pb.v1 import events_pb2

if TYPE_CHECKING:
    from .session import Session

__all__ = ["STEP_TEXT_LIMIT", "USER_TEXT_LIMIT", "StepKind", "clipped_json", "record_step"]

STEP_TEXT_LIMIT = 300
"""Characters of one step's text kept on the record."""
USER_TEXT_LIMIT = 1000
"""Characters kept of what the person asked (a ``user_text`` step)."""

_NAME_LIMIT = 200
_ID_LIMIT = 200


class StepKind(StrEnum):
    """What a step was (the ``kind`` of a ``RunStep``)."""

    USER_TEXT = "user_text"
    """What the person asked the agent (a prompt, a new message of the conversation)."""
    MODEL_TEXT = "model_text"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"


def clipped_json(value: object, limit: int = STEP_TEXT_LIMIT) -> str:
    """``value`` as compact JSON, clipped to ``limit`` characters; never raises (not JSON: its clipped repr)."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        text = safe_repr(value, limit)
    return shorten(text, limit)


def record_step(session: Session, kind: StepKind, *, name: str = "", text: str = "", call_id: str = "") -> None:
    """Put one step on the run's record (a ``RunStep`` event), clipped; empty text is no step."""
    if kind in (StepKind.MODEL_TEXT, StepKind.USER_TEXT) and not text.strip():
        return
    limit = USER_TEXT_LIMIT if kind is StepKind.USER_TEXT else STEP_TEXT_LIMIT
    session.events.emit(
        events_pb2.RunStep(
            kind=kind.value,
            name=shorten(name, _NAME_LIMIT),
            text=shorten(text, limit),
            call_id=shorten(call_id, _ID_LIMIT),
        )
    )
