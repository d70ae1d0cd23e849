"""SteeringConfig: how long goldfive waits, how much it remembers, and when its detectors and ladder step in.

Build one directly for explicit values, or with :meth:`SteeringConfig.from_env`
to let ``GOLDFIVE_STEER_<FIELD>`` environment variables override the defaults.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping
from typing import Any

from .drift import DriftKind
from .errors import ConfigError
from .ladder import DEFAULT_LADDER, LadderTable, merge_ladder

__all__ = ["ENV_PREFIX", "SteeringConfig"]

logger = logging.getLogger(__name__)

ENV_PREFIX = "GOLDFIVE_STEER_"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SteeringConfig:
    """How long goldfive waits, how much it remembers, and when its detectors and ladder step in.

    Build one directly for explicit values, or with :meth:`from_env` (what
    ``wrap`` and the plugins do when no config is given) to let
    ``GOLDFIVE_STEER_<FIELD>`` environment variables override the defaults.
    """

    approval_default_timeout_ms: int = 600_000
    """Wait for a decision when ``report_awaiting_approval`` gives no positive ``timeout_ms``."""

    tool_approval_timeout_ms: int | None = None
    """Wait for a tool confirmation (Flow B); ``None`` = ``approval_default_timeout_ms``."""

    pause_escalate_deadline_s: float | None = None
    """How long a PAUSE_ESCALATE waits for a person before aborting the run; ``None`` = wait."""

    decided_history: int = 4096
    """Decided approvals remembered per run so a second decision gets "already decided"."""

    loop_warning_repeats: int = 3
    """The same tool with the same arguments this many times in a row: LOOPING_TOOL_CALL at WARNING."""

    loop_critical_repeats: int = 5
    """... and from this many times in a row on: LOOPING_TOOL_CALL at CRITICAL (every further repeat)."""

    max_steps: int | None = 200
    """Step budget (model calls; callable agents: checkpoints): TOO_MANY_STEPS at each multiple; ``None`` = off."""

    max_transfers: int | None = 10
    """Agent transfers a run may make; every one beyond is RUNAWAY_DELEGATION at CRITICAL; ``None`` = off."""

    max_reinvokes: int = 2
    """How often a run's agent may be cancelled and re-invoked (level 3) before the ladder escalates instead."""

    ladder: Mapping[DriftKind | None, tuple[int, int, int, int]] | None = dataclasses.field(
        default=None, metadata={"env": False}
    )
    """Rows replacing the default ladder's (docs/flows/escalation.md; ``None`` = the default row); not read from env."""

    def __post_init__(self) -> None:
        _positive_int("approval_default_timeout_ms", self.approval_default_timeout_ms)
        if self.tool_approval_timeout_ms is not None:
            _positive_int("tool_approval_timeout_ms", self.tool_approval_timeout_ms)
        if self.pause_escalate_deadline_s is not None:
            value = self.pause_escalate_deadline_s
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ConfigError(
                    f"pause_escalate_deadline_s must be a positive number of seconds or None, got {value!r}"
                )
        _positive_int("decided_history", self.decided_history)
        _positive_int("loop_warning_repeats", self.loop_warning_repeats)
        _positive_int("loop_critical_repeats", self.loop_critical_repeats)
        if self.max_steps is not None:
            _positive_int("max_steps", self.max_steps)
        if self.max_transfers is not None:
            _positive_int("max_transfers", self.max_transfers)
        if isinstance(self.max_reinvokes, bool) or not isinstance(self.max_reinvokes, int) or self.max_reinvokes < 0:
            raise ConfigError(f"max_reinvokes must be an integer >= 0, got {self.max_reinvokes!r}")
        if self.ladder is not None:
            object.__setattr__(self, "ladder", merge_ladder(self.ladder))

    @property
    def ladder_table(self) -> LadderTable:
        """The ladder in force: the default one (docs/flows/escalation.md) with ``ladder``'s rows replacing its rows."""
        return DEFAULT_LADDER if self.ladder is None else merge_ladder(self.ladder)

    @property
    def effective_tool_approval_timeout_ms(self) -> int:
        """The Flow B wait in milliseconds."""
        return self.tool_approval_timeout_ms or self.approval_default_timeout_ms

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> SteeringConfig:
        """Defaults, overridden by ``GOLDFIVE_STEER_*`` variables, overridden by ``overrides``.

        A variable that does not parse, or parses to a value out of range, is
        logged at WARNING and ignored (the default stays).
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(ENV_PREFIX + field.name.upper())
            if raw is None or field.name in overrides or not field.metadata.get("env", True):
                continue
            try:
                parsed = _parse(field.name, raw)
                alone: dict[str, Any] = {field.name: parsed}
                cls(**alone)  # validate this one value on its own
            except (ValueError, ConfigError) as exc:
                logger.warning("ignoring %s%s=%r: %s; keeping the default", ENV_PREFIX, field.name.upper(), raw, exc)
                continue
            values[field.name] = parsed
        values.update(overrides)
        return cls(**values)


_OPTIONAL_INTS = frozenset({"tool_approval_timeout_ms", "max_steps", "max_transfers"})


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def _parse(name: str, raw: str) -> int | float | None:
    text = raw.strip()
    if name.endswith("_s"):
        if text.lower() in ("", "none"):
            return None
        return float(text)
    if text.lower() in ("", "none") and name in _OPTIONAL_INTS:
        return None
    return int(text)
