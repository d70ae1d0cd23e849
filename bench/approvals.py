"""Benchmark: many approvals pending at once in one process, then all decided.

    python bench/approvals.py              # 10,000 pending approvals (the issue's figure)
    python bench/approvals.py -n 2000 --samples 500

Reports, next to the targets of issue 2:

* memory goldfive holds per pending approval (tracemalloc), measured two ways:
  A. per waiting task whose caller coroutine awaits ``Session.request_approval``, minus a
     baseline of as many tasks whose same-shaped caller awaits a bare Future (each phase in
     a fresh event loop). What remains is goldfive's: the request, the record, its index
     entry, the waiter future, the deadline timer and goldfive's own two coroutine frames
     (request_approval, wait); the task object and the caller's frame cancel out;
  B. the state alone: ``ApprovalRequest`` + ``ApprovalBook.open`` + a waiter Future + a
     deadline TimerHandle, with no task at all.
  The target applies to A (the larger, honest one).
* decisions per second: ``await channel.send(APPROVE)`` through ControlRouter and Session
  (parse, record transition, ApprovalGranted event to an InMemorySink, waking the waiter),
  for all pending approvals one after another; and the end-to-end rate until every waiter
  has resumed.
* latency ``channel.send(APPROVE)`` → the waiting task resumes, p50/p99, next to a bare
  ``asyncio.Event`` set → wake measured in the same run, in alternating pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from goldfive_core import (
    ApprovalBook,
    ApprovalRequest,
    ControlChannel,
    ControlKind,
    ControlMessage,
    ControlRouter,
    InMemorySink,
    Session,
    SteeringConfig,
)
from goldfive_core.approvals import _expire  # the timer callback ApprovalBook.wait schedules

TIMEOUT_MS = 600_000  # the Flow A default: the waits never expire during the benchmark


def request(i: int) -> ApprovalRequest:
    return ApprovalRequest(
        target_id=f"task-{i:06d}",
        kind="task",
        prompt=f"Spend {i % 500} EUR on order #{i}?",
        task_id=f"task-{i:06d}",
        timeout_ms=TIMEOUT_MS,
        keep_open_on_timeout=True,
    )


def new_session(sinks: list[Any] | None = None) -> Session:
    return Session(sinks=sinks or [], config=SteeringConfig(), has_channel=True)


async def settle(tasks: list[asyncio.Task[Any]]) -> None:
    """Let every task reach its first await (one loop pass per task batch is enough)."""
    for _ in range(3):
        await asyncio.sleep(0)
    assert not any(t.done() for t in tasks)


async def measure_tasks(n: int, make: Callable[[int], Coroutine[Any, Any, Any]]) -> tuple[int, list[asyncio.Task[Any]]]:
    """Bytes allocated (and still held) by creating ``n`` tasks that all reach their wait."""
    gc.collect()
    before = tracemalloc.take_snapshot()
    tasks = [asyncio.create_task(make(i)) for i in range(n)]
    await settle(tasks)
    gc.collect()
    after = tracemalloc.take_snapshot()
    held = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return held, tasks


async def _bare_tasks(n: int) -> int:
    """Baseline: ``n`` tasks, each a caller coroutine awaiting a bare Future."""
    loop = asyncio.get_running_loop()
    futures: list[asyncio.Future[None]] = []

    async def caller(i: int) -> None:
        fut: asyncio.Future[None] = loop.create_future()
        futures.append(fut)
        await fut

    held, tasks = await measure_tasks(n, caller)
    for fut in futures:
        fut.set_result(None)
    await asyncio.gather(*tasks)
    return held


async def _approval_tasks(n: int) -> int:
    """``n`` tasks, each the same caller coroutine awaiting ``session.request_approval``."""
    session = new_session()

    async def caller(i: int) -> None:
        await session.request_approval(request(i))

    held, tasks = await measure_tasks(n, caller)
    stats = session.approvals.statistics()
    assert stats.pending == n and stats.waiters == n, stats
    session.finish()  # withdraws them all
    await asyncio.gather(*tasks)
    return held


async def _state_only(n: int) -> int:
    """Request + record + index entry + waiter Future + deadline timer, as ApprovalBook.wait holds them."""
    loop = asyncio.get_running_loop()
    book = ApprovalBook()
    handles: list[asyncio.TimerHandle] = []
    gc.collect()
    before = tracemalloc.take_snapshot()
    for i in range(n):
        record, _ = book.open(request(i))
        record.waiter = loop.create_future()
        handles.append(loop.call_later(TIMEOUT_MS / 1000, _expire, record.waiter, record.target_id))
    gc.collect()
    after = tracemalloc.take_snapshot()
    for handle in handles:
        handle.cancel()
    return sum(stat.size_diff for stat in after.compare_to(before, "filename"))


def memory(n: int) -> dict[str, float]:
    """Each phase in a fresh event loop, so each pays for its own container growth (task set, timer heap)."""
    results = {}
    for name, phase in (("bare", _bare_tasks), ("approvals", _approval_tasks), ("state", _state_only)):
        gc.collect()
        tracemalloc.start(1)
        try:
            results[name] = asyncio.run(phase(n)) / n
        finally:
            tracemalloc.stop()
    return {
        "task_baseline": results["bare"],
        "per_pending_A": results["approvals"] - results["bare"],
        "per_pending_B": results["state"],
    }


async def throughput(n: int) -> dict[str, float]:
    sink = InMemorySink()
    session = new_session([sink])
    channel = ControlChannel()
    router = ControlRouter(channel)
    router.attach(session)
    tasks = [asyncio.create_task(session.request_approval(request(i))) for i in range(n)]
    await settle(tasks)
    assert session.approvals.statistics().waiters == n
    messages = [
        ControlMessage(ControlKind.APPROVE, {"target_id": f"task-{i:06d}", "decided_by": "bench"}) for i in range(n)
    ]
    t0 = time.perf_counter()
    for msg in messages:
        ack = await channel.send(msg)
        if not ack.ok:
            raise SystemExit(f"decision refused: {ack.detail}")
    t_sent = time.perf_counter()
    outcomes = await asyncio.gather(*tasks)
    t_woken = time.perf_counter()
    assert all(o.decision == "approve" for o in outcomes)
    assert len(sink.of("approval_granted")) == n
    stats = session.approvals.statistics()
    assert stats.live == 0 and stats.waiters == 0
    router.detach(session)
    return {"decisions_per_s": n / (t_sent - t0), "end_to_end_per_s": n / (t_woken - t0)}


async def latency(samples: int, pending: int) -> dict[str, float]:
    """Alternating pairs: bare Event set→wake, then channel.send(APPROVE)→waiter resumes."""
    loop = asyncio.get_running_loop()
    session = new_session([InMemorySink()])
    channel = ControlChannel()
    router = ControlRouter(channel)
    router.attach(session)
    # Keep `pending` other approvals open so the decision lands in a realistically full book.
    background = [asyncio.create_task(session.request_approval(request(i))) for i in range(pending)]
    await settle(background)

    bare_ns: list[int] = []
    gold_ns: list[int] = []
    for k in range(samples + 50):  # the first 50 pairs warm up and are dropped
        event = asyncio.Event()
        woke: asyncio.Future[int] = loop.create_future()

        async def bare_waiter(event: asyncio.Event = event, woke: asyncio.Future[int] = woke) -> None:
            await event.wait()
            woke.set_result(time.perf_counter_ns())

        waiter = asyncio.create_task(bare_waiter())
        await asyncio.sleep(0)
        t0 = time.perf_counter_ns()
        event.set()
        t1 = await woke
        await waiter

        target = f"lat-{k}"
        resumed: asyncio.Future[int] = loop.create_future()

        async def gold_waiter(target: str = target, resumed: asyncio.Future[int] = resumed) -> None:
            req = ApprovalRequest(target_id=target, kind="task", prompt="?", timeout_ms=TIMEOUT_MS)
            await session.request_approval(req)
            resumed.set_result(time.perf_counter_ns())

        waiter = asyncio.create_task(gold_waiter())
        await asyncio.sleep(0)
        msg = ControlMessage(ControlKind.APPROVE, {"target_id": target})
        g0 = time.perf_counter_ns()
        ack = await channel.send(msg)
        g1 = await resumed
        await waiter
        if not ack.ok:
            raise SystemExit(f"decision refused: {ack.detail}")
        if k >= 50:
            bare_ns.append(t1 - t0)
            gold_ns.append(g1 - g0)
    session.finish()
    await asyncio.gather(*background)
    router.detach(session)

    def pct(values: list[int], q: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000

    return {
        "bare_p50_us": pct(bare_ns, 0.5),
        "bare_p99_us": pct(bare_ns, 0.99),
        "gold_p50_us": pct(gold_ns, 0.5),
        "gold_p99_us": pct(gold_ns, 0.99),
        "ratio_p50": statistics.median(gold_ns) / statistics.median(bare_ns),
        "ratio_paired_median": statistics.median(g / b for g, b in zip(gold_ns, bare_ns, strict=True)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10_000, help="approvals pending at once (default 10,000)")
    parser.add_argument("--samples", type=int, default=2_000, help="latency pairs (default 2,000)")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds; the median is reported (default 3)")
    args = parser.parse_args(argv)
    n = args.n

    print(f"goldfive approvals benchmark: {n:,} pending at once, Python {sys.version.split()[0]}")
    mem = memory(n)
    rounds = [asyncio.run(throughput(n)) for _ in range(args.rounds)]
    rate = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    lat = asyncio.run(latency(args.samples, n))

    rows = [
        (
            "memory per pending approval (A: task minus bare-Future task)",
            f"{mem['per_pending_A']:,.0f} B",
            "<= 2,048 B",
            mem["per_pending_A"] <= 2048,
        ),
        ("  (B: request + record + index + waiter + timer, no task)", f"{mem['per_pending_B']:,.0f} B", "", None),
        ("  (baseline: one task awaiting a bare Future)", f"{mem['task_baseline']:,.0f} B", "", None),
        (
            "decisions/s: channel.send(APPROVE) via router + session",
            f"{rate['decisions_per_s']:,.0f}",
            ">= 20,000",
            rate["decisions_per_s"] >= 20_000,
        ),
        ("  (end to end, until every waiter resumed)", f"{rate['end_to_end_per_s']:,.0f}", "", None),
        ("latency send(APPROVE) -> waiter resumes, p50", f"{lat['gold_p50_us']:.1f} us", "", None),
        ("latency send(APPROVE) -> waiter resumes, p99", f"{lat['gold_p99_us']:.1f} us", "", None),
        ("bare asyncio.Event set -> wake, p50", f"{lat['bare_p50_us']:.1f} us", "", None),
        ("bare asyncio.Event set -> wake, p99", f"{lat['bare_p99_us']:.1f} us", "", None),
        ("p50 latency / bare p50 (medians)", f"{lat['ratio_p50']:.1f}x", "<= 10x", lat["ratio_p50"] <= 10),
        ("  (median of paired ratios)", f"{lat['ratio_paired_median']:.1f}x", "", None),
    ]
    per_round = ", ".join(f"{r['decisions_per_s']:,.0f}/s" for r in rounds)
    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure':<{width}}  {'value':>12}  {'target':>10}  result")
    print("-" * (width + 36))
    for label, value, target, ok in rows:
        verdict = "" if ok is None else ("PASS" if ok else "MISS")
        print(f"{label:<{width}}  {value:>12}  {target:>10}  {verdict}")
    print(
        f"\nthroughput: median of {args.rounds} rounds of {n:,} decisions (each round opens {n:,} approvals, then "
        f"decides them one by one; rounds: {per_round}).\n"
        f"latency: {args.samples:,} alternating pairs after 50 warm-up pairs, with {n:,} other approvals open.\n"
        "memory: tracemalloc snapshot diffs after gc, sinks off (events are the sinks' memory, not goldfive's).\n"
        "Wall-clock figures: other processes on the machine slow them down; rerun on a quiet machine to compare."
    )
    misses = [r[0] for r in rows if r[3] is False]
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
