"""What ``goldfive mcp`` adds to a tools/call that needs no person (offline, stdio, the bundled demo server).

    python bench/mcp_gateway.py [--calls 300] [--warmup 30]

Two MCP SDK clients in the same process and run: one talks to the demo bank straight (its stdio command), one
to ``goldfive mcp --default allow --db <tmp>`` in front of the same command. ``read_balance`` is called on each
in alternation, one at a time (another account each time), so both see the same load. Printed: p50 / p99 per
side, the ratio of the medians and the added p50 (the issue's targets: ratio <= 1.2, added p50 <= 1 ms). On
Linux also the CPU each process spent per call (from /proc, the same calls): what the gateway costs whatever
else runs on the machine, beside the wall-clock figures, which a loaded machine (the load average is printed)
inflates with every extra process hop.

Then ``--approvals`` gated calls (``--gate transfer_funds``) on a SQLite store: each is approved in this process
with ``decide()`` (what ``goldfive approve`` calls) once it is pending; timed from the decision to the moment the
upstream's tool body starts (the demo bank's ``--stamp``). Target: p50 <= 5 ms. With ``--against CHECKOUT`` (another
checkout of goldfive with its own ``.venv``, e.g. ``/work/main``) that checkout's gateway takes every other approval
in the same run, so a change is compared with its baseline under the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from _support import REPO, ms_line, pct
from mcp import Client, StdioServerParameters

from goldfive_core.approvals import Principal
from goldfive_core.store import Store, open_store
from goldfive_core.store.base import OPEN_STATUSES
from goldfive_core.store.decide import decide

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
    parser.add_argument("--approvals", type=int, default=40)
    parser.add_argument("--against", type=Path, metavar="CHECKOUT", help="also time that checkout's gateway")
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
            cpu_before = _cpu_by_process()
            for i in range(args.calls):
                pair = (straight, through) if i % 2 == 0 else (through, straight)
                for client in pair:
                    (bare if client is straight else gated).append(await timed(client, args.warmup + i))
            cpu = {name: (spent - cpu_before.get(name, 0.0)) / args.calls for name, spent in _cpu_by_process().items()}
        sides = {"this checkout": (Path(sys.executable), REPO)}
        if args.against is not None:
            sides["--against"] = (args.against.resolve() / ".venv" / "bin" / "python", args.against.resolve())
        starts = await approve_to_start(Path(tmp), args.approvals, sides)
    ratio = pct(gated, 0.5) / pct(bare, 0.5)
    added_ms = (pct(gated, 0.5) - pct(bare, 0.5)) * 1000
    print("tools/call that needs no person, over stdio (read_balance on the demo bank):")
    print(f"  straight to the upstream   {ms_line(bare)}")
    print(f"  through goldfive mcp       {ms_line(gated)}")
    print(f"  ratio of medians {ratio:.2f} (target <= 1.2), added p50 {added_ms:.2f} ms (target <= 1 ms)")
    if cpu:
        direct = cpu.get("client", 0.0) / 2 + cpu.get("bank", 0.0) / 2  # the client made both sides' calls
        gateway_ms, direct_ms = cpu.get("gateway", 0.0) * 1000, direct * 1000
        print(f"  CPU per call: gateway {gateway_ms:.3f} ms, straight path (client + upstream) {direct_ms:.3f} ms:")
        print(f"    the gateway adds {gateway_ms / direct_ms:.2f}x of the straight call's CPU")
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("approve (decide() on SQLite) -> the upstream's tool body starts:")
    for side, times in starts.items():
        label = side if len(starts) > 1 else ""
        print(f"  {label:14s}{ms_line(times)}   (target p50 <= 5 ms)")
    print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


def _cpu_by_process() -> dict[str, float]:
    """CPU seconds so far of this process ("client"), the gateway and the demo banks (Linux /proc; else {})."""
    if not Path("/proc/self/stat").exists():
        return {}
    tick = os.sysconf("SC_CLK_TCK")
    out = {"client": _cpu_of("self", tick)}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            spent = _cpu_of(pid, tick)
        except OSError:
            continue
        parent = _parent_of(pid)
        if b"mcp" in cmdline and parent == os.getpid():
            out["gateway"] = out.get("gateway", 0.0) + spent
        elif any(part.endswith(b"mcp_demo_server.py") for part in cmdline) and os.getpid() in (
            parent,
            _parent_of(str(parent)),
        ):
            out["bank"] = out.get("bank", 0.0) + spent  # both banks: the straight one and the gateway's
    return out


def _cpu_of(pid: str, tick: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick


def _parent_of(pid: str) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


async def _first_pending(store: Store) -> str:
    for _ in range(10_000):
        page = store.approval_page(statuses=OPEN_STATUSES, limit=1)
        if page.rows:
            return page.rows[0].target_id
        await asyncio.sleep(0.002)
    raise SystemExit("no approval request appeared")


async def approve_to_start(tmp: Path, count: int, sides: dict[str, tuple[Path, Path]]) -> dict[str, list[float]]:
    """Seconds from each decision to the upstream's body starting, for ``count`` gated calls per side.

    ``sides``: name -> (its Python, its checkout); the sides take turns, in alternating order."""
    out: dict[str, list[float]] = {side: [] for side in sides}
    async with contextlib.AsyncExitStack() as stack:
        gateways = {}
        for n, (side, (python, checkout)) in enumerate(sides.items()):
            db, calls = str(tmp / f"gated-{n}.db"), tmp / f"stamps-{n}.jsonl"
            demo = checkout / "examples" / "mcp_demo_server.py"
            upstream = f"bank={python} {demo} --stamp --calls {calls}"
            argv = ["-m", "goldfive_core.cli", "mcp", "--db", db, "--gate", "transfer_funds", "--upstream", upstream]
            params = StdioServerParameters(command=str(python), args=argv, cwd=str(checkout))
            client = await stack.enter_async_context(Client(params, mode="legacy"))
            await client.list_tools()  # the gateway made the store by now
            store = open_store(db)
            stack.callback(store.close)
            gateways[side] = (client, store, calls)
        for i in range(count):
            for side in list(sides) if i % 2 == 0 else reversed(list(sides)):
                client, store, calls = gateways[side]
                call = asyncio.create_task(client.call_tool("transfer_funds", {"amount": i + 1, "to": "ACME"}))
                target = await _first_pending(store)
                started = time.time()
                await asyncio.to_thread(decide, store, target, approve=True, principal=Principal(name="bench"))
                await call
                out[side].append(json.loads(calls.read_text().splitlines()[-1])["at"] - started)
    return out


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
