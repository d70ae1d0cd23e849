"""Thousands of simulated waiting agents for the benches, spread over client processes (``bench/_sim_agents.py``).

One Python process with one httpx pool cannot hold thousands of streams (httpx's pool looks over every connection
it holds at each request: ``bench/idle_streams.py --agents 10000`` opened none in five minutes), and one event loop
is a core's worth of work while a fleet connects. :class:`Swarm` gives each client process a share of the agents
(each with its own token, run, stream and connections), tells them to join in waves, and follows what they report:
which server each agent's stream is on, and every message delivered (with the time it arrived, on the clock every
process of the machine shares).

:func:`cheap_users` makes the agents' users with a cheap token hash, for the benches only: goldfive's own
(``goldfive users add``, :func:`~goldfive_core.store.users.add_user`) costs one scrypt check (≈ 50 ms of CPU) per
user to make and one per server that first sees the token, which is not what a fleet bench measures.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import resource
import secrets
import sys
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

from _support import REPO

from goldfive_core.store import open_store
from goldfive_core.store.base import UserRow
from goldfive_core.store.users import add_user, hash_token

CHEAP_HASH_N = 2
"""The scrypt cost of the benches' agent tokens (goldfive's default is 2**14): the bench says so in its output."""
PER_PROCESS = 2500
"""Agents per client process by default (each process: one event loop, two connections per agent at most)."""


def raise_fd_limit() -> tuple[int, int]:
    """Raise this process's open-file limit to its hard limit (children inherit it): (soft, hard) now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def cheap_users(location: str, schema: str | None, prefix: str, n: int, *, scrypt: int = 0) -> list[str]:
    """``n`` agent users ``PREFIX0``... and their tokens: the first ``scrypt`` made as goldfive makes them (its
    default scrypt cost), the others with a cheap hash (:data:`CHEAP_HASH_N`), for the benches only."""
    store = open_store(location, schema=schema)
    tokens = []
    try:
        for i in range(n):
            if i < scrypt:
                tokens.append(add_user(store, f"{prefix}{i}", "agent").token)
                continue
            token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)[:43]
            store.add_user(
                UserRow(
                    name=f"{prefix}{i}",
                    role="agent",
                    token_id=token_id,
                    token_hash=hash_token(secret, n=CHEAP_HASH_N),
                    disabled=False,
                    created_at_ms=0,
                    updated_at_ms=0,
                    failed_logins=0,
                    locked_until_ms=0,
                )
            )
            tokens.append(f"gf5_{token_id}_{secret}")
    finally:
        store.close()
    return tokens


@dataclasses.dataclass(eq=False)
class Sim:
    """The bench's view of one simulated agent: what its client process reported."""

    run_id: str
    token: str
    order: list[int]
    """The servers it tries, in turn (its home first)."""
    targets: list[str] = dataclasses.field(default_factory=list)
    keep_pass: bool = True
    group: str = "cheap"
    """Which kind of agent it is, for the report (its token's hash, whether it keeps its pass)."""
    early: bool = False
    """Joins in the first phase (:meth:`Swarm.join`)."""
    server: int = -1
    """The server its stream is on now (-1: none)."""
    up_at: float = 0.0
    """When its stream last connected (CLOCK_MONOTONIC)."""
    down_at: float = 0.0
    """When its stream last ended."""
    tries: int = 0
    """The stream requests its last connection took."""
    asked: float = 0.0
    """When its last stream request was sent."""
    answered: float = 0.0
    """When that request's answer (its head) came."""
    got: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    """target → the control ids delivered for it (each new inbox id once)."""
    at: dict[str, float] = dataclasses.field(default_factory=dict)
    _arrived: dict[str, asyncio.Event] = dataclasses.field(default_factory=dict)

    @property
    def home(self) -> int:
        return self.order[0]

    def arrived(self, target: str) -> asyncio.Event:
        return self._arrived.setdefault(target, asyncio.Event())

    def spec(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "token": self.token,
            "order": self.order,
            "targets": self.targets,
            "keep_pass": self.keep_pass,
            "early": self.early,
        }


def orders(home: int, index: int, servers: int) -> list[int]:
    """The order agent ``index`` (homed on ``home``) tries the servers in: its home, then the others starting at a
    different one for every other agent (a killed server's agents spread over the survivors)."""
    others = [(home + k) % servers for k in range(1, servers)]
    shift = index % len(others) if others else 0
    return [home, *others[shift:], *others[:shift]]


