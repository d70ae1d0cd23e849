"""How long ``import goldfive_core`` takes, against the floor it cannot go below (offline).

    python bench/import_time.py [--reps 15] [--against DIR]

Each repetition starts fresh interpreters, in alternating order, and reads ``-X importtime``'s
cumulative microseconds for the top-level module:

* ``goldfive_core`` — the package as a user imports it;
* every public name — ``from goldfive_core import *``: the package loads its names on first use
  (PEP 562), so this is what a program that uses all of them pays, once;
* the floor — what the core needs in any case: ``asyncio``, ``logging`` and the protobuf runtime its
  generated modules and JSON conversion use (the generated modules themselves are not in it);
* with ``--against DIR`` also ``goldfive_core`` from another checkout (``DIR`` is put first on
  ``sys.path``), e.g. an older commit unpacked with ``git archive REV goldfive_core | tar -x -C DIR``.

Reports median, min and max per side and the median of per-repetition differences to the floor.
Target: ``import goldfive_core`` <= 50 ms. On a loaded machine compare the sides of one run, not runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

FLOOR = (
    "import asyncio, logging, google.protobuf.message, google.protobuf.descriptor_pool,"
    " google.protobuf.symbol_database, google.protobuf.json_format, google.protobuf.timestamp_pb2"
)


def cumulative_us(code: str, module: str, path: str | None = None) -> int:
    """Cumulative import time of ``module`` (µs) while a fresh interpreter runs ``code``."""
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True, check=True
    ).stderr
    for line in reversed(out.splitlines()):
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1])
    raise RuntimeError(f"{module} not in the import trace of {code!r}")


def toplevel_us(code: str) -> int:
    """The top-level imports ``code`` makes, summed (each module counted once, as in one interpreter)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True
    ).stderr
    total = 0
    started = False  # interpreter start-up (encodings, site) comes first and is no one's cost
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[1].strip().isdigit():
            continue
        top = parts[2].startswith(" ") and not parts[2].startswith("  ")
        if started and top:
            total += int(parts[1].strip())  # a top-level entry (nested ones are inside its cumulative time)
        started = started or (top and parts[2].strip() == "site")
    return total


def show(label: str, values: list[int]) -> str:
    """Median and range in ms."""
    ms = [v / 1000 for v in values]
    return f"{label:<34} median {statistics.median(ms):7.1f} ms   min {min(ms):7.1f}   max {max(ms):7.1f}"


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--against", metavar="DIR", help="another checkout's goldfive_core, for comparison")
    args = parser.parse_args()
    every = "every public name (import *)"
    sides: dict[str, list[int]] = {"goldfive_core": [], every: [], "floor (asyncio, logging, protobuf)": []}
    if args.against:
        sides[f"goldfive_core from {args.against}"] = []
    for i in range(args.reps):
        order = list(sides)
        if i % 2:
            order.reverse()
        for side in order:
            if side == "goldfive_core":
                sides[side].append(cumulative_us("import goldfive_core", "goldfive_core"))
            elif side == every:
                sides[side].append(toplevel_us("from goldfive_core import *"))
            elif side.startswith("floor"):
                sides[side].append(toplevel_us(FLOOR))
            else:
                sides[side].append(cumulative_us("import goldfive_core", "goldfive_core", args.against))
    print(f"Python {sys.version.split()[0]}; {args.reps} repetitions; load average {os.getloadavg()[0]:.1f}")
    for side, values in sides.items():
        print(show(side, values))
    floor = sides["floor (asyncio, logging, protobuf)"]
    target = "ok" if statistics.median(sides["goldfive_core"]) <= 50_000 else "NOT MET"
    print(f"{'import goldfive_core':<34} target <= 50 ms: {target}")
    extra = [g - f for g, f in zip(sides[every], floor, strict=True)]
    above = statistics.median(extra) / 1000
    print(f"{'every public name above the floor':<34} median {above:7.1f} ms")


if __name__ == "__main__":
    main()
