"""Control messages a person sends to a run, their acks, and the in-memory channel.

A :class:`ControlChannel` is a rendezvous between whoever decides (a UI, a CLI,
a test) and the run that obeys. It is bound to exactly one *dispatcher* at a
time (a run's router); dispatch is synchronous, so a decision lands the moment
it is sent, even while the agent is blocked inside a tool call. Messages sent
while nothing is bound wait, in order, and are dispatched when a run binds.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._util import fact, new_id, now_ms, safe_repr, shorten
from .errors import ChannelBusyError
from .limits import text_problem

if TYPE_CHECKING:
    from .toolcall import ExecutionLedger

__all__ = [
    "AckResult",
    "AckVerdict",
    "ChannelStatistics",
    "ControlAck",
    "ControlChannel",
    "ControlKind",
    "ControlMessage",
    "ControlTransport",
    "DEFAULT_SEND_TIMEOUT_S",
    "Dispatcher",
    "check_message",
]

logger = logging.getLogger(__name__)


class ControlKind(StrEnum):
    """What a control message asks for. Values equal names; wire numbers in control.proto."""

    UNSPECIFIED = "UNSPECIFIED"
    PAUSE = "PAUSE"
    RESUME = "RESUME"
    CANCEL = "CANCEL"
    REWIND_TO = "REWIND_TO"
    STEER = "STEER"
    APPROVE = "APPROVE"
    REJECT = "REJECT"
    STATUS_QUERY = "STATUS_QUERY"
    INTERCEPT_TRANSFER = "INTERCEPT_TRANSFER"
    INJECT_MESSAGE = "INJECT_MESSAGE"
    GOLDFIVE_STEER = "GOLDFIVE_STEER"
    GOLDFIVE_PAUSE_ESCALATE = "GOLDFIVE_PAUSE_ESCALATE"


class AckResult(StrEnum):
    """Outcome of dispatching one control message."""

    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    UNSUPPORTED = "UNSUPPORTED"


class AckVerdict(StrEnum):
    """What became of a decision (APPROVE/REJECT) its SUCCESS ack answers: the ack data's ``"decision"``."""

    APPLIED = "applied"
    """Applied as sent. Never written: an ack whose data names no other verdict says it."""
    COUNTED = "counted"
    """One vote of a quorum: the request stays pending (the data has ``quorum_progress``, and ``args_digest`` /
    ``args`` when an edit restarted the count)."""
    QUORUM = "quorum"
    """The last vote of a quorum: decided by all who approved (the data has ``decided_by``, ``detail``,
    ``quorum_progress`` and the ``edited_args`` they approved)."""
    EXPIRED = "expired"
    """Not a decision: the deciding server's expiry notice ended the wait as its timeout would."""


@dataclasses.dataclass(frozen=True)
class ControlMessage:
    """One instruction to a run.

    ``kind`` is a :class:`ControlKind` (a plain string naming one is accepted and
    converted); anything else is kept as given so that dispatch can answer it
    with a FAILURE ack instead of failing at construction.
    """

    kind: ControlKind | str
    payload: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    id: str = dataclasses.field(default_factory=functools.partial(new_id, "ctl"))
    issued_at_ms: int = dataclasses.field(default_factory=now_ms)

    def __post_init__(self) -> None:
        if isinstance(self.kind, str) and not isinstance(self.kind, ControlKind):
            # An unknown string is kept verbatim; dispatch answers "unknown control kind".
            with contextlib.suppress(ValueError):
                object.__setattr__(self, "kind", ControlKind(self.kind))


@fact(slots=False)
class ControlAck:
    """The answer to a control message, in words a UI can show."""

    control_id: str
    result: AckResult
    detail: str = ""
    acked_at_ms: int = dataclasses.field(default_factory=now_ms)
    data: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """True when the message was applied."""
        return self.result is AckResult.SUCCESS

    @property
    def verdict(self) -> AckVerdict:
        """What became of the decision this ack answers (:attr:`AckVerdict.APPLIED` when its data names none)."""
        named = self.data.get("decision") if isinstance(self.data, Mapping) else None
        return next((v for v in AckVerdict if v.value == named), AckVerdict.APPLIED)

    @classmethod
    def success(cls, control_id: str, detail: str = "", data: Mapping[str, Any] | None = None) -> ControlAck:
        """A SUCCESS ack."""
        return cls(control_id, AckResult.SUCCESS, detail, data=data)

    @classmethod
    def failure(cls, control_id: str, detail: str) -> ControlAck:
        """A FAILURE ack saying what was wrong."""
        return cls(control_id, AckResult.FAILURE, detail)

    @classmethod
    def unsupported(cls, control_id: str, detail: str) -> ControlAck:
        """An UNSUPPORTED ack (a known kind this run cannot honour)."""
        return cls(control_id, AckResult.UNSUPPORTED, detail)


Dispatcher = Callable[[ControlMessage], ControlAck]
"""Applies one message synchronously and says what happened. Must not block."""


@dataclasses.dataclass(frozen=True)
class ChannelStatistics:
    """A snapshot of a channel for observability and tests."""

    bound: bool
    backlog: int
    dispatched: int


