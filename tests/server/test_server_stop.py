"""``goldfive serve`` stops on the first Ctrl+C or SIGTERM although an inbox tab holds an event stream open.

Before, uvicorn's graceful stop waited for every connection to finish, and an event stream never does: the
first Ctrl+C was ignored while a tab was open, a second one printed tracebacks, and SIGTERM waited until the tab
was closed. Now the streams are ended as the stop begins, so the tab sees its stream end (and says
disconnected) and the process exits cleanly.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from server_support import serve_process
from store_support import Backend


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_serve_stops_at_once_with_an_inbox_stream_open(sqlite_backend: Backend, tmp_path: Path, sig: int) -> None:
    backend = sqlite_backend
    backend.open()
    with serve_process(backend, tmp_path / "k.pem") as served, httpx.Client(base_url=served.url) as client:
        login = client.post(
            "/api/login", json={"name": "admin", "token": served.admin_token}, headers={"Origin": served.url}
        )
        assert login.status_code == 200, login.text
        # A read waits at most 10 s, less than the stream's 15 s ping: a stream left open fails the read.
        with client.stream("GET", "/api/events", timeout=httpx.Timeout(10.0)) as stream:
            chunks = stream.iter_bytes()
            assert b"connected" in next(chunks)
            served.proc.send_signal(sig)
            try:
                for _ in chunks:  # the server ends the stream (before: it stayed open until the tab closed)
                    pass
            except httpx.ReadTimeout:
                pytest.fail("the event stream stayed open after the stop signal")
        try:
            code = served.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail("goldfive serve did not stop on one signal while a stream was open")
        stderr = served.proc.stderr.read() if served.proc.stderr else ""
        assert "Traceback" not in stderr, stderr
        assert code in (0, -sig), (code, stderr)
