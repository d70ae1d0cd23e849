"""Reading the code blocks out of README.md and docs/**/*.md, as the doc-snippet tests run them.

The conventions (written down for authors in docs/development.md, "Code blocks in the docs"):

* A ``python`` block is a program: it runs as written, on its own, in a fresh namespace and an empty
  working directory. Top-level ``await`` is allowed (the block then runs in an event loop).
* A ``python`` block that defines ``test_*`` functions is a pytest file: it runs under pytest, in a
  directory of its own with pytest's default configuration, as a user who copied it would run it.
* ``<!-- snippet: fragment (why) -->`` on the line before a fence marks a block that is part of a
  program (it names things defined elsewhere): it is compiled and its imports are run, nothing else.
* A ``toml`` block is parsed: one with ``[[rule]]`` is loaded as a policy, one with ``[[webhook]]``,
  ``[[slack]]`` or ``[[email]]`` as a notification config.
* Any other block (``bash``, ``text``, ...) is shown, not run.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRAGMENT = re.compile(r"^\s*<!--\s*snippet:\s*fragment\b.*-->\s*$")
_MARKER = re.compile(r"^\s*<!--\s*snippet:")
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its text, and whether it is a marked fragment."""

    path: Path
    line: int
    lang: str
    code: str
    fragment: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    """The README and every page of the docs tree."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file, dedented to their fence."""
    lines = path.read_text(encoding="utf-8").split("\n")
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            _check_marker(path, lines, i)
            i += 1
            continue
        start, indent = i, fence["indent"]
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        if i == len(lines):
            raise AssertionError(f"{path.relative_to(ROOT)}:{start + 1}: a code block that never closes")
        body = "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines[start + 1 : i])
        marked = start > 0 and FRAGMENT.match(lines[start - 1]) is not None
        found.append(Block(path, start + 1, fence["lang"], textwrap.dedent(body) + "\n", marked))
        i += 1
    return found


def _check_marker(path: Path, lines: list[str], i: int) -> None:
    # A marker that is misspelt, or not right above a fence, would silently mark nothing.
    if _MARKER.match(lines[i]) is None:
        return
    where = f"{path.relative_to(ROOT)}:{i + 1}"
    assert FRAGMENT.match(lines[i]), f"{where}: unknown snippet marker {lines[i].strip()!r}"
    assert i + 1 < len(lines) and _FENCE.match(lines[i + 1]), (
        f"{where}: a snippet marker must stand right above a fence"
    )


def all_blocks(*langs: str) -> list[Block]:
    """Every block of the given languages, in every doc file."""
    return [block for path in doc_files() for block in blocks(path) if block.lang in langs]


def run_pytest(folder: Path, files: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """Write ``files`` into ``folder`` and run pytest there, as a user who copied them would."""
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard
        check=False,
    )
