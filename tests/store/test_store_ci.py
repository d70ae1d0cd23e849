"""Where PostgreSQL is expected (CI=true) and missing, the test run stops instead of skipping those tests."""

from __future__ import annotations

import os
import subprocess

from store_support import HERE, PYTHON, REPO


def _pytest(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", str(HERE / "test_store_decisions.py"), *argv],
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
