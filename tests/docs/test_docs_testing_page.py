"""The Testing page's example passes as a user copies it, in each asyncio mode the page names (issue #24).

The doc-snippet walk already runs it under pytest's defaults (pytest-asyncio's strict mode, with the
``@pytest.mark.asyncio`` the example carries). Here: without the mark it fails in strict mode, as the
page says, and passes under the page's own ``asyncio_mode = "auto"`` block.
"""

from __future__ import annotations

from pathlib import Path

from tests.docs.snippets import ROOT, Block, blocks, run_pytest

PAGE = ROOT / "docs" / "testing.md"
MARK = "@pytest.mark.asyncio\n"


def _page_blocks() -> tuple[Block, Block]:
    found = blocks(PAGE)
    (example,) = [b for b in found if b.lang == "python" and "def test_" in b.code]
    (config,) = [b for b in found if b.lang == "toml" and "asyncio_mode" in b.code]
    return example, config


def test_the_example_carries_the_mark_strict_mode_needs() -> None:
    example, _ = _page_blocks()
    assert example.code.count(MARK) == 1


def test_without_the_mark_strict_mode_fails_it(tmp_path: Path) -> None:
    example, _ = _page_blocks()
    proc = run_pytest(tmp_path, {"pytest.ini": "[pytest]\n", "test_copied.py": example.code.replace(MARK, "")})
    assert proc.returncode == 1, proc.stdout
    assert "async def functions are not natively supported" in proc.stdout


def test_without_the_mark_the_pages_auto_mode_runs_it(tmp_path: Path) -> None:
    example, config = _page_blocks()
    proc = run_pytest(tmp_path, {"pyproject.toml": config.code, "test_copied.py": example.code.replace(MARK, "")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
