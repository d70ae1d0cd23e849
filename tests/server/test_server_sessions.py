"""Sessions end when access ends: disabling, rotating or logging out closes open event streams, here at once
and from another process within the re-check interval; a rotate never re-enables a disabled user."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import httpx
from server_support import Server, goldfive, live, serve_process, start_task_agent
from store_support import Backend

from goldfive_core.server.auth import COOKIE
from goldfive_core.store.users import add_user, disable_user, enable_user, rotate_user

DEADLINE_S = 20.0
"""A safety net for a stream that should end (a broken fix hangs there, and fails, instead of forever)."""


@dataclasses.dataclass
class Stream:
    """One open SSE stream read in the background: the event kinds it delivered, and whether it ended."""

    events: list[str] = dataclasses.field(default_factory=list)
    opened: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    task: asyncio.Task[int] | None = None

    async def until_ended(self) -> list[str]:
        assert self.task is not None
        await asyncio.wait_for(self.task, DEADLINE_S)
        return self.events

    async def until_event(self, kind: str) -> None:
        async with asyncio.timeout(DEADLINE_S):
            while kind not in self.events:
                assert self.task is not None and not self.task.done(), f"stream ended before {kind}: {self.events}"
                await asyncio.sleep(0.02)


async def open_stream(client: httpx.AsyncClient, path: str, headers: dict[str, str]) -> Stream:
    stream = Stream()

    async def read() -> int:
        async with client.stream("GET", path, headers=headers, timeout=httpx.Timeout(DEADLINE_S * 3)) as resp:
            assert resp.status_code == 200, await resp.aread()
            async for line in resp.aiter_lines():
                stream.opened.set()
                if line.startswith("event: "):
                    stream.events.append(line.removeprefix("event: "))
            return resp.status_code

    stream.task = asyncio.create_task(read())
    opened = asyncio.create_task(stream.opened.wait())
    await asyncio.wait((opened, stream.task), timeout=DEADLINE_S, return_when=asyncio.FIRST_COMPLETED)
    if stream.task.done():
        stream.task.result()
    assert stream.opened.is_set(), "the stream did not open"
    return stream


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _only_immediate_ends(srv: Server) -> Any:
    """The app, its periodic re-check pushed out of the way and no access news: only an end done by this process's
    own route (disable, rotate, logout) can close a stream."""
    app = srv.client._transport.app  # type: ignore[attr-defined]
    app.state.api.sessions.every_s = 3600.0
    app.state.api.sessions._news = None
    return app


async def test_disabling_a_user_here_closes_their_open_stream_before_any_later_event(sqlite_server: Server) -> None:
    srv = sqlite_server
    async with live(_only_immediate_ends(srv)) as url, httpx.AsyncClient(base_url=url) as client:
        ana = await open_stream(client, "/api/events", bearer(srv.tokens["ana"]))
        vic = await open_stream(client, "/api/events", bearer(srv.tokens["vic"]))
        disabled = await client.post("/api/users/ana/disable", headers=bearer(srv.tokens["root"]))
        assert disabled.status_code == 200 and disabled.json()["disabled"] is True
        agent = start_task_agent(srv.backend, "after-disable")
        try:
            await vic.until_event("approval_requested")  # the new request's prompt went out to those still allowed
            assert await ana.until_ended() == []  # ... and not to ana: her stream ended with nothing more
            refused = await client.get("/api/events", headers=bearer(srv.tokens["ana"]))
            assert refused.status_code == 401
        finally:
            await agent.close()
            vic.task.cancel()  # type: ignore[union-attr]


async def test_rotating_and_logging_out_here_close_the_streams_opened_with_the_old_credential(
    sqlite_server: Server,
) -> None:
    srv = sqlite_server
    async with live(_only_immediate_ends(srv)) as url, httpx.AsyncClient(base_url=url) as client:
        old = await open_stream(client, "/api/events", bearer(srv.tokens["vic"]))
        rotated = await client.post("/api/users/vic/rotate", headers=bearer(srv.tokens["root"]))
        assert rotated.status_code == 200 and rotated.json()["disabled"] is False
        assert await old.until_ended() == []
        new = await open_stream(client, "/api/events", bearer(rotated.json()["token"]))  # the new token streams
        new.task.cancel()  # type: ignore[union-attr]

        login = await client.post("/api/login", json={"name": "ana", "token": srv.tokens["ana"]})
        cookie, csrf = login.cookies[COOKIE], login.json()["csrf"]
        web = {"Cookie": f"{COOKIE}={cookie}", "Sec-Fetch-Site": "same-origin"}
        page = await open_stream(client, "/api/events", web)
        out = await client.post("/api/logout", headers={**web, "X-CSRF-Token": csrf})
        assert out.status_code == 200
        assert await page.until_ended() == []


async def test_disabling_an_agent_user_closes_its_control_stream(sqlite_server: Server) -> None:
    srv = sqlite_server
    bot = add_user(srv.store, "bot", "agent").token
    async with live(_only_immediate_ends(srv)) as url, httpx.AsyncClient(base_url=url) as client:
        stream = await open_stream(client, "/api/agent/stream?run=run-s&endpoint=e1", bearer(bot))
        assert (await client.post("/api/users/bot/disable", headers=bearer(srv.tokens["root"]))).status_code == 200
        assert await stream.until_ended() == []


NO_PERIODIC_RECHECK = {"GOLDFIVE_SERVE_SESSION_RECHECK_S": "3600"}
"""A serve whose periodic re-check is pushed out of the way: only the store's access news ends a stream now."""


