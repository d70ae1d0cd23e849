"""Count what one remote APPROVE costs from ``decide()`` to the tool body starting, by instrumenting a real run.

    python bench/approve_path.py [-n 5] [--http]

A callable agent on a ``StoreChannel`` over SQLite (temp dir, trusting the signer) asks for one call; this
process decides it with ``decide(..., signer=)`` (what ``goldfive serve`` runs). With ``--http`` the agent is on
an ``HttpChannel`` to the server's app (uvicorn in this process, over the same kind of store) and a person
approves with ``POST /api/approvals/ID/approve``. Counted from the decision until the body starts:

* commits: write transactions entered (``SqlDb.transaction``), any thread;
* decision writes: writes that changed the record's decision columns until the run ended (a trigger counts them);
* thread hand-offs: work handed to another thread (``ThreadPoolExecutor.submit``, ``loop.call_soon_threadsafe``,
  ``Thread.start``);
* network legs (``--http``): the agent's requests to the server (any httpx client) and the control frames its
  stream received, by path.

The figures are counts, not timings; run it on two checkouts to compare (it imports the checkout it lives in).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import sqlite3
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.approvals import Principal
from goldfive_core.signing import load_or_create_signing_key
from goldfive_core.store import StoreChannel, decide, open_store, run_approved
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.http._inbox import HttpInbox
from goldfive_core.store.sql.db import SqlDb
from goldfive_core.store.users import add_user

COUNTS: Counter[str] = Counter()
T0 = [0.0]
ARMED = threading.Event()


def _counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if ARMED.is_set():
            COUNTS[name] += 1
            if name == "commits":  # which store call committed (the function that opened the transaction)
                COUNTS[f"commit: {sys._getframe(1).f_code.co_name}"] += 1
        return original(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def instrumented() -> Iterator[None]:
    patches = [
        *((db, "transaction", "commits") for db in SqlDb.__subclasses__()),
        (HttpInbox, "_frame", "leg: control frame pushed on the stream"),
        (concurrent.futures.ThreadPoolExecutor, "submit", "hand-offs"),
        (asyncio.BaseEventLoop, "call_soon_threadsafe", "hand-offs"),
        (threading.Thread, "start", "hand-offs"),
    ]
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in patches]
    for owner, attr, name in patches:
        setattr(owner, attr, _counting(name, getattr(owner, attr)))
    sends = [(httpx.Client, httpx.Client.send), (httpx.AsyncClient, httpx.AsyncClient.send)]
    for client, send in sends:
        client.send = _leg(send)
    try:
        yield
    finally:
        for owner, attr, original in saved:
            setattr(owner, attr, original)
        for client, send in sends:
            client.send = send


def _leg(send: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(self: Any, request: httpx.Request, *args: Any, **kwargs: Any) -> Any:
        path = request.url.path
        if ARMED.is_set() and path.startswith("/api/agent/"):  # the agent's, not the person's
            kind = "/".join(p if not p.startswith("call-") else "{id}" for p in path.split("/"))
            COUNTS[f"leg: {request.method} {kind}"] += 1
        return send(self, request, *args, **kwargs)

    return wrapper


def _body(started: asyncio.Event) -> Callable[[Mapping[str, Any]], Awaitable[str]]:
    async def body(args: Mapping[str, Any]) -> str:
        ARMED.clear()  # the body starts: nothing after this is on the decision's path
        COUNTS["ms"] = round((time.perf_counter() - T0[0]) * 1000)
        started.set()
        return "ok"

    return body


def _arm() -> None:
    COUNTS.clear()
    T0[0] = time.perf_counter()
    ARMED.set()


async def one(path: Path, key_dir: Path, target: str) -> Counter[str]:
    signer = load_or_create_signing_key(key_dir / "signing.pem")[0]
    store = open_store(str(path))
    channel = StoreChannel(open_store(str(path)), trust_key=signer.trust_key)
    started = asyncio.Event()

    body = _body(started)

    async def agent(task: Task, tools: AgentTools) -> Any:
        return await run_approved(  # the channel's ledger, as every adapter's gate has it
            tools.session, store, call_id=target, tool_name="pay", args={"n": 1}, body=body, ledger=channel.ledger
        )

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run())
    while not [r for r in store.approvals_for(target) if r.open]:  # noqa: ASYNC110 (polling another store)
        await asyncio.sleep(0.02)
    _trigger(path)
    _arm()
    await asyncio.to_thread(
        decide, store, target, approve=True, principal=Principal(name="ana", channel="web"), signer=signer
    )
    await started.wait()
    counts = Counter(COUNTS)
    await run
    await channel.aclose()
    counts["decision writes"] = _writes(path, target)
    return counts


async def one_http(path: Path, key_dir: Path, target: str, url: str, tokens: dict[str, str]) -> Counter[str]:
    store = open_store(str(path))
    channel = HttpChannel(url, token=tokens["bot"])
    started = asyncio.Event()

    body = _body(started)

    async def agent(task: Task, tools: AgentTools) -> Any:
        return await run_approved(
            tools.session,
            channel.store,
            call_id=target,
            tool_name="pay",
            args={"n": 1},
            body=body,
            ledger=channel.ledger,
        )

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run())
    while not [r for r in store.approvals_for(target) if r.open]:  # noqa: ASYNC110 (polling another store)
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.5)  # the agent's stream is connected and its first events are written
    _trigger(path)
    _arm()
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        sent = client.post(
            f"/api/approvals/{target}/approve", headers={"Authorization": f"Bearer {tokens['ana']}"}, json={}
        )
        decided = asyncio.ensure_future(sent)
        await started.wait()
        await decided
    counts = Counter(COUNTS)
    await run
    await channel.aclose()
    counts["decision writes"] = _writes(path, target)
    return counts


def _trigger(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript(
            "CREATE TABLE IF NOT EXISTS t_writes (target_id TEXT);"
            "CREATE TRIGGER IF NOT EXISTS t_w AFTER UPDATE OF status, decision, decided_by, decided_at_ms, "
            "decision_sig, decided_via ON gf_approvals BEGIN INSERT INTO t_writes VALUES (new.target_id); END;"
        )


def _writes(path: Path, target: str) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return int(db.execute("SELECT count(*) FROM t_writes WHERE target_id = ?", (target,)).fetchone()[0])


@contextlib.asynccontextmanager
async def _served(path: Path, key_dir: Path) -> Any:
    from goldfive_core.server.app import ServerConfig, create_app

    store = open_store(str(path))
    tokens = {name: add_user(store, name, role).token for name, role in (("ana", "approver"), ("bot", "agent"))}
    signer = load_or_create_signing_key(key_dir / "signing.pem")[0]
    port = _free_port()
    config = uvicorn.Config(
        create_app(store, ServerConfig(signer=signer)), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn has no event for it)
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", tokens
    finally:
        server.should_exit = True
        await task


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5, help="calls to measure")
    parser.add_argument("--http", action="store_true", help="the agent on an HttpChannel to the server's app")
    options = parser.parse_args()
    n = options.n
    with tempfile.TemporaryDirectory(prefix="goldfive-bench-approve-") as tmp, instrumented():
        path = Path(tmp) / "goldfive.db"
        if options.http:
            open_store(str(path)).close()
            async with _served(path, Path(tmp)) as (url, tokens):
                runs = [await one_http(path, Path(tmp), f"call-{i}", url, tokens) for i in range(n)]
            where = "HttpChannel to the server's app"
        else:
            runs = [await one(path, Path(tmp), f"call-{i}") for i in range(n)]
            where = "StoreChannel"
    print(f"remote APPROVE, {where} on SQLite, decision -> body starts (n={n}; min / max per call):")
    kinds = sorted({k for r in runs for k in r if k.startswith(("leg", "commit:"))})
    names = ["commits", "decision writes", "hand-offs", *kinds]
    for name in names:
        values = [r[name] for r in runs]
        print(f"  {name:44} {min(values):3d} / {max(values):3d}")
    times = sorted(r["ms"] for r in runs)
    print(f"  {'decision -> body starts, ms (instrumented)':44} p50 {times[len(times) // 2]}")


if __name__ == "__main__":
    asyncio.run(main())
