"""The bundled example (``make demo``) runs offline with no terminal: flags choose, and with none it approves.

It uses the SQLite store as its control channel, so a person can also answer from a second terminal
with the ``goldfive`` command line; the last test does exactly that.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "adk_approval.py"


def _run(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *flags],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], ["approving by default", "sent 250 EUR to ACME Corp", "ledger: [{'amount': 250, 'to': 'ACME Corp'}]"]),
        (["--decision", "edit", "--amount", "120", "--to", "ACME Ltd"], ["sent 120 EUR to ACME Ltd"]),
        (
            ["--decision", "reject", "--reason", "wrong payee"],
            ["I did not pay: user_rejected (wrong payee)", "ledger: []"],
        ),
        (["--in-memory"], ["approving by default", "sent 250 EUR to ACME Corp"]),
        (
            ["--policy", "examples/payments_policy.toml", "--invoice", "80"],
            ["rule='small payments' action='allow'", "sent 80 EUR to ACME Corp", "ledger: [{'amount': 80"],
        ),
        (
            ["--policy", "examples/payments_policy.toml", "--payee", "Mallory Ltd"],
            [
                "rule='blocked payees' action='deny'",
                "I did not pay: policy_denied (this payee is blocked",
                "ledger: []",
            ],
        ),
    ],
)
def test_example_runs_without_a_terminal(flags: list[str], expected: list[str], tmp_path: Path) -> None:
    done = _run(*flags, "--db", str(tmp_path / "goldfive.db"))
    assert done.returncode == 0, done.stderr
    for words in expected:
        assert words in done.stdout, done.stdout
    assert "run_completed" in done.stdout
    if "--in-memory" in flags:
        assert not (tmp_path / "goldfive.db").exists()
        assert "second terminal" not in done.stdout
    elif "--policy" in flags:  # a rule decided: nobody was asked
        assert "second terminal" not in done.stdout
    else:
        assert "answer from a second terminal" in done.stdout


def test_a_second_terminal_approves_with_the_command_line(tmp_path: Path) -> None:
    db = str(tmp_path / "goldfive.db")
    agent = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--wait", "--db", db, "--timeout-ms", "30000"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stdout is not None
        target = None
        deadline = time.monotonic() + 30
        while target is None and time.monotonic() < deadline:
            line = agent.stdout.readline()
            found = re.search(r"approve (adk-[0-9a-f-]+) --by", line)
            target = found.group(1) if found else None
        assert target is not None, "the example never printed the approval id"

        def cli(*argv: str) -> subprocess.CompletedProcess[str]:
            command = [sys.executable, "-m", "goldfive_core.cli", "--db", db, *argv]
            return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)

        edit = '{"amount": 90, "to": "ACME Corp"}'
        first = cli("approve", target, "--by", "ana", "--edit", edit)
        assert first.returncode == 0, first.stderr
        second = cli("reject", target, "--by", "bob", "--reason", "too late")
        assert second.returncode == 1 and "already decided" in second.stderr
        out, err = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
    assert agent.returncode == 0, err
    assert "decided_by='ana'" in out and "sent 90 EUR to ACME Corp" in out
    assert "ledger: [{'amount': 90, 'to': 'ACME Corp'}]" in out
    verify = subprocess.run(
        [sys.executable, "-m", "goldfive_core.cli", "--db", db, "audit", "verify"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
