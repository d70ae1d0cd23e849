"""Helpers for the browser tests: subprocesses whose output a test can wait for, and the Chromium check."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("GOLDFIVE_TEST_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = ROOT / "tests" / ".artifacts"


def chromium_or_skip() -> str:
    """The Chromium binary; a missing one fails in CI (``CI=true``) and skips elsewhere, saying why."""
    problem = ""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problem = "playwright is not installed (pip install -e '.[dev]')"
    if not problem and not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        problem = f"no Chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run does this)"
    if problem:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"browser tests need Chromium in CI: {problem}")
        pytest.skip(f"browser tests skipped: {problem}")
    return CHROMIUM


def this_tree(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a subprocess that must run the code of the tree these tests are in (``goldfive`` and the examples
    import ``goldfive_core``): ROOT first on ``PYTHONPATH``, ahead of an installed (or editable) copy elsewhere, so
    a scratch copy of the tree (``scripts/mutation.py``) serves its own pages and code."""
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)}


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Proc:
    """A subprocess whose stdout lines are collected by a thread, so a test can wait for one."""

    def __init__(self, args: Sequence[str], *, env: dict[str, str], cwd: Path = ROOT) -> None:
        self.args = list(args)
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            self.args,
            cwd=cwd,
            env={**this_tree(env), "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pred: Callable[[str], bool], timeout: float = 20.0) -> str:
        """The first output line matching ``pred``; AssertionError (with the output) after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    if pred(line):
                        return line
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(f"{self.args[:3]} never printed the line; output:\n" + self.output())
                self._cond.wait(min(left, 0.5))

    def output(self) -> str:
        """Everything printed so far."""
        with self._cond:
            return "\n".join(self.lines)

    def stop(self) -> None:
        """Terminate the process group (bounded), then kill it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self._reader.join(timeout=5)


def goldfive_bin() -> str:
    """The ``goldfive`` command of this interpreter's environment."""
    found = Path(sys.executable).with_name("goldfive")
    return str(found) if found.exists() else (shutil.which("goldfive") or "goldfive")


def wait_http(url: str, proc: Proc, timeout: float = 30.0) -> None:
    """Wait until ``url`` answers (any HTTP status), or fail with the server's output."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.proc.poll() is not None:
            raise AssertionError("goldfive serve exited:\n" + proc.output())
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"goldfive serve did not answer at {url} in {timeout} s:\n" + proc.output())
