"""An upstream's ``input_required`` result (MCP 2026-07-28 multi round-trip, SEP-2322): asked, answered, retried.

Instead of a ``CallToolResult`` an upstream may answer ``tools/call`` with ``{"resultType": "input_required",
"inputRequests": {KEY: {"method": "elicitation/create", "params": {...}}}, "requestState": "..."}``. The gateway
answers every request as it answers an ``elicitation/create`` (:meth:`ElicitAnswerer.answer`: the calling client
or a person, as ``--elicit`` says) and sends the same ``tools/call`` again under a new JSON-RPC id, with
``inputResponses`` (``{KEY: ElicitResult}``) and the ``requestState`` echoed byte for byte; until the upstream
answers with a result, at most :data:`MAX_ROUNDS` rounds. A round with only ``requestState`` is retried after a
short backoff (:data:`STATE_ONLY_BACKOFF`).

The request state is the upstream's: opaque to the gateway, never read, logged or shown, and bounded
(:data:`MAX_STATE_CHARS`). A result the gateway cannot continue — more than :data:`MAX_INPUT_REQUESTS` requests,
one that is not a form elicitation (``sampling/createMessage``, ``roots/list``, a URL), a malformed one, a state
over the bound, or too many rounds — ends the call with an ``isError`` result that says so (nothing is retried).
The retries are one tool call to goldfive: the gate let it through once, the ledger holds it once, and an
answer is never an approval of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from ..._util import shorten
from ...retry import Backoff

__all__ = ["MAX_INPUT_REQUESTS", "MAX_ROUNDS", "MAX_STATE_CHARS", "STATE_ONLY_BACKOFF", "call_with_input"]

MAX_ROUNDS = 10
"""The most ``input_required`` rounds one call may take (the MCP SDKs' default)."""

MAX_INPUT_REQUESTS = 8
"""The most input requests one round may carry."""

MAX_STATE_CHARS = 256 * 1024
"""The longest ``requestState`` the gateway echoes."""

STATE_ONLY_BACKOFF = Backoff(first_s=0.05, cap_s=0.25)
"""The delays before retrying a round that carried only ``requestState`` (the SDKs' 50 ms doubling to 250 ms)."""

Request = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Answer = Callable[[types.ElicitRequestParams], Awaitable["types.ElicitResult | types.ErrorData"]]


class Unanswerable(Exception):
    """The upstream asked for something the gateway cannot give it (the text says what, for the model)."""


def is_input_required(result: Mapping[str, Any]) -> bool:
    return result.get("resultType") == "input_required"


async def call_with_input(request: Request, params: dict[str, Any], answer: Answer) -> dict[str, Any]:
    """``request(params)``, answering and retrying while the upstream answers ``input_required``.

    Raises :class:`Unanswerable` when a round cannot be answered (the upstream is not asked again)."""
    result = await request(params)
    delays = STATE_ONLY_BACKOFF.delays()
    for _ in range(MAX_ROUNDS):
        if not is_input_required(result):
            return result
        requests, state = _round(result)
        retry = dict(params)
        if requests:
            delays.reset()
            retry["inputResponses"] = {key: await _answered(answer, key, asked) for key, asked in requests.items()}
        else:
            await asyncio.sleep(delays.next())
        if state is not None:
            retry["requestState"] = state
        result = await request(retry)
    if is_input_required(result):
        raise Unanswerable(f"its MCP server still asked for input after {MAX_ROUNDS} rounds")
    return result


def _round(result: Mapping[str, Any]) -> tuple[dict[str, types.ElicitRequestParams], str | None]:
    """The round's questions, by key, and its state (checked and bounded; else :class:`Unanswerable`)."""
    state = result.get("requestState")
    if state is not None and (not isinstance(state, str) or len(state) > MAX_STATE_CHARS):
        raise Unanswerable(f"its MCP server sent a requestState that is not a string of at most {MAX_STATE_CHARS}")
    raw = result.get("inputRequests") or {}
    if not isinstance(raw, Mapping) or len(raw) > MAX_INPUT_REQUESTS:
        raise Unanswerable(
            f"its MCP server sent input requests the gateway does not take (an object of at most {MAX_INPUT_REQUESTS})"
        )
    requests: dict[str, types.ElicitRequestParams] = {}
    for key, asked in raw.items():
        method = asked.get("method") if isinstance(asked, Mapping) else None
        if method != "elicitation/create":
            raise Unanswerable(
                f"its MCP server asked for {shorten(str(method), 60)!r}, which the gateway does not answer "
                "(only form elicitation)"
            )
        try:
            requests[str(key)] = types.ElicitRequest.model_validate(asked, by_name=False).params
        except ValidationError:
            raise Unanswerable("its MCP server sent an elicitation request that is not valid MCP") from None
    return requests, state


async def _answered(answer: Answer, key: str, asked: types.ElicitRequestParams) -> dict[str, Any]:
    got = await answer(asked)
    if isinstance(got, types.ErrorData):
        raise Unanswerable(f"its MCP server's request {shorten(key, 60)!r} cannot be answered: {got.message}")
    return got.model_dump(by_alias=True, mode="json", exclude_none=True)
