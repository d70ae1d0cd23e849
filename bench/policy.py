"""Benchmark: what evaluating a 50-rule policy costs per tool call (issue 12 target: <= 20 µs).

    python bench/policy.py [--calls 20000] [--samples 15]

The policy (built from TOML, as users write it) has 50 rules: 20 on one tool with conditions that
compare, test membership and run regexes over nested arguments, 20 on other tools, and 10 globs with
run labels. The calls are
  * worst: an amount past every threshold of the 19 transfer rules, so each of them runs its first two
    tests before it fails, and the 20th matches (no part of the ladder can be skipped);
  * below: an amount below every threshold (the 19 rules are one ladder, skipped with one test);
  * mixed: a rotation of calls that allow, ask, deny and match nothing.
Each is timed as ``Policy.evaluate(PolicyCall(...))`` (building the call view included).

The same-run baseline is a call with no policy: what a callable agent does before each of its own
tool calls today (``AgentTools.before_tool``: the step gate and the drift detectors), timed in the
same process in alternating samples. Reported: medians, and the ratio (baseline + policy) / baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import contextlib

from goldfive_core import Session, SteeringConfig
from goldfive_core.adapters.callable import AgentTools
from goldfive_core.policy import PolicyCall, parse_policy
from goldfive_core.tasks import Task

TARGET_US = 20.0


def fifty_rules() -> str:
    parts: list[str] = []

    def rule(name: str, body: str) -> None:
        parts.append(f'[[rule]]\nname = "{name}"\n{body}\n')

    currencies = ["EUR", "USD", "GBP", "CHF", "JPY"]
    for i in range(19):
        when = (
            f"args.amount > {1000 * (i + 1)} and args.currency in ['{currencies[i % 5]}', 'X{i}'] "
            f"and args.dest.country matches '[A-Z]{{2}}' and args.dest.iban != 'DE{i:02d}'"
        )
        action = 'action = "ask"\napprovers = ["role:finance"]\nquorum = 2' if i % 2 else 'action = "allow"'
        rule(f"transfer {i}", f'tool = "transfer_funds"\nwhen = "{when}"\n{action}')
    rule(
        "transfer last",
        'tool = "transfer_funds"\nwhen = "args.memo matches \'inv-[0-9]+\' and len(args.tags) >= 1"\n'
        'action = "deny"\nreason = "invoices go through the invoice tool"',
    )
    for i in range(20):
        rule(f"tool {i}", f'tool = "tool_{i}"\nwhen = "args.n <= {i}"\naction = "allow"')
    for i in range(10):
        rule(
            f"glob {i}",
            f'tool = "*_admin_{i}"\nlabels = {{ env = "prod" }}\naction = "deny"\nreason = "no admin {i} in prod"',
        )
    return "\n".join(parts)


WORST = {
    "amount": 5,  # below every threshold: every transfer condition is evaluated and fails
    "currency": "EUR",
    "dest": {"country": "DE", "iban": "DE99"},
    "memo": "inv-2041",
    "tags": ["q3"],
}
PAST = {**WORST, "amount": 10**9, "currency": "XXX"}  # passes every threshold; the currency test fails
MIXED: list[tuple[str, dict[str, Any]]] = [
    ("transfer_funds", WORST),
    ("transfer_funds", {**WORST, "amount": 1500}),  # matches "transfer 0" (allow) at once
    ("tool_7", {"n": 3}),
    ("tool_7", {"n": 30}),
    ("something_else", {"x": 1}),
    ("db_admin_3", {}),
]


def time_loop(fn: Any, n: int) -> float:
    """Seconds per call of ``fn()`` over ``n`` calls."""
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


async def time_async_loop(fn: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await fn()
    return (time.perf_counter() - start) / n


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=15)
    opts = parser.parse_args()

    policy = parse_policy(fifty_rules(), source="bench")
    assert len(policy) == 50, len(policy)
    labels = {"env": "prod"}
    worst_call = lambda: policy.evaluate(  # noqa: E731
        PolicyCall(tool="transfer_funds", args=PAST, agent="billing", labels=labels, gated=True)
    )
    below_call = lambda: policy.evaluate(  # noqa: E731
        PolicyCall(tool="transfer_funds", args=WORST, agent="billing", labels=labels, gated=True)
    )
    for call in (worst_call, below_call):
        verdict = call()
        assert verdict.kind == "deny" and verdict.rule_name == "transfer last", verdict
    rotation = [PolicyCall(tool=t, args=a, agent="billing", labels=labels, gated=True) for t, a in MIXED]
    kinds = [policy.evaluate(c).kind for c in rotation]
    assert set(kinds) == {"allow", "ask", "deny"}, kinds

    def mixed() -> None:
        for t, a in MIXED:
            policy.evaluate(PolicyCall(tool=t, args=a, agent="billing", labels=labels, gated=True))

    session = Session(config=SteeringConfig())
    tools = AgentTools(session, Task(id="t", title="bench"))
    counter = iter(range(10**9))

    async def no_policy() -> None:  # distinct args so the loop detector never fires
        await tools.before_tool("transfer_funds", {"amount": next(counter)})

    async def with_policy() -> None:
        await tools.before_tool("transfer_funds", {"amount": next(counter)})
        worst_call()

    worst, below, mix, base, combined = [], [], [], [], []
    n = opts.calls
    for _ in range(opts.samples):
        worst.append(time_loop(worst_call, n))
        below.append(time_loop(below_call, n))
        mix.append(time_loop(mixed, n // len(MIXED)) / len(MIXED))
        base.append(await time_async_loop(no_policy, n // 4))
        combined.append(await time_async_loop(with_policy, n // 4))
        session = Session(config=SteeringConfig())  # a fresh session: detector history stays small
        tools = AgentTools(session, Task(id="t", title="bench"))

    us = 1e6
    w, lo, m, b, c = (statistics.median(x) * us for x in (worst, below, mix, base, combined))
    wmin, lomin, bmin, cmin = (min(x) * us for x in (worst, below, base, combined))
    print(f"policy: {len(policy)} rules; {opts.samples} samples of {n} calls; median (best) per call")
    print(
        f"  Policy.evaluate, worst call (39 tests in 20 rules):     {w:7.2f} µs ({wmin:.2f})   target <= {TARGET_US} µs"
    )
    print(f"  Policy.evaluate, below every threshold (ladder skipped): {lo:6.2f} µs ({lomin:.2f})")
    print(f"  Policy.evaluate, mixed calls (allow/ask/deny/none):    {m:7.2f} µs")
    print(f"  baseline, a tool call with no policy (before_tool):    {b:7.2f} µs ({bmin:.2f})")
    print(f"  the same call plus the worst-case evaluation:          {c:7.2f} µs ({cmin:.2f})   ratio {c / b:.2f}x")
    with contextlib.suppress(OSError):
        print(f"  load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("PASS" if w <= TARGET_US else "FAIL", f"(worst case {w:.2f} µs vs {TARGET_US} µs)")


if __name__ == "__main__":
    asyncio.run(main())
