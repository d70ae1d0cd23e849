"""Durable approval: the agent waits in one terminal, a person answers from another with ``goldfive``.

Runs offline (a plain async agent, no model, no API key)::

    python examples/durable_approval.py                 # terminal 1: the agent asks and waits
    goldfive pending                                    # terminal 2: what is waiting
    goldfive approve deploy-1a2b3c --by ana             #             answer it (or: reject ID --reason "...")

The decision travels through the store (``./goldfive.db``, SQLite; ``--dsn postgresql://...`` for
PostgreSQL): the agent's StoreChannel picks it up, the tool body runs once, and every event lands in
the hash-chained audit log (``goldfive events``, ``goldfive audit verify``).

Kill the agent (``kill -9``) while it waits and the request stays listed as *orphaned*; approve it
anyway, then restart with the same ``--call-id``: the replayed call uses the recorded decision and
deploys exactly once (a third run says it already ran).

Without a terminal (``make demo`` in CI, a pipe) and without ``--wait``, a second process approves
after ``--approve-after`` seconds (default 0.5) by running the real ``goldfive approve`` command.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from goldfive_core import AgentTools, Task, wrap
from goldfive_core._util import new_id
from goldfive_core.store import StoreChannel, open_store
from goldfive_core.store.execution import run_approved

from _console import PrintSink

AUTO_NAME = "auto (no terminal)"


async def deploy(args: Mapping[str, Any]) -> dict[str, Any]:
    """The risky tool (offline: it only says what it would do)."""
    return {"deployed": args["version"], "to": args["environment"]}


def approve_later(location_args: list[str], call_id: str, after_s: float) -> subprocess.Popen[str]:
    """Another process that runs ``goldfive approve`` once the request exists (the non-interactive path)."""
    script = (
        "import shlex, sys, time, subprocess\n"
        f"time.sleep({after_s!r})\n"
        "cmd = [sys.executable, '-m', 'goldfive_core.cli', *sys.argv[1:]]\n"
        "for _ in range(100):\n"
        "    r = subprocess.run(cmd, capture_output=True, text=True)\n"
        "    if 'unknown approval id' not in r.stderr:\n"
        "        break\n"
        "    time.sleep(0.1)\n"
        "print('  second terminal $ goldfive ' + shlex.join(sys.argv[1:]))\n"
        "print('  ' + (r.stdout or r.stderr).strip())\n"
    )
    argv = [*location_args, "approve", call_id, "--by", AUTO_NAME, "--reason", "approved by the demo's helper"]
    return subprocess.Popen([sys.executable, "-c", script, *argv], text=True)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default=os.environ.get("GOLDFIVE_DB", "goldfive.db"), help="SQLite store file")
    parser.add_argument("--dsn", default=os.environ.get("GOLDFIVE_DSN"), help="PostgreSQL DSN instead of --db")
    parser.add_argument("--call-id", default=None, help="the tool call's id (pin it to replay after a restart)")
    parser.add_argument("--timeout-ms", type=int, default=600_000, help="how long the agent waits (default 10 min)")
    parser.add_argument("--approve-after", type=float, default=None, help="approve from a second process after N s")
    parser.add_argument("--wait", action="store_true", help="never auto-approve; wait for a person")
    args = parser.parse_args()

    location = args.dsn or args.db
    location_args = ["--dsn", args.dsn] if args.dsn else ["--db", args.db]
    store = open_store(location)
    channel = StoreChannel(store)
    call_id = args.call_id or new_id("deploy")
    auto_after = args.approve_after
    if auto_after is None and not args.wait and not sys.stdin.isatty():
        auto_after = 0.5

    async def release_agent(task: Task, tools: AgentTools) -> Any:
        await tools.report_task_started("release", title="ship v2")
        print(f"\nThe agent wants to deploy v2 to production and waits for a person (store: {store.url}).")
        print("In another terminal:")
        print("  goldfive pending" + ("" if location == "goldfive.db" else f" {' '.join(location_args)}"))
        print(f"  goldfive approve {call_id} --by <you>      or   goldfive reject {call_id} --reason '...'\n")
        outcome = await run_approved(
            tools.session,
            store,
            call_id=call_id,
            tool_name="deploy",
            args={"version": "v2", "environment": "production"},
            body=deploy,
            prompt="Deploy v2 to production?",
            task_id="release",
            timeout_ms=args.timeout_ms,
        )
        await tools.report_task_completed(task_id="release", result=outcome.status)
        return outcome

    helper = approve_later(location_args, call_id, auto_after) if auto_after is not None else None
    runner = wrap(release_agent, control=channel, sinks=[channel.sink, PrintSink()])
    try:
        result = await runner.run("deploy v2")
    finally:
        await channel.aclose()
        if helper is not None:
            await asyncio.to_thread(helper.wait, 30)
    outcome = result.output
    if outcome.status == "ran":
        who = f" (approved by {outcome.decided_by})" if outcome.decided_by else ""
        print(f"\nDeployed{who}: {outcome.result}")
    elif outcome.status == "already_done":
        print(f"\nNothing to do: {outcome.detail}")
    else:
        print(f"\nNot deployed: {outcome.status} {outcome.detail}".rstrip())
    print("Audit trail: goldfive events   ·   tamper check: goldfive audit verify")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
