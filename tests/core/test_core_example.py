"""The bundled example runs offline, fast, and shows each Flow A outcome."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "approval_gated_agent.py"


def run_example(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,  # a hang guard, not a speed check: the example never waits for a person
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize(
    ("args", "decision_line", "outcome"),
    [
        ((), "approval_granted    target_id='purchase' detail='approved automatically by the example'", "Booked"),
        (("--approve", "--by", "ana"), "approval_granted    target_id='purchase' decided_by='ana'", "Booked"),
        (
            ("--reject", "too expensive", "--by", "bo"),
            "approval_rejected   target_id='purchase' detail='too expensive' decided_by='bo'",
            "Did not buy the ticket: reject (too expensive)",
        ),
        (("--timeout-ms", "5"), "drift_detected", "Did not buy the ticket: timeout"),
    ],
)
def test_each_outcome(args: tuple[str, ...], decision_line: str, outcome: str) -> None:
    out = run_example(*args)
    assert "task_blocked        task_id='purchase' blocker='awaiting_approval'" in out
    assert "approval_requested  target_id='purchase' kind='task'" in out
    assert decision_line in out
    assert outcome in out
    assert "run COMPLETED" in out
    if not args:
        assert "no terminal and no --approve/--reject flag: approving as 'auto (no terminal)'" in out
    if args[:1] == ("--timeout-ms",):
        assert "kind='HUMAN_INTERVENTION_REQUIRED' severity='WARNING'" in out
        assert "timeout_ms=5 " in out
