"""The deciders' side of the control channel: post a message into a store's inbox and wait for its ack.

:class:`StoreSender` is what :func:`~goldfive_core.store.decide`, the ``goldfive`` command and ``goldfive
serve`` use to reach a run in another process; :func:`send_control` is the one way in for the run controls
(pause, resume, steer, cancel) from outside. A message nobody took in time is withdrawn, never dispatched
later, and raised as :class:`DeliveryTimeout` (:class:`RunGone` when its run ended first).

The agents' side (serving an inbox) is :mod:`goldfive_core.store.channel`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from enum import Enum
from typing import Any, Protocol

from .._util import shorten
from ..control import DEFAULT_SEND_TIMEOUT_S, ControlAck, ControlKind, ControlMessage
from ..errors import AmbiguousRunError, DeliveryTimeout, RunGone, RunNotLiveError, UnknownRunError
from ..retry import Backoff, retry
from .base import Store, StoreError, StoreUnavailableError
from .liveness import RunLiveness

__all__ = [
    "DEFAULT_CONTROL_TIMEOUT_S",
    "RUN_LEVEL_KINDS",
    "AckSource",
    "AmbiguousRunError",
    "DeliveryTimeout",
    "Offload",
    "RunGone",
    "RunNotLiveError",
    "StoreSender",
    "UnknownRunError",
    "asend_control",
    "live_runs",
    "send_control",
]

logger = logging.getLogger(__name__)

DEFAULT_CONTROL_TIMEOUT_S = 30.0
"""How long a sender waits for a live run's ack by default."""

_LIVENESS_SLICE_S = 0.25
"""While waiting for an ack, how often the sender checks that the addressed run is still alive."""

_LATE_ACK_S = 5.0
"""A message claimed at the last moment is being dispatched: how long its ack may still take."""

_STORE_BACK = Backoff(first_s=0.05, cap_s=1.0)
"""Retries of the ack wait while the store is out of reach (the message is durable in the inbox)."""


RUN_LEVEL_KINDS = frozenset(
    {
        ControlKind.PAUSE,
        ControlKind.RESUME,
        ControlKind.CANCEL,
        ControlKind.STEER,
        ControlKind.GOLDFIVE_STEER,
        ControlKind.INJECT_MESSAGE,
        ControlKind.STATUS_QUERY,
    }
)
"""Kinds that act on a whole run. Unaddressed, they go to the only live run on the store, or wait for
the next run to start when none is live; with several live runs they are refused (name one)."""


class AckSource(Protocol):
    """Where an event loop waits for acks without a thread of its own per wait (``goldfive serve``'s watch).

    One that also has ``async run_gone(run_id) -> RunLiveness | None`` answers the deliveries' liveness checks
    too (how the run's process is gone, None while live: what :meth:`Store.liveness_of` says). One that also has
    ``watch(control_id)`` (a context manager whose ``async wait(timeout_s)`` gives the ack or None) watches a
    message over its whole delivery, so the wait between two liveness checks does not look for the ack again."""

    async def wait_ack(self, control_id: str, timeout_s: float) -> ControlAck | None:
        """The ack of ``control_id`` once stored, or None after ``timeout_s``."""
        ...


Offload = Callable[..., Awaitable[Any]]
"""Runs ``fn(*args)`` on a thread and awaits its result (``goldfive serve``'s pools)."""


class _Do(Enum):
    POST = "post"
    AWAIT_ACK = "await_ack"
    GONE = "gone"
    WITHDRAW = "withdraw"


@dataclasses.dataclass(frozen=True, slots=True)
class _Step:
    """One store call a delivery needs: what, for which message and run, and (waiting) until when."""

    kind: _Do
    msg: ControlMessage
    address: str
    until: float = 0.0


def live_runs(store: Store) -> list[str]:
    """The ids of the runs the store holds live (newest first, at most 1000 looked at)."""
    return [r.run_id for r in store.runs(limit=1000) if store.liveness_of(r).live]


def _listed(runs: list[str]) -> str:
    return ", ".join(runs[:10]) + (f" and {len(runs) - 10} more" if len(runs) > 10 else "")


