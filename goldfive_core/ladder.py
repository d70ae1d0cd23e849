"""The intervention ladder as a data table: which level a drift leads to (docs/flows/escalation.md).

A row gives the level for each severity; CRITICAL has two columns, one for
the first CRITICAL drift of a (kind, task) and one for every repeat. The
``None`` key holds the row for kinds without a row of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from .drift import DriftKind, DriftSeverity, InterventionLevel
from .errors import ConfigError

__all__ = ["DEFAULT_LADDER", "LadderRow", "LadderTable", "ladder_level", "merge_ladder"]

_L = InterventionLevel


class LadderRow(NamedTuple):
    """The levels one drift kind leads to, by severity (``critical_repeat``: seen CRITICAL before)."""

    info: InterventionLevel
    warning: InterventionLevel
    critical_first: InterventionLevel
    critical_repeat: InterventionLevel


LadderTable = Mapping[DriftKind | None, LadderRow]
"""Rows by drift kind; the ``None`` row applies to every kind without a row."""


def _row(info: int, warning: int, critical_first: int, critical_repeat: int) -> LadderRow:
    return LadderRow(_L(info), _L(warning), _L(critical_first), _L(critical_repeat))


DEFAULT_LADDER: LadderTable = MappingProxyType(
    {
        None: _row(0, 1, 3, 4),
        DriftKind.INTENT_DIVERGENCE: _row(0, 1, 4, 4),
        DriftKind.REFINE_VALIDATION_FAILED: _row(0, 0, 4, 4),
        DriftKind.RUNAWAY_DELEGATION: _row(0, 0, 3, 4),
        DriftKind.HUMAN_INTERVENTION_REQUIRED: _row(0, 0, 4, 5),
        DriftKind.TASK_TIMEOUT: _row(0, 0, 4, 4),
        DriftKind.TOO_MANY_STEPS: _row(0, 0, 4, 4),
        DriftKind.RESOURCE_EXHAUSTED: _row(0, 0, 4, 4),
        DriftKind.LLM_CALL_TIMEOUT: _row(0, 0, 4, 4),
        DriftKind.LOOPING_TOOL_CALL: _row(0, 2, 3, 4),
        DriftKind.LOOPING_REASONING: _row(0, 2, 3, 4),
        DriftKind.PLAN_DIVERGENCE: _row(0, 0, 0, 0),
        DriftKind.NEW_WORK_DISCOVERED: _row(0, 0, 0, 0),
    }
)
"""The table on docs/flows/escalation.md, cell for cell (tests/docs/test_docs_ladder.py checks the page)."""


def _as_row(key: object, value: object) -> LadderRow:
    if not isinstance(value, tuple) or len(value) != 4:
        raise ConfigError(f"ladder row for {key!r} must be 4 levels (info, warning, critical_first, critical_repeat)")
    levels: list[InterventionLevel] = []
    for cell in value:
        if isinstance(cell, bool) or not isinstance(cell, int) or not 0 <= cell <= 5:
            raise ConfigError(f"ladder row for {key!r}: {cell!r} is not a level (0 OBSERVE .. 5 TERMINATE)")
        levels.append(_L(cell))
    return LadderRow(*levels)


def merge_ladder(overrides: Mapping[DriftKind | None, tuple[int, int, int, int]] | None) -> LadderTable:
    """The default table with ``overrides`` replacing whole rows (``None`` = the default row).

    Raises ConfigError naming the bad key or cell.
    """
    table: dict[DriftKind | None, LadderRow] = dict(DEFAULT_LADDER)
    for key, value in (overrides or {}).items():
        if key is not None and not isinstance(key, DriftKind):
            raise ConfigError(f"ladder keys must be DriftKind members or None (the default row), got {key!r}")
        table[key] = _as_row(key, value)
    return MappingProxyType(table)


def ladder_level(
    table: LadderTable, kind: DriftKind, severity: DriftSeverity, occurrence_count: int
) -> InterventionLevel:
    """The level for a drift; ``occurrence_count`` counts this (kind, task, severity), this one included."""
    row = table.get(kind) or table[None]
    if severity is DriftSeverity.INFO:
        return row.info
    if severity is DriftSeverity.WARNING:
        return row.warning
    return row.critical_first if occurrence_count <= 1 else row.critical_repeat
