"""Steering: SteeringConfig (the knobs, with environment overrides); the ladder lives beside it."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Mapping
from typing import Any

from .errors import ConfigError

__all__ = ["ENV_PREFIX", "SteeringConfig"]

logger = logging.getLogger(__name__)

ENV_PREFIX = "GOLDFIVE_STEER_"


@dataclasses.dataclass(frozen=True, kw_only=True)
class SteeringConfig:
    """How long goldfive waits and how much it remembers.

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
            if raw is None or field.name in overrides:
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


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


def _parse(name: str, raw: str) -> int | float | None:
    text = raw.strip()
    if name.endswith("_s"):
        if text.lower() in ("", "none"):
            return None
        return float(text)
    if text.lower() in ("", "none") and name == "tool_approval_timeout_ms":
        return None
    return int(text)
