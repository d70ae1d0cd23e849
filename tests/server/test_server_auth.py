"""Logging in: the web session cookie, CSRF on cookie writes, throttled failures, tokens, and admin-only users."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib

import httpx
import pytest
from server_support import ORIGIN, Server, start_task_agent

from goldfive_core.approvals import Principal
from goldfive_core.server import auth as auth_mod
from goldfive_core.server.auth import COOKIE, LOGIN_FAILURE_BURST, SESSION_TTL_MS, WRONG_SECRET_BURST
from goldfive_core.server.throttle import AttemptLimiter, client_key
from goldfive_core.store import ApprovalRow
from goldfive_core.store.rows import WebSession
from goldfive_core.store.users import hash_token, verify_token


async def _login(srv: Server, name: str = "ana") -> tuple[httpx.AsyncClient, str]:
    client = httpx.AsyncClient(transport=srv.client._transport, base_url=ORIGIN)
    resp = await client.post("/api/login", json={"name": name, "token": srv.tokens[name]}, headers={"Origin": ORIGIN})
    assert resp.status_code == 200, resp.text
    cookie = resp.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    return client, resp.json()["csrf"]


async def test_web_login_gives_a_session_cookie_and_writes_need_the_csrf_token(sqlite_server: Server) -> None:
    srv = sqlite_server
    agent = start_task_agent(srv.backend, "pay-w")
    client, csrf = await _login(srv)
    try:
        await srv.pending("pay-w")
        me = (await client.get("/api/me")).json()
        assert (me["name"], me["role"], me["channel"]) == ("ana", "approver", "web")
        same_site = {"Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"}
        no_token = await client.post("/api/approvals/pay-w/approve", json={}, headers=same_site)
        assert no_token.status_code == 403 and "X-CSRF-Token" in no_token.json()["error"]
        cross = await client.post(
            "/api/approvals/pay-w/approve", json={}, headers={"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"}
        )
        assert cross.status_code == 403 and "cross-site" in cross.json()["error"]
        evil_origin = await client.post(
            "/api/approvals/pay-w/approve", json={}, headers={"X-CSRF-Token": csrf, "Origin": "http://evil.test"}
        )
        assert evil_origin.status_code == 403
        assert (await srv.get("/api/approvals/pay-w")).json()["state"] == "pending"
        ok = await client.post("/api/approvals/pay-w/approve", json={}, headers={**same_site, "X-CSRF-Token": csrf})
        assert ok.status_code == 200, ok.text
        (granted,) = [e.approval_granted for e in (await _granted(agent))]
        assert (granted.decided_by, granted.channel) == ("ana", "web")
        out = await client.post("/api/logout", headers={**same_site, "X-CSRF-Token": csrf})
        assert out.status_code == 200
        assert (await client.get("/api/me")).status_code == 401
    finally:
        await client.aclose()
        await agent.close()


async def _granted(agent: object) -> list[object]:
    await agent.result()  # type: ignore[attr-defined]
    return list(agent.sink.of("approval_granted"))  # type: ignore[attr-defined]


def _from(srv: Server, address: str) -> httpx.AsyncClient:
    """A client of the app whose requests come from ``address``."""
    app = srv.client._transport.app  # type: ignore[attr-defined]
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(address, 4321)), base_url=ORIGIN)


@pytest.fixture
def scrypt_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every scrypt check the server makes (the real one runs; this only counts)."""
    seen: list[str] = []

    def counted(secret: str, stored: str) -> bool:
        seen.append(secret)
        return verify_token(secret, stored)

    monkeypatch.setattr(auth_mod, "verify_token", counted)
    return seen


async def test_failed_logins_never_lock_out_the_right_token(sqlite_server: Server) -> None:
    srv = sqlite_server
    wrong_id = {"name": "ana", "token": "gf5_0123456789abcdef_" + "A" * 43}
    async with _from(srv, "203.0.113.7") as attacker, _from(srv, "192.0.2.1") as elsewhere:
        statuses = [
            (await attacker.post("/api/login", json=wrong_id)).status_code for _ in range(LOGIN_FAILURE_BURST + 2)
        ]
        assert statuses == [401] * LOGIN_FAILURE_BURST + [429, 429]  # the address is slowed down, the name is not
        limited = await attacker.post("/api/login", json=wrong_id)
        assert "try again" in limited.json()["error"] and limited.headers["retry-after"]
        right = {"name": "ana", "token": srv.tokens["ana"]}
        assert (await elsewhere.post("/api/login", json=right)).status_code == 200
        assert (await attacker.post("/api/login", json=right)).status_code == 200  # even from the noisy address
    # Unknown names get the same answer as a wrong token; someone else's token is not a login for ana.
    nobody = await srv.client.post("/api/login", json={"name": "nobody", "token": srv.tokens["ana"]})
    assert nobody.status_code == 401 and nobody.json()["error"] == "wrong name or token (or the user is disabled)"
    swapped = await srv.client.post("/api/login", json={"name": "vic", "token": srv.tokens["root"]})
    assert swapped.status_code == 401


