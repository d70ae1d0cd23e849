"""examples/escalation.py runs offline and ends as the person's answer says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "escalation.py"


@pytest.mark.parametrize(
    ("flags", "ending"),
    [
        (["--steer", "read the cache"], "run ended: COMPLETED"),
        (["--cancel"], "run ended: CANCELLED"),
        (["--resume"], "run ended: ABORTED"),
        (["--no-answer", "--deadline", "0.05"], "run ended: ABORTED"),
    ],
)
def test_the_example_runs_offline(flags: list[str], ending: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), *flags],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    escalation = [line for line in proc.stdout.splitlines() if "kind='HUMAN_INTERVENTION_REQUIRED'" in line]
    assert escalation, proc.stdout
    assert "severity='CRITICAL'" in escalation[0] and "ladder_level=4" in escalation[0]
    assert ending in proc.stdout