async def test_a_disable_or_rotate_by_another_process_closes_a_serve_processs_streams(
    backend: Backend, tmp_path: Path
) -> None:
    store = backend.open()
    ana, vic = add_user(store, "ana", "approver").token, add_user(store, "vic", "viewer").token
    root = add_user(store, "root", "admin").token
    with serve_process(backend, tmp_path / "k.pem", env=NO_PERIODIC_RECHECK) as served:
        async with httpx.AsyncClient(base_url=served.url) as client:
            admin = await open_stream(client, "/api/events", bearer(root))
            ana_stream = await open_stream(client, "/api/events", bearer(ana))
            vic_stream = await open_stream(client, "/api/events", bearer(vic))
            assert goldfive(backend, "users", "disable", "ana").returncode == 0  # the command, not this server
            assert goldfive(backend, "users", "rotate", "vic").returncode == 0
            assert await ana_stream.until_ended() == []
            assert await vic_stream.until_ended() == []
            agent = start_task_agent(backend, "after-cli")
            try:
                await admin.until_event("approval_requested")  # the admin's stream was not touched
            finally:
                await agent.close()
                admin.task.cancel()  # type: ignore[union-attr]


async def test_a_disable_or_rotate_on_one_serve_closes_the_streams_another_serve_holds_at_once(
    backend: Backend, tmp_path: Path
) -> None:
    store = backend.open()
    ana, vic = add_user(store, "ana", "approver").token, add_user(store, "vic", "viewer").token
    root, bot = add_user(store, "root", "admin").token, add_user(store, "bot", "agent").token
    key = tmp_path / "k.pem"
    with (
        serve_process(backend, key, env=NO_PERIODIC_RECHECK) as holder,
        serve_process(backend, key, env=NO_PERIODIC_RECHECK) as other,
    ):
        async with httpx.AsyncClient(base_url=holder.url) as client, httpx.AsyncClient(base_url=other.url) as admin:
            watching = await open_stream(client, "/api/events", bearer(root))
            streams = {
                "ana": await open_stream(client, "/api/events", bearer(ana)),
                "vic": await open_stream(client, "/api/events", bearer(vic)),
                "bot": await open_stream(client, "/api/agent/stream?run=run-s&endpoint=e1", bearer(bot)),
            }
            for name, verb in (("ana", "disable"), ("vic", "rotate"), ("bot", "disable")):
                done = await admin.post(f"/api/users/{name}/{verb}", headers=bearer(root))  # on the other serve
                assert done.status_code == 200, done.text
                assert await streams[name].until_ended() == [], name  # on this one, with nothing more sent
            refused = await client.get("/api/events", headers=bearer(ana))
            assert refused.status_code == 401
            agent = start_task_agent(backend, "after-the-other-serve")
            try:
                await watching.until_event("approval_requested")  # the admin's own stream was not touched
            finally:
                await agent.close()
                watching.task.cancel()  # type: ignore[union-attr]


def test_rotate_never_re_enables_a_disabled_user_and_enable_does(sqlite_backend: Backend) -> None:
    store = sqlite_backend.open()
    add_user(store, "ana", "approver")
    disable_user(store, "ana")
    rotated = rotate_user(store, "ana")
    assert rotated.user.disabled is True
    row = store.user("ana")
    assert row is not None and row.disabled and row.token_id == rotated.user.token_id
    assert enable_user(store, "ana").disabled is False
    said = goldfive(sqlite_backend, "users", "disable", "ana")
    assert said.returncode == 0 and "disabled 'ana'" in said.stdout
    again = goldfive(sqlite_backend, "--json", "users", "rotate", "ana")
    assert again.returncode == 0 and '"disabled": true' in again.stdout
    assert "still DISABLED" in goldfive(sqlite_backend, "users", "rotate", "ana").stdout
    assert "DISABLED" in goldfive(sqlite_backend, "users", "list").stdout
    enabled = goldfive(sqlite_backend, "users", "enable", "ana")
    assert enabled.returncode == 0 and "enabled 'ana'" in enabled.stdout
    assert "DISABLED" not in goldfive(sqlite_backend, "users", "list").stdout
    assert goldfive(sqlite_backend, "users", "enable", "nobody").returncode == 1


