"""From ``Proceed`` to the body's end: the one in-flight record of an approved tool call, for every adapter.

After :func:`~goldfive_core.toolcall.gate_tool_call` answers :class:`~goldfive_core.toolcall.Proceed`, an
adapter hands the outcome to :meth:`InFlight.started`; when its host says the body ended it calls
:meth:`InFlight.finished` with the result or the error. The record then

* tells the ledger once that the body finished ("done", with the result or the error: one way for every host —
  the exception it raised, or the host's words when that is all it gives, recorded as those words);
  two errors say more than that: :class:`NotStarted` (the host knows the body never began: the claim is given
  back, "released, not run") and :class:`InDoubt` (the host lost the body mid-way: it may or may not have run,
  so the entry stays "executing", in doubt for a person, and is never run again);
* runs what the adapter asked for at the end (``on_end``: e.g. the ADK plugin settles a resumed call's lease);
* answers the approver's note — the one hook for it: what the model is to be told about the approval, which the
  adapter puts in its host's shape (ADK: the function response; Claude: the hook's ``additionalContext``).

A host that runs the body itself (:func:`~goldfive_core.store.run_approved`) calls :meth:`InFlight.run`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from .errors import InDoubt, NotStarted
from .toolcall import Proceed

__all__ = ["InDoubt", "InFlight", "NotStarted"]

T = TypeVar("T")

OnEnd = Callable[[], Awaitable[None]]


class _HostFailure(Exception):
    """A body's failure as its host reported it, in words only (Claude's PostToolUseFailure).

    Its ``repr`` is those words, so the ledger records them as they are (an exception is recorded by its repr).
    """

    def __repr__(self) -> str:
        return str(self)


@dataclasses.dataclass(frozen=True, slots=True)
class _Record:
    proceed: Proceed
    on_end: OnEnd | None


class InFlight:
    """The approved calls whose body runs now, by call id (one per adapter object: a plugin, a Claude run)."""

    def __init__(self) -> None:
        self._calls: dict[str, _Record] = {}

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._calls

    def started(self, outcome: Proceed, *, on_end: OnEnd | None = None) -> None:
        """The body is about to run; keep what its end must do (nothing is kept when there is nothing to do)."""
        # `decision is None` first: a call nobody decided has no note, and `note` is a property (a Python call).
        if outcome.ledger is None and (outcome.decision is None or not outcome.note) and on_end is None:
            return
        self._calls[outcome.call_id] = _Record(outcome, on_end)

    async def finished(self, call_id: str, *, result: Any = None, error: BaseException | str | None = None) -> str:
        """The body of ``call_id`` ended: record it and return the approver's note for the model.

        ``error``: the exception it raised, or the host's words for its failure; a :class:`NotStarted` gives the
        claim back instead of recording "done", an :class:`InDoubt` leaves the entry "executing" (in doubt). The
        note is "" when there is none, when the call is not in flight, and after a failure (the model is told of the
        error instead). Never raises for the ledger (:meth:`Proceed.finish`, :meth:`Proceed.release`).
        """
        record = self._calls.pop(call_id, None)
        if record is None:
            return ""
        failure = _HostFailure(error) if isinstance(error, str) else error
        if isinstance(failure, NotStarted):
            await record.proceed.release()
        elif isinstance(failure, InDoubt):
            record.proceed.in_doubt(str(failure))
        else:
            await record.proceed.finish(result=None if failure is not None else result, error=failure)
        if record.on_end is not None:
            await record.on_end()
        return "" if failure is not None else record.proceed.note

    async def run(self, outcome: Proceed, body: Callable[[Mapping[str, Any]], Awaitable[T]]) -> T:
        """Run ``body`` with the approved arguments, in flight from start to end (its error propagates)."""
        self.started(outcome)
        try:
            result = await body(dict(outcome.args))
        except BaseException as exc:  # asyncio.CancelledError too: the body started, its end is recorded
            await self.finished(outcome.call_id, error=exc)
            raise
        await self.finished(outcome.call_id, result=result)
        return result
