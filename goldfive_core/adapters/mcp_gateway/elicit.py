"""An upstream's ``elicitation/create``: answered by a person through goldfive, or by the MCP client that called.

The gateway's client to each upstream declares the elicitation capability, and every form-mode request is
answered by :class:`ElicitAnswerer` as its ``mode`` says (``goldfive mcp --elicit``):

``person`` (the default)
    :func:`~goldfive_core.elicitation.ask_for_input` in the client connection's run: an ``ApprovalRequested{kind=
    "input"}`` with the upstream's message, its requested schema, the upstream and the tool call(s) it came from
    and the MCP client's identity. The person's answer goes back as the MCP ``ElicitResult``: accept with the
    content (checked against the schema again here), decline, or cancel (also for a timeout, or a run that ended).
``client``
    The request is passed on to the MCP client whose ``tools/call`` the upstream is running — when that client
    declared form elicitation (``capabilities.elicitation`` with ``form``, or empty as the 2025-06-18 form) and
    the call has a way to ask it (a plain ``tools/call``'s back-channel; a task-augmented one's task, which goes
    ``input_required`` until a ``tasks/result`` carries the question, :mod:`.tasks`). Its answer goes
    upstream with the same action and content. A client that cannot answer: a person answers, as ``person``.
``client-or-decline``
    As ``client``, but a client that cannot answer means ``decline`` (nobody else is asked).

What the client is sent is bounded as a person's card is (the message cut to
:data:`~goldfive_core.elicitation.MAX_MESSAGE_CHARS`, a schema that is no small flat form never sent: the upstream
gets ``cancel``), and so is its answer: content that does not fit the requested schema, an error, no answer
within the approval timeout, or more than :data:`MAX_CLIENT_ASKS` questions open at once are each a ``cancel``
upstream. An elicitation is only ever an answer to the upstream's question: it runs inside a call the gate
already let through, under its own request, and never approves, edits or lets through any tool call.

A URL-mode request is refused with an error (the gateway opens no links and passes none on).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import mcp_types as types

from ..._util import shorten
from ...elicitation import MAX_MESSAGE_CHARS, InputRequest, answer_problem, ask_for_input, form_problem

if TYPE_CHECKING:
    from ...session import Session

__all__ = ["ELICIT_MODES", "MAX_CLIENT_ASKS", "AskClient", "Calling", "ElicitAnswerer", "ElicitMode", "can_elicit_form"]

logger = logging.getLogger(__name__)

Callback = Callable[[Any, types.ElicitRequestParams], Awaitable["types.ElicitResult | types.ErrorData"]]

ElicitMode = Literal["person", "client", "client-or-decline"]
ELICIT_MODES: tuple[ElicitMode, ...] = ("person", "client", "client-or-decline")

AskClient = Callable[[types.ElicitRequestFormParams], Awaitable[types.ElicitResult]]
"""Sends ``elicitation/create`` to the MCP client that made a call and returns its answer (raises on an error)."""

MAX_CLIENT_ASKS = 8
"""The most questions one client connection is asked at once (an upstream asking more gets ``cancel``)."""


def can_elicit_form(client: Mapping[str, Any]) -> bool:
    """Whether the client's ``initialize`` params (as JSON) declare form-mode elicitation."""
    caps = client.get("capabilities")
    elicitation = caps.get("elicitation") if isinstance(caps, Mapping) else None
    if not isinstance(elicitation, Mapping):
        return False
    # 2025-11-25: {"form": {}} and/or {"url": {}}; an empty object (the 2025-06-18 form) means form mode.
    return "form" in elicitation or "url" not in elicitation


@dataclasses.dataclass(frozen=True, slots=True)
class _Running:
    tool: str
    ask: AskClient | None


class Calling:
    """Which tools each upstream is running for the client now (an elicitation names the one it came from).

    With each, how to ask the client that made the call (None: it cannot be asked)."""

    def __init__(self) -> None:
        self._now: dict[str, list[_Running]] = {}

    @contextlib.contextmanager
    def running(self, upstream: str, tool: str, ask: AskClient | None = None) -> Iterator[None]:
        entry = _Running(tool, ask)
        self._now.setdefault(upstream, []).append(entry)
        try:
            yield
        finally:
            now = self._now[upstream]
            now.remove(entry)
            if not now:
                del self._now[upstream]

    def tools(self, upstream: str) -> list[str]:
        return sorted({r.tool for r in self._now.get(upstream, [])})

    def asker(self, upstream: str) -> AskClient | None:
        """How to ask the client about a call running on ``upstream`` (one connection: one client for all)."""
        return next((r.ask for r in self._now.get(upstream, []) if r.ask is not None), None)


