"""The server's thread pools belong to the app: none exists at import, and they end with the app's lifespan."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from server_support import ORIGIN, await_until
from store_support import REPO, Backend

from goldfive_core.server import ServerConfig, create_app
from goldfive_core.server.threads import AGENTS, AUTH, ServerThreads
from goldfive_core.signing import load_or_create_signing_key
from goldfive_core.store.users import add_user


def test_importing_the_server_makes_no_thread_pool() -> None:
    code = (
        "import gc, concurrent.futures\n"
        "import goldfive_core.server, goldfive_core.server.agents, goldfive_core.server.auth\n"
        "pools = [o for o in gc.get_objects() if isinstance(o, concurrent.futures.ThreadPoolExecutor)]\n"
        "print(len(pools))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"


def _auth_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(AUTH.name)}


async def test_the_pools_of_a_served_app_end_with_its_lifespan(sqlite_backend: Backend, tmp_path: Path) -> None:
    store = sqlite_backend.open()
    signer, _ = load_or_create_signing_key(tmp_path / "k.pem")
    token = add_user(store, "ana", "approver").token
    app = create_app(store, ServerConfig(signer=signer))
    before = _auth_threads()
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN) as client:
            me = await client.get("/api/me", headers={"Authorization": f"Bearer {token}"})
        assert me.status_code == 200 and me.json()["name"] == "ana"
        mine = _auth_threads() - before  # the token's look-up ran on this app's own authentication pool
        assert mine
    await await_until(lambda: not any(t.is_alive() for t in mine), what="the app's authentication threads ended")


async def test_a_pool_shut_down_refuses_work_and_makes_no_new_threads() -> None:
    threads = ServerThreads()
    assert await threads.run(AUTH, sum, [3, 4]) == 7
    threads.shutdown()
    with pytest.raises(RuntimeError):
        await threads.run(AUTH, sum, [1])
    with pytest.raises(RuntimeError, match="shut down"):
        await threads.run(AGENTS, sum, [1])