async def test_wrong_secrets_for_a_real_token_id_are_limited_before_scrypt(
    sqlite_server: Server, scrypt_checks: list[str]
) -> None:
    srv = sqlite_server
    vic_id = srv.tokens["vic"].split("_")[1]
    wrong = {"Authorization": f"Bearer gf5_{vic_id}_{'W' * 43}"}
    async with _from(srv, "203.0.113.7") as attacker, _from(srv, "192.0.2.1") as elsewhere:
        statuses = [(await attacker.get("/api/me", headers=wrong)).status_code for _ in range(WRONG_SECRET_BURST + 20)]
        assert statuses == [401] * WRONG_SECRET_BURST + [429] * 20
        assert len(scrypt_checks) == WRONG_SECRET_BURST  # the refused ones cost no scrypt
        limited = await attacker.get("/api/me", headers=wrong)
        assert limited.headers["retry-after"] and "too many wrong secrets" in limited.json()["error"]
        assert (
            await attacker.post("/api/login", json={"name": "vic", "token": wrong["Authorization"][7:]})
        ).status_code == 429
        # vic's right token: from another address it is checked (its limit is its own) ...
        vic = {"Authorization": f"Bearer {srv.tokens['vic']}"}
        assert (await elsewhere.get("/api/me", headers=vic)).json()["name"] == "vic"
        # ... and once verified it passes even from the limited address, without another scrypt.
        checks = len(scrypt_checks)
        assert (await attacker.get("/api/me", headers=vic)).json()["name"] == "vic"
        assert (await attacker.post("/api/login", json={"name": "vic", "token": srv.tokens["vic"]})).status_code == 200
        assert len(scrypt_checks) == checks
        # Another address starts with a limit of its own.
        assert (await elsewhere.get("/api/me", headers=wrong)).status_code == 401
    # Unknown token ids are refused at once (no scrypt) and never limited: there is no real token to protect.
    unknown = {"Authorization": "Bearer gf5_0123456789abcdef_" + "W" * 43}
    checks = len(scrypt_checks)
    assert [(await srv.client.get("/api/me", headers=unknown)).status_code for _ in range(10)] == [401] * 10
    assert len(scrypt_checks) == checks


async def test_concurrent_first_requests_share_one_check_and_concurrent_wrong_secrets_are_capped(
    sqlite_server: Server, scrypt_checks: list[str]
) -> None:
    srv = sqlite_server
    vic = {"Authorization": f"Bearer {srv.tokens['vic']}"}
    async with _from(srv, "192.0.2.1") as client:
        answers = await asyncio.gather(*(client.get("/api/me", headers=vic) for _ in range(12)))
        assert [a.status_code for a in answers] == [200] * 12 and len(scrypt_checks) == 1
    ana_id = srv.tokens["ana"].split("_")[1]
    wrong = [{"Authorization": f"Bearer gf5_{ana_id}_{chr(65 + i) * 43}"} for i in range(12)]
    async with _from(srv, "203.0.113.7") as attacker:
        answers = await asyncio.gather(*(attacker.get("/api/me", headers=h) for h in wrong))
    assert sorted(a.status_code for a in answers) == [401] * WRONG_SECRET_BURST + [429] * (12 - WRONG_SECRET_BURST)
    assert len(scrypt_checks) == 1 + WRONG_SECRET_BURST


