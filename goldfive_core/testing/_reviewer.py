"""A scripted reviewer: a person stand-in that answers approval requests by rule.

It is an event sink: put it in the run's ``sinks`` and it sees every ``ApprovalRequested``; it answers
with APPROVE / REJECT control messages sent on any transport that has ``async send(msg) -> ControlAck``
(``ControlChannel``, ``StoreChannel`` — the agent's own or another one on the same store).
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

from .._util import shorten
from ..control import ControlAck, ControlKind, ControlMessage
from ..pb.v1 import events_pb2

__all__ = [
    "Action",
    "Approve",
    "Edit",
    "LetTimeOut",
    "Reject",
    "Review",
    "ReviewRequest",
    "ReviewRule",
    "ScriptedReviewer",
    "Transport",
]

logger = logging.getLogger(__name__)


class Transport(Protocol):
    """What the reviewer needs of a control channel: send a message, get its ack."""

    async def send(self, msg: ControlMessage) -> ControlAck:
        """Deliver ``msg`` to the run and return the run's answer."""
        ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReviewRequest:
    """An ``ApprovalRequested`` event as a reviewer reads it."""

    target_id: str
    kind: str
    """``"tool"`` (a tool call) or ``"task"`` (``report_awaiting_approval``)."""
    prompt: str
    tool_name: str
    """The tool's name for a tool call; ``""`` for a task."""
    args: Mapping[str, Any]
    """The call's arguments (``metadata["args_json"]`` parsed); empty for a task."""
    args_digest: str
    task_id: str
    run_id: str
    session_id: str
    metadata: Mapping[str, str]
    timeout_ms: int

    @classmethod
    def from_event(cls, event: events_pb2.Event) -> ReviewRequest:
        """Read an ``ApprovalRequested`` event; ValueError for any other payload."""
        if event.WhichOneof("payload") != "approval_requested":
            raise ValueError(f"not an approval_requested event: {event.WhichOneof('payload')!r}")
        req = event.approval_requested
        metadata = dict(req.metadata)
        try:
            parsed = json.loads(metadata["args_json"]) if "args_json" in metadata else {}
        except ValueError:
            parsed = {}
        return cls(
            target_id=req.target_id,
            kind=req.kind,
            prompt=req.prompt,
            tool_name=metadata.get("tool_name", ""),
            args=parsed if isinstance(parsed, dict) else {},
            args_digest=req.args_digest,
            task_id=req.task_id,
            run_id=event.run_id,
            session_id=event.session_id,
            metadata=metadata,
            timeout_ms=req.timeout_ms,
        )


@dataclasses.dataclass(frozen=True)
class Approve:
    """Say yes (APPROVE): the tool runs with the arguments it was called with."""

    detail: str = ""
    _: dataclasses.KW_ONLY
    decided_by: str | None = None
    """Who decided; ``None`` = the reviewer's ``name``."""


@dataclasses.dataclass(frozen=True)
class Edit:
    """Say yes with other arguments (APPROVE with ``edited_args``): a mapping, or a function of the old ones."""

    args: Mapping[str, Any] | Callable[[Mapping[str, Any]], Mapping[str, Any]]
    _: dataclasses.KW_ONLY
    detail: str = ""
    decided_by: str | None = None


@dataclasses.dataclass(frozen=True)
class Reject:
    """Say no (REJECT) with a reason; for a tool call the model sees the reason."""

    detail: str = "rejected by the scripted reviewer"
    _: dataclasses.KW_ONLY
    decided_by: str | None = None


@dataclasses.dataclass(frozen=True)
class LetTimeOut:
    """Never answer: the wait runs out and the run's timeout outcome applies."""


Action = Approve | Edit | Reject | LetTimeOut
"""What the reviewer does with one request."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReviewRule:
    """Answer ``then`` to the requests that match every condition given (none given = every request).

    ``tool`` is an ``fnmatch`` pattern on the tool name; ``kind`` is ``"tool"`` or ``"task"``;
    ``where`` is any predicate; ``times`` limits the rule to its first N matches (e.g. reject the
    first call, approve the retry). ``then`` may be a function of the request.
    """

    then: Action | Callable[[ReviewRequest], Action]
    tool: str | None = None
    kind: Literal["tool", "task"] | None = None
    where: Callable[[ReviewRequest], bool] | None = None
    times: int | None = None

    def matches(self, request: ReviewRequest) -> bool:
        """Whether the conditions hold for ``request`` (``times`` is counted by the reviewer)."""
        if self.kind is not None and request.kind != self.kind:
            return False
        if self.tool is not None and not fnmatch.fnmatchcase(request.tool_name, self.tool):
            return False
        return self.where is None or self.where(request)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Review:
    """One request the reviewer handled: what it did and what the run answered."""

    request: ReviewRequest
    action: Action
    message: ControlMessage | None
    """The decision sent; ``None`` for :class:`LetTimeOut`."""
    ack: ControlAck | None
    """The run's answer; ``None`` when nothing was sent or the send itself failed (see ``error``)."""
    error: str = ""


