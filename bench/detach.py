"""Benchmark: what a client of ADK's HTTP server waits for, with and without ``detach_after``.

    python bench/detach.py [-n 5]

Each round starts a run through ADK's own HTTP server (``get_fast_api_app`` + uvicorn in a
subprocess, the test server of tests/detach with a Resumer, SQLite store and sessions) and has a
person approve from another process (the ``goldfive`` command) ``--think`` seconds later:

* ``detach_after=none`` (the baseline, today's behaviour): the client's POST /run_sse stays open
  until the person decides — its duration is the person's think time plus the run.
* ``detach_after=0``: the POST ends at once with ADK's confirmation request; then the Resumer
  resumes the invocation when the decision lands. Reported: the POST's duration, and the time from
  the ``goldfive approve`` command's exit to the run's final answer in the ADK session.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "detach"))
from adk_http_support import Server, World, calls, texts, user_text, wait_until


def _finished(server: Server, session_id: str) -> bool:
    return any(t.startswith("tool said") for t in texts(list(server.session(session_id)["events"])))


def held(rounds: int, think: float) -> list[float]:
    """Baseline: the request is held until the person decides."""
    world = World(Path(tempfile.mkdtemp()), detach_after="none")
    server = Server(world)
    out = []
    try:
        for i in range(rounds):
            sid = f"held{i}"
            server.create_session(sid)
            done: list[float] = []

            def post(sid: str = sid, done: list[float] = done) -> None:
                start = time.monotonic()
                server.run_sse(sid, user_text("pay"))
                done.append(time.monotonic() - start)

            thread = threading.Thread(target=post)
            thread.start()
            store_rows = wait_until(lambda: world.cli("pending", "--json").stdout.count("target_id") > 0, what="ask")
            assert store_rows
            time.sleep(think)  # the person thinks (the point of the measurement)
            ident = next(line.split()[0] for line in world.cli("pending").stdout.splitlines() if "[" in line)
            assert world.cli("approve", ident).returncode == 0
            thread.join(60)
            out.append(done[0])
    finally:
        server.stop()
    return out


def detached(rounds: int, think: float) -> tuple[list[float], list[float]]:
    world = World(Path(tempfile.mkdtemp()), detach_after="0")
    server = Server(world)
    posts, resumes = [], []
    try:
        for i in range(rounds):
            sid = f"det{i}"
            server.create_session(sid)
            start = time.monotonic()
            events = server.run_sse(sid, user_text("pay"))
            posts.append(time.monotonic() - start)
            (call,) = calls(events, "transfer")
            time.sleep(think)
            assert world.cli("approve", call["id"]).returncode == 0
            decided = time.monotonic()
            wait_until(lambda sid=sid: _finished(server, sid), what="the resumed run")  # type: ignore[misc]
            resumes.append(time.monotonic() - decided)
    finally:
        server.stop()
    return posts, resumes


def _fmt(values: list[float]) -> str:
    return (
        f"median {statistics.median(values) * 1000:.0f} ms (min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=5, help="rounds per mode")
    parser.add_argument("--think", type=float, default=2.0, help="seconds the person takes to decide")
    args = parser.parse_args()
    base = held(args.n, args.think)
    posts, resumes = detached(args.n, args.think)
    print(f"person thinks {args.think:.1f} s; {args.n} rounds each; ADK HTTP server, SQLite store and sessions")
    print(f"detach_after=None  POST /run_sse held for      {_fmt(base)}")
    print(f"detach_after=0     POST /run_sse ends after    {_fmt(posts)}")
    print(f"detach_after=0     approve exit -> final answer {_fmt(resumes)} (Resumer poll 0.2 s)")
    print(f"ratio: held request / detached request = {statistics.median(base) / statistics.median(posts):.1f}x")


if __name__ == "__main__":
    main()
