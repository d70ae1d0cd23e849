"""An MCP client for the browser tests: ``goldfive mcp`` in front of the booking upstream, two calls whose
question a person answers in the inbox. Prints ``RESULT <n>: <what the model reads>`` after each call."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "mcp" / "elicit_upstream.py"


async def main(db: str, calls: int) -> None:
    argv = ["-m", "goldfive_core.cli", "mcp", "--db", db, "--default", "allow"]
    argv += ["--upstream", f"bookings={sys.executable} {UPSTREAM}"]
    params = StdioServerParameters(command=sys.executable, args=argv, cwd=str(ROOT))
    async with Client(params, mode="legacy") as client:
        for n in range(1, calls + 1):
            result = await client.call_tool("book_table", {"restaurant": f"Chez Ana #{n}"})
            said = " ".join(getattr(block, "text", "") for block in result.content)
            sys.stdout.write(f"RESULT {n}: {said}\n")
            sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
