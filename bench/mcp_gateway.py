"""What ``goldfive mcp`` adds to a tools/call that needs no person (offline, stdio, the bundled demo server).

    python bench/mcp_gateway.py [--calls 300] [--warmup 30]

Two MCP SDK clients in the same process and run: one talks to the demo bank straight (its stdio command), one
to ``goldfive mcp --default allow --db <tmp>`` in front of the same command. ``read_balance`` is called on each
in alternation, one at a time (another account each time), so both see the same load. Printed: p50 / p99 per
side, the ratio of the medians and the added p50 (the issue's targets: ratio <= 1.2, added p50 <= 1 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from _support import REPO, ms_line, pct
from mcp import Client, StdioServerParameters

DEMO = REPO / "examples" / "mcp_demo_server.py"


async def timed(client: Client, i: int) -> float:
    # Other arguments each time: the same call again and again is what goldfive's loop detector stops.
    start = time.perf_counter()
    result = await client.call_tool("read_balance", {"account": f"acct-{i}"})
    elapsed = time.perf_counter() - start
    if result.is_error:
        raise SystemExit(f"the call failed: {result.content}")
    return elapsed


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        direct = StdioServerParameters(command=sys.executable, args=[str(DEMO)])
        db = str(Path(tmp) / "goldfive.db")
        upstream = f"bank={sys.executable} {DEMO}"
        gateway = StdioServerParameters(
            command=sys.executable,
            args=["-m", "goldfive_core.cli", "mcp", "--db", db, "--default", "allow", "--upstream", upstream],
        )
        async with Client(direct, mode="legacy") as straight, Client(gateway, mode="legacy") as through:
            for i in range(args.warmup):
                await timed(straight, i)
                await timed(through, i)
            bare: list[float] = []
            gated: list[float] = []
            for i in range(args.calls):
                pair = (straight, through) if i % 2 == 0 else (through, straight)
                for client in pair:
                    (bare if client is straight else gated).append(await timed(client, args.warmup + i))
    ratio = pct(gated, 0.5) / pct(bare, 0.5)
    added_ms = (pct(gated, 0.5) - pct(bare, 0.5)) * 1000
    print("tools/call that needs no person, over stdio (read_balance on the demo bank):")
    print(f"  straight to the upstream   {ms_line(bare)}")
    print(f"  through goldfive mcp       {ms_line(gated)}")
    print(f"  ratio of medians {ratio:.2f} (target <= 1.2), added p50 {added_ms:.2f} ms (target <= 1 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
