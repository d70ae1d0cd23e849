"""examples/claude_agent.py runs offline and does what the person decided."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run(
        [sys.executable, "examples/claude_agent.py", *flags],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("flags", "ledger"),
    [
        ((), "ledger: [{'order_id': '1042', 'amount': 250}]"),
        (("--decision", "edit", "--amount", "120"), "ledger: [{'amount': 120, 'order_id': '1042'}]"),
        (("--decision", "reject", "--reason", "already refunded"), "ledger: []"),
    ],
)
def test_the_example_runs_offline(flags: tuple[str, ...], ledger: str) -> None:
    done = _run(*flags)
    assert done.returncode == 0, done.stderr
    assert "offline: FakeClaudeCLI plays Claude" in done.stdout
    assert ledger in done.stdout
    if "reject" in flags:
        assert "rejected this mcp__shop__refund call: already refunded" in done.stdout