class StoreSender:
    """Posts control messages into ``store``'s inbox and waits, bounded, for the run's ack (thread-safe)."""

    def __init__(self, store: Store, *, ack_timeout_s: float = DEFAULT_CONTROL_TIMEOUT_S) -> None:
        if ack_timeout_s <= 0:
            raise ValueError(f"ack_timeout_s must be > 0, got {ack_timeout_s}")
        self.store = store
        self.ack_timeout_s = ack_timeout_s

    def address(self, msg: ControlMessage) -> str:
        """The run a message goes to: ``payload["run_id"]``, else the run holding its open approval, else any."""
        payload = msg.payload
        if not isinstance(payload, Mapping):
            return ""  # posting refuses it with a clear error
        for key in ("run_id", "session_id", "target"):
            value = payload.get(key)
            if isinstance(value, str) and value and (key == "run_id" or self.store.run(value) is not None):
                return value
        if msg.kind in (ControlKind.APPROVE, ControlKind.REJECT):
            target = payload.get("target_id")
            if isinstance(target, str) and target:
                holders = {row.run_id for row in self.store.approvals_for(target) if row.open}
                if len(holders) == 1:
                    return holders.pop()
            # Not requested yet (an early decision): it stays unaddressed, and only the process whose run
            # announced that call takes it; it waits for that run, never goes to another.
            return ""
        if msg.kind in RUN_LEVEL_KINDS:
            live = live_runs(self.store)
            if len(live) > 1:
                raise AmbiguousRunError(
                    f"{msg.kind} names no run and {len(live)} runs are live on this store ({_listed(live)}); "
                    "name one with payload['run_id']"
                )
            if live:
                return live[0]
        return ""

    def deliver(self, msg: ControlMessage, *, timeout_s: float | None = None, run_id: str | None = None) -> ControlAck:
        """Post ``msg`` and block until its ack.

        Raises :class:`DeliveryTimeout` when no agent took it in time (it is
        withdrawn), StoreUnavailableError when the store cannot be reached.
        """
        address = self.address(msg) if run_id is None else run_id
        steps = self._delivery(msg, address, self.ack_timeout_s if timeout_s is None else timeout_s)
        reply: Any = None
        try:
            while True:
                step = steps.send(reply)
                reply = self._await_ack(msg.id, step.until) if step.kind is _Do.AWAIT_ACK else self._step(step)
        except StopIteration as done:
            ack: ControlAck = done.value
            return ack

    async def adeliver(
        self,
        msg: ControlMessage,
        *,
        acks: AckSource,
        offload: Offload,
        timeout_s: float | None = None,
        run_id: str | None = None,
        posted: bool = False,
        watched: Callable[[float], Awaitable[ControlAck | None]] | None = None,
    ) -> ControlAck:
        """:meth:`deliver` without holding a thread while the agent acks: ``acks`` waits for the ack in the event
        loop, ``offload`` runs the short store calls (post, liveness, withdraw) on a thread; same answers, same
        timeouts, same exceptions. ``posted``: the caller already posted ``msg`` (:meth:`post`, to ``run_id``) on
        the thread that checked it, saving a thread hop; the delivery goes on from there. ``watched``: the wait of
        a watch the caller began on ``msg.id`` (before it posted it), used instead of one begun here."""
        address = self.address(msg) if run_id is None else run_id
        steps = self._delivery(msg, address, self.ack_timeout_s if timeout_s is None else timeout_s)
        if watched is not None:
            return await self._adeliver(steps, watched, acks, offload, posted)
        watch = getattr(acks, "watch", None)  # one watch over the whole delivery: looked for once, not every slice
        with watch(msg.id) if watch is not None else contextlib.nullcontext() as watched:
            wait = watched.wait if watched is not None else functools.partial(acks.wait_ack, msg.id)
            return await self._adeliver(steps, wait, acks, offload, posted)

    async def _adeliver(
        self,
        steps: Generator[_Step, Any, ControlAck],
        wait: Callable[[float], Awaitable[ControlAck | None]],
        acks: AckSource,
        offload: Offload,
        posted: bool,
    ) -> ControlAck:
        reply: Any = None
        try:
            while True:
                step = steps.send(reply)
                if step.kind is _Do.AWAIT_ACK:
                    reply = await wait(max(step.until - time.monotonic(), 0.0))
                elif step.kind is _Do.POST and posted:
                    posted, reply = False, None
                elif step.kind is _Do.GONE and step.address and (gone := getattr(acks, "run_gone", None)):
                    reply = await gone(step.address)  # with the other waiting deliveries' checks (goldfive serve)
                else:
                    reply = await offload(self._step, step)
        except StopIteration as done:
            ack: ControlAck = done.value
            return ack

    def post(self, msg: ControlMessage, *, run_id: str) -> int:
        """Put ``msg`` in the control inbox for ``run_id`` (a delivery's first step); its inbox id."""
        return self.store.post_control(msg, run_id=run_id)

    def _step(self, step: _Step) -> Any:
        """One store call of a delivery (all but the wait for the ack, which each driver does its own way)."""
        if step.kind is _Do.POST:
            return self.post(step.msg, run_id=step.address)
        if step.kind is _Do.GONE:
            return self._gone(step.address)
        return self.store.withdraw_control(step.msg.id)

    @staticmethod
    def _delivery(msg: ControlMessage, address: str, timeout_s: float) -> Generator[_Step, Any, ControlAck]:
        """The protocol of one delivery, written once: it yields the store calls it needs and is sent their
        results (:meth:`deliver` answers them on this thread, :meth:`adeliver` from the event loop)."""
        deadline = time.monotonic() + timeout_s
        yield _Step(_Do.POST, msg, address)
        while True:
            ack = yield _Step(_Do.AWAIT_ACK, msg, address, min(deadline, time.monotonic() + _LIVENESS_SLICE_S))
            if ack is not None:
                return ack  # type: ignore[no-any-return]
            gone = yield _Step(_Do.GONE, msg, address)
            if gone is not None and (yield _Step(_Do.WITHDRAW, msg, address)):
                raise RunGone(
                    f"run {address} is not running ({gone.reason}); control message {msg.id} was withdrawn",
                    liveness=gone,
                )
            if time.monotonic() >= deadline:
                break
        if (yield _Step(_Do.WITHDRAW, msg, address)):
            raise DeliveryTimeout(f"no agent took control message {msg.id} within {timeout_s:g}s; it was withdrawn")
        # Claimed at the last moment: the dispatch is under way, its ack follows within moments.
        ack = yield _Step(_Do.AWAIT_ACK, msg, address, time.monotonic() + _LATE_ACK_S)
        if ack is None:
            raise DeliveryTimeout(f"control message {msg.id} was taken by an agent but not acked within {timeout_s:g}s")
        return ack  # type: ignore[no-any-return]

    async def send(self, msg: ControlMessage, timeout: float | None = DEFAULT_SEND_TIMEOUT_S) -> ControlAck:  # noqa: ASYNC109 (a deadline on the wait for an agent)
        """:meth:`deliver` from the event loop; every problem comes back as a FAILURE ack."""
        try:
            return await asyncio.to_thread(self.deliver, msg, timeout_s=timeout)
        except DeliveryTimeout as exc:
            return ControlAck.failure(msg.id, f"not dispatched: {exc}")
        except StoreError as exc:
            return ControlAck.failure(msg.id, f"not delivered: {shorten(str(exc))}")

    def _gone(self, run_id: str) -> RunLiveness | None:
        if not run_id:
            return None
        liveness = self.store.liveness_of(self.store.run(run_id))
        return None if liveness.live else liveness

    def _await_ack(self, control_id: str, deadline: float) -> ControlAck | None:
        # The message is durable in the inbox: through an outage, keep waiting while the store comes back.
        return retry(
            lambda: self.store.wait_ack(control_id, max(deadline - time.monotonic(), 0.0)),
            budget_s=deadline - time.monotonic(),
            on=StoreUnavailableError,
            what=f"waiting for the ack of {control_id}",
            policy=_STORE_BACK,
            logger=logger,
        )


