"""Asking a person for input: a form (a small flat schema) answered accept + content, decline or cancel.

Adapter-neutral: an MCP upstream's ``elicitation/create`` (the MCP gateway), or any agent that needs a few
values from a person, calls :func:`ask_for_input`. The question travels as an approval request of kind
``input`` — the same request machinery as every approval: its own request id and digest, a decision that
names it, signatures by ``goldfive serve``, the audit log, the inbox, ``goldfive pending`` — and the answer
comes back as an :class:`InputAnswer`:

========================================  =====================================
the person                                 :class:`InputAnswer`
========================================  =====================================
submits the form (approve with content)    ``accept`` with the content
declines (reject)                          ``decline``
cancels (reject with ``answer="cancel"``)  ``cancel``
nobody answers in time, the run ends       ``cancel`` (never ``decline``)
========================================  =====================================

The form's schema is the elicitation subset (:func:`form_problem`): a flat object whose properties are
strings (``minLength``/``maxLength``, ``format`` email/uri/date/date-time), numbers and integers
(``minimum``/``maximum``), booleans, and enums (``enum``, titled ``oneOf`` of ``const``, or a multi-select
array of them), with ``required``. The content is checked against it (:func:`answer_problem`) where a person
answers (``goldfive serve``, the ``goldfive`` command: a clear error naming the field) and again here before
it is handed back (fail closed: content that does not fit is never returned; the answer is ``cancel``).

The message and the schema come from a model or a remote server: they are carried bounded and shown inert.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from collections.abc import Mapping
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from ._util import args_digest, canonical_json, new_id, safe_repr, shorten
from .approvals import MAX_TIMEOUT_MS, ApprovalRequest
from .argschema import MAX_SCHEMA_CHARS, ArgsProblem, object_problem, schema_from_metadata
from .errors import ApprovalError

if TYPE_CHECKING:
    from .session import Session

__all__ = [
    "INPUT_KIND",
    "MAX_FIELDS",
    "MAX_MESSAGE_CHARS",
    "SCHEMA_KEY",
    "InputAnswer",
    "InputRequest",
    "answer_problem",
    "ask_for_input",
    "form_from_metadata",
    "form_problem",
    "input_digest",
    "request_answer_problem",
]

logger = logging.getLogger(__name__)

INPUT_KIND = "input"
"""The approval kind of a request for input."""

SCHEMA_KEY = "input_schema"
"""The request metadata key that carries the form's schema (canonical JSON)."""

MAX_MESSAGE_CHARS = 4000
"""A longer message (the asker's words) is cut to this many characters."""

MAX_FIELDS = 50
"""The most properties a form may have."""


_TYPES = ("string", "number", "integer", "boolean")
_FORMATS = ("email", "uri", "date", "date-time")
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]{1,255}\.[^@\s.]{1,63}$")
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
_DIGEST_TOOL = "input"

