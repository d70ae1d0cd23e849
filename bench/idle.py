"""Benchmark: what a waiting SQLite agent costs while idle, and how fast a decision still wakes it.

    python bench/idle.py                 # 8 rounds of 1.5 s idle each, baseline and current
    python bench/idle.py -n 20 --idle-s 3

An agent process (bench/store.py's agent) waits for one approval at a time on a SQLite store.
For each request this process lets the agent sit idle for ``--idle-s`` seconds, reading the agent's
CPU time (user + system, from /proc) over that window, then decides with ``StoreChannel.deliver``
and measures decide→resume (until the agent's waiting coroutine resumed). The same run is made
twice: the **baseline** polls ``PRAGMA data_version`` every 2 ms (goldfive before the idle back-off;
``GOLDFIVE_SQLITE_IDLE_POLL_S=0.002``) and the **current** default backs off to 40 ms while idle.
Targets: idle ≤ 1 % of a core, decide→resume p50 ≤ 50 ms. Linux only (/proc).
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

from goldfive_core import ControlKind, ControlMessage  # noqa: E402
from goldfive_core.store import SqliteStore, StoreChannel  # noqa: E402


def _cpu_s(pid: int) -> float:
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


def measure(n: int, idle_s: float, idle_poll_s: str | None) -> dict[str, float]:
    env = dict(os.environ)
    if idle_poll_s is None:
        env.pop("GOLDFIVE_SQLITE_IDLE_POLL_S", None)
    else:
        env["GOLDFIVE_SQLITE_IDLE_POLL_S"] = idle_poll_s
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "idle.db")
        store = SqliteStore(db, idle_poll_interval_s=float(idle_poll_s) if idle_poll_s else None)
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
    ordered = sorted(resume)
    return {
        "idle_cpu_pct": 100 * statistics.mean(cpu),
        "p50_ms": statistics.median(resume),
        "p99_ms": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=8, help="approvals (idle windows) per measurement")
    parser.add_argument("--idle-s", type=float, default=1.5, help="seconds the agent waits idle each round")
    args = parser.parse_args()
    baseline = measure(args.n, args.idle_s, "0.002")
    current = measure(args.n, args.idle_s, None)
    print(f"SQLite agent waiting for a decision ({args.n} rounds, {args.idle_s:g} s idle each)")
    print(f"{'':10} {'idle CPU':>10} {'decide→resume p50':>19} {'p99':>9}")
    for name, row in (("baseline", baseline), ("current", current)):
        print(f"{name:10} {row['idle_cpu_pct']:9.2f}% {row['p50_ms']:16.1f} ms {row['p99_ms']:6.1f} ms")
    ratio = baseline["idle_cpu_pct"] / current["idle_cpu_pct"] if current["idle_cpu_pct"] else float("inf")
    print(f"idle CPU: current uses 1/{ratio:.0f} of the baseline; targets: ≤ 1 % of a core, p50 ≤ 50 ms")


if __name__ == "__main__":
    main()
