"""Benchmark: what a waiting SQLite agent costs while idle, and how fast a decision still wakes it.

    python bench/idle.py                 # 8 rounds of 2 s idle each, per configuration
    python bench/idle.py -n 20 --idle-s 3

An agent process (bench/store.py's agent) waits for one approval at a time on a SQLite store.
For each request this process lets the agent sit idle for ``--idle-s`` seconds, reading the agent's
CPU time over that window (all its threads, from /proc/<pid>/task/*/schedstat, in nanoseconds),
then decides with ``StoreChannel.deliver`` and measures decide→resume (until the agent's waiting
coroutine resumed). The same run is made for three configurations, in this order:

* **baseline** — no wake-ups, polling ``PRAGMA data_version`` every 2 ms (goldfive before the idle
  back-off: ``GOLDFIVE_SQLITE_WAKE=0 GOLDFIVE_SQLITE_IDLE_POLL_S=0.002``);
* **polling** — no wake-ups, polls backing off to 40 ms while idle (``GOLDFIVE_SQLITE_WAKE=0``; what
  a waiter does where the wake sockets cannot be made);
* **current** — the default: the agent's channel keeps one wake socket bound while it serves and
  sleeps on it in its event loop, poked by the decider's commit (looking anyway every 5 s); heartbeats
  poke nobody.

Targets for **current**: idle ≤ 1 % of a core, decide→resume p50 ≤ 50 ms. The load average is
printed before and after: on a busy machine latencies grow for every row alike. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run from a checkout without installing

from _support import pct  # noqa: E402

from goldfive_core import ControlKind, ControlMessage  # noqa: E402
from goldfive_core.store import SqliteStore, StoreChannel  # noqa: E402

CONFIGS: dict[str, dict[str, str]] = {
    "baseline": {"GOLDFIVE_SQLITE_WAKE": "0", "GOLDFIVE_SQLITE_IDLE_POLL_S": "0.002"},
    "polling": {"GOLDFIVE_SQLITE_WAKE": "0"},
    "current": {},
}
_OURS = ("GOLDFIVE_SQLITE_WAKE", "GOLDFIVE_SQLITE_IDLE_POLL_S", "GOLDFIVE_SQLITE_WAKE_FALLBACK_S")


def _cpu_s(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far (schedstat: ns; else /proc/<pid>/stat in clock ticks)."""
    try:
        total = 0
        for task in Path(f"/proc/{pid}/task").iterdir():
            total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _expect(proc: subprocess.Popen[str], prefix: str) -> str:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the agent exited while the bench waited for {prefix!r}")
        if line.startswith(prefix):
            return line.strip()


def measure(n: int, idle_s: float, settings: dict[str, str]) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in _OURS}
    env.update(settings)
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "idle.db")
        wake = settings.get("GOLDFIVE_SQLITE_WAKE") != "0"
        poll = settings.get("GOLDFIVE_SQLITE_IDLE_POLL_S")
        store = SqliteStore(db, wake=wake, idle_poll_interval_s=float(poll) if poll else None)
        decider = StoreChannel(store)
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "store.py"), "--agent", db, "--n", str(n)],
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
        )
        try:
            run_id = _expect(proc, "run ").split()[1]
            cpu, resume = [], []
            for i in range(n):
                _expect(proc, f"req t{i}")
                time.sleep(0.3)  # let the request's own writes settle before the idle window starts
                before, started = _cpu_s(proc.pid), time.monotonic()
                time.sleep(idle_s)
                cpu.append((_cpu_s(proc.pid) - before) / (time.monotonic() - started))
                msg = ControlMessage(ControlKind.APPROVE, {"target_id": f"t{i}", "run_id": run_id})
                start = time.time_ns()
                ack = decider.deliver(msg, run_id=run_id, timeout_s=30)
                assert ack.ok, ack
                resume.append((int(_expect(proc, f"res t{i}").split()[2]) - start) / 1e6)
            _expect(proc, "done")
        finally:
            proc.wait(timeout=60)
            store.close()
    return {
        "idle_cpu_pct": 100 * statistics.mean(cpu),
        "p50_ms": statistics.median(resume),
        "p99_ms": pct(resume, 0.99),
    }


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} cores)"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "inf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=8, help="approvals (idle windows) per measurement")
    parser.add_argument("--idle-s", type=float, default=2.0, help="seconds the agent waits idle each round")
    args = parser.parse_args()
    print(f"before: {_load()}")
    rows = {name: measure(args.n, args.idle_s, settings) for name, settings in CONFIGS.items()}
    print(f"after:  {_load()}")
    print(f"SQLite agent waiting for a decision ({args.n} rounds, {args.idle_s:g} s idle each)")
    print(f"{'':10} {'idle CPU':>10} {'decide→resume p50':>19} {'p99':>9}")
    for name, row in rows.items():
        print(f"{name:10} {row['idle_cpu_pct']:9.2f}% {row['p50_ms']:16.1f} ms {row['p99_ms']:6.1f} ms")
    base, cur = rows["baseline"], rows["current"]
    print(
        f"current / baseline: idle CPU {_ratio(cur['idle_cpu_pct'], base['idle_cpu_pct'])}, "
        f"p50 {_ratio(cur['p50_ms'], base['p50_ms'])}, p99 {_ratio(cur['p99_ms'], base['p99_ms'])}"
    )
    ok = cur["idle_cpu_pct"] <= 1.0 and cur["p50_ms"] <= 50.0
    print(f"targets (current): idle ≤ 1 % of a core, p50 ≤ 50 ms: {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
