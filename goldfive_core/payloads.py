"""Parsing control-message payloads: the one place a payload's keys are read and checked.

Every function raises :class:`BadPayload` (or ValueError, where noted) with words fit for a
FAILURE ack: the key, what it should be, what came.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from ._util import canonical_json, safe_repr
from .approvals import Decision, reviewer_claim
from .control import ControlKind
from .errors import BadPayload

__all__ = [
    "MAX_DEADLINE_S",
    "MAX_TEXT",
    "BadPayload",
    "decision_from_payload",
    "escalation_deadline_s",
    "text_field",
]

MAX_TEXT = 65_536
"""Longest free text (detail, steer text) a control message may carry."""


def text_field(payload: Mapping[str, Any], key: str, *, required: bool = False) -> str:
    """``payload[key]`` as a string ("" when absent); raises BadPayload for a wrong type, size or emptiness."""
    value = payload.get(key)
    if value is None:
        if required:
            raise BadPayload(f"missing {key}: payload[{key!r}] must be a non-empty string")
        return ""
    if not isinstance(value, str):
        raise BadPayload(f"payload[{key!r}] must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise BadPayload(f"missing {key}: payload[{key!r}] is empty")
    if len(value) > MAX_TEXT:
        raise BadPayload(f"payload[{key!r}] is {len(value)} characters; the limit is {MAX_TEXT}")
    return value


def decision_from_payload(kind: ControlKind, payload: Mapping[str, Any]) -> tuple[str, Decision]:
    """Parse an APPROVE/REJECT payload; raises ValueError with a message fit for an ack."""
    get = payload.get
    target_id, detail, decided_by, digest, channel, request_id = (
        get("target_id"),
        get("detail"),
        get("decided_by"),
        get("args_digest"),
        get("channel"),
        get("request_id"),
    )
    if detail is None or (isinstance(detail, str) and not detail):  # an empty detail: the reason, if any
        detail = get("reason")
    # Every decision passes here while an agent waits: plain strings within the limit are taken as they are,
    # and anything else goes through text_field(), which says what is wrong (the same checks, one call each).
    plain = isinstance(target_id, str) and len(target_id) <= MAX_TEXT and target_id.strip() != ""
    for value in (detail, decided_by, digest, channel, request_id):
        if value is not None and (not isinstance(value, str) or len(value) > MAX_TEXT):
            plain = False
    if not plain:
        try:
            target_id = text_field(payload, "target_id", required=True)
            detail = text_field(payload, "detail") or text_field(payload, "reason")
            decided_by = text_field(payload, "decided_by")
            digest = text_field(payload, "args_digest")
            channel = text_field(payload, "channel")
            request_id = text_field(payload, "request_id")
        except BadPayload as exc:
            raise ValueError(f"{kind.value}: {exc}") from None
    assert isinstance(target_id, str)
    # Neither who decided nor the channel said: no claim to refuse (reviewer_claim("", "") is "").
    forged = reviewer_claim(decided_by, channel) if decided_by or channel else ""
    if forged:  # a reviewer's verdict never arrives by a channel: it is taken in the agent's own gate only
        raise ValueError(f"{kind.value}: refused: {forged}")
    if type(payload) is dict and payload.keys().isdisjoint(_RARE_KEYS):
        # The common shape (no edit, no stated quorum, no answer): what the fields below give when they are absent.
        return target_id, Decision(
            approved=kind is ControlKind.APPROVE,
            detail=detail or "",
            decided_by=decided_by or "",
            args_digest=digest or "",
            decided_at_ms=time.time_ns() // 1_000_000,  # now_ms(), inline: the APPROVE's path to the body
            channel=channel or "",
            request_id=request_id or "",
        )
    edited = payload.get("edited_args")
    if edited is not None:
        if kind is not ControlKind.APPROVE:
            raise ValueError("REJECT: edited_args only go with APPROVE")
        if not isinstance(edited, Mapping):
            raise ValueError(f"APPROVE: payload['edited_args'] must be an object, got {type(edited).__name__}")
        try:
            canonical_json(edited)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"APPROVE: edited_args are not JSON: {exc}") from None
        edited = dict(edited)
    quorum = _quorum_field(payload, kind)
    return target_id, Decision(
        approved=kind is ControlKind.APPROVE,
        detail=detail or "",
        decided_by=decided_by or "",
        edited_args=edited,
        args_digest=digest or "",
        channel=channel or "",
        request_id=request_id or "",
        quorum=quorum,
        quorum_reject=_quorum_reject_field(payload, kind, quorum),
        answer=_answer_field(payload, kind),
    )


_RARE_KEYS = frozenset({"edited_args", "quorum", "quorum_reject", "answer"})
"""The keys of a decision's payload that only some decisions carry (each read and checked when present)."""


def _answer_field(payload: Mapping[str, Any], kind: ControlKind) -> str:
    """A rejection's ``answer``: ``"cancel"`` (an input request dismissed rather than declined) or ``""``."""
    value = payload.get("answer")
    if value is None or value == "":
        return ""
    if value != "cancel" or kind is not ControlKind.REJECT:
        raise ValueError(f"{kind.value}: payload['answer'] may only be 'cancel', with REJECT, got {safe_repr(value)}")
    return "cancel"


_MAX_STATED_QUORUM = 20  # the policy's MAX_QUORUM; this module does not import the policy package


def _quorum_field(payload: Mapping[str, Any], kind: ControlKind) -> int:
    """The quorum a decision states (the deciding server's rule; 0 = not stated); raises ValueError when it is bad."""
    value = payload.get("quorum")
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= _MAX_STATED_QUORUM:
        raise ValueError(
            f"{kind.value}: payload['quorum'] must be a whole number in 2..{_MAX_STATED_QUORUM}, got {safe_repr(value)}"
        )
    return value


def _quorum_reject_field(payload: Mapping[str, Any], kind: ControlKind, quorum: int) -> str:
    """The deciding server's ``reject`` mode with its quorum: ``"counts"`` or ``""`` (a rejection ends the request)."""
    value = payload.get("quorum_reject")
    if value is None:
        return ""
    if value != "counts" or not quorum:
        raise ValueError(
            f"{kind.value}: payload['quorum_reject'] may only be 'counts', with a stated quorum, got {safe_repr(value)}"
        )
    return "counts"


def escalation_deadline_s(escalation: Mapping[str, Any]) -> float | None:
    """A GOLDFIVE_PAUSE_ESCALATE payload's ``deadline_s`` (None = none); raises ValueError when it is bad."""
    value = escalation.get("deadline_s")
    if value is None:
        return None
    # Compare before math.isfinite(): a huge int overflows float conversion.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 < value <= MAX_DEADLINE_S
        or not math.isfinite(value)
    ):
        raise ValueError(
            f"payload['deadline_s'] must be a positive number of seconds (at most {MAX_DEADLINE_S}), "
            f"got {safe_repr(value)}"
        )
    return float(value)


MAX_DEADLINE_S = 366 * 24 * 3600
"""A year: longer deadlines overflow the event loop's clock arithmetic for no benefit."""
