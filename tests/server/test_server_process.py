"""A real ``goldfive serve`` process on loopback: first start, the key file, the live event stream, users."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from server_support import free_port as _free_port
from server_support import goldfive as _goldfive
from server_support import serve_process as _serve
from server_support import start_task_agent
from store_support import REPO, Backend


async def _sse(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> AsyncIterator[dict[str, str]]:
    async with client.stream("GET", url, headers=headers, timeout=httpx.Timeout(20, read=20)) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        fields: dict[str, str] = {}
        async for line in resp.aiter_lines():
            if not line:
                if "data" in fields:
                    yield fields
                fields = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(": ")
                fields[key] = value


async def test_first_start_prints_an_admin_token_and_the_trust_key_and_makes_a_private_key(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    key = tmp_path / "cfg" / "decision-key.pem"
    with _serve(sqlite_backend, key) as served:
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        assert "127.0.0.1" in served.lines[0]
        token = served.admin_token
        async with httpx.AsyncClient(base_url=served.url) as client:
            me = await client.get("/api/me", headers={"Authorization": f"Bearer {token}"})
            assert me.json()["role"] == "admin"
            assert (await client.get("/api/approvals")).status_code == 401
    with _serve(sqlite_backend, key) as again:  # second start: same key, no new admin
        assert not any(line.startswith("gf5_") for line in again.lines)
        assert again.trust_key.raw == served.trust_key.raw
    key.chmod(0o644)
    proc = _goldfive(sqlite_backend, "serve", "--port", str(_free_port()), "--key", str(key))
    assert proc.returncode == 2 and "chmod 600" in proc.stderr


async def test_the_event_stream_pushes_new_events_and_resumes_after_last_event_id(
    backend: Backend, tmp_path: Path
) -> None:
    backend.open()  # create the store
    with _serve(backend, tmp_path / "k.pem") as served:
        auth = {"Authorization": f"Bearer {served.admin_token}"}
        async with httpx.AsyncClient(base_url=served.url) as client:
            seen: list[dict[str, str]] = []

            head = backend.open().audit_head()[0]

            async def read() -> None:
                async for message in _sse(client, "/api/events", {**auth, "Last-Event-ID": str(head)}):
                    seen.append(message)
                    if message["event"] == "approval_granted":
                        return

            reader = asyncio.create_task(read())
            agent = start_task_agent(backend, "sse-1", trust=served.trust_key)
            try:
                for _ in range(400):
                    if any(m["event"] == "approval_requested" for m in seen):
                        break
                    await asyncio.sleep(0.025)
                resp = await client.post("/api/approvals/sse-1/approve", json={"reason": "fine"}, headers=auth)
                assert resp.status_code == 200, resp.text
                await asyncio.wait_for(reader, 15)
                assert (await agent.result()).output["decision"] == "approve"
            finally:
                await agent.close()
            kinds = [m["event"] for m in seen]
            assert kinds[0] == "run_started" and "approval_requested" in kinds and kinds[-1] == "approval_granted"
            ids = [int(m["id"]) for m in seen]
            assert ids == sorted(ids) and len(set(ids)) == len(ids)
            data = json.loads(seen[-1]["data"])
            assert data["seq"] == ids[-1] and data["event"]["approval_granted"]["decided_by"] == "admin"
            # Resume from the middle: exactly the events after that id, in order.
            middle = ids[1]
            resumed: list[int] = []

            async def resume() -> None:
                async for message in _sse(client, "/api/events", {**auth, "Last-Event-ID": str(middle)}):
                    resumed.append(int(message["id"]))
                    if int(message["id"]) >= ids[-1]:
                        return

            await asyncio.wait_for(resume(), 15)
            assert resumed[: len(ids) - 2] == ids[2:]


def test_users_command_prints_the_token_once_on_the_last_line(sqlite_backend: Backend) -> None:
    made = _goldfive(sqlite_backend, "users", "add", "ana", "--role", "approver")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]
    assert token.startswith("gf5_") and "approver" in made.stdout
    as_json = _goldfive(sqlite_backend, "--json", "users", "add", "bob", "--role", "viewer")
    data = json.loads(as_json.stdout)
    assert data["name"] == "bob" and data["role"] == "viewer" and data["token"].startswith("gf5_")
    taken = _goldfive(sqlite_backend, "users", "add", "ana", "--role", "admin")
    assert taken.returncode == 1 and "exists already" in taken.stderr
    listed = _goldfive(sqlite_backend, "users", "list")
    assert "ana  approver" in listed.stdout and token not in listed.stdout
    rotated = _goldfive(sqlite_backend, "users", "rotate", "ana")
    assert rotated.stdout.strip().splitlines()[-1] != token
    disabled = _goldfive(sqlite_backend, "users", "disable", "bob")
    assert disabled.returncode == 0 and "DISABLED" in _goldfive(sqlite_backend, "users", "list").stdout
    assert _goldfive(sqlite_backend, "users", "disable", "nobody").returncode == 1
    assert _goldfive(sqlite_backend, "users", "add", "carl").returncode == 2


def test_users_are_put_in_policy_groups_and_listed_with_them(sqlite_backend: Backend) -> None:
    made = _goldfive(
        sqlite_backend, "users", "add", "ana", "--role", "approver", "--group", "ops", "--group", "finance"
    )
    assert made.returncode == 0 and "(role approver, groups finance,ops)" in made.stdout, made.stderr
    changed = _goldfive(sqlite_backend, "--json", "users", "groups", "ana", "--add", "audit", "--remove", "ops")
    assert json.loads(changed.stdout) == {"name": "ana", "groups": ["audit", "finance"]}
    listed = _goldfive(sqlite_backend, "--json", "users", "list")
    [ana] = json.loads(listed.stdout)["users"]
    assert (ana["role"], ana["groups"]) == ("approver", ["audit", "finance"])
    assert "ana  approver  groups audit,finance" in _goldfive(sqlite_backend, "users", "list").stdout
    # A group may not borrow a permission role's name, nor a bad name; an unknown user; no change asked.
    as_role = _goldfive(sqlite_backend, "users", "groups", "ana", "--add", "admin")
    assert as_role.returncode == 1 and "name of a permission role" in as_role.stderr
    assert _goldfive(sqlite_backend, "users", "add", "bo", "--role", "viewer", "--group", "a b").returncode == 1
    assert _goldfive(sqlite_backend, "users", "groups", "nobody", "--add", "x").returncode == 1
    assert _goldfive(sqlite_backend, "users", "groups", "ana").returncode == 2


@pytest.mark.parametrize("blocked", ["starlette", "uvicorn"])
def test_the_server_package_names_its_extra_when_a_dependency_is_missing(blocked: str) -> None:
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "import goldfive_core, goldfive_core.cli\n"
        "assert sys.modules.get('starlette') is None and 'cryptography' not in sys.modules\n"
        "try:\n    import goldfive_core.server\nexcept ImportError as e:\n    print(e)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, cwd=REPO
    )
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'goldfive[server]'" in proc.stdout


async def test_two_serve_processes_over_one_postgresql_work_together(tmp_path: Path) -> None:
    from store_support import NO_PG, PG_DSN

    if not PG_DSN:
        pytest.skip(NO_PG)
    import uuid

    import psycopg

    backend = Backend("postgres", PG_DSN, f"t_{uuid.uuid4().hex[:12]}")
    try:
        backend.open()
        key = tmp_path / "shared-key.pem"
        with _serve(backend, key) as first, _serve(backend, key) as second:
            token = first.admin_token  # made by whichever started first; the second made none
            assert not any(line.startswith("gf5_") for line in second.lines)
            auth = {"Authorization": f"Bearer {token}"}
            agent = start_task_agent(backend, "pg-1", trust=second.trust_key)
            try:
                async with httpx.AsyncClient(base_url=first.url) as a, httpx.AsyncClient(base_url=second.url) as b:
                    for _ in range(400):
                        if (await b.get("/api/approvals", headers=auth)).json()["total"]:
                            break
                        await asyncio.sleep(0.025)
                    # A browser session made at one process is good at the other (shared key, sessions in the store).
                    login = await a.post("/api/login", json={"name": "admin", "token": token})
                    cookie = login.headers["set-cookie"].split(";", 1)[0]
                    assert (await b.get("/api/me", headers={"Cookie": cookie})).json()["channel"] == "web"
                    head = backend.open().audit_head()[0]
                    seen: list[dict[str, str]] = []

                    async def read() -> None:
                        async for message in _sse(b, "/api/events", {**auth, "Last-Event-ID": str(head)}):
                            seen.append(message)
                            if message["event"] == "approval_granted":
                                return

                    reader = asyncio.create_task(read())
                    ok = await a.post("/api/approvals/pg-1/approve", json={}, headers=auth)
                    assert ok.status_code == 200, ok.text
                    await asyncio.wait_for(reader, 15)
                    late = await b.post("/api/approvals/pg-1/reject", json={"reason": "x"}, headers=auth)
                    assert late.status_code == 409 and "already decided" in late.json()["error"]
                assert (await agent.result()).output["decided_by"] == "admin"
            finally:
                await agent.close()
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{backend.schema}" CASCADE')


def test_a_serve_process_collects_its_garbage_in_larger_young_generations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Thousands of agents' streams are millions of tracked objects: with Python's default thresholds a server ran
    full collections (seconds with its event loop stopped) every minute while idle (see ``GC_THRESHOLDS``)."""
    import gc
    import io

    from goldfive_core.server import run as run_mod
    from goldfive_core.store import open_store

    monkeypatch.setattr(run_mod._Server, "run", lambda self: None)  # everything up to serving, then return
    before = gc.get_threshold()
    try:
        assert before != run_mod.GC_THRESHOLDS
        store = open_store(str(tmp_path / "g.db"))
        out = io.StringIO()
        run_mod.serve(store, key_path=tmp_path / "k.pem", out=out, checkpoint_every_s=0)
        assert "the inbox is at" in out.getvalue()
        assert gc.get_threshold() == run_mod.GC_THRESHOLDS
    finally:
        gc.set_threshold(*before)
