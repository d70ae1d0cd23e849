"""The store and the command line need nothing beyond protobuf; PostgreSQL is imported only when used."""

from __future__ import annotations

import subprocess
import tomllib

from store_support import PYTHON, REPO

from goldfive_core.cli import main


def test_store_and_cli_import_without_psycopg_or_host_sdks() -> None:
    code = (
        "import sys, goldfive_core.store, goldfive_core.cli, goldfive_core.store.execution\n"
        "bad = [m for m in ('psycopg', 'google.adk', 'claude_agent_sdk') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "from goldfive_core.store import SqliteStore\n"
        "print('ok')\n"
    )
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    assert result.stdout.strip() == "ok", result.stderr


def test_console_script_and_postgres_extra_are_declared() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["goldfive"] == "goldfive_core.cli:main"
    assert main.__module__ == "goldfive_core.cli"
    assert any(dep.startswith("psycopg[binary]") for dep in project["optional-dependencies"]["postgres"])


def test_license_is_an_spdx_string_so_setuptools_does_not_warn() -> None:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert data["project"]["license"] == "Apache-2.0"  # the table form is deprecated and warned about at install
    assert "setuptools>=77" in data["build-system"]["requires"]  # the first setuptools that reads SPDX strings