def _control_id(msg: object) -> str:
    ident = getattr(msg, "id", None)
    return ident if isinstance(ident, str) else ""


def check_message(msg: object) -> ControlAck | None:
    """A FAILURE ack if ``msg`` is not a well-formed ControlMessage, else None.

    Every dispatcher runs this first so that malformed input (wrong types,
    unknown kinds, a payload that is not a mapping) is answered, never raised.
    """
    if not isinstance(msg, ControlMessage):
        return ControlAck.failure("", f"expected a ControlMessage, got {type(msg).__name__}")
    if not isinstance(msg.id, str):
        return ControlAck.failure("", f"control message id must be a string, got {type(msg.id).__name__}")
    if not isinstance(msg.kind, ControlKind):
        known = ", ".join(k.value for k in ControlKind if k is not ControlKind.UNSPECIFIED)
        return ControlAck.failure(msg.id, f"unknown control kind {safe_repr(msg.kind)} (expected one of: {known})")
    if msg.kind is ControlKind.UNSPECIFIED:
        return ControlAck.failure(msg.id, "control kind UNSPECIFIED: say what the message asks for")
    if type(msg.payload) is not dict and not isinstance(msg.payload, Mapping):  # a dict skips the ABC's check
        return ControlAck.failure(msg.id, f"payload must be a mapping, got {type(msg.payload).__name__}")
    # A lone surrogate in a steer text, a reason, a name or an edit: refused here, once for every kind, before a
    # handler queues it, decides with it or emits it (each of which would fail in an encoder half-way).
    not_text = "" if msg.id.isascii() else text_problem(msg.id, what="control message id")  # ASCII is text
    if not_text:
        return ControlAck.failure("", f"{msg.kind}: {not_text}; nothing was done")
    not_text = text_problem(msg.payload, what="payload")
    if not_text:
        return ControlAck.failure(msg.id, f"{msg.kind}: {not_text}; nothing was done")
    return None


DEFAULT_SEND_TIMEOUT_S = 60.0
"""How long ``send()`` waits for a run to take a message unless told otherwise (``timeout=None``: no bound)."""

_ENDED_MEMORY = 1024


@runtime_checkable
class ControlTransport(Protocol):
    """What runs (through their :class:`~goldfive_core.routing.ControlRouter`), the ladder and the gate use of a
    control channel. :class:`ControlChannel` (in memory) and :class:`~goldfive_core.store.StoreChannel` (a store,
    across processes) implement it; neither extends the other.
    """

    ledger: ExecutionLedger | None
    """At-most-once records of approved tool calls this transport offers the gate (None: none)."""

    @property
    def bound(self) -> bool:
        """Whether a run is listening."""
        ...

    def bind(self, dispatcher: Dispatcher, *, owner: object | None = None) -> None:
        """Start dispatching messages to ``dispatcher`` (a run's router)."""
        ...

    def unbind(self, dispatcher: Dispatcher) -> None:
        """Stop dispatching to ``dispatcher``."""
        ...

    def run_ended(self, names: Iterable[str], detail: str) -> None:
        """A run ended: messages naming it (run id, session id, a target id it asked about) get ``detail`` at once."""
        ...

    async def send(self, msg: ControlMessage, *, timeout: float | None = DEFAULT_SEND_TIMEOUT_S) -> ControlAck:  # noqa: ASYNC109
        """Deliver ``msg`` and return its ack (a FAILURE ack for every problem)."""
        ...

    def send_nowait(self, msg: ControlMessage) -> asyncio.Future[ControlAck]:
        """Start delivering ``msg``; a future of its ack."""
        ...

    def statistics(self) -> ChannelStatistics:
        """Counts for observability."""
        ...


def message_names(msg: ControlMessage) -> list[str]:
    """The run ids, session ids and target ids a message names."""
    payload = msg.payload
    names = [v for k in ("run_id", "session_id", "target", "target_id") if isinstance(v := payload.get(k), str) and v]
    return names