class Swarm:
    """The client processes holding ``sims`` (see the module docstring); ``async with`` starts and stops them."""

    def __init__(self, urls: list[str], sims: list[Sim], tmp: Path, *, processes: int = 0, beat_s: float = 5.0):
        self.urls = urls
        self.sims = sims
        self.by_run = {s.run_id: s for s in sims}
        self.tmp = tmp
        self.processes = processes or max(1, -(-len(sims) // PER_PROCESS))
        self.beat_s = beat_s
        self.errors: list[str] = []
        self.lag = 0.0
        """The client processes' worst event-loop lag (s) up to the last :meth:`stats`."""
        self.downs = 0
        self._procs: list[asyncio.subprocess.Process] = []
        self._replies: list[asyncio.Queue[list[str]]] = []
        self._readers: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Swarm:
        for k in range(self.processes):
            share = self.sims[k :: self.processes]
            spec = self.tmp / f"swarm-{os.getpid()}-{id(self)}-{k}.json"
            spec.write_text(json.dumps({"urls": self.urls, "beat_s": self.beat_s, "agents": [s.spec() for s in share]}))
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(REPO / "bench" / "_sim_agents.py"),
                str(spec),
                stdin=PIPE,
                stdout=PIPE,
                env=dict(os.environ, PYTHONPATH=str(REPO)),
                limit=1 << 20,
            )
            self._procs.append(proc)
            self._replies.append(asyncio.Queue())
            self._readers.append(asyncio.create_task(self._read(proc, self._replies[-1])))
        for replies in self._replies:
            await asyncio.wait_for(replies.get(), 300)  # "ready"
        return self

    async def __aexit__(self, *exc: object) -> None:
        for proc in self._procs:
            with contextlib.suppress(ConnectionError, RuntimeError):
                assert proc.stdin is not None
                proc.stdin.write(b"stop\n")
                await proc.stdin.drain()
        for proc in self._procs:
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)

    async def _read(self, proc: asyncio.subprocess.Process, replies: asyncio.Queue[list[str]]) -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            words = raw.decode().split()
            if not words:
                continue
            kind = words[0]
            if kind == "up":
                sim = self.by_run[words[1]]
                sim.server, sim.up_at, sim.tries = int(words[2]), float(words[3]), int(words[4])
                sim.asked, sim.answered = float(words[5]), float(words[6])
            elif kind == "down":
                sim = self.by_run[words[1]]
                sim.server, sim.down_at = -1, float(words[2])
                self.downs += 1
            elif kind == "got":
                sim, target = self.by_run[words[1]], words[2]
                sim.got.setdefault(target, []).append(words[3])
                sim.at.setdefault(target, float(words[4]))
                sim.arrived(target).set()
            elif kind == "error":
                self.errors.append(" ".join(words[1:]))
            else:
                replies.put_nowait(words)

    async def _ask(self, command: str, timeout_s: float) -> list[list[str]]:
        for proc in self._procs:
            assert proc.stdin is not None
            proc.stdin.write(command.encode() + b"\n")
            await proc.stdin.drain()
        return [await asyncio.wait_for(replies.get(), timeout_s) for replies in self._replies]

    async def join(self, wave: int, *, early: bool = False) -> tuple[float, int]:
        """Every agent (``early``: every early one; else the others) registers its run and opens its stream,
        ``wave`` at a time per process: (seconds, failed)."""
        answers = await self._ask(f"join {wave} {'early' if early else 'rest'}", 3600)
        return max(float(a[1]) for a in answers), sum(int(a[2]) for a in answers)

    async def stats(self) -> tuple[int, int, int]:
        """(heartbeat requests sent so far, agents whose run no open stream keeps alive, agents connected); the
        client processes' worst event-loop lag since the last call is kept in :attr:`lag`."""
        answers = await self._ask("stats", 120)
        self.lag = max(float(a[4]) for a in answers)
        return tuple(sum(int(a[k]) for a in answers) for k in (1, 2, 3))  # type: ignore[return-value]

    @property
    def pids(self) -> list[int]:
        """The client processes."""
        return [p.pid for p in self._procs]

    def connected(self) -> int:
        return sum(1 for s in self.sims if s.server >= 0)
