"""Logging in: the web session cookie, CSRF on cookie writes, throttled failures, tokens, and admin-only users."""

from __future__ import annotations

import httpx
from server_support import ORIGIN, Server, start_task_agent

from goldfive_core.approvals import Principal
from goldfive_core.store import ApprovalRow
from goldfive_core.store.users import verify_token


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


async def test_failed_logins_are_refused_then_locked_out_per_account(sqlite_server: Server) -> None:
    srv = sqlite_server
    bad = {"name": "ana", "token": "gf5_0123456789abcdef_" + "A" * 43}
    statuses = [(await srv.client.post("/api/login", json=bad)).status_code for _ in range(6)]
    assert statuses[:5] == [401] * 5 and statuses[5] == 429
    locked = await srv.client.post("/api/login", json={"name": "ana", "token": srv.tokens["ana"]})
    assert locked.status_code == 429 and "try again" in locked.json()["error"] and locked.headers["retry-after"]
    # Other accounts are not locked; unknown names get the same answer as a wrong token.
    assert (await srv.client.post("/api/login", json={"name": "root", "token": srv.tokens["root"]})).status_code == 200
    nobody = await srv.client.post("/api/login", json={"name": "nobody", "token": srv.tokens["ana"]})
    assert nobody.status_code == 401 and nobody.json()["error"] == "wrong name or token (or the user is disabled)"
    # Someone else's token is not a login for ana.
    swapped = await srv.client.post("/api/login", json={"name": "vic", "token": srv.tokens["root"]})
    assert swapped.status_code == 401


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
