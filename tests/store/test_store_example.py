"""The durable approval example runs without a terminal: a second process approves with the real command."""

from __future__ import annotations

import subprocess
from pathlib import Path

from store_support import PYTHON, REPO, Backend


def test_example_is_approved_from_a_second_process(tmp_path: Path) -> None:
    backend = Backend("sqlite", str(tmp_path / "goldfive.db"))
    env = backend.env()
    result = subprocess.run(
        [PYTHON, str(REPO / "examples" / "durable_approval.py"), "--call-id", "deploy-demo"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "goldfive approve deploy-demo --by <you>" in result.stdout
    assert "ok: approved 'deploy-demo'" in result.stdout
    assert "Deployed (approved by auto (no terminal)): {'deployed': 'v2', 'to': 'production'}" in result.stdout

    again = subprocess.run(
        [PYTHON, str(REPO / "examples" / "durable_approval.py"), "--call-id", "deploy-demo", "--wait"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Nothing to do: deploy already ran for 'deploy-demo'" in again.stdout
    verify = subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", "audit", "verify"], env=env, capture_output=True, text=True, check=False
    )
    assert verify.returncode == 0 and verify.stdout.startswith("ok: the audit chain of")
