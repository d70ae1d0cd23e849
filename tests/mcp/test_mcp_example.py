"""examples/mcp_gateway.py runs offline as its docstring says: an allowed read, a transfer a second process approves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcp_support import ROOT


def test_the_example_runs_offline_and_the_transfer_reaches_the_bank_once(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_gateway.py")],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert out.returncode == 0, out.stderr
    assert "read_balance (allowed by --allow): checking: 5230.50 EUR" in out.stdout
    assert "transfer_funds ran: sent 120.00 EUR to ACME" in out.stdout
    calls = (tmp_path / "mcp-calls.jsonl").read_text().splitlines()
    assert [line.split('"tool": ')[1] for line in calls] == ['"read_balance"}', '"transfer_funds"}']
