"""Suite-wide hooks: what PostgreSQL's tests need and how many reached it, in one process or under pytest-xdist.

A test wants PostgreSQL when it runs with the ``postgres`` value of a ``backend`` fixture or asks for
``postgres_backend`` — whichever suite's conftest hands that fixture out (tests/store, tests/server, tests/http,
...). It *ran* against the server when its setup passed (the fixture reached PostgreSQL and made its schema): the
count is taken here from each test's setup report, not by each fixture, so no suite's own fixture can be left
out. Where PostgreSQL is expected (``CI=true``, or a DSN is set) and cannot be reached, the run stops at
collection with the reason, whichever tests were chosen. This file is loaded by every pytest process, the xdist
controller included (which collects nothing: it adds up its workers' counts).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "store"))  # store_support, under the name its conftest uses
from store_support import PG_RAN, PG_WANTED, pg_expected, pg_problem


def wants_pg(item: pytest.Item) -> bool:
    """Whether ``item`` runs against PostgreSQL: the ``postgres`` value of a ``backend`` fixture, or
    ``postgres_backend`` / ``pg_backend`` (tests/http's name; asked for directly or by another fixture)."""
    callspec = getattr(item, "callspec", None)
    on_pg = callspec is not None and callspec.params.get("backend") == "postgres"
    return on_pg or not _PG_ONLY.isdisjoint(getattr(item, "fixturenames", ()))


_PG_ONLY = frozenset({"postgres_backend", "pg_backend"})
"""The fixtures that hand out PostgreSQL alone."""


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    wanted = sum(1 for item in session.items if wants_pg(item))
    config.stash[PG_WANTED] = wanted
    config.stash[PG_RAN] = []
    if wanted and pg_expected():
        problem = pg_problem()
        if problem:
            raise pytest.UsageError(
                f"{wanted} tests need PostgreSQL, which is expected here (CI=true or GOLDFIVE_TEST_PG_DSN set) "
                f"but unavailable: {problem}"
            )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A PostgreSQL test whose setup passed reached the server (its fixture connected and made its schema)."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if report.when == "setup" and report.passed and wants_pg(item):
        item.config.stash.setdefault(PG_RAN, []).append(item.nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist a worker hands its counts to the controller, which prints the summary."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["pg_wanted"] = session.config.stash.get(PG_WANTED, 0)
        output["pg_ran"] = session.config.stash.get(PG_RAN, [])


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
