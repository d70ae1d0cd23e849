"""What the benches share: percentiles, one latency line, and a `goldfive serve` subprocess (offline)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def bench_event(run_id: str, sequence: int, payload: Any) -> Any:
    """An ``Event`` of run ``run_id`` carrying ``payload`` (any payload message), stamped now."""
    from goldfive_core.pb.v1 import events_pb2

    event = events_pb2.Event(event_id=f"ev-{run_id}-{sequence}", run_id=run_id, sequence=sequence)
    event.emitted_at.FromMilliseconds(int(time.time() * 1000))
    field = next(
        f.name
        for f in events_pb2.Event.DESCRIPTOR.oneofs_by_name["payload"].fields
        if f.message_type.full_name == type(payload).DESCRIPTOR.full_name
    )
    getattr(event, field).CopyFrom(payload)
    return event


def event_json(run_id: str, sequence: int, payload: Any) -> dict[str, Any]:
    """:func:`bench_event` in the protobuf JSON an agent posts to ``/api/agent/events``."""
    from google.protobuf import json_format

    out: dict[str, Any] = json_format.MessageToDict(
        bench_event(run_id, sequence, payload), preserving_proto_field_name=True
    )
    return out


def asked_events(run_id: str, targets: Sequence[str]) -> list[dict[str, Any]]:
    """An agent's first events as it posts them: its run started, then one pending task request per target."""
    from goldfive_core.pb.v1 import events_pb2

    events = [event_json(run_id, 0, events_pb2.RunStarted(adapter="callable"))]
    for k, target in enumerate(targets, start=1):
        ask = events_pb2.ApprovalRequested(target_id=target, kind="task", prompt="pay?", timeout_ms=3_600_000)
        events.append(event_json(run_id, k, ask))
    return events


async def stream_frames(resp: Any, connected: Any) -> AsyncIterator[dict[str, Any]]:
    """The frames of an open ``/api/agent/stream`` response (``connected``, an asyncio.Event, set on its hello)."""
    data = ""
    async for line in resp.aiter_lines():
        if line.startswith(": connected"):
            connected.set()
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and data:
            frame, data = json.loads(data), ""
            yield frame


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms_line(values: list[float]) -> str:
    """p50 / p99 of latencies in seconds, printed in ms with the sample count."""
    if not values:
        return "none (n=0)"
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
def serve(
    location: str, schema: str | None, key: Path, *, tree: Path = REPO, extra: Sequence[str] = ()
) -> Iterator[Served]:
    """Run `goldfive serve` over a SQLite path or a PostgreSQL DSN (``schema``) until the block ends; ``tree`` is
    the checkout whose code it runs (another one gives a baseline measured in the same run)."""
    import httpx  # goldfive[server]; the store bench runs without it

    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("GOLDFIVE_DB", None)
    env.pop("GOLDFIVE_DSN", None)
    if location.startswith("postgres"):
        env["GOLDFIVE_DSN"], env["GOLDFIVE_PG_SCHEMA"] = location, schema or "public"
    else:
        env["GOLDFIVE_DB"] = location
    profile = os.environ.get("GOLDFIVE_BENCH_PROFILE", "")  # a directory: each server writes its profile there
    runner = [str(REPO / "bench" / "_serve_timed.py")] if profile else ["-m", "goldfive_core.cli"]
    proc = subprocess.Popen(
        [sys.executable, *runner, "serve", "--port", str(port), "--key", str(key), *extra],
        env=env,
        cwd=tree,
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
        if proc.poll() is None:  # uvicorn re-raises the signal once stopped: SIGINT lets cProfile write its file
            proc.send_signal(signal.SIGINT if profile else signal.SIGTERM)
        try:  # a profiled server writes its profile as it stops; one that held thousands of streams takes a while
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """Process ``pid``'s resident memory (KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")