class ControlChannel:
    """In-memory control channel (one asyncio event loop); implements :class:`ControlTransport`.

    ``await send(msg)`` returns the :class:`ControlAck` once the bound run has
    dispatched the message; ``send_nowait(msg)`` returns a future of it at once.
    Acks come back in send order and are never dropped: a message that cannot
    be applied, or that waited longer than ``send(timeout=...)``, gets a
    FAILURE ack saying why.
    """

    ledger: ExecutionLedger | None = None
    """At-most-once records this transport offers adapters (none in memory; a store channel has its store's)."""

    def __init__(self, *, max_backlog: int = 10_000) -> None:
        if max_backlog < 1:
            raise ValueError(f"max_backlog must be >= 1, got {max_backlog}")
        self._max_backlog = max_backlog
        self._dispatcher: Dispatcher | None = None
        self._owner: object | None = None
        self._backlog: collections.deque[tuple[ControlMessage, asyncio.Future[ControlAck]]] = collections.deque()
        self._dispatched = 0
        self._ended: collections.OrderedDict[str, str] = collections.OrderedDict()

    # -- sending ---------------------------------------------------------
    async def send(self, msg: ControlMessage, *, timeout: float | None = DEFAULT_SEND_TIMEOUT_S) -> ControlAck:  # noqa: ASYNC109 (a deadline on the wait for a run, not on the call)
        """Dispatch ``msg`` (now, or once a run binds) and return its ack.

        ``timeout`` bounds the wait for a run to bind (seconds; default
        :data:`DEFAULT_SEND_TIMEOUT_S`, ``None`` = wait for one). When it runs
        out the message is withdrawn, never dispatched later, and the ack is a
        FAILURE that says so. A message for a run that ended is answered at once.
        """
        fut = self.send_nowait(msg)
        if fut.done() or timeout is None:
            return await fut
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.CancelledError:
            if not fut.done():  # as without a timeout: a cancelled sender's message is never dispatched later
                self._withdraw(fut)
                fut.cancel()
            raise
        except TimeoutError:
            if fut.done():  # dispatched in the same instant the timer fired
                return fut.result()
            self._withdraw(fut)
            return ControlAck.failure(
                _control_id(msg), f"not dispatched: no run bound this channel within {timeout:g}s"
            )

    def send_nowait(self, msg: ControlMessage) -> asyncio.Future[ControlAck]:
        """Dispatch ``msg`` if a run is bound, else queue it; return a future of the ack."""
        fut: asyncio.Future[ControlAck] = asyncio.get_running_loop().create_future()
        if self._dispatcher is not None and not self._backlog:
            fut.set_result(self._dispatch(msg))
        elif (ended := self._ended_for(msg)) is not None:
            fut.set_result(ControlAck.failure(_control_id(msg), ended))
        elif len(self._backlog) >= self._max_backlog:
            fut.set_result(
                ControlAck.failure(
                    _control_id(msg),
                    f"refused: {len(self._backlog)} messages already wait for a run (max_backlog={self._max_backlog})",
                )
            )
        else:
            self._backlog.append((msg, fut))
        return fut

    # -- binding (runs call these) ----------------------------------------
    def bind(self, dispatcher: Dispatcher, *, owner: object | None = None) -> None:
        """Attach the run's dispatcher and dispatch every waiting message in order."""
        # Compare with ==: a bound method (router.dispatch) is a new object on every attribute access.
        if self._dispatcher is not None and self._dispatcher != dispatcher:
            raise ChannelBusyError(
                f"this ControlChannel is already bound to {self._owner!r}; use one channel per runner"
            )
        self._dispatcher = dispatcher
        self._owner = owner
        while self._backlog and self._dispatcher == dispatcher:
            msg, fut = self._backlog.popleft()
            if not fut.done():
                fut.set_result(self._dispatch(msg))

    def unbind(self, dispatcher: Dispatcher) -> None:
        """Detach ``dispatcher``; later messages wait for the next run."""
        if self._dispatcher == dispatcher:
            self._dispatcher = None
            self._owner = None

    @property
    def bound(self) -> bool:
        """Whether a run is listening."""
        return self._dispatcher is not None

    def run_ended(self, names: Iterable[str], detail: str) -> None:
        """Remember (bounded) that the runs named ended, so a message for them is answered at once."""
        for name in names:
            if name:
                self._ended[name] = detail
                self._ended.move_to_end(name)
        while len(self._ended) > _ENDED_MEMORY:
            self._ended.popitem(last=False)
        if self._dispatcher is None:  # messages already waiting for one of them get their answer now
            for msg, fut in list(self._backlog):
                ended = self._ended_for(msg)
                if ended is not None and not fut.done():
                    self._withdraw(fut)
                    fut.set_result(ControlAck.failure(_control_id(msg), ended))

    def statistics(self) -> ChannelStatistics:
        """Counts for observability."""
        return ChannelStatistics(bound=self.bound, backlog=len(self._backlog), dispatched=self._dispatched)

    # -- internals ---------------------------------------------------------
    def _ended_for(self, msg: object) -> str | None:
        if not self._ended or not isinstance(msg, ControlMessage) or not isinstance(msg.payload, Mapping):
            return None
        return next((self._ended[n] for n in message_names(msg) if n in self._ended), None)

    def _withdraw(self, fut: asyncio.Future[ControlAck]) -> None:
        self._backlog = collections.deque(item for item in self._backlog if item[1] is not fut)

    def _dispatch(self, msg: ControlMessage) -> ControlAck:
        dispatcher = self._dispatcher
        assert dispatcher is not None
        self._dispatched += 1
        try:
            ack = dispatcher(msg)
        except Exception as exc:  # a dispatcher bug must not reach the sender or lose the ack
            logger.exception("dispatching control message %s failed", _control_id(msg))
            return ControlAck.failure(_control_id(msg), f"internal error while dispatching: {shorten(repr(exc))}")
        if not isinstance(ack, ControlAck):
            return ControlAck.failure(_control_id(msg), f"dispatcher returned {type(ack).__name__}, not a ControlAck")
        return ack
