"""``goldfive serve`` with its time accounted for (``GOLDFIVE_BENCH_PROFILE=DIR`` in bench/_support.py's serve).

Every store call the server hands to a thread (its pools and ``asyncio.to_thread``) is timed by what it called:
calls, wall time and that thread's CPU time; the event loop's own thread is profiled by cProfile. Every SQL statement
is counted (by its first words), and every write transaction made through ``SqlDb.writing`` by the statements it ran,
its wall time and how long it held the audit chain's head. All of it is written into DIR when the server stops
(SIGINT): ``serve-PID.prof`` and ``serve-PID.calls.json``. One phase (the idle window) is profiled alone: a SIGUSR1
starts every count afresh, a SIGUSR2 writes them at once.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import cProfile
import gc
import json
import os
import signal
import sys
import threading
import time
from typing import Any

from goldfive_core.server import threads
from goldfive_core.store.sql.db import SqlDb

OUT = os.environ["GOLDFIVE_BENCH_PROFILE"]
_calls: collections.defaultdict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
_lock = threading.Lock()


def _timed(name: str, fn: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            with _lock:
                entry = _calls[name]
                entry[0] += 1
                entry[1] += time.perf_counter() - wall
                entry[2] += time.thread_time() - cpu

    return call


def _name(pool: str, fn: Any) -> str:
    return f"{pool} {getattr(fn, '__qualname__', type(fn).__name__)}"


_run = threads.ServerThreads.run


async def _pool_run(self: Any, pool: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
    return await _run(self, pool, _timed(_name(pool.name, fn), fn), *args, **kwargs)


_to_thread = asyncio.to_thread


async def _default_run(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    return await _to_thread(_timed(_name("to_thread", fn), fn), *args, **kwargs)


threads.ServerThreads.run = _pool_run  # type: ignore[method-assign]

# The steps of a request that wait (in the event loop): how many, their total and longest wall time.
_waits: collections.defaultdict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])


def _waited(name: str, fn: Any) -> Any:
    async def step(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await fn(*args, **kwargs)
        finally:
            took = time.perf_counter() - t0
            entry = _waits[name]
            entry[0] += 1
            entry[1] += took
            entry[2] = max(entry[2], took)

    return step


def _wait_steps() -> None:
    from goldfive_core.server import agents, auth, heartbeats

    for owner, names in (
        (auth.Authenticator, ("authenticate",)),
        (agents.AgentApi, ("open_stream", "heartbeat", "acks", "events")),
        (heartbeats.HeartbeatBatch, ("beat", "owned")),
    ):
        for name in names:
            setattr(owner, name, _waited(f"{owner.__name__}.{name}", getattr(owner, name)))


_wait_steps()

# Statements and transactions: every statement counted by its SQL's first words, every write transaction by the
# statements it ran and how long it held the audit chain's head (from the head's lock to the commit's end).
_statements: collections.Counter[str] = collections.Counter()
_writes: collections.defaultdict[str, list[float]] = collections.defaultdict(lambda: [0, 0, 0.0, 0.0])
_local = threading.local()
_execute = SqlDb.execute
_writing = SqlDb.writing


_by_caller: collections.Counter[str] = collections.Counter()


def _caller() -> str:
    """The goldfive functions that ran a statement (the innermost outside the SQL plumbing, then its caller's)."""
    frame = sys._getframe(2)
    names: list[str] = []
    while frame is not None and len(names) < 2:
        path = frame.f_code.co_filename
        if "goldfive_core" in path and not path.endswith(("db.py", "postgres.py", "sqlite.py")):
            names.append(frame.f_code.co_qualname)
        frame = frame.f_back  # type: ignore[assignment]
    return " < ".join(names)


def _counted_execute(self: Any, conn: Any, sql: str, params: Any = ()) -> Any:
    key = " ".join(sql.split()[:4])[:60]
    with _lock:
        _statements[key] += 1
        _by_caller[f"{key} | {_caller()}"] += 1
    tx = getattr(_local, "tx", None)
    if tx is not None:
        tx[0] += 1
        if tx[1] == 0.0 and "gf_chain_head" in sql and sql.lstrip().upper().startswith("SELECT"):
            tx[1] = time.perf_counter()
    return _execute(self, conn, sql, params)


@contextlib.contextmanager
def _counted_writing(self: Any, what: str, *, quiet: bool = False) -> Any:
    _local.tx = tx = [0, 0.0]
    t0 = time.perf_counter()
    try:
        with _writing(self, what, quiet=quiet) as conn:
            yield conn
    finally:
        _local.tx = None
        end = time.perf_counter()
        key = " ".join(w for w in what.split() if not w.isdigit())[:50]
        with _lock:
            entry = _writes[key]
            entry[0] += 1
            entry[1] += tx[0]
            entry[2] += end - t0
            entry[3] += (end - tx[1]) if tx[1] else 0.0


SqlDb.execute = _counted_execute  # type: ignore[method-assign]
SqlDb.writing = _counted_writing  # type: ignore[assignment,method-assign]
asyncio.to_thread = _default_run
profile = cProfile.Profile()


_gc: collections.defaultdict[int, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
"""Garbage collections by generation: how many, their time, and the longest."""
_gc_started = [0.0]


def _gc_timed(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_started[0] = time.perf_counter()
        return
    took = time.perf_counter() - _gc_started[0]
    entry = _gc[info["generation"]]
    entry[0] += 1
    entry[1] += took
    entry[2] = max(entry[2], took)


gc.callbacks.append(_gc_timed)
if os.environ.get("GOLDFIVE_BENCH_GC"):  # an experiment: other collector thresholds ("700,10,10" is Python's)
    from goldfive_core.server import run as _run_mod

    _run_mod.GC_THRESHOLDS = tuple(int(x) for x in os.environ["GOLDFIVE_BENCH_GC"].split(","))  # type: ignore[assignment]
    gc.set_threshold(*_run_mod.GC_THRESHOLDS)


def _afresh(signum: int, frame: Any) -> None:
    """SIGUSR1: forget what was counted so far (a bench profiles one phase: the idle window, a disconnect), after
    writing how many objects the collector tracks now, by type, to ``serve-PID.objects.txt``."""
    global profile
    profile.disable()
    tracked = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
    with open(f"{OUT}/serve-{os.getpid()}.objects.txt", "a") as out:
        out.write(f"{sum(tracked.values())} objects tracked by the collector\n")
        out.writelines(f"{n:9d} {name}\n" for name, n in tracked.most_common(40))
    profile = cProfile.Profile()
    with _lock:
        _calls.clear()
        _statements.clear()
        _writes.clear()
        _gc.clear()
        _waits.clear()
    profile.enable()


signal.signal(signal.SIGUSR1, _afresh)
_dumped = [False]


def _dump() -> None:
    if _dumped[0]:
        return
    _dumped[0] = True
    profile.disable()
    profile.dump_stats(f"{OUT}/serve-{os.getpid()}.prof")
    times = os.times()
    report = {
        "process_cpu_s": times.user + times.system,
        "loop_thread_cpu_s": time.thread_time(),
        "calls": {k: {"n": v[0], "wall_s": v[1], "cpu_s": v[2]} for k, v in _calls.items()},
        "statements": dict(_statements.most_common()),
        "statements_by_caller": dict(_by_caller.most_common()),
        "waits": {k: {"n": v[0], "s": v[1], "longest_s": v[2]} for k, v in _waits.items()},
        "gc": {f"generation {k}": {"n": v[0], "s": v[1], "longest_s": v[2]} for k, v in sorted(_gc.items())},
        "writes": {
            k: {"n": v[0], "statements": v[1], "wall_s": v[2], "chain_head_s": v[3]} for k, v in _writes.items()
        },
    }
    with open(f"{OUT}/serve-{os.getpid()}.calls.json", "w") as out:
        json.dump(report, out, indent=1)


atexit.register(_dump)
signal.signal(signal.SIGUSR2, lambda signum, frame: _dump())
from goldfive_core.cli import main  # noqa: E402

profile.enable()
try:
    sys.exit(main(sys.argv[1:]))
except KeyboardInterrupt:
    sys.exit(130)