class ScriptedReviewer:
    """Answers approval requests by rule, like a person would, through a real control transport.

    ``rules`` are tried in order and the first match decides; with no match, ``default`` applies.
    Put the reviewer in the run's sinks (``wrap(..., sinks=[reviewer])``, ``GoldfivePlugin(sinks=...)``)
    and send decisions on ``control``::

        reviewer = ScriptedReviewer(channel, [ReviewRule(tool="transfer_*", where=lambda r: r.args["amount"] > 100,
                                                   then=Reject("over the limit"))], default=Approve())
        plugin = GoldfivePlugin(control=channel, sinks=[sink, reviewer])
        ...  # run the agent
        assert [type(r.action) for r in reviewer.reviews] == [Reject]

    Each decision carries the ``args_digest`` of the request it answers (like a UI would), and is
    sent from a task of its own; ``send_timeout`` bounds each send. ``await wait_reviewed(n)`` waits
    until ``n`` requests were handled and their acks are in.
    """

    def __init__(
        self,
        control: Transport,
        rules: Sequence[ReviewRule] = (),
        *,
        default: Action = Approve(),
        name: str = "scripted-reviewer",
        send_timeout: float = 30.0,
    ) -> None:
        self.control = control
        self.rules = tuple(rules)
        self.default = default
        self.name = name
        self.send_timeout = send_timeout
        self.seen: list[ReviewRequest] = []
        """Every request seen, in order."""
        self.reviews: list[Review] = []
        """Every request handled, in the order the answers came back."""
        self._used = [0] * len(self.rules)
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None

    # -- the rule book --------------------------------------------------------------------------
    def action_for(self, request: ReviewRequest) -> Action:
        """The action for ``request``: the first matching rule's (counted towards its ``times``)."""
        for index, rule in enumerate(self.rules):
            if rule.times is not None and self._used[index] >= rule.times:
                continue
            if rule.matches(request):
                self._used[index] += 1
                return rule.then(request) if callable(rule.then) else rule.then
        return self.default

    def message_for(self, request: ReviewRequest, action: Action) -> ControlMessage | None:
        """The control message that carries ``action`` for ``request`` (``None`` for LetTimeOut)."""
        if isinstance(action, LetTimeOut):
            return None
        payload: dict[str, Any] = {"target_id": request.target_id, "decided_by": action.decided_by or self.name}
        if request.args_digest:
            payload["args_digest"] = request.args_digest
        if action.detail:
            payload["detail"] = action.detail
        if isinstance(action, Reject):
            return ControlMessage(ControlKind.REJECT, payload)
        if isinstance(action, Edit):
            edited = action.args(request.args) if callable(action.args) else action.args
            payload["edited_args"] = dict(edited)
        return ControlMessage(ControlKind.APPROVE, payload)

    # -- the sink side --------------------------------------------------------------------------
    def emit(self, event: events_pb2.Event) -> None:
        """See one event; an ``ApprovalRequested`` is answered from a task of its own."""
        if event.WhichOneof("payload") != "approval_requested":
            return
        request = ReviewRequest.from_event(event)
        self.seen.append(request)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # emitted from a thread without a loop: answer on the loop we know
            if self._loop is None:
                raise RuntimeError(
                    f"ScriptedReviewer saw {request.target_id!r} outside an event loop before any inside one"
                ) from None
            self._loop.call_soon_threadsafe(self._start, request)
            return
        self._loop = loop
        self._start(request)

    def _start(self, request: ReviewRequest) -> None:
        task = asyncio.get_running_loop().create_task(self._answer(request), name=f"review {request.target_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, request: ReviewRequest) -> None:
        action = self.action_for(request)
        message: ControlMessage | None = None
        ack: ControlAck | None = None
        error = ""
        try:
            message = self.message_for(request, action)
            if message is not None:
                async with asyncio.timeout(self.send_timeout):
                    ack = await self.control.send(message)
        except TimeoutError:
            error = f"no ack within {self.send_timeout} s"
        except Exception as exc:  # recorded for the test to see; the run itself is not ours to fail
            error = shorten(f"{type(exc).__name__}: {exc}", 500)
            logger.warning("ScriptedReviewer could not answer %s: %s", request.target_id, error)
        self.reviews.append(Review(request=request, action=action, message=message, ack=ack, error=error))
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    # -- waiting --------------------------------------------------------------------------------
    async def wait_reviewed(
        self,
        count: int = 1,
        *,
        timeout: float | None = 30.0,  # noqa: ASYNC109 (a bound on waiting, like AwaitableSink.wait_for)
    ) -> list[Review]:
        """Every review once at least ``count`` requests were handled; TimeoutError after ``timeout`` s."""
        async with asyncio.timeout(timeout):
            while len(self.reviews) < count:
                if self._changed is None:
                    self._changed = asyncio.Event()
                await self._changed.wait()
        return list(self.reviews)

    async def aclose(self) -> None:
        """Cancel the answers still being sent and wait for them to stop."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
