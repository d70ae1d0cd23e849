"""The authorization matrix: every route of the app x every kind of caller → the status it must get.

The routes come from the app's own route table (``create_app``, with the agent routes of ``server/agents.py``):
a route added without a row here fails :func:`test_every_route_has_a_row`. Each row says which permission the
route needs and what a caller who has it gets for the probe request (a harmless one: unknown ids, empty
bodies); every other caller must get 401 (who are you) or 403 (not allowed), and every answer carries
``X-Content-Type-Options: nosniff``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from server_support import ORIGIN, Server
from starlette.routing import Mount, Route

from goldfive_core.server.auth import COOKIE, SESSION_TTL_MS
from goldfive_core.store.users import add_user, disable_user, rotate_user

PUBLIC = ""


@dataclasses.dataclass(frozen=True)
class Row:
    permission: str
    """What the route needs (``read``, ``decide``, ``control``, ``manage_users``, ``agent``); PUBLIC: nothing."""
    probe: str
    """The path requested (path parameters filled with ids that do not exist)."""
    ok: int
    """What a caller with the permission gets for the probe."""


MATRIX: dict[tuple[str, str], Row] = {
    ("GET", "/"): Row(PUBLIC, "/", 200),
    ("GET", "/static"): Row(PUBLIC, "/static/inbox.js", 200),
    ("POST", "/api/login"): Row(PUBLIC, "/api/login", 400),
    ("POST", "/api/logout"): Row("read", "/api/logout", 200),
    ("GET", "/api/me"): Row("read", "/api/me", 200),
    ("GET", "/api/approvals"): Row("read", "/api/approvals", 200),
    ("GET", "/api/history"): Row("read", "/api/history", 200),
    ("GET", "/api/review/stats"): Row("read", "/api/review/stats", 200),
    ("GET", "/api/approvals/{target_id}"): Row("read", "/api/approvals/nope", 404),
    ("POST", "/api/approvals/{target_id}/approve"): Row("decide", "/api/approvals/nope/approve", 404),
    ("POST", "/api/approvals/{target_id}/reject"): Row("decide", "/api/approvals/nope/reject", 400),
    ("GET", "/api/grants"): Row("read", "/api/grants", 200),
    ("POST", "/api/grants/{grant_id}/revoke"): Row("decide", "/api/grants/nope/revoke", 404),
    ("GET", "/api/runs"): Row("read", "/api/runs", 200),
    ("GET", "/api/runs/{run_id}/events"): Row("read", "/api/runs/nope/events", 404),
    ("POST", "/api/runs/{run_id}/pause"): Row("control", "/api/runs/nope/pause", 404),
    ("POST", "/api/runs/{run_id}/resume"): Row("control", "/api/runs/nope/resume", 404),
    ("POST", "/api/runs/{run_id}/cancel"): Row("control", "/api/runs/nope/cancel", 404),
    ("POST", "/api/runs/{run_id}/steer"): Row("control", "/api/runs/nope/steer", 400),
    ("GET", "/api/audit/verify"): Row("read", "/api/audit/verify", 200),
    ("GET", "/api/notifications"): Row("read", "/api/notifications", 200),
    ("GET", "/api/audit/events"): Row("read", "/api/audit/events", 200),
    ("GET", "/api/in-doubt"): Row("read", "/api/in-doubt", 200),
    ("GET", "/api/users"): Row("manage_users", "/api/users", 200),
    ("POST", "/api/users"): Row("manage_users", "/api/users", 400),
    ("POST", "/api/users/{name}/{action}"): Row("manage_users", "/api/users/nobody/rotate", 404),
    # An allowed caller gets 400 for a bad Last-Event-ID: checked after authorization, and no stream is held open.
    ("GET", "/api/events"): Row("read", "/api/events?after=x", 400),
    ("POST", "/api/agent/events"): Row("agent", "/api/agent/events", 400),
    ("POST", "/api/agent/heartbeat"): Row("agent", "/api/agent/heartbeat", 200),
    ("GET", "/api/agent/stream"): Row("agent", "/api/agent/stream", 400),
    ("POST", "/api/agent/acks"): Row("agent", "/api/agent/acks", 400),
    ("GET", "/api/agent/runs/{run_id}/decisions"): Row("agent", "/api/agent/runs/nope/decisions", 200),
    ("GET", "/api/agent/grants"): Row("agent", "/api/agent/grants", 200),
    ("GET", "/api/agent/ledger/{call_id}"): Row("agent", "/api/agent/ledger/nope?run=run-matrix", 200),
    ("POST", "/api/agent/ledger/{call_id}/executing"): Row("agent", "/api/agent/ledger/nope/executing", 400),
    ("POST", "/api/agent/ledger/{call_id}/done"): Row("agent", "/api/agent/ledger/nope/done", 400),
    ("POST", "/api/agent/ledger/{call_id}/released"): Row("agent", "/api/agent/ledger/nope/released", 400),
}

ROLE_PERMISSIONS = {
    "viewer": {"read"},
    "approver": {"read", "decide", "control"},
    "admin": {"read", "decide", "control", "manage_users"},
    "agent": {"agent"},
}

CALLERS = (
    "no credentials",
    "malformed",
    "real id, wrong secret",
    "viewer",
    "approver",
    "admin",
    "agent",
    "disabled",
    "disabled user's cookie",
    "rotated-old token",
    "cookie",
    "cookie without CSRF",
    "cookie with a wrong CSRF token",
    "cross-site fetch",
    "same-site fetch",
)


def route_table(app: Any) -> set[tuple[str, str]]:
    """(method, path) of every route the app serves (HEAD is GET's)."""
    found: set[tuple[str, str]] = set()
    for route in app.routes:
        if isinstance(route, Route):
            found.update((method, route.path) for method in route.methods or () if method != "HEAD")
        elif isinstance(route, Mount):
            found.add(("GET", route.path))
        else:  # pragma: no cover - a kind of route this test does not know: give it a row and a case
            found.add(("?", repr(route)))
    return found


def expected(caller: str, method: str, row: Row) -> int:
    """The status ``caller`` must get for ``row``'s probe."""
    if row.permission == PUBLIC:
        return 403 if caller.endswith("fetch") and method == "POST" else row.ok
    if caller in ("no credentials", "malformed", "real id, wrong secret", "disabled", "rotated-old token"):
        return 401
    if caller == "disabled user's cookie":
        return 401
    if caller.endswith("fetch"):
        return 403  # a cookie request from another site (or a sibling site), read or write
    write = method == "POST"
    if caller.startswith("cookie") and caller != "cookie" and write:
        return 403  # a cookie write without the session's own CSRF token
    role = "approver" if caller.startswith("cookie") else caller
    return row.ok if row.permission in ROLE_PERMISSIONS[role] else 403


@dataclasses.dataclass
class Callers:
    srv: Server
    wrong_secret: str
    disabled_token: str
    old_token: str
    disabled_cookie: str
    addresses: int = 0

    def client(self, address: str = "127.0.0.1") -> httpx.AsyncClient:
        app = self.srv.client._transport.app  # type: ignore[attr-defined]
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(address, 4321)), base_url=ORIGIN)

    async def login(self) -> tuple[str, str]:
        """A fresh web session of ana (approver): (cookie, csrf)."""
        resp = await self.srv.client.post("/api/login", json={"name": "ana", "token": self.srv.tokens["ana"]})
        assert resp.status_code == 200, resp.text
        return resp.cookies[COOKIE], resp.json()["csrf"]

    async def send(self, caller: str, method: str, path: str) -> httpx.Response:
        headers: dict[str, str] = {}
        address = "127.0.0.1"
        bearer = {
            "malformed": "Bearer not-a-goldfive-token",
            "viewer": f"Bearer {self.srv.tokens['vic']}",
            "approver": f"Bearer {self.srv.tokens['ana']}",
            "admin": f"Bearer {self.srv.tokens['root']}",
            "agent": f"Bearer {self.srv.tokens['bot']}",
            "disabled": f"Bearer {self.disabled_token}",
            "rotated-old token": f"Bearer {self.old_token}",
            "real id, wrong secret": f"Bearer {self.wrong_secret}",
        }
        if caller in bearer:
            headers["Authorization"] = bearer[caller]
        if caller == "real id, wrong secret":  # each from its own address: the limit is per (token id, address)
            self.addresses += 1
            address = f"198.51.100.{self.addresses}"
        if caller == "disabled user's cookie":
            headers["Cookie"] = f"{COOKIE}={self.disabled_cookie}"
        if caller.startswith("cookie") or caller.endswith("fetch"):
            cookie, csrf = await self.login()
            headers["Cookie"] = f"{COOKIE}={cookie}"
            headers["X-CSRF-Token"] = {"cookie without CSRF": "", "cookie with a wrong CSRF token": csrf[::-1]}.get(
                caller, csrf
            )
            if not headers["X-CSRF-Token"]:
                del headers["X-CSRF-Token"]
            headers["Sec-Fetch-Site"] = {"cross-site fetch": "cross-site", "same-site fetch": "same-site"}.get(
                caller, "same-origin"
            )
        async with self.client(address) as client:
            if method == "POST":
                return await client.post(path, headers=headers, json={})
            return await client.get(path, headers=headers)