Action = Literal["accept", "decline", "cancel"]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class InputAnswer:
    """How a request for input ended: ``accept`` (with ``content``), ``decline`` or ``cancel``."""

    action: Action
    content: Mapping[str, Any] | None = None
    """The person's values (``accept`` only), checked against the form's schema."""
    answered_by: str = ""
    detail: str = ""
    """The person's reason, or why the answer is a cancel (a timeout, the run ended, an answer that did not fit)."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class InputRequest:
    """What a person is asked: ``message`` (the asker's words) and the form's ``schema``.

    ``title`` names what asks (a tool's name; shown as the card's title); ``metadata`` (strings) travels on the
    request like any approval's (who asked, from where). ``timeout_ms`` None: the session's tool approval timeout.
    """

    message: str
    schema: Mapping[str, Any]
    title: str = ""
    metadata: Mapping[str, str] = dataclasses.field(default_factory=dict)
    timeout_ms: int | None = None
    task_id: str = ""


# -- the schema -------------------------------------------------------------------------------------------
def form_problem(schema: object) -> str | None:
    """Why ``schema`` is not a form a person can fill (None = it is): the elicitation subset, bounded."""
    if not isinstance(schema, Mapping):
        return f"the requested schema must be an object, got {type(schema).__name__}"
    try:
        text = canonical_json(dict(schema))
    except (TypeError, ValueError):
        return "the requested schema is not JSON"
    if len(text) > MAX_SCHEMA_CHARS:
        return f"the requested schema is {len(text)} characters; the limit is {MAX_SCHEMA_CHARS}"
    if schema.get("type", "object") != "object":
        return f"the requested schema must be of type 'object', got {safe_repr(schema.get('type'), 40)}"
    props = schema.get("properties", {})
    if not isinstance(props, Mapping) or len(props) > MAX_FIELDS:
        return f"the requested schema's properties must be an object of at most {MAX_FIELDS} fields"
    for name, prop in props.items():
        if not isinstance(name, str) or not _NAME.match(name):
            return f"field name {safe_repr(name, 80)} must be 1-64 letters, digits, '_', '.' or '-'"
        problem = _property_problem(prop)
        if problem is not None:
            return f"field {name!r}: {problem}"
    required = schema.get("required", [])
    if not isinstance(required, list) or any(not isinstance(r, str) or r not in props for r in required):
        return "the requested schema's required must list names of its properties"
    return None


def _property_problem(prop: object) -> str | None:
    if not isinstance(prop, Mapping):
        return "must be an object"
    kind = prop.get("type")
    if kind == "array":
        items = prop.get("items")
        if not isinstance(items, Mapping) or not _choices(items):
            return "an array must be a multi-select: items with 'enum' or 'anyOf' of 'const'"
        return _counts_problem(prop, ("minItems", "maxItems"))
    if kind not in _TYPES:
        return f"type must be one of {', '.join(_TYPES)} or array (multi-select), got {safe_repr(kind, 40)}"
    if ("enum" in prop or "oneOf" in prop) and (kind != "string" or not _choices(prop)):
        return "an enum must be strings ('enum', or 'oneOf' of 'const' with 'title')"
    if kind == "string":
        fmt = prop.get("format")
        if fmt is not None and fmt not in _FORMATS:
            return f"format must be one of {', '.join(_FORMATS)}, got {safe_repr(fmt, 40)}"
        return _counts_problem(prop, ("minLength", "maxLength"))
    if kind in ("number", "integer"):
        for key in ("minimum", "maximum"):
            value = prop.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                return f"{key} must be a number"
    return None


def _counts_problem(prop: Mapping[str, Any], keys: tuple[str, str]) -> str | None:
    for key in keys:
        value = prop.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            return f"{key} must be a whole number >= 0"
    return None


def _choices(prop: Mapping[str, Any]) -> list[str] | None:
    """The values an enum property (or a multi-select's items) allows; None when it is no enum of strings."""
    enum = prop.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return list(enum)
    options = prop.get("oneOf", prop.get("anyOf"))
    if isinstance(options, list) and options:
        values = [o.get("const") if isinstance(o, Mapping) else None for o in options]
        if all(isinstance(v, str) for v in values):
            return [str(v) for v in values]
    return None


def form_from_metadata(metadata: Mapping[str, str]) -> dict[str, Any] | None:
    """The form's schema an ``input`` request carries, or None (absent, not JSON, not a form)."""
    value = schema_from_metadata(metadata, key=SCHEMA_KEY)
    return value if value is not None and form_problem(value) is None else None


# -- the answer -------------------------------------------------------------------------------------------
def request_answer_problem(metadata: Mapping[str, str], content: object) -> ArgsProblem | None:
    """:func:`answer_problem` against the form an ``input`` request carries (none readable: refused)."""
    schema = form_from_metadata(metadata)
    if schema is None:
        return _problem("", "cannot be checked: the request carries no readable form")
    return answer_problem(schema, content)


def answer_problem(schema: Mapping[str, Any], content: object) -> ArgsProblem | None:
    """None when ``content`` fits the form ``schema``; else the first problem, naming the field."""
    bad = object_problem(content)
    if bad is not None:
        return _problem("", bad)
    assert isinstance(content, Mapping)
    props = schema.get("properties", {})
    unknown = [k for k in content if k not in props]
    if unknown:
        return _problem(unknown[0], "is not a field of this form", kind="unknown")
    for name in schema.get("required", []):
        if name not in content:
            return _problem(name, "is required and missing", kind="missing")
    for name, value in content.items():
        why = _value_problem(props[name], value)
        if why is not None:
            return _problem(name, why, kind="type" if why.startswith("must be a") else "value")
    return None


def _problem(field: str, text: str, *, kind: Literal["unknown", "missing", "type", "value"] = "value") -> ArgsProblem:
    where = f"{field!r}" if field else "the answer"
    return ArgsProblem(
        field=field, message=f"{where} {text} (checked against the form's schema)", kind=kind, detail=text
    )


def _value_problem(prop: Mapping[str, Any], value: Any) -> str | None:
    kind = prop.get("type")
    if kind == "array":
        allowed = _choices(prop.get("items", {})) or []
        if not isinstance(value, list) or any(v not in allowed for v in value):
            return f"must be a list of: {_listed(allowed)}"
        return _count(prop, len(value), ("minItems", "maxItems"), "choices")
    if kind == "boolean":
        return None if isinstance(value, bool) else "must be a boolean (true or false)"
    if kind in ("number", "integer"):
        return _number_problem(prop, value, integer=kind == "integer")
    if not isinstance(value, str):
        return "must be a string"
    choices = _choices(prop)
    if choices is not None and value not in choices:
        return f"must be one of: {_listed(choices)}"
    counted = _count(prop, len(value), ("minLength", "maxLength"), "characters")
    return counted or _format_problem(prop.get("format"), value)


def _number_problem(prop: Mapping[str, Any], value: Any, *, integer: bool) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "must be a number" if not integer else "must be an integer"
    if integer and value != int(value):
        return "must be an integer"
    low, high = prop.get("minimum"), prop.get("maximum")
    if isinstance(low, int | float) and value < low:
        return f"must be at least {low}"
    if isinstance(high, int | float) and value > high:
        return f"must be at most {high}"
    return None


def _count(prop: Mapping[str, Any], size: int, keys: tuple[str, str], unit: str) -> str | None:
    low, high = (prop.get(k) for k in keys)
    if isinstance(low, int) and size < low:
        return f"must have at least {low} {unit}"
    if isinstance(high, int) and size > high:
        return f"must have at most {high} {unit}"
    return None


def _format_problem(fmt: object, value: str) -> str | None:
    if fmt == "email" and not _EMAIL.match(value):
        return "must be an email address"
    if fmt == "uri":
        parts = urlsplit(value)
        if not parts.scheme or not (parts.netloc or parts.path) or any(c.isspace() for c in value):
            return "must be a URI (scheme:...)"
    if fmt == "date":
        try:
            date.fromisoformat(value)
        except ValueError:
            return "must be a date (YYYY-MM-DD)"
    if fmt == "date-time":
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return "must be a date and time (ISO 8601)"
    return None


def _listed(values: list[str]) -> str:
    return shorten(", ".join(repr(v) for v in values), 300)


# -- asking -----------------------------------------------------------------------------------------------
def input_digest(message: str, schema: Mapping[str, Any]) -> str:
    """The digest an answer is bound to: the message and the schema the person was shown."""
    return args_digest(_DIGEST_TOOL, {"message": message, "requested_schema": dict(schema)})


async def ask_for_input(session: Session, request: InputRequest) -> InputAnswer:
    """Ask a person ``request`` in ``session``'s run and wait for the answer (never raises for a refusal).

    A schema that is no form, a run with no control channel, or a run that is over: ``cancel`` at once (nobody
    is asked). ``asyncio.CancelledError`` propagates (the request is withdrawn).
    """
    problem = form_problem(request.schema)
    if problem is not None:
        return InputAnswer(action="cancel", detail=f"nobody was asked: {problem}")
    if not session.has_channel:
        return InputAnswer(action="cancel", detail="nobody can answer (no control channel)")
    schema = dict(request.schema)
    message = shorten(request.message, MAX_MESSAGE_CHARS)
    timeout = request.timeout_ms or session.config.effective_tool_approval_timeout_ms
    # In the asker's order (a form's fields are shown as asked), not canonical JSON's sorted one.
    ordered = json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    metadata = {**request.metadata, "tool_name": shorten(request.title, 200), SCHEMA_KEY: ordered}

    def validate(content: Mapping[str, Any]) -> str | None:
        found = answer_problem(schema, content)
        return found.message if found is not None else None

    approval = ApprovalRequest(
        target_id=new_id(INPUT_KIND),
        kind="input",
        prompt=message,
        task_id=request.task_id,
        metadata=metadata,
        args_digest=input_digest(message, schema),
        timeout_ms=min(max(int(timeout), 1), MAX_TIMEOUT_MS),
        validate_edit=validate,
    )
    try:
        outcome = await session.request_approval(approval)
    except ApprovalError as exc:
        return InputAnswer(action="cancel", detail=f"nobody was asked: {exc}")
    if outcome.decision == "approve":
        content = dict(outcome.edited_args or {})
        found = answer_problem(schema, content)
        if found is not None:  # fail closed: content that does not fit never reaches the asker
            logger.warning("refused a recorded answer to %s: %s", approval.target_id, found.field or "the answer")
            return InputAnswer(
                action="cancel", answered_by=outcome.decided_by, detail=f"the answer does not fit: {found}"
            )
        return InputAnswer(action="accept", content=content, answered_by=outcome.decided_by, detail=outcome.detail)
    if outcome.decision == "reject":
        action: Action = "cancel" if outcome.answer == "cancel" else "decline"
        return InputAnswer(action=action, answered_by=outcome.decided_by, detail=outcome.detail)
    if outcome.decision == "timeout":
        return InputAnswer(action="cancel", detail=f"nobody answered within {approval.timeout_ms} ms")
    return InputAnswer(action="cancel", detail=outcome.detail or "the run ended before anyone answered")
