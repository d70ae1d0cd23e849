"""Where PostgreSQL is expected (CI=true) and missing, the test run stops instead of skipping those tests, whichever
suite's tests were chosen; the summary counts every test that ran against PostgreSQL, whichever suite's fixture
handed it out."""

from __future__ import annotations

import os
import subprocess

import pytest
from store_support import HERE, PG_DSN, PYTHON, REPO

SERVER_TEST = str(REPO / "tests" / "server" / "test_server_api.py")
"""A suite whose ``backend`` fixture is its own (tests/server/conftest.py), not the store tests'."""


def _pytest(env: dict[str, str], *argv: str, tests: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    chosen = tests or (str(HERE / "test_store_decisions.py"),)
    return subprocess.run(
        [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", *chosen, *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _env(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GOLDFIVE_TEST_PG_DSN")}
    env.update(changes)
    return env


def test_ci_without_postgres_stops_at_collection_with_the_reason() -> None:
    stopped = _pytest(_env(CI="true"), "--collect-only")
    assert stopped.returncode == 4, stopped.stdout + stopped.stderr
    assert "tests need PostgreSQL, which is expected here" in stopped.stderr
    assert "GOLDFIVE_TEST_PG_DSN" in stopped.stderr


def test_outside_ci_the_postgres_tests_skip_and_the_summary_counts_them() -> None:
    skipped = _pytest(_env(), "-k", "re_asked")
    assert skipped.returncode == 0, skipped.stdout
    assert "1 passed, 1 skipped" in skipped.stdout
    assert "PostgreSQL: 0 of 1 PostgreSQL tests ran against a real server" in skipped.stdout


def test_ci_without_postgres_stops_another_suites_run_too() -> None:
    """Only tests/server chosen: the store tests' conftest is not loaded, and the rule holds all the same."""
    stopped = _pytest(_env(CI="true"), "--collect-only", tests=(SERVER_TEST,))
    assert stopped.returncode == 4, stopped.stdout + stopped.stderr
    assert "tests need PostgreSQL, which is expected here" in stopped.stderr


@pytest.mark.skipif(not PG_DSN, reason="needs GOLDFIVE_TEST_PG_DSN")
def test_the_summary_counts_the_postgres_tests_of_every_suite_that_ran() -> None:
    """One store test and one server test (each suite's own ``backend`` fixture) on PostgreSQL: both counted, run
    together or the server's alone; with CI=true and a server that cannot be reached, the run still stops."""
    both = _pytest(
        _env(GOLDFIVE_TEST_PG_DSN=PG_DSN),
        "-k",
        "re_asked or status_filter_lists",
        tests=(str(HERE / "test_store_decisions.py"), SERVER_TEST),
    )
    assert both.returncode == 0, both.stdout[-2000:]
    assert "PostgreSQL: 2 of 2 PostgreSQL tests ran against a real server" in both.stdout, both.stdout[-2000:]
    alone = _pytest(_env(GOLDFIVE_TEST_PG_DSN=PG_DSN), "-k", "status_filter_lists", tests=(SERVER_TEST,))
    assert "PostgreSQL: 1 of 1 PostgreSQL tests ran against a real server" in alone.stdout, alone.stdout[-2000:]
    unreachable = "postgresql://goldfive@127.0.0.1:9/postgres"  # the discard port: nothing listens
    stopped = _pytest(
        _env(CI="true", GOLDFIVE_TEST_PG_DSN=unreachable), "-k", "status_filter_lists", tests=(SERVER_TEST,)
    )
    assert stopped.returncode != 0 and "unreachable" in stopped.stderr, stopped.stdout + stopped.stderr
