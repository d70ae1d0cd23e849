"""The Testing page's example passes as a user copies it, in each asyncio mode the page names (issue #24).

The doc-snippet walk already runs it under pytest's defaults (pytest-asyncio's strict mode, with the
``@pytest.mark.asyncio`` the example carries). Here: without the mark it fails in strict mode, as the
page says, and passes under the page's own ``asyncio_mode = "auto"`` block.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.docs.snippets import ROOT, Block, blocks

PAGE = ROOT / "docs" / "testing.md"
MARK = "@pytest.mark.asyncio\n"


def _page_blocks() -> tuple[Block, Block]:
    found = blocks(PAGE)
    (example,) = [b for b in found if b.lang == "python" and "def test_" in b.code]
    (config,) = [b for b in found if b.lang == "toml" and "asyncio_mode" in b.code]
    return example, config


def _pytest(folder: Path, config_name: str, config: str, test: str) -> subprocess.CompletedProcess[str]:
    (folder / config_name).write_text(config, encoding="utf-8")
    (folder / "test_copied.py").write_text(test, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_copied.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard
        check=False,
    )


def test_the_example_carries_the_mark_strict_mode_needs() -> None:
    example, _ = _page_blocks()
    assert example.code.count(MARK) == 1


def test_without_the_mark_strict_mode_fails_it(tmp_path: Path) -> None:
    example, _ = _page_blocks()
    proc = _pytest(tmp_path, "pytest.ini", "[pytest]\n", example.code.replace(MARK, ""))
    assert proc.returncode == 1, proc.stdout
    assert "async def functions are not natively supported" in proc.stdout


def test_without_the_mark_the_pages_auto_mode_runs_it(tmp_path: Path) -> None:
    example, config = _page_blocks()
    proc = _pytest(tmp_path, "pyproject.toml", config.code, example.code.replace(MARK, ""))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
