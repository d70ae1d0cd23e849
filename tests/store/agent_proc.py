"""An agent process for the cross-process store tests (run as a subprocess).

It opens the store named by GOLDFIVE_DB / GOLDFIVE_DSN (+ GOLDFIVE_PG_SCHEMA),
runs one callable agent under ``wrap(..., control=StoreChannel(...))`` and
prints one JSON line with the outcome. Modes:

- ``flow-a``: ``report_awaiting_approval`` on task ``--call-id``;
- ``tool``: a guarded tool call (``run_approved``) with id ``--call-id`` whose
  body appends a line to ``--marker``; ``--die-in-body`` kills the process
  inside the body, before its result is recorded; ``--hold-in-body FILE`` holds the body until FILE exists.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.store import StoreChannel, open_store
from goldfive_core.store.execution import run_approved


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")


def _wait_acks_written(store: Any) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = store.db.execute(store.db.conn(), "SELECT COUNT(*) FROM gf_inbox WHERE status = 'claimed'").fetchone()
        if not row[0]:
            return
        time.sleep(0.005)


def _wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["flow-a", "tool", "steps"])
    parser.add_argument("--call-id", default="call-1")
    parser.add_argument("--marker", default="")
    parser.add_argument("--timeout-ms", type=int, default=20_000)
    parser.add_argument("--die-in-body", action="store_true")
    parser.add_argument("--hold-in-body", default="", help="the body returns once this file exists")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    store = open_store()
    channel = StoreChannel(store)

    async def body(call_args: Any) -> dict[str, Any]:
        _append(Path(args.marker), json.dumps(call_args, sort_keys=True))
        if args.die_in_body:
            # Let the decision's ack reach the store first (the test is about a crash between "executing"
            # and "done", not about a lost ack), then die after the side effect, before the result is recorded.
            await asyncio.to_thread(_wait_acks_written, store)
            os._exit(9)
        if args.hold_in_body:
            await asyncio.to_thread(_wait_for_file, Path(args.hold_in_body))
        return {"sent": call_args["amount"]}

    async def agent(task: Task, tools: AgentTools) -> Any:
        if args.mode == "flow-a":
            await tools.report_task_started(args.call_id)
            return await tools.report_awaiting_approval("deploy v2?", task_id=args.call_id, timeout_ms=args.timeout_ms)
        if args.mode == "steps":
            # Steps until a person cancels or steers "stop". Bounded by a generous wall-clock budget, not by a
            # step count: on a loaded machine the test's CLI calls can take seconds, and a run that ended on its
            # own before the CLI looked would fail the test for the wrong reason.
            notes: list[str] = []
            deadline = asyncio.get_running_loop().time() + 60
            while asyncio.get_running_loop().time() < deadline:
                notes += await tools.checkpoint()
                if "stop" in notes:
                    return {"notes": notes}
                await asyncio.sleep(0.01)
            return {"notes": notes}
        outcome = await run_approved(
            tools.session,
            store,
            call_id=args.call_id,
            tool_name="send_money",
            args={"to": "bob", "amount": 10},
            body=body,
            prompt="send 10 to bob?",
            timeout_ms=args.timeout_ms,
        )
        return {"status": outcome.status, "result": outcome.result, "detail": outcome.detail}

    runner = wrap(agent, control=channel, sinks=[channel.sink])
    result = await runner.run("test")
    await channel.aclose()
    sys.stdout.write(json.dumps({"status": result.status.value, "output": result.output}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main())
