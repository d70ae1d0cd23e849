"""The ladder table on the Flow C page is the one goldfive runs (the code's comments cite that page)."""

from __future__ import annotations

from goldfive_core.drift import DriftKind
from goldfive_core.ladder import DEFAULT_LADDER
from tests.docs.snippets import ROOT

PAGE = ROOT / "docs" / "flows" / "escalation.md"


def _table() -> dict[DriftKind | None, tuple[int, int, int, int]]:
    section = PAGE.read_text(encoding="utf-8").split("## The ladder table", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| drift")]
    table: dict[DriftKind | None, tuple[int, int, int, int]] = {}
    for row in rows:
        name, *cells = (cell.strip() for cell in row.strip("|").split("|"))
        key = None if name.startswith("default") else DriftKind[name]
        info, warning, first, repeat = (int(cell) for cell in cells)
        table[key] = (info, warning, first, repeat)
    return table


def test_the_pages_ladder_is_default_ladder_cell_for_cell() -> None:
    expected = {kind: tuple(int(level) for level in row) for kind, row in DEFAULT_LADDER.items()}
    assert _table() == expected
