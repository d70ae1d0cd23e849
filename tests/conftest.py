"""Suite-wide hooks: what PostgreSQL's tests need and how many reached it, in one process or under pytest-xdist.

The PostgreSQL fixtures and the per-worker counting are in tests/store/conftest.py. This file is loaded by every
pytest process, the xdist controller included (which collects nothing, so it never loads that one).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "store"))  # store_support, under the name its conftest uses
from store_support import PG_RAN, PG_WANTED, pg_expected, pg_problem


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under xdist a worker's collection error would reach the person as an internal error without its reason, so
    the controller checks first (it cannot tell which tests need PostgreSQL: where it is expected, it must answer)."""
    config = session.config
    controller = getattr(config, "workerinput", None) is None and getattr(config.option, "numprocesses", None)
    if controller and pg_expected() and (problem := pg_problem()):
        raise pytest.UsageError(f"PostgreSQL is expected here (CI=true or a DSN set) but unavailable: {problem}")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """The controller adds up its workers' counts: each collects the whole suite (one wanted count), runs a share."""
    output = getattr(node, "workeroutput", {})
    config: pytest.Config = node.config  # type: ignore[attr-defined]
    config.stash[PG_WANTED] = max(config.stash.get(PG_WANTED, 0), output.get("pg_wanted", 0))
    config.stash.setdefault(PG_RAN, []).extend(output.get("pg_ran", []))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if getattr(config, "workerinput", None) is not None:
        return
    wanted = config.stash.get(PG_WANTED, 0)
    if not wanted:
        return
    ran = len(config.stash.get(PG_RAN, []))
    note = "" if ran == wanted else f" ({wanted - ran} did not reach it: skipped or stopped before)"
    terminalreporter.write_line(f"PostgreSQL: {ran} of {wanted} PostgreSQL tests ran against a real server{note}")
