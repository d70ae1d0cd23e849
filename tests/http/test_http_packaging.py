"""Packaging of the HTTP channel: httpx only (no database driver, no server stack), and its public names."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import goldfive_core.store.http

ROOT = Path(__file__).resolve().parents[2]

_AGENT_HOST = textwrap.dedent(
    """
    import importlib.abc
    import sys

    BLOCKED = ("psycopg", "starlette", "uvicorn", "cryptography", "google.adk", "claude_agent_sdk")

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError(f"blocked by the test: {name}", name=name)
            return None

    sys.meta_path.insert(0, Block())
    import goldfive_core
    assert "goldfive_core.store.http" not in sys.modules
    from goldfive_core.store.http import HttpChannel
    channel = HttpChannel("http://127.0.0.1:9", token="gf5_x")
    print("ok", type(channel.ledger).__name__)
    """
)

_NO_HTTPX = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "httpx" or name.startswith("httpx."):
                raise ImportError(f"blocked by the test: {name}", name=name)
            return None

    sys.meta_path.insert(0, Block())
    try:
        import goldfive_core.store.http
    except ImportError as exc:
        print(exc)
    """
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def test_an_agent_host_needs_httpx_and_nothing_of_the_database_or_the_server() -> None:
    proc = _run(_AGENT_HOST)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok HttpLedger"


def test_without_httpx_the_error_names_the_extra() -> None:
    proc = _run(_NO_HTTPX)
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'goldfive[http]'" in proc.stdout


def test_public_names_are_pinned() -> None:
    assert sorted(goldfive_core.store.http.__all__) == [
        "AgentRefused",
        "DEFAULT_UNREACHABLE_AFTER_S",
        "HttpChannel",
        "HttpLedger",
        "RemoteStore",
    ]
    assert goldfive_core.store.http.HttpChannel.__doc__
