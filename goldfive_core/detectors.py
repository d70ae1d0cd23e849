"""Built-in deterministic detectors: repeated tool calls, a step budget, runaway delegation.

Each instance watches one session (``install_default_steering`` makes fresh
ones per session); thresholds come from :class:`SteeringConfig`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._util import canonical_json, safe_repr, shorten
from .drift import Drift, DriftKind, DriftSeverity
from .protocols import Detector

if TYPE_CHECKING:
    from .config import SteeringConfig
    from .session import Session

__all__ = ["DelegationDetector", "LoopingToolCallDetector", "StepBudgetDetector", "default_detectors"]

logger = logging.getLogger(__name__)


def _current_task(session: Session) -> str | None:
    task = session.tasks.current
    return task.id if task is not None else None


class LoopingToolCallDetector(Detector):
    """The same tool with the same arguments, again and again in a row: LOOPING_TOOL_CALL.

    WARNING when the streak reaches ``warning_repeats`` (if below
    ``critical_repeats``), CRITICAL on every call from ``critical_repeats`` on.
    Any other call ends the streak. Alternating loops (A, B, A, B) are not
    this detector's business.
    """

    def __init__(self, warning_repeats: int = 3, critical_repeats: int = 5) -> None:
        self.warning_repeats = warning_repeats
        self.critical_repeats = critical_repeats
        self._last_name: str | None = None
        self._last_args: dict[str, Any] = {}
        self.streak = 0
        """How many times in a row the latest call was made."""

    def on_tool_call(self, session: Session, tool_name: str, args: Mapping[str, Any]) -> Drift | None:
        """Count the streak of identical calls; report at the thresholds."""
        # Runs on every tool call: a plain comparison first, the canonical JSON only when it says "same".
        try:
            same = tool_name == self._last_name and args == self._last_args and _same_json(args, self._last_args)
        except Exception:  # an argument whose __eq__ raises: compare as text
            same = tool_name == self._last_name and safe_repr(args, 100_000) == safe_repr(self._last_args, 100_000)
        self._last_name, self._last_args = tool_name, dict(args)
        self.streak = self.streak + 1 if same else 1
        if self.streak >= self.critical_repeats:
            severity = DriftSeverity.CRITICAL
        elif self.streak == self.warning_repeats:
            severity = DriftSeverity.WARNING
        else:
            return None
        try:
            shown = canonical_json(args)
        except (TypeError, ValueError):
            shown = safe_repr(args, 200)
        detail = f"{tool_name}({shorten(shown, 120)}) called {self.streak} times in a row with the same arguments"
        return Drift(DriftKind.LOOPING_TOOL_CALL, severity, detail, task_id=_current_task(session))


def _same_json(args: Mapping[str, Any], last: Mapping[str, Any]) -> bool:
    """Equal arguments that JSON also says are the same (1 and 1.0 differ); non-JSON ones compare by repr."""
    try:
        return canonical_json(args) == canonical_json(last)
    except (TypeError, ValueError):
        return safe_repr(args, 100_000) == safe_repr(last, 100_000)


class StepBudgetDetector(Detector):
    """More steps (model calls) than the budget: TOO_MANY_STEPS at CRITICAL, once per budget used up."""

    def __init__(self, max_steps: int) -> None:
        self.max_steps = max_steps
        self.steps = 0
        """Steps seen so far."""

    def on_model_call(self, session: Session) -> Drift | None:
        """Count the step; report the first step beyond each multiple of the budget."""
        self.steps += 1
        if self.steps <= self.max_steps or (self.steps - 1) % self.max_steps:
            return None
        detail = f"step {self.steps} is beyond the step budget of {self.max_steps}"
        return Drift(DriftKind.TOO_MANY_STEPS, DriftSeverity.CRITICAL, detail, task_id=_current_task(session))


class DelegationDetector(Detector):
    """More agent transfers than the cap: RUNAWAY_DELEGATION at CRITICAL on every transfer beyond it."""

    def __init__(self, max_transfers: int) -> None:
        self.max_transfers = max_transfers
        self.transfers = 0
        """Transfers seen so far."""

    def on_transfer(self, session: Session, to_agent: str) -> Drift | None:
        """Count the transfer; report it when it is beyond the cap."""
        self.transfers += 1
        if self.transfers <= self.max_transfers:
            return None
        detail = f"transfer {self.transfers} (to {to_agent!r}) is beyond the cap of {self.max_transfers} transfers"
        return Drift(DriftKind.RUNAWAY_DELEGATION, DriftSeverity.CRITICAL, detail, task_id=_current_task(session))


def default_detectors(config: SteeringConfig) -> list[Detector]:
    """Fresh built-in detectors for one session, as ``config`` sets them (``None`` thresholds are off)."""
    detectors: list[Detector] = [LoopingToolCallDetector(config.loop_warning_repeats, config.loop_critical_repeats)]
    if config.max_steps is not None:
        detectors.append(StepBudgetDetector(config.max_steps))
    if config.max_transfers is not None:
        detectors.append(DelegationDetector(config.max_transfers))
    return detectors
