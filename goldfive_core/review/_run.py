"""Run one reviewer, bounded, and never let it fail open: whatever goes wrong means "ask a person"."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._util import shorten
from ._verdict import MAX_REASON_CHARS, ReviewContext, ReviewVerdict

if TYPE_CHECKING:
    from ..policy import Rule, RuleReviewer
    from ..toolcall import ToolCall

__all__ = ["Judged", "resolve_reviewer", "run_reviewer"]

logger = logging.getLogger(__name__)

_resolved: dict[str, Callable[..., Any]] = {}


def resolve_reviewer(reviewer: RuleReviewer) -> Callable[..., Any]:
    """The callable a rule names: the object itself, or ``module:callable`` imported (once per process).

    Raises ImportError / AttributeError / TypeError with what is wrong; the caller treats that as "ask".
    """
    target = reviewer.target
    if not isinstance(target, str):
        return target
    hit = _resolved.get(target)
    if hit is not None:
        return hit
    module_name, _, path = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in path.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target} is a {type(obj).__name__}, not a callable")
    found: Callable[..., Any] = obj
    _resolved[target] = found
    return found


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Judged:
    """What one review came to: the verdict acted on (``ask`` whenever it failed) and why it failed."""

    verdict: ReviewVerdict
    error: str = ""
    """Why the reviewer gave no usable verdict ("" when it answered)."""
    elapsed_ms: int = 0

    @property
    def failed(self) -> bool:
        """The reviewer raised, timed out or returned something else: a person decides."""
        return bool(self.error)


async def run_reviewer(reviewer: RuleReviewer, call: ToolCall, context: ReviewContext, rule: Rule) -> Judged:
    """Run ``reviewer`` on ``call`` within its ``timeout_ms``; never raises (``asyncio.CancelledError`` propagates).

    A sync callable runs in a worker thread so its timeout holds; an async one (or one returning an
    awaitable) is awaited. Anything but a :class:`ReviewVerdict` — an exception, a timeout, another value —
    is a failure, and a failure is ``ask``: a reviewer never lets a call through by going wrong.
    """
    started = time.monotonic()
    try:
        verdict = await asyncio.wait_for(_call(reviewer, call, context, rule), reviewer.timeout_ms / 1000)
    except TimeoutError:
        return _failed(reviewer, f"it did not answer within {reviewer.timeout_ms / 1000:g} s", started)
    except Exception as exc:  # the reviewer's own bug or outage: a person decides (cancellation propagates)
        return _failed(reviewer, f"it raised {type(exc).__name__}: {shorten(str(exc), 300)}", started)
    clean = _clean(verdict)
    if clean is None:
        return _failed(reviewer, f"it returned {shorten(type(verdict).__name__, 80)}, not a ReviewVerdict", started)
    return Judged(verdict=clean, elapsed_ms=_since(started))


async def _call(reviewer: RuleReviewer, call: ToolCall, context: ReviewContext, rule: Rule) -> Any:
    fn = resolve_reviewer(reviewer)
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):  # noqa: B004
        result = fn(call, context, rule)
    else:  # a blocking function must not hold the agent's loop past its timeout
        result = await asyncio.to_thread(fn, call, context, rule)
    if inspect.isawaitable(result):
        result = await result
    return result


def _clean(verdict: Any) -> ReviewVerdict | None:
    """The verdict rebuilt (so a subclass or a tampered value carries nothing else on); None for anything else."""
    if not isinstance(verdict, ReviewVerdict):
        return None
    try:
        return ReviewVerdict(action=verdict.action, reason=shorten(verdict.reason, MAX_REASON_CHARS))
    except (AttributeError, TypeError, ValueError):
        return None


def _failed(reviewer: RuleReviewer, why: str, started: float) -> Judged:
    logger.warning("the reviewer %s gave no verdict: %s; a person decides", reviewer.decider, why)
    return Judged(verdict=ReviewVerdict(action="ask"), error=why, elapsed_ms=_since(started))


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
