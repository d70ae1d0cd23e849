"""Confirmations a tool asks for itself, and ADK's own confirmation flow made visible.

A tool may call ``tool_context.request_confirmation(hint=..., payload=...)`` in its body (ADK's
``human_tool_confirmation`` sample does): ADK then ends the invocation with an
``adk_request_confirmation`` call and runs the tool again, confirmed, when the client answers.

* **With a channel**, goldfive asks the person instead (:func:`confirm_asked`, from the plugin's
  ``after_tool_callback``): ``ApprovalRequested`` carries the hint (as the prompt) and the requested
  payload (``metadata["payload_json"]``); the person's answer — and a payload, sent as
  ``edited_args`` (``goldfive approve ID --edit '{...}'``) — reaches the tool's confirmed run in
  ``tool_context.tool_confirmation``, in the same invocation. ADK never hears of the request, so no
  ``adk_request_confirmation`` reaches the client.
* **Without a channel** ADK's flow stays in charge, but goldfive reports it: the
  ``adk_request_confirmation`` call becomes an ``ApprovalRequested`` (:func:`announce_native`) and the
  client's answer, when the confirmed call runs, an ``ApprovalGranted`` / ``ApprovalRejected``
  (:func:`announce_native_answer`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from goldfive_core._util import args_digest, canonical_json, shorten
from goldfive_core.approvals import ApprovalRequest
from goldfive_core.errors import ApprovalError
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.run_state import is_stopped
from goldfive_core.session import Session, approval_timeout_drift

from ._compat import end_invocation
from ._confirm import skip

__all__ = ["ASK_CONFIRMATION", "announce_native", "announce_native_answer", "asked_confirmation", "confirm_asked"]

logger = logging.getLogger(__name__)

ASK_CONFIRMATION = "adk_request_confirmation"
"""The function call ADK sends the client to ask for a confirmation (and whose response answers it)."""

_PROMPT_LIMIT = 2000


def asked_confirmation(tool_context: ToolContext) -> ToolConfirmation | None:
    """The confirmation the tool's body asked for with ``request_confirmation``, if it asked."""
    call_id = tool_context.function_call_id
    if not call_id:
        return None
    return tool_context.actions.requested_tool_confirmations.get(call_id)


def _json_or_repr(value: Any) -> str:
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return shorten(repr(value), 500)


def _accept_payload(edited: Mapping[str, Any]) -> str | None:
    return None  # any JSON object: the tool reads the payload it asked for


async def confirm_asked(
    session: Session,
    *,
    tool: BaseTool,
    tool_args: dict[str, Any],
    tool_context: ToolContext,
    asked: ToolConfirmation,
    task_id: str,
) -> dict[str, Any]:
    """Ask the person for the confirmation the tool requested; run the tool again with the answer.

    Returns the function response the model gets: the confirmed run's result, or a skip response
    when nobody answered in time or the run was cancelled (then the tool does not run again).
    """
    name = tool.name
    call_id = tool_context.function_call_id or ""
    # Taken from ADK: goldfive answers it, so ADK must not end the invocation to ask the client.
    tool_context.actions.requested_tool_confirmations.pop(call_id, None)
    args_json = _json_or_repr(tool_args)
    metadata = {"tool_name": name, "args_json": args_json, "agent_name": tool_context.agent_name, "asked_by": "tool"}
    if asked.hint:
        metadata["hint"] = shorten(asked.hint, _PROMPT_LIMIT)
    if asked.payload is not None:
        metadata["payload_json"] = _json_or_repr(asked.payload)
    timeout_ms = session.config.effective_tool_approval_timeout_ms
    try:
        digest = args_digest(name, tool_args)
    except (TypeError, ValueError):
        digest = ""
    request = ApprovalRequest(
        target_id=call_id,
        kind="tool",
        prompt=shorten(asked.hint, _PROMPT_LIMIT) or f"{name}({shorten(args_json, 300)}) asks for a confirmation",
        task_id=task_id,
        metadata=metadata,
        args_digest=digest,
        timeout_ms=timeout_ms,
        validate_edit=_accept_payload,
    )
    try:
        outcome = await session.request_approval(request)
    except ApprovalError as exc:
        return skip(name, "approval_error", str(exc))
    if outcome.decision == "timeout":
        session.emit_drift(approval_timeout_drift(task_id, call_id, timeout_ms))
        return skip(name, "approval_timeout", f"no confirmation within {timeout_ms} ms; the tool did not go on")
    if outcome.decision not in ("approve", "reject"):
        if is_stopped(session.state):
            end_invocation(tool_context)
        return skip(name, "run_cancelled", outcome.detail or "the run was cancelled")
    approved = outcome.decision == "approve"
    payload = outcome.edited_args if approved and outcome.edited_args is not None else asked.payload
    tool_context.tool_confirmation = ToolConfirmation(hint=asked.hint, confirmed=approved, payload=payload)
    try:
        result = await tool.run_async(args=tool_args, tool_context=tool_context)
    except Exception as exc:  # the tool's own failure, reported as its response (as ADK reports tool errors)
        logger.warning("%s failed in its confirmed run (%s)", name, call_id, exc_info=True)
        return {"error": f"{name} failed after it was confirmed: {shorten(f'{type(exc).__name__}: {exc}', 500)}"}
    if tool_context.actions.requested_tool_confirmations.pop(call_id, None) is not None:
        return skip(name, "approval_error", "the tool asked for a confirmation again after it was answered")
    return result if isinstance(result, dict) else {"result": result}


def announce_native(session: Session, call: types.FunctionCall, *, task_id: str) -> str | None:
    """Report ADK's own ``adk_request_confirmation`` call as an ApprovalRequested; the target id, or None.

    goldfive does not wait on it (nobody could answer through goldfive): the client answers ADK.
    """
    args = call.args or {}
    original = args.get("originalFunctionCall")
    asked = args.get("toolConfirmation")
    if not isinstance(original, Mapping) or not original.get("id"):
        return None
    target_id = str(original["id"])
    name = str(original.get("name") or "")
    tool_args = original.get("args") if isinstance(original.get("args"), Mapping) else {}
    hint = str(asked.get("hint") or "") if isinstance(asked, Mapping) else ""
    metadata = {
        "tool_name": name,
        "args_json": _json_or_repr(tool_args),
        "asked_by": "adk",
        "confirmation_call_id": call.id or "",
    }
    if hint:
        metadata["hint"] = shorten(hint, _PROMPT_LIMIT)
    if isinstance(asked, Mapping) and asked.get("payload") is not None:
        metadata["payload_json"] = _json_or_repr(asked["payload"])
    try:
        digest = args_digest(name, tool_args)
    except (TypeError, ValueError):
        digest = ""
    session.events.emit(
        events_pb2.ApprovalRequested(
            target_id=target_id,
            kind="tool",
            prompt=shorten(hint, _PROMPT_LIMIT) or f"Allow {name}?",
            task_id=task_id,
            metadata=metadata,
            args_digest=digest,
        )
    )
    return target_id


def announce_native_answer(session: Session, call_id: str, answer: ToolConfirmation) -> None:
    """Report the client's answer to ADK's own confirmation (seen when the confirmed call runs)."""
    detail = "answered through ADK's own confirmation"
    if answer.payload is not None:
        detail += f" (payload {shorten(_json_or_repr(answer.payload), 500)})"
    if answer.confirmed:
        session.events.emit(events_pb2.ApprovalGranted(target_id=call_id, detail=detail))
    else:
        session.events.emit(events_pb2.ApprovalRejected(target_id=call_id, detail=detail))