def _live_run(store: Store, run: str | None) -> str:
    """The run a control goes to: ``run`` if it is live, else the only live run; raises when there is none."""
    if run:
        found = store.run(run)
        if found is None:
            raise UnknownRunError(f"no run {shorten(run, 80)!r} in this store (goldfive runs lists them)")
        liveness = store.liveness_of(found)
        if not liveness.live:
            raise RunNotLiveError(f"run {shorten(run, 80)} is not running ({liveness.reason}); nothing was sent")
        return run
    live = live_runs(store)
    if not live:
        raise RunNotLiveError("no live run in this store (is the agent running with a StoreChannel?)")
    if len(live) > 1:
        raise AmbiguousRunError(f"several runs are live ({_listed(live)}); name one with --run")
    return live[0]


def _control_message(
    store: Store, kind: ControlKind, payload: Mapping[str, Any], run: str | None
) -> tuple[ControlMessage, str]:
    """The run control for ``run`` (checked live) and the run it goes to; raises before anything is posted."""
    if kind not in RUN_LEVEL_KINDS:
        raise ValueError(f"send_control sends run controls ({', '.join(sorted(RUN_LEVEL_KINDS))}), not {kind}")
    run_id = _live_run(store, run)
    return ControlMessage(kind, {**payload, "run_id": run_id}), run_id


def send_control(
    store: Store,
    kind: ControlKind,
    payload: Mapping[str, Any],
    *,
    run: str | None = None,
    timeout_s: float = DEFAULT_CONTROL_TIMEOUT_S,
) -> ControlAck:
    """Send a run control (pause, resume, steer, cancel) to a live run and wait for its ack; the one way in
    for the command line and ``goldfive serve``.

    ``run`` names the run (default: the only live one). Raises :class:`UnknownRunError`,
    :class:`RunNotLiveError` or :class:`AmbiguousRunError` before anything is posted; :class:`RunGone` /
    :class:`DeliveryTimeout` when no agent took it in time (withdrawn); StoreError when the store fails.
    """
    msg, run_id = _control_message(store, kind, payload, run)
    return StoreSender(store).deliver(msg, timeout_s=timeout_s, run_id=run_id)


async def asend_control(
    store: Store,
    kind: ControlKind,
    payload: Mapping[str, Any],
    *,
    acks: AckSource,
    offload: Offload,
    run: str | None = None,
    timeout_s: float = DEFAULT_CONTROL_TIMEOUT_S,
) -> ControlAck:
    """:func:`send_control` from an event loop, waiting for the ack without a thread (see
    :meth:`StoreSender.adeliver`); the same checks, answers and exceptions."""
    msg, run_id = await offload(_control_message, store, kind, payload, run)
    return await StoreSender(store).adeliver(msg, acks=acks, offload=offload, timeout_s=timeout_s, run_id=run_id)
