"""goldfive serve --notify: a waiting agent pings a webhook with the inbox link; the decision follows up."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import httpx
import pytest
from notify_support import Receiver, receiver
from server_support import Server, eventually, goldfive, serve_process, start_task_agent, start_tool_agent
from store_support import NO_PG, PG_DSN, Backend

from goldfive_core.server.notify import Notifier, NotifyConfig, RetryPolicy, WebhookTarget, verify_webhook
from goldfive_core.store.outbox import outbox_rows

SECRET = "hook-secret"


def _config_file(tmp_path: Path, rec: Receiver, public_url: str = "https://gf.example") -> Path:
    path = tmp_path / "notify.toml"
    path.write_text(
        f'public_url = "{public_url}"\n[[webhook]]\nname = "ops"\nurl = "{rec.url}/hook"\nsecret_env = "HOOK_SECRET"\n'
        "[retry]\nbase_s = 0.05\nmax_s = 0.2\n"
    )
    return path


async def test_serve_sends_the_request_and_its_decision_to_a_webhook(
    sqlite_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)  # the serve process reads the secret from its environment
    with receiver() as rec:
        rec.fail_next = [503]  # the receiver is down at first: the notice is retried, sent once
        env_file = _config_file(tmp_path, rec)
        backend = sqlite_backend
        backend.open()
        agent = start_task_agent(backend, "deploy-1")
        try:
            with serve_process(backend, tmp_path / "k.pem", "--notify", str(env_file)) as served:
                assert any("notifications on webhook:ops" in line for line in served.lines)

                async def got(n: int) -> bool:
                    return len(rec.requests) >= n

                await eventually(lambda: got(1), "the request notice", limit_s=20)
                first = rec.requests[0]
                assert verify_webhook(SECRET, first.body, first.headers)
                body = first.json()
                assert body["notice"]["kind"] == "approval_requested"
                assert body["link"].startswith("https://gf.example/#/approvals/deploy-1")
                async with httpx.AsyncClient(base_url=served.url) as client:
                    auth = {"Authorization": f"Bearer {served.admin_token}"}
                    decided = await client.post("/api/approvals/deploy-1/approve", json={}, headers=auth)
                    assert decided.status_code == 200, decided.text
                    await eventually(lambda: got(2), "the follow-up notice", limit_s=20)

                    async def recorded() -> dict[str, object] | None:
                        status = (await client.get("/api/notifications", headers=auth)).json()
                        return status if status["channels"]["webhook:ops"]["sent"] == 2 else None

                    status = await eventually(recorded, "both notices recorded as sent")
                follow = rec.requests[1].json()["notice"]
                assert follow["kind"] == "approval_granted" and follow["decided_by"] == "admin"
                assert status == {
                    "channels": {"webhook:ops": {"pending": 0, "sent": 2, "failed": 0}},
                    "failures": [],
                }
            assert (await agent.result()).output["decision"] == "approve"
        finally:
            await agent.close()
    cli = await asyncio.to_thread(goldfive, backend, "notify", "status", "--json")
    assert json.loads(cli.stdout)["channels"]["webhook:ops"]["sent"] == 2


async def test_notifications_route_lists_failures_for_the_inbox(sqlite_server: Server) -> None:
    with receiver() as rec:
        rec.fail_next = [500]
        cfg = NotifyConfig(targets=(WebhookTarget(name="ops", url=rec.url, secret=SECRET),))  # secret set inline
        agent = start_task_agent(sqlite_server.backend, "deploy-2")
        try:
            await sqlite_server.pending("deploy-2")
            once = NotifyConfig(targets=cfg.targets, retry=RetryPolicy(max_attempts=1))
            await Notifier(sqlite_server.store, once, start_at=0).step()
            assert [r.status for r in outbox_rows(sqlite_server.store)] == ["failed"]
            data = (await sqlite_server.get("/api/notifications", user="vic")).json()
            (failure,) = data["failures"]
            assert failure["channel"] == "webhook:ops" and failure["error"] == "webhook:ops: HTTP 500"
            assert rec.url not in json.dumps(data)
            assert (await sqlite_server.client.get("/api/notifications")).status_code == 401
        finally:
            await agent.close()


async def test_two_serve_processes_on_one_postgresql_send_each_notice_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not PG_DSN:
        pytest.skip(NO_PG)
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    backend = Backend("postgres", PG_DSN, f"t_{uuid.uuid4().hex[:12]}")
    backend.open()
    try:
        await _two_serves_send_once(backend, tmp_path)
    finally:
        import psycopg

        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{backend.schema}" CASCADE')


async def _two_serves_send_once(backend: Backend, tmp_path: Path) -> None:
    with receiver() as rec:
        config = _config_file(tmp_path, rec)
        key = tmp_path / "shared-key.pem"
        with (
            serve_process(backend, key, "--notify", str(config)) as first,
            serve_process(backend, key, "--notify", str(config)),
        ):
            agents = [start_task_agent(backend, f"pg-n-{i}") for i in range(3)]
            try:

                async def got_all() -> bool:
                    return len(rec.requests) >= 3

                await eventually(got_all, "three request notices", limit_s=30)
                async with httpx.AsyncClient(base_url=first.url) as client:
                    auth = {"Authorization": f"Bearer {first.admin_token}"}

                    async def settled() -> bool:
                        status = (await client.get("/api/notifications", headers=auth)).json()
                        return bool(status["channels"].get("webhook:ops", {}).get("sent") == 3)

                    await eventually(settled, "all notices recorded as sent")
            finally:
                for agent in agents:
                    await agent.close()
        keys = [r.headers["Idempotency-Key"] for r in rec.requests]
        asked = [r for r in rec.requests if r.headers["Goldfive-Event"] == "approval_requested"]
    # each notice sent once, though both processes scanned the same log; closing the agents while the
    # servers still run may add follow-ups (cancelled), each of them once too
    assert len(keys) == len(set(keys))
    assert len(asked) == 3


SERVER_POLICY_TOML = """
[[rule]]
name = "large transfers"
tool = "transfer_funds"
when = "args.amount > 10000"
action = "ask"
approvers = ["role:finance"]
"""


async def test_serve_policy_notifies_who_may_decide_under_the_servers_rule(
    sqlite_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real ``goldfive serve --policy --notify``: the agent's request names no rule (it has no policy), the
    server's rule for the call asks role:finance. The finance channel (``roles = ["finance"]``) gets the request,
    naming the server's rule and its approvers; the channel of role:it does not."""
    monkeypatch.setenv("HOOK_SECRET", SECRET)
    with receiver() as rec:
        path = tmp_path / "notify.toml"
        path.write_text(
            'public_url = "https://gf.example"\n'
            + "".join(
                f'[[webhook]]\nname = "{role}"\nurl = "{rec.url}/{role}"\nsecret_env = "HOOK_SECRET"\n'
                f'roles = ["{role}"]\n'
                for role in ("finance", "it")
            )
            + "[retry]\nbase_s = 0.05\nmax_s = 0.2\n"
        )
        policy = tmp_path / "server-policy.toml"
        policy.write_text(SERVER_POLICY_TOML)
        backend = sqlite_backend
        backend.open()
        agent = start_tool_agent(backend, "pay-1", {"amount": 20_000, "to": "bolt"})
        try:
            with serve_process(backend, tmp_path / "k.pem", "--notify", str(path), "--policy", str(policy)):

                async def got() -> bool:
                    return len(rec.requests) >= 1

                await eventually(got, "the request notice", limit_s=20)
                [sent] = rec.requests
                assert sent.path == "/finance", sent.path
                notice = sent.json()["notice"]
                assert (notice["rule"], notice["approvers"]) == ("large transfers", "role:finance"), notice
        finally:
            await agent.close()
