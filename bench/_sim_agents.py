"""One client process of simulated waiting agents (bench/_swarm.py starts several): many agents, one event loop.

    python bench/_sim_agents.py SPEC.json      # then commands on stdin, one per line

Each agent is what an ``HttpChannel`` does on the wire, with its own token, its own connections (its own httpx
client: no pool shared between agents, as each ``HttpChannel`` has its own) and its own run: it registers the run
and its pending requests (``POST /api/agent/events``), opens ``/api/agent/stream`` at once, acks each message it
receives, and heartbeats its run every 5 s as its own request **until** its stream's answer says the server keeps
the run alive (``X-Goldfive-Liveness: stream``) and again from the moment the stream ends — so no run is judged
crashed while thousands connect. It sends back the pass its server gave (``X-Goldfive-Pass``) with every request,
unless told to forget it (an agent from before the pass). When a server goes away (a refused connection, a broken
stream, a 5xx) it tries the next URL of its own order, with the channel's backoff.

SPEC: ``{"urls": [...], "beat_s": 5, "agents": [{"run", "token", "order": [server...], "targets": [...],
"keep_pass": bool, "early": bool}]}``. Commands: ``join W PHASE`` (register and connect the ``early`` agents or the
``rest``, W at a time; answered ``joined SECONDS FAILED``), ``stats`` (answered ``stats BEATS UNCARRIED CONNECTED
LAG``, LAG: the event loop's worst lateness since the last ``stats``), ``stop``. Reports, one line each: ``up RUN
SERVER T TRIES ASKED ANSWERED`` (a stream connected after TRIES stream requests, the last sent at ASKED and
answered at ANSWERED), ``down RUN T`` (it ended), ``got RUN TARGET
CONTROL_ID T`` (a message delivered the first time; ``T``: CLOCK_MONOTONIC seconds, one clock for the machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import sys
import zlib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

import httpx
from _agent import monotonic
from _support import asked_events

from goldfive_core.retry import Backoff
from goldfive_core.store.agents import LIVENESS_HEADER, LIVENESS_ON_STREAM, PASS_HEADER

KEEPALIVE_S = 3.0
"""An agent drops an idle connection before the server does (it closes them after 5 s): no request is sent on a
connection the server is closing."""
READ_TIMEOUT_S = 45.0
"""A stream silent this long is broken (the server pings every 30 s), as in ``HttpInbox``."""
OUTAGE = Backoff(first_s=0.05, cap_s=1.0)
"""The channel's delays between attempts to reach a server (``HttpInbox``'s)."""


_out: list[Any] = []
"""The stdout pipe's asyncio transport once the loop runs: writes never block the loop (a blocking flush into a full
pipe stalls every agent of the process while the bench is busy)."""


def say(line: str) -> None:
    if _out:
        _out[0].write((line + "\n").encode())
        return
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class _Unavailable(Exception):
    """A server answered 5xx/429 or refused: try the next one."""


class Agent:
    """One simulated agent: its token, run, stream, acks and heartbeats (see the module docstring)."""

    def __init__(self, spec: dict[str, Any], urls: list[str], beat_s: float, tls: ssl.SSLContext) -> None:
        self.run_id: str = spec["run"]
        self.token: str = spec["token"]
        self.order: list[int] = spec["order"]
        self.targets: list[str] = spec["targets"]
        self.keep_pass: bool = spec.get("keep_pass", True)
        self.early: bool = spec.get("early", False)
        self.urls = urls
        self.beat_s = beat_s
        self.turn = 0
        """Which server of ``order`` it uses now (moves on when one fails it, as ``RemoteStore.rotate``)."""
        self.proof = ""
        self.carried = False
        self.connected = asyncio.Event()
        self.beats = 0
        self.tries = 0
        """Stream requests made since the stream was last up."""
        self.asked = self.answered = 0.0
        """When the last stream request was sent, and when its answer's head came."""
        self.seen: set[int] = set()
        self.owed: dict[int, dict[str, Any]] = {}
        self.client = httpx.AsyncClient(
            verify=tls,  # one TLS context for all (httpx makes one per client otherwise: ~0.8 MiB, 20 ms each)
            timeout=httpx.Timeout(30.0, read=READ_TIMEOUT_S),
            limits=httpx.Limits(max_connections=4, max_keepalive_connections=2, keepalive_expiry=KEEPALIVE_S),
        )

    @property
    def server(self) -> int:
        return self.order[self.turn % len(self.order)]

    def rotate(self, failed: int) -> None:
        if self.server == failed:
            self.turn += 1

    def headers(self) -> dict[str, str]:
        proof = {PASS_HEADER: self.proof} if self.proof and self.keep_pass else {}
        return {"Authorization": f"Bearer {self.token}", **proof}

    async def post(self, path: str, body: Any) -> Any:
        """One request to the server in use; a transport error or 5xx/429 moves to the next (and raises)."""
        server = self.server
        try:
            resp = await self.client.post(self.urls[server] + path, json=body, headers=self.headers())
        except httpx.HTTPError as exc:
            self.rotate(server)
            raise _Unavailable(f"{type(exc).__name__}") from None
        if resp.status_code >= 500 or resp.status_code == 429:
            self.rotate(server)
            raise _Unavailable(f"{resp.status_code}")
        if resp.status_code >= 300:
            raise RuntimeError(f"{self.run_id}: {path} refused {resp.status_code}: {resp.text[:300]}")
        return resp.json()

    async def register(self) -> bool:
        """Its run and pending requests, written by the agent itself (it owns the run); False: never reached."""
        body = {"pid": 1, "host": "fleet", "events": asked_events(self.run_id, self.targets)}
        delays = OUTAGE.delays()
        for _ in range(40):  # a loaded server dropped the connection: a sink retries (a retry may find it stored)
            try:
                await self.post("/api/agent/events", body)
                return True
            except _Unavailable:
                await asyncio.sleep(delays.next())
        return False

    async def beat(self) -> None:
        """Heartbeat the run as its own request while no open stream's server keeps it alive."""
        await asyncio.sleep(self.beat_s * (zlib.crc32(self.run_id.encode()) % 1000) / 1000)  # spread
        while True:
            if not (self.carried and self.connected.is_set()):
                self.beats += 1
                with contextlib.suppress(_Unavailable):
                    await self.post("/api/agent/heartbeat", {"run_ids": [self.run_id]})
            await asyncio.sleep(self.beat_s)

    async def listen(self) -> None:
        """Hold the stream, reconnecting (to the next server when one fails) with the channel's backoff."""
        delays = OUTAGE.delays()
        while True:
            server = self.server
            try:
                if self.owed:  # acks not posted before the stream broke go first
                    await self._post_acks()
                params = {"run": self.run_id, "endpoint": self.run_id}
                self.tries += 1
                url = self.urls[server] + "/api/agent/stream"
                self.asked = monotonic()
                async with self.client.stream("GET", url, params=params, headers=self.headers()) as resp:
                    self.answered = monotonic()
                    if resp.status_code != 200:
                        await resp.aread()
                        raise _Unavailable(f"stream: {resp.status_code} {resp.text[:200]}")
                    self.carried = resp.headers.get(LIVENESS_HEADER) == LIVENESS_ON_STREAM
                    self.proof = resp.headers.get(PASS_HEADER, self.proof)
                    await self._read(resp, server, delays)
            except (httpx.HTTPError, _Unavailable):
                pass
            except Exception as exc:  # an answer this agent cannot read: said, then the same reconnect
                say(f"error {self.run_id} {type(exc).__name__}: {str(exc)[:200]}".replace("\n", " "))
            if self.connected.is_set():
                say(f"down {self.run_id} {monotonic():.6f}")
                self.tries = 0
            self.connected.clear()
            self.carried = False
            self.rotate(server)
            await asyncio.sleep(delays.next())

    async def _read(self, resp: httpx.Response, server: int, delays: Any) -> None:
        data = ""
        async for line in resp.aiter_lines():
            if line.startswith(": connected"):
                self.connected.set()
                delays.reset()
                say(f"up {self.run_id} {server} {monotonic():.6f} {self.tries} {self.asked:.6f} {self.answered:.6f}")
            elif line.startswith("data: "):
                data = line[6:]
            elif line == "" and data:
                frame, data = json.loads(data), ""
                inbox_id, message = frame["inbox_id"], frame["message"]
                if inbox_id not in self.seen:  # a resend after a broken connection is acked again, not reported
                    self.seen.add(inbox_id)
                    target = str(message.get("approve", {}).get("target_id", ""))
                    say(f"got {self.run_id} {target} {message['id']} {monotonic():.6f}")
                ack = {"control_id": message["id"], "result": "SUCCESS", "detail": "approved"}
                self.owed[inbox_id] = {"inbox_id": inbox_id, "ack": ack}
                await self._post_acks()

    async def _post_acks(self) -> None:
        acks = list(self.owed.values())
        await self.post("/api/agent/acks", {"endpoint": self.run_id, "acks": acks})
        for item in acks:
            self.owed.pop(item["inbox_id"], None)


