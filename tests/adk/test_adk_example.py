"""The bundled example runs offline with no terminal: flags choose, and with none it approves and says so."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], ["approving by default", "sent 250 EUR to ACME Corp", "ledger: [{'amount': 250, 'to': 'ACME Corp'}]"]),
        (["--decision", "edit", "--amount", "120", "--to", "ACME Ltd"], ["sent 120 EUR to ACME Ltd"]),
        (
            ["--decision", "reject", "--reason", "wrong payee"],
            ["I did not pay: user_rejected (wrong payee)", "ledger: []"],
        ),
    ],
)
def test_example_runs_without_a_terminal(flags: list[str], expected: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "examples/adk_approval.py", *flags],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for words in expected:
        assert words in done.stdout, done.stdout
    assert "run_completed" in done.stdout
