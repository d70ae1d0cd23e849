"""What the benches share: percentiles, one latency line, and a `goldfive serve` subprocess (offline)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms_line(values: list[float]) -> str:
    """p50 / p99 of latencies in seconds, printed in ms with the sample count."""
    return f"p50 {pct(values, 0.5) * 1000:7.2f} ms   p99 {pct(values, 0.99) * 1000:7.2f} ms   (n={len(values)})"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass(frozen=True)
class Served:
    """A running `goldfive serve`: its URL, process id and the trust key it printed."""

    url: str
    pid: int
    trust_line: str


@contextlib.contextmanager
def serve(location: str, schema: str | None, key: Path) -> Iterator[Served]:
    """Run `goldfive serve` over a SQLite path or a PostgreSQL DSN (``schema``) until the block ends."""
    import httpx  # goldfive[server]; the store bench runs without it

    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("GOLDFIVE_DB", None)
    env.pop("GOLDFIVE_DSN", None)
    if location.startswith("postgres"):
        env["GOLDFIVE_DSN"], env["GOLDFIVE_PG_SCHEMA"] = location, schema or "public"
    else:
        env["GOLDFIVE_DB"] = location
    proc = subprocess.Popen(
        [sys.executable, "-m", "goldfive_core.cli", "serve", "--port", str(port), "--key", str(key)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        trust = ""
        while not trust:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("goldfive serve did not start")
            if "GOLDFIVE_TRUST_KEY=" in line:
                trust = line.split("GOLDFIVE_TRUST_KEY=", 1)[1].strip()
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                httpx.get(url + "/api/me", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        yield Served(url=url, pid=proc.pid, trust_line=trust)
    finally:
        proc.terminate()
        proc.wait(10)
