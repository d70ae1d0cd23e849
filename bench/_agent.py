"""One agent process for the benches: a callable agent whose gated tool body notes when it starts.

    python bench/_agent.py http URL TOKEN          # on an HttpChannel to goldfive serve (no database)
    python bench/_agent.py store LOCATION [SCHEMA]  # on a StoreChannel, straight on the store

It runs from whichever checkout is on ``PYTHONPATH`` (a baseline tree uses its own code) and speaks lines:
each line ``CALL_ID`` on stdin makes the agent ask for one call of ``transfer_funds`` through the execution
ledger (``run_approved``: the gate, the ledger's "executing" claim, then the body), and the body's first line
prints ``body CALL_ID T`` (``T``: ``CLOCK_MONOTONIC`` seconds, the same clock in every process of the machine).
An empty line ends the run.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping
from typing import Any


def monotonic() -> float:
    """The clock the bench and its agent processes share (system-wide on Linux)."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


async def _lines() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def ask_and_run(session: Any, store: Any, call_id: str, body: Any, **kwargs: Any) -> Any:
    """One call of ``transfer_funds`` (its arguments name it) through the gate and the ledger: the body runs once a
    person approved it. ``kwargs``: ``run_approved``'s (the ledger, the trust key)."""
    from goldfive_core.store import run_approved

    return await run_approved(
        session,
        store,
        call_id=call_id,
        tool_name="transfer_funds",
        args={"call": call_id},
        body=body,
        timeout_ms=60_000,
        **kwargs,
    )


async def main(argv: list[str]) -> None:
    from goldfive_core import AgentTools, Task, wrap
    from goldfive_core.store import StoreChannel, open_store

    channel: Any
    if argv[0] == "http":
        from goldfive_core.store.http import HttpChannel

        channel = HttpChannel(argv[1], token=argv[2])
    else:
        channel = StoreChannel(open_store(argv[1], schema=argv[2] if len(argv) > 2 else None))
    commands = await _lines()

    async def body(args: Mapping[str, Any]) -> str:
        print(f"body {args['call']} {monotonic():.6f}", flush=True)
        return "ok"

    async def agent(task: Task, tools: AgentTools) -> None:
        print("ready", flush=True)
        while call_id := (await commands.readline()).decode().strip():
            await ask_and_run(tools.session, channel.store, call_id, body, ledger=channel.ledger)

    await wrap(agent, control=channel, sinks=[channel.sink]).run("bench")
    await channel.aclose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