async def test_rotate_over_the_api_keeps_a_disabled_user_out_until_enabled(sqlite_server: Server) -> None:
    srv = sqlite_server
    assert (await srv.post("/api/users/vic/disable", user="root")).status_code == 200
    rotated = await srv.post("/api/users/vic/rotate", user="root")
    assert rotated.status_code == 200 and rotated.json()["disabled"] is True
    srv.tokens["vic"] = rotated.json()["token"]
    assert (await srv.get("/api/me", user="vic")).status_code == 401
    assert (await srv.post("/api/users/vic/enable", user="ana")).status_code == 403
    enabled = await srv.post("/api/users/vic/enable", user="root")
    assert enabled.status_code == 200 and enabled.json()["disabled"] is False
    assert (await srv.get("/api/me", user="vic")).json()["name"] == "vic"


async def test_the_re_check_of_many_agents_streams_is_one_store_look_up(sqlite_server: Server) -> None:
    srv = sqlite_server
    bots = {f"bot{i}": add_user(srv.store, f"bot{i}", "agent").token for i in range(6)}
    app = _only_immediate_ends(srv)
    app.state.api.sessions._news = None  # no access news either: only the explicit re-checks below see the disable
    looks: list[str] = []
    one, many = srv.store.user_by_token_id, srv.store.users_by_token_ids
    srv.store.user_by_token_id = lambda token_id: looks.append("one") or one(token_id)  # type: ignore[method-assign]
    srv.store.users_by_token_ids = lambda ids: looks.append("many") or many(ids)  # type: ignore[method-assign]
    async with live(app) as url, httpx.AsyncClient(base_url=url) as client:
        streams = {
            name: await open_stream(client, f"/api/agent/stream?run=run-{name}&endpoint=e1", bearer(token))
            for name, token in bots.items()
        }
        looks.clear()
        assert await app.state.api.sessions.recheck() == 0
        assert looks == ["many"]  # six streams, six tokens: one look at the store
        disable_user(srv.store, "bot3")  # as another process does: only the re-check can see it
        assert await app.state.api.sessions.recheck() == 1
        assert await streams["bot3"].until_ended() == []
        assert all(not s.task.done() for name, s in streams.items() if name != "bot3")  # type: ignore[union-attr]
        for stream in streams.values():
            stream.task.cancel()  # type: ignore[union-attr]


async def test_the_re_check_each_second_looks_at_web_sessions_only_and_still_ends_one_logged_out_elsewhere(
    sqlite_server: Server,
) -> None:
    """Between the bearer tokens' re-checks (on access news, or the slow safety net) the round each second checks the
    web sessions alone: a server holding thousands of agents' streams walks none of them each second."""
    srv = sqlite_server
    bots = {f"bot{i}": add_user(srv.store, f"bot{i}", "agent").token for i in range(3)}
    app = _only_immediate_ends(srv)
    sessions = app.state.api.sessions
    checked: list[list[str]] = []
    real = sessions._still_valid_all

    async def counted(leases: list[Any]) -> list[bool]:
        checked.append(sorted(user.name for user, _ in leases))
        return await real(leases)  # type: ignore[no-any-return]

    sessions._still_valid_all = counted
    async with live(app) as url, httpx.AsyncClient(base_url=url) as client:
        agents = [
            await open_stream(client, f"/api/agent/stream?run=run-{name}&endpoint=e1", bearer(token))
            for name, token in bots.items()
        ]
        login = await client.post("/api/login", json={"name": "ana", "token": srv.tokens["ana"]})
        web = {"Cookie": f"{COOKIE}={login.cookies[COOKIE]}", "Sec-Fetch-Site": "same-origin"}
        page = await open_stream(client, "/api/events", web)
        assert await sessions.recheck(bearer=False) == 0
        assert checked == [["ana"]]  # the web session, not the agents' streams
        sid = login.cookies[COOKIE].partition(".")[0]
        srv.store.end_web_session(hashlib.sha256(sid.encode()).hexdigest())  # by another process: a re-check sees it
        assert await sessions.recheck(bearer=False) == 1
        assert await page.until_ended() == []
        assert await sessions.recheck() == 0  # with the bearer tokens: every agent's stream, all still good
        assert checked[-1] == sorted(bots)
        assert all(not stream.task.done() for stream in agents)  # type: ignore[union-attr]
        for stream in agents:
            stream.task.cancel()  # type: ignore[union-attr]
