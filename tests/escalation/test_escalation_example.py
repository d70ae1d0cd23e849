"""examples/escalation.py runs offline and ends as the person's answer says; its exit status says so too."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "escalation.py"
GOLDFIVE = [sys.executable, "-m", "goldfive_core.cli"]


@pytest.mark.parametrize(
    ("flags", "ending", "code"),
    [
        (["--steer", "read the cache"], "run ended: COMPLETED", 0),
        (["--cancel"], "run ended: CANCELLED", 1),
        (["--resume"], "run ended: ABORTED", 1),
        (["--no-answer", "--deadline", "0.05"], "run ended: ABORTED", 1),
    ],
)
def test_the_example_runs_offline(flags: list[str], ending: str, code: int) -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), *flags],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == code, proc.stdout + proc.stderr
    escalation = [line for line in proc.stdout.splitlines() if "kind='HUMAN_INTERVENTION_REQUIRED'" in line]
    assert escalation, proc.stdout
    assert "severity='CRITICAL'" in escalation[0] and "ladder_level=4" in escalation[0]
    assert ending in proc.stdout


def test_on_a_store_the_escalation_waits_for_a_person_and_a_steer_from_the_cli_ends_it(tmp_path: Path) -> None:
    """``--db --wait``: the paused run is on the store (``goldfive runs`` shows it escalated, so the inbox does
    too), and ``goldfive steer`` from another process sends it on to complete."""
    db = str(tmp_path / "goldfive.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDFIVE_")}
    agent = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--db", db, "--wait", "--deadline", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # wait until the run says it is escalated on the store
            runs = subprocess.run([*GOLDFIVE, "--db", db, "runs"], capture_output=True, text=True, env=env, cwd=ROOT)
            if "ESCALATED" in runs.stdout:
                break
            assert agent.poll() is None and time.monotonic() < deadline, runs.stdout + runs.stderr
            time.sleep(0.2)
        steer = subprocess.run(
            [*GOLDFIVE, "--db", db, "steer", "read the cached forecast"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
        )
        assert steer.returncode == 0, steer.stdout + steer.stderr
        out, _ = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == 0, out
    assert "run ended: COMPLETED" in out and "as asked: 'read the cached forecast'" in out