def test_the_attempt_limiter_refills_and_stays_bounded() -> None:
    now = [0.0]
    limiter = AttemptLimiter(burst=2, refill_s=10.0, max_keys=3, clock=lambda: now[0])
    assert [limiter.take("a"), limiter.take("a"), limiter.take("a")] == [0, 0, 10]
    now[0] = 5.0
    assert limiter.take("a") == 5
    now[0] = 10.0
    assert limiter.take("a") == 0 and limiter.take("a") == 10
    limiter.give_back("a")  # not a failure after all
    assert limiter.take("a") == 0
    for key in "bcdefg":
        limiter.take(key)
    assert len(limiter) == 3  # the oldest keys went first
    assert limiter.take("b") == 0 and limiter.take("b") == 0  # b was dropped: a full bucket again
    limiter.give_back("g")
    limiter.give_back("g")
    assert len(limiter) <= 3
    assert client_key("2001:db8:1:2:3:4:5:6") == client_key("2001:db8:1:2:ffff::1") == "2001:db8:1:2::/64"
    assert client_key("::ffff:192.0.2.9") == "192.0.2.9" and client_key("198.51.100.4") == "198.51.100.4"
    assert client_key(None) == "?" and client_key("testclient") == "testclient"


async def test_login_refuses_a_cross_site_post_and_bad_bodies(sqlite_server: Server) -> None:
    srv = sqlite_server
    good = {"name": "ana", "token": srv.tokens["ana"]}
    cross = await srv.client.post("/api/login", json=good, headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403
    assert (await srv.client.post("/api/login", content=b"nope")).status_code == 400
    assert (await srv.client.post("/api/login", json={"name": "ana"})).status_code == 400


async def test_tokens_are_stored_as_slow_hashes_and_rotation_and_disabling_end_access(sqlite_server: Server) -> None:
    srv = sqlite_server
    row = srv.store.user("ana")
    assert row is not None and row.token_hash.startswith("scrypt$") and srv.tokens["ana"] not in row.token_hash
    assert verify_token(srv.tokens["ana"].split("_", 2)[2], row.token_hash)
    assert (await srv.get("/api/me")).status_code == 200
    client, _ = await _login(srv)
    try:
        rotated = await srv.post("/api/users/ana/rotate", user="root")
        assert rotated.status_code == 200
        new_token = rotated.json()["token"]
        assert (await srv.get("/api/me")).status_code == 401  # the old token no longer works
        assert (await client.get("/api/me")).status_code == 401  # web sessions ended
        srv.tokens["ana"] = new_token
        assert (await srv.get("/api/me")).json()["name"] == "ana"
        assert (await srv.post("/api/users/ana/disable", user="root")).status_code == 200
        assert (await srv.get("/api/me")).status_code == 401
    finally:
        await client.aclose()


async def test_only_admins_manage_users(sqlite_server: Server) -> None:
    srv = sqlite_server
    for user in ("ana", "vic"):
        assert (await srv.get("/api/users", user=user)).status_code == 403
        assert (await srv.post("/api/users", {"name": "eve", "role": "admin"}, user=user)).status_code == 403
    made = await srv.post("/api/users", {"name": "bob", "role": "approver"}, user="root")
    assert made.status_code == 201 and made.json()["token"].startswith("gf5_")
    names = [u["name"] for u in (await srv.get("/api/users", user="root")).json()["users"]]
    assert names == ["ana", "bob", "root", "vic"]
    assert (await srv.post("/api/users", {"name": "bob", "role": "approver"}, user="root")).status_code == 409
    assert (await srv.post("/api/users", {"name": "x y", "role": "approver"}, user="root")).status_code == 400
    assert (await srv.post("/api/users", {"name": "z", "role": "god"}, user="root")).status_code == 400


async def test_a_refused_user_command_is_answered_by_its_kind_not_by_its_words(sqlite_server: Server) -> None:
    # A bad role or name that holds the word "exists" is a bad request (400), not a name taken (409).
    srv = sqlite_server
    for body in ({"name": "z", "role": "exists"}, {"name": "exists already!", "role": "approver"}):
        refused = await srv.post("/api/users", body, user="root")
        assert refused.status_code == 400, (body, refused.text)
    assert [u["name"] for u in (await srv.get("/api/users", user="root")).json()["users"]] == ["ana", "root", "vic"]
    assert (await srv.post("/api/users", {"name": "ana", "role": "approver"}, user="root")).status_code == 409


async def test_admins_change_policy_groups_over_the_api(sqlite_server: Server) -> None:
    srv = sqlite_server
    assert (await srv.post("/api/users/bob/groups", {"add": ["finance"]}, user="ana")).status_code == 403
    made = await srv.post("/api/users", {"name": "bob", "role": "approver", "groups": ["ops"]}, user="root")
    assert made.status_code == 201
    changed = await srv.post("/api/users/bob/groups", {"add": ["finance", "audit"], "remove": ["ops"]}, user="root")
    assert changed.status_code == 200, changed.text
    assert changed.json() == {"name": "bob", "role": "approver", "groups": ["audit", "finance"]}
    row = srv.store.user("bob")
    assert row is not None and row.groups == ("audit", "finance")
    for body, status in (
        ({}, 400),  # nothing asked
        ({"add": "finance"}, 400),  # not a list
        ({"add": [1]}, 400),
        ({"add": ["admin"]}, 400),  # a permission role's name
        ({"add": ["a b"]}, 400),
        ({"add": ["x"], "role": "admin"}, 400),  # unknown field: no role change through here
    ):
        refused = await srv.post("/api/users/bob/groups", body, user="root")
        assert refused.status_code == status, (body, refused.text)
    assert (await srv.post("/api/users/nobody/groups", {"add": ["x"]}, user="root")).status_code == 404
    row = srv.store.user("bob")
    assert row is not None and (row.role, row.groups) == ("approver", ("audit", "finance"))  # refusals changed nothing


async def test_a_decision_authority_can_refuse_a_user_and_nothing_changes(sqlite_server: Server) -> None:
    srv = sqlite_server

    class OnlyRoot:
        def may_decide(self, principal: Principal, approval: ApprovalRow, *, approve: bool) -> str | None:
            return None if principal.name == "root" else f"{principal.name} may not decide {approval.target_id}"

    srv.client._transport.app.state.api.config.authority = OnlyRoot()  # type: ignore[attr-defined]
    agent = start_task_agent(srv.backend, "pay-a")
    try:
        await srv.pending("pay-a")
        refused = await srv.post("/api/approvals/pay-a/approve", {})
        assert refused.status_code == 403 and refused.json()["error"] == "ana may not decide pay-a"
        assert (await srv.get("/api/approvals/pay-a")).json()["state"] == "pending"
        assert (await srv.post("/api/approvals/pay-a/approve", {}, user="root")).status_code == 200
        assert (await agent.result()).output["decided_by"] == "root"
    finally:
        await agent.close()


def _session_of(srv: Server, client: httpx.AsyncClient) -> WebSession:
    cookie = client.cookies[COOKIE]
    session = srv.store.web_session(hashlib.sha256(cookie.split(".", 1)[0].encode()).hexdigest())
    assert session is not None
    return session


async def test_a_web_session_lasts_its_ttl_and_not_a_moment_more(server: Server) -> None:
    srv = server
    client, _ = await _login(srv)
    try:
        session = _session_of(srv, client)
        assert session.expires_at_ms - session.created_at_ms == SESSION_TTL_MS == 12 * 3600 * 1000
        assert (await client.get("/api/me")).status_code == 200
        # Its time is up (the row as the clock finds it twelve hours on): the same cookie is refused.
        srv.store.end_web_session(session.id_hash)
        srv.store.add_web_session(dataclasses.replace(session, expires_at_ms=srv.store.clock_ms() - 1))
        ended = await client.get("/api/me")
        assert ended.status_code == 401 and "session has ended" in ended.json()["error"]
    finally:
        await client.aclose()


async def test_the_login_cookie_says_the_sessions_ttl(sqlite_server: Server) -> None:
    resp = await sqlite_server.client.post(
        "/api/login", json={"name": "ana", "token": sqlite_server.tokens["ana"]}, headers={"Origin": ORIGIN}
    )
    assert f"max-age={SESSION_TTL_MS // 1000}" in resp.headers["set-cookie"].lower()


async def test_a_role_the_permission_table_does_not_know_may_do_nothing(sqlite_server: Server) -> None:
    """A user row whose role this server does not know (written by hand, or by a newer version) is refused
    everything but who it is: no permission is assumed for it."""
    srv = sqlite_server
    assert srv.store.update_user("vic", role="auditor")
    for path in ("/api/approvals", "/api/runs", "/api/grants", "/api/audit/verify"):
        refused = await srv.get(path, user="vic")
        assert refused.status_code == 403 and "role 'auditor', which may not read" in refused.json()["error"], path


async def test_a_hash_changed_under_a_token_id_stops_the_old_secret_even_when_it_was_verified(
    sqlite_server: Server,
) -> None:
    """The server remembers which token it verified against which stored hash: a new hash under the same id (a
    rotate that kept the id, an edit by hand) is checked afresh, and the old secret no longer gets in."""
    srv = sqlite_server
    assert (await srv.get("/api/me")).status_code == 200  # verified once (scrypt), then remembered
    assert srv.store.update_user("ana", token_hash=hash_token("another-secret-" + "x" * 28))
    refused = await srv.get("/api/me")
    assert refused.status_code == 401, refused.text