@pytest.fixture
async def callers(sqlite_server: Server) -> AsyncIterator[Callers]:
    srv = sqlite_server
    store = srv.store
    srv.tokens["bot"] = add_user(store, "bot", "agent").token
    dan = add_user(store, "dan", "approver")
    # dan's web session, stored as if in the race between his login and the disable that follows it
    resp = await srv.client.post("/api/login", json={"name": "dan", "token": dan.token})
    cookie = resp.cookies[COOKIE]
    session = store.web_session(hashlib.sha256(cookie.split(".", 1)[0].encode()).hexdigest())
    assert session is not None
    disable_user(store, "dan")
    store.add_web_session(dataclasses.replace(session, expires_at_ms=session.created_at_ms + SESSION_TTL_MS))
    rob = add_user(store, "rob", "admin")
    rotate_user(store, "rob")
    ana_id = srv.tokens["ana"].split("_")[1]
    yield Callers(srv, f"gf5_{ana_id}_{'W' * 43}", dan.token, rob.token, cookie)


def test_every_route_has_a_row(sqlite_server: Server) -> None:
    app = sqlite_server.client._transport.app  # type: ignore[attr-defined]
    served = route_table(app)
    assert served - set(MATRIX) == set(), "routes without a row in the authorization matrix"
    assert set(MATRIX) - served == set(), "rows for routes the app does not serve"


@pytest.mark.parametrize("caller", CALLERS)
async def test_each_caller_gets_the_expected_status_on_every_route(callers: Callers, caller: str) -> None:
    wrong: list[str] = []
    for (method, path), row in sorted(MATRIX.items()):
        resp = await callers.send(caller, method, row.probe)
        want = expected(caller, method, row)
        if resp.status_code != want:
            wrong.append(f"{method} {path}: {resp.status_code}, expected {want}: {resp.text[:160]}")
        if resp.headers.get("x-content-type-options") != "nosniff":
            wrong.append(f"{method} {path}: no X-Content-Type-Options: nosniff")
        if resp.status_code in (401, 403) and resp.headers.get("content-type", "").startswith("application/json"):
            assert "error" in resp.json()
    assert wrong == []


async def test_an_unknown_route_and_a_wrong_method_say_so_with_nosniff(sqlite_server: Server) -> None:
    missing = await sqlite_server.client.get("/api/nothing-here")
    assert missing.status_code == 404 and missing.headers["x-content-type-options"] == "nosniff"
    wrong_method = await sqlite_server.client.delete("/api/me")
    assert wrong_method.status_code == 405 and wrong_method.headers["x-content-type-options"] == "nosniff"