async def _join(agents: list[Agent], wave: int, tasks: list[asyncio.Task[None]]) -> None:
    t0 = monotonic()
    failed = 0

    async def one(agent: Agent) -> None:
        nonlocal failed
        if not await agent.register():
            failed += 1
            return
        # Beating from the moment its run exists, streaming at once: the beats stop when the stream's server says
        # it keeps the run alive (as an HttpChannel's sink and inbox do).
        tasks.append(asyncio.create_task(agent.beat()))
        tasks.append(asyncio.create_task(agent.listen()))
        try:
            await asyncio.wait_for(agent.connected.wait(), 120)
        except TimeoutError:
            failed += 1

    for start in range(0, len(agents), wave):
        await asyncio.gather(*(one(a) for a in agents[start : start + wave]))
    say(f"joined {monotonic() - t0:.3f} {failed}")


class _Lag:
    """How late this process's event loop runs a timer (its agents' work waits that long): the worst since asked."""

    def __init__(self) -> None:
        self.worst = 0.0

    async def watch(self) -> None:
        while True:
            t0 = monotonic()
            await asyncio.sleep(0.2)
            self.worst = max(self.worst, monotonic() - t0 - 0.2)

    def take(self) -> float:
        worst, self.worst = self.worst, 0.0
        return worst


async def _commands(agents: list[Agent]) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    _out.append(transport)
    lag = _Lag()
    tasks: list[asyncio.Task[None]] = [asyncio.create_task(lag.watch())]
    try:
        while line := (await reader.readline()).decode().split():
            if line[0] == "join":
                early = line[2] == "early"
                chosen = [a for a in agents if a.early == early]
                tasks.append(asyncio.create_task(_join(chosen, int(line[1]), tasks)))
            elif line[0] == "stats":
                beats = sum(a.beats for a in agents)
                uncarried = sum(1 for a in agents if not (a.carried and a.connected.is_set()))
                connected = sum(1 for a in agents if a.connected.is_set())
                say(f"stats {beats} {uncarried} {connected} {lag.take():.3f}")
            elif line[0] == "stop":
                break
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(a.client.aclose() for a in agents), return_exceptions=True)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    tls = ssl.create_default_context()
    agents = [Agent(a, spec["urls"], float(spec.get("beat_s", 5.0)), tls) for a in spec["agents"]]
    say(f"ready {len(agents)}")
    asyncio.run(_commands(agents))


if __name__ == "__main__":
    main()