class ElicitAnswerer:
    """Answers one client connection's upstreams' elicitations: a person (its run's session), or the client."""

    def __init__(
        self,
        session: Session,
        identity: Callable[[], Mapping[str, str]],
        *,
        timeout_ms: int | None = None,
        mode: ElicitMode = "person",
    ) -> None:
        self.session = session
        self.identity = identity
        """The MCP client's identity (``mcp_client``, ``mcp_session``) for the request's metadata."""
        self.timeout_ms = timeout_ms
        self.mode: ElicitMode = mode
        self.calling = Calling()
        self._asking = 0

    def client_asker(self, client: Mapping[str, Any], ask: AskClient | None) -> AskClient | None:
        """``ask`` for a call from ``client`` when that client declared form elicitation (else None).

        Whether it is used is the ``mode``'s (the elicitation callback's) choice."""
        if ask is None or not can_elicit_form(client):
            return None
        return ask

    def callback(self, upstream: str) -> Callback:
        """The ``elicitation_callback`` of the SDK client connected to ``upstream``."""

        async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
            return await self.answer(upstream, params)

        return answer

    async def answer(self, upstream: str, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        """``upstream``'s question answered as the mode says (an ``elicitation/create``, or one an
        ``input_required`` result carries)."""
        if not isinstance(params, types.ElicitRequestFormParams):
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="the goldfive gateway answers form-mode elicitation only (no URL mode)",
            )
        if self.mode != "person":  # the operator chose who answers: "person" never asks the client
            ask = self.calling.asker(upstream)
            if ask is not None:
                return await self._ask_client(upstream, ask, params)
            if self.mode == "client-or-decline":
                logger.info("declined an elicitation from %s: its client cannot answer", upstream)
                return types.ElicitResult(action="decline")
        return await self._ask(upstream, params)

    async def _ask_client(
        self, upstream: str, ask: AskClient, params: types.ElicitRequestFormParams
    ) -> types.ElicitResult:
        """The question passed on to the client; its answer, checked, as the upstream's (every fault: cancel)."""
        schema = params.requested_schema
        problem = form_problem(schema)
        if problem is not None:
            logger.info("cancelled an elicitation from %s without asking: %s", upstream, shorten(problem, 200))
            return types.ElicitResult(action="cancel")
        if self._asking >= MAX_CLIENT_ASKS:
            logger.warning("cancelled an elicitation from %s: %d already open", upstream, self._asking)
            return types.ElicitResult(action="cancel")
        question = types.ElicitRequestFormParams(
            message=shorten(params.message, MAX_MESSAGE_CHARS), requested_schema=schema
        )
        timeout_ms = self.timeout_ms or self.session.config.effective_tool_approval_timeout_ms
        self._asking += 1
        try:
            answer = await asyncio.wait_for(ask(question), timeout_ms / 1000)
        except TimeoutError:
            logger.info("cancelled an elicitation from %s: the client did not answer in %d ms", upstream, timeout_ms)
            return types.ElicitResult(action="cancel")
        except Exception as exc:  # an error answer, a malformed one, a client gone: never passed on as content
            logger.info("cancelled an elicitation from %s: the client failed (%s)", upstream, type(exc).__name__)
            return types.ElicitResult(action="cancel")
        finally:
            self._asking -= 1
        if answer.action != "accept":
            return types.ElicitResult(action=answer.action)
        content = dict(answer.content or {})
        found = answer_problem(schema, content)
        if found is not None:  # fail closed: content that does not fit never reaches the upstream
            logger.warning("cancelled an elicitation from %s: the client's answer does not fit", upstream)
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(action="accept", content=content)

    async def _ask(self, upstream: str, params: types.ElicitRequestFormParams) -> types.ElicitResult:
        tools = self.calling.tools(upstream)
        tool = tools[0] if len(tools) == 1 else ""
        metadata = {
            **self.identity(),
            "mcp_upstream": upstream,
            "mcp_tool": tool or shorten(", ".join(tools), 200),
        }
        title = f"{tool or upstream} asks for input"
        request = InputRequest(
            message=params.message,
            schema=params.requested_schema,
            title=title,
            metadata=metadata,
            timeout_ms=self.timeout_ms,
        )
        answer = await ask_for_input(self.session, request)
        if answer.action == "cancel" and not answer.answered_by:
            logger.info("an elicitation from %s was cancelled: %s", upstream, shorten(answer.detail, 200))
        if answer.action == "accept":
            return types.ElicitResult(action="accept", content=dict(answer.content or {}))
        return types.ElicitResult(action=answer.action)
