"""goldfive serve with a policy (``ServerConfig(policy=...)`` = ``goldfive serve --policy FILE``): the rule's
approvers are checked against the logged-in users' names and roles (403, audited, nothing changes); a quorum
of two distinct users through the API (the same user twice counts once); the progress on the record; grants
made, listed and revoked through the API while the agent runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import ORIGIN, Server, eventually, goldfive, serve_process
from store_support import REPO, Backend, await_until

from goldfive_core import AgentTools, InMemorySink, Task, wrap
from goldfive_core.policy import Policy, parse_policy
from goldfive_core.server import ServerConfig, create_app
from goldfive_core.signing import load_or_create_signing_key
from goldfive_core.store import StoreChannel
from goldfive_core.store.execution import GuardedResult, run_approved
from goldfive_core.store.grants import DECIDERS_STREAM
from goldfive_core.store.users import add_user, set_groups

POLICY_TOML = """
[[rule]]
name = "large transfers"
tool = "transfer_funds"
when = "args.amount > 10000"
action = "ask"
approvers = ["user:ana", "user:bo", "role:admin"]
quorum = 2

[[rule]]
name = "payments to acme"
tool = "transfer_funds"
when = "args.to == 'acme'"
action = "ask"
approvers = ["user:ana", "user:bo"]
grants = ["run", "1h"]
"""
POLICY = parse_policy(POLICY_TOML, source="serve-policy.toml")
USERS = (("ana", "approver"), ("bo", "approver"), ("dee", "approver"), ("vic", "viewer"), ("root", "admin"))


@contextlib.asynccontextmanager
async def policy_server(
    backend: Backend,
    tmp_path: Path,
    *,
    policy: Policy = POLICY,
    users: tuple[tuple[str, str, tuple[str, ...]], ...] = tuple((n, r, ()) for n, r in USERS),
) -> AsyncIterator[Server]:
    store = backend.open()
    signer, _ = load_or_create_signing_key(tmp_path / "keys" / "decision-key.pem")
    config = ServerConfig(signer=signer, decide_timeout_s=20.0, control_timeout_s=20.0, policy=policy)
    app = create_app(store, config)
    tokens = {name: add_user(store, name, role, groups).token for name, role, groups in users}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN) as client:
        yield Server(backend, store, signer, tmp_path, client, tokens)
    await app.state.api.events.aclose()


class PayingAgent:
    """A callable agent (its own StoreChannel: another 'process') making transfer_funds calls under POLICY.

    Each call waits for ``go[i]`` first, so the test says when the next call is made.
    """

    def __init__(self, backend: Backend, calls: list[Mapping[str, Any]], *, policy: Policy = POLICY) -> None:
        self.channel = StoreChannel(backend.open(), sweep_interval_s=0.2)
        self.sink = InMemorySink()
        self.ran: list[dict[str, Any]] = []
        self.results: list[GuardedResult] = []
        self.go = [asyncio.Event() for _ in calls]

        async def body(args: Mapping[str, Any]) -> str:
            self.ran.append(dict(args))
            return "sent"

        async def agent(task: Task, tools: AgentTools) -> None:
            for i, args in enumerate(calls):
                await self.go[i].wait()
                self.results.append(
                    await run_approved(
                        tools.session,
                        self.channel.store,
                        call_id=f"call-{i}",
                        tool_name="transfer_funds",
                        args=args,
                        body=body,
                        timeout_ms=120_000,
                    )
                )

        runner = wrap(agent, control=self.channel, sinks=[self.channel.sink, self.sink], policy=policy)
        self.task = asyncio.create_task(runner.run("pay"))

    async def close(self) -> None:
        if not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
        await self.channel.aclose()


async def _refusals(srv: Server) -> list[dict[str, Any]]:
    events = (await srv.get(f"/api/audit/events?run={DECIDERS_STREAM}", user="vic")).json()["events"]
    return [e["event"]["decision_refused"] for e in events if e["kind"] == "decision_refused"]


async def _progress(srv: Server, target: str) -> str:
    return str((await srv.get(f"/api/approvals/{target}", user="vic")).json()["quorum_progress"])


async def test_a_quorum_of_two_distinct_users_through_the_api(backend: Backend, tmp_path: Path) -> None:
    async with policy_server(backend, tmp_path) as srv:
        agent = PayingAgent(backend, [{"amount": 20_000, "to": "bolt"}])
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert card["rule"] == "large transfers" and card["quorum_progress"] == ""
            assert card["policy"]["approvers"] == ["user:ana", "user:bo", "role:admin"]
            assert card["policy"]["quorum"] == 2 and card["policy"]["grants"] == []

            # dee may decide (role approver) but is not among this rule's approvers: 403, audited, nothing changes.
            refused = await srv.post("/api/approvals/call-0/approve", {}, user="dee")
            assert refused.status_code == 403, refused.text
            assert "'dee' is not among the approvers (user:ana, user:bo, role:admin)" in refused.json()["error"]
            [audited] = await _refusals(srv)
            assert (audited["decided_by"], audited["target_id"], audited["decision"]) == ("dee", "call-0", "approve")
            assert audited["request_run_id"] == card["run_id"] and audited["channel"] == "api"
            assert "is not among the approvers" in audited["reason"]

            first = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
            assert first.status_code == 200, first.text
            assert "(1 of 2: ana)" in first.json()["detail"] and "the request stays pending" in first.json()["detail"]
            assert first.json()["counted"] is True and "repeated" not in first.json()
            await eventually(lambda: _wait_for(srv, "call-0", "1 of 2: ana"), "the progress on the record")
            shown = (await _cli(backend, "show", "call-0")).stdout  # goldfive show says it too
            assert "policy     rule 'large transfers' (ask) · approvers user:ana,user:bo,role:admin" in shown
            assert "approvals  1 of 2: ana" in shown

            # The same person again counts once; the body has not run.
            again = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
            assert "ana already approved; the same person counts once" in again.json()["detail"]
            assert "(1 of 2: ana)" in again.json()["detail"]
            assert again.json()["repeated"] is True  # the inbox says "already approved", not "was counted"
            assert agent.ran == [] and (await srv.pending("call-0"))["state"] == "pending"

            # root holds role admin, one of the rule's approvers: the second distinct approver.
            second = await srv.post("/api/approvals/call-0/approve", {}, user="root")
            assert second.status_code == 200 and "(2 of 2: ana, root)" in second.json()["detail"], second.text
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [{"amount": 20_000, "to": "bolt"}]
            assert agent.results[0].status == "ran"
            decided = await eventually(lambda: _decided(srv, "call-0"), "the decision on the record")
            assert decided["decided_by"] == "ana, root" and decided["quorum_progress"] == "2 of 2: ana, root"
            assert len(await _refusals(srv)) == 1
            assert (await srv.get("/api/audit/verify", user="vic")).json()["ok"]
        finally:
            await agent.close()


FINANCE_POLICY = parse_policy(
    """
[[rule]]
name = "large transfers"
tool = "transfer_funds"
action = "ask"
approvers = ["role:finance"]
quorum = 2
""",
    source="finance-policy.toml",
)
FINANCE_USERS = (
    ("ana", "approver", ("finance",)),
    ("bo", "approver", ("finance", "ops")),
    ("cy", "approver", ("finance",)),
    ("dee", "approver", ("ops",)),
    ("vic", "viewer", ("finance",)),
    ("root", "admin", ()),
)


async def test_a_rule_naming_role_finance_is_answered_by_approvers_in_group_finance(
    backend: Backend, tmp_path: Path
) -> None:
    """``role:finance`` names the users in policy group finance; their permission role still has to let them
    decide; a group change counts at once; two finance users make the quorum."""
    async with policy_server(backend, tmp_path, policy=FINANCE_POLICY, users=FINANCE_USERS) as srv:
        agent = PayingAgent(backend, [{"amount": 20_000, "to": "bolt"}], policy=FINANCE_POLICY)
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert card["policy"]["approvers"] == ["role:finance"] and card["policy"]["quorum"] == 2

            # dee is an approver, but in group ops only: 403, audited, nothing counted.
            refused = await srv.post("/api/approvals/call-0/approve", {}, user="dee")
            assert refused.status_code == 403, refused.text
            assert "'dee' is not among the approvers (role:finance)" in refused.json()["error"]
            [audited] = await _refusals(srv)
            assert (audited["decided_by"], audited["decision"], audited["channel"]) == ("dee", "approve", "api")
            # vic is in group finance but a viewer: a group never grants the permission to decide.
            viewer = await srv.post("/api/approvals/call-0/approve", {}, user="vic")
            assert viewer.status_code == 403 and "may not decide" in viewer.json()["error"], viewer.text

            first = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
            assert first.status_code == 200 and "(1 of 2: ana)" in first.json()["detail"], first.text
            # bo leaves group finance: refused at once (the server reads the groups on every decision).
            await asyncio.to_thread(set_groups, srv.store, "bo", remove=["finance"])
            left = await srv.post("/api/approvals/call-0/approve", {}, user="bo")
            assert left.status_code == 403 and "'bo' is not among the approvers" in left.json()["error"], left.text
            assert len(await _refusals(srv)) == 2 and agent.ran == []

            second = await srv.post("/api/approvals/call-0/approve", {}, user="cy")
            assert second.status_code == 200 and "(2 of 2: ana, cy)" in second.json()["detail"], second.text
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [{"amount": 20_000, "to": "bolt"}] and agent.results[0].status == "ran"

            listed = {u["name"]: u["groups"] for u in (await srv.get("/api/users", user="root")).json()["users"]}
            assert listed["ana"] == ["finance"] and listed["bo"] == ["ops"] and listed["root"] == []
        finally:
            await agent.close()


async def _wait_for(srv: Server, target: str, progress: str) -> bool:
    return await _progress(srv, target) == progress


async def _done(agent: PayingAgent, count: int) -> bool:
    return len(agent.results) >= count


async def _decided(srv: Server, target: str) -> dict[str, Any] | None:
    item: dict[str, Any] = (await srv.get(f"/api/approvals/{target}", user="vic")).json()
    return item if item["state"] == "decided" and item["quorum_progress"].startswith("2 of 2") else None


async def test_grants_through_the_api_listed_revoked_and_the_live_run_asks_again(
    backend: Backend, tmp_path: Path
) -> None:
    async with policy_server(backend, tmp_path) as srv:
        calls = [{"amount": 10, "to": "acme"}, {"amount": 20, "to": "acme"}, {"amount": 30, "to": "acme"}]
        agent = PayingAgent(backend, calls)
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert card["policy"]["grants"] == [
                {"scope": "run", "label": "for this run"},
                {"scope": "1h", "label": "for 1h"},
            ]
            bad = await srv.post("/api/approvals/call-0/approve", {"grant": "session"}, user="ana")
            assert bad.status_code == 409 and "does not offer a grant for this session" in bad.json()["error"]
            made = await srv.post("/api/approvals/call-0/approve", {"grant": "run"}, user="ana")
            assert made.status_code == 200, made.text
            assert "allow transfer_funds calls matching rule 'payments to acme' for the rest of run" in made.text
            await eventually(lambda: _done(agent, 1), "the first call")

            listed = await eventually(lambda: _grants(srv), "the grant in the list")
            [grant] = listed
            assert (grant["rule"], grant["scope"], grant["granted_by"], grant["state"]) == (
                "payments to acme",
                "run",
                "ana",
                "active",
            )
            assert grant["run_id"] == card["run_id"] and grant["target_id"] == "call-0"

            agent.go[1].set()  # runs on the grant: nobody is asked
            await eventually(lambda: _done(agent, 2), "the second call")
            assert [r["amount"] for r in agent.ran] == [10, 20]

            gid = grant["grant_id"]
            viewer = await srv.post(f"/api/grants/{gid}/revoke", {}, user="vic")
            assert viewer.status_code == 403
            outsider = await srv.post(f"/api/grants/{gid}/revoke", {}, user="dee")
            assert outsider.status_code == 403 and "'dee' may not revoke grant" in outsider.json()["error"]
            revoked = await srv.post(f"/api/grants/{gid}/revoke", {"reason": "enough"}, user="bo")
            assert revoked.status_code == 200, revoked.text
            assert revoked.json()["grant"]["state"] == "revoked" and revoked.json()["grant"]["revoked_by"] == "bo"
            twice = await srv.post(f"/api/grants/{gid}/revoke", {}, user="ana")
            assert twice.status_code == 409 and "already revoked by bo" in twice.json()["error"]
            assert (await srv.post("/api/grants/grant-nope/revoke", {}, user="ana")).status_code == 404
            assert (await srv.get("/api/grants", user="vic")).json()["grants"] == []
            [old] = (await srv.get("/api/grants?all=1", user="vic")).json()["grants"]
            assert (old["state"], old["revoke_reason"]) == ("revoked", "enough")

            agent.go[2].set()  # the grant was revoked while the run is live: this call asks again
            await srv.pending("call-2")
            assert [r["amount"] for r in agent.ran] == [10, 20]
            rejected = await srv.post("/api/approvals/call-2/reject", {"reason": "no more"}, user="bo")
            assert rejected.status_code == 200, rejected.text
            await eventually(lambda: _done(agent, 3), "the third call")
            assert [r["amount"] for r in agent.ran] == [10, 20]
        finally:
            await agent.close()


async def _grants(srv: Server) -> list[dict[str, Any]]:
    return list((await srv.get("/api/grants", user="vic")).json()["grants"])


@pytest.mark.parametrize("user", ["ana", "root"])
async def test_without_a_server_policy_the_requests_own_fields_are_checked_against_the_users_roles(
    sqlite_backend: Backend, tmp_path: Path, user: str
) -> None:
    """With no --policy, a rule naming role:admin is still checked against the logged-in user's role."""
    from goldfive_core.server import ServerConfig as Config

    store = sqlite_backend.open()
    signer, _ = load_or_create_signing_key(tmp_path / "k.pem")
    app = create_app(store, Config(signer=signer, decide_timeout_s=20.0))
    tokens = {name: add_user(store, name, role).token for name, role in USERS}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN) as client:
        srv = Server(sqlite_backend, store, signer, tmp_path, client, tokens)
        only_admins = parse_policy(
            '[[rule]]\nname = "admins only"\ntool = "transfer_funds"\naction = "ask"\napprovers = ["role:admin"]\n'
        )
        channel = StoreChannel(sqlite_backend.open(), sweep_interval_s=0.2)
        ran: list[Any] = []

        async def agent(task: Task, tools: AgentTools) -> GuardedResult:
            async def body(args: Mapping[str, Any]) -> str:
                ran.append(args)
                return "sent"

            return await run_approved(
                tools.session, channel.store, call_id="c1", tool_name="transfer_funds", args={"amount": 1}, body=body
            )

        run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink], policy=only_admins).run("x"))
        try:
            await srv.pending("c1")
            answer = await srv.post("/api/approvals/c1/approve", {}, user=user)
            if user == "ana":
                assert answer.status_code == 403 and "not among the approvers (role:admin)" in answer.text
                assert ran == []
            else:
                assert answer.status_code == 200, answer.text
                await asyncio.wait_for(run, 20)
                assert ran == [{"amount": 1}]
        finally:
            if not run.done():
                run.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await run
            await channel.aclose()
        await app.state.api.events.aclose()


async def _cli(backend: Backend, *args: str, url: str = "", token: str = "") -> subprocess.CompletedProcess[str]:
    env = backend.env()
    if url:
        env["GOLDFIVE_URL"], env["GOLDFIVE_TOKEN"] = url, token
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "goldfive_core.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )


async def test_goldfive_serve_policy_and_goldfive_grants_on_the_database_and_through_the_server(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    backend = sqlite_backend
    backend.open()
    token = {
        name: goldfive(backend, "users", "add", name, "--role", "approver").stdout.strip().splitlines()[-1]
        for name in ("ana", "dee")
    }
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(POLICY_TOML)
    with serve_process(backend, tmp_path / "k.pem", "--policy", str(policy_file)) as served:
        assert any("who may decide follows the policy" in line for line in served.lines), served.lines
        agent = PayingAgent(backend, [{"amount": 10, "to": "acme"}, {"amount": 20, "to": "acme"}])
        try:
            agent.go[0].set()
            await await_until(lambda: backend.open().approvals(), what="the request")
            dee = await _cli(backend, "approve", "call-0", "--grant", "run", url=served.url, token=token["dee"])
            assert dee.returncode == 1 and "'dee' is not among the approvers (user:ana, user:bo)" in dee.stderr
            ana = await _cli(backend, "approve", "call-0", "--grant", "run", url=served.url, token=token["ana"])
            assert ana.returncode == 0, ana.stderr
            assert "allow transfer_funds calls matching rule 'payments to acme' for the rest of run" in ana.stdout
            await eventually(lambda: _done(agent, 1), "the first call")
            await asyncio.to_thread(agent.channel.sink.flush)

            local = await _cli(backend, "grants")
            remote = await _cli(backend, "grants", url=served.url, token=token["ana"])
            assert local.returncode == remote.returncode == 0 and local.stdout == remote.stdout
            assert "active  rule 'payments to acme'  tool transfer_funds  run " in local.stdout
            assert "by ana" in local.stdout and "no expiry of its own" in local.stdout
            grant_id = local.stdout.split()[0]

            agent.go[1].set()  # on the grant
            await eventually(lambda: _done(agent, 2), "the second call")
            assert [r["amount"] for r in agent.ran] == [10, 20]

            revoked = await _cli(
                backend, "grants", "revoke", grant_id, "--reason", "done", url=served.url, token=token["ana"]
            )
            assert revoked.returncode == 0, revoked.stderr
            assert revoked.stdout.startswith(f"revoked {grant_id}: it lets no more calls through")
            assert (await _cli(backend, "grants")).stdout.strip() == (
                "no active grants (--all shows revoked and expired ones)"
            )
            listed = (await _cli(backend, "grants", "--all")).stdout
            assert f"{grant_id}  REVOKED" in listed and "revoked by ana" in listed and ": done" in listed
            again = await _cli(backend, "grants", "revoke", grant_id, "--by", "cy")
            assert again.returncode == 1 and "already revoked by ana" in again.stderr
            usage = await _cli(backend, "grants", "revoke")
            assert usage.returncode == 2 and "needs the grant's id" in usage.stderr
            as_json = json.loads((await _cli(backend, "--json", "grants", "--all")).stdout)
            assert [g["state"] for g in as_json["grants"]] == ["revoked"]
        finally:
            await agent.close()


async def test_an_edit_in_a_quorum_puts_the_edited_arguments_on_the_table(backend: Backend, tmp_path: Path) -> None:
    """ana edits the amount: the count restarts with her, and bo reads and votes on the edited arguments."""
    async with policy_server(backend, tmp_path) as srv:
        agent = PayingAgent(backend, [{"amount": 20_000, "to": "bolt"}])
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            old_digest = card["args_digest"]
            assert card["original_args"] is None and card["original_args_digest"] == ""

            edited = {"amount": 15_000, "to": "bolt"}
            first = await srv.post(
                "/api/approvals/call-0/approve", {"edited_args": edited, "args_digest": old_digest}, user="ana"
            )
            assert first.status_code == 200, first.text
            assert "ana edited the arguments: the count starts again with them" in first.json()["detail"]
            new_digest = first.json()["args_digest"]
            assert new_digest != old_digest

            # bo sees what he is voting on: the edited arguments and their digest; the call's own stay reviewable.
            shown = await srv.get("/api/approvals/call-0", user="bo")
            item = shown.json()
            assert (item["args"], item["args_digest"]) == (edited, new_digest)
            original = {"amount": 20_000, "to": "bolt"}
            assert (item["original_args"], item["original_args_digest"]) == (original, old_digest)
            assert item["quorum_progress"] == "1 of 2: ana" and item["state"] == "pending"
            cli = (await _cli(backend, "show", "call-0")).stdout
            assert '{"amount":15000,"to":"bolt"}' in cli and f"digest     {new_digest}" in cli
            assert f'originally requested  {{"amount":20000,"to":"bolt"}}  (digest {old_digest};' in cli

            # A vote on the arguments that are no longer on the table is refused as stale and changes nothing.
            stale = await srv.post("/api/approvals/call-0/approve", {"args_digest": old_digest}, user="bo")
            assert stale.status_code == 409, stale.text
            assert "no longer the ones on the table" in stale.json()["error"]
            assert stale.json()["approval"]["args_digest"] == new_digest
            assert await _progress(srv, "call-0") == "1 of 2: ana" and agent.ran == []
            assert (await srv.pending("call-0"))["state"] == "pending"

            # With the digest of the edited arguments bo's vote counts: the body runs once, with them.
            second = await srv.post("/api/approvals/call-0/approve", {"args_digest": new_digest}, user="bo")
            assert second.status_code == 200 and "(2 of 2: ana, bo)" in second.json()["detail"], second.text
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [edited] and agent.results[0].status == "ran"
            decided = await eventually(lambda: _decided(srv, "call-0"), "the decision on the record")
            assert decided["decided_by"] == "ana, bo" and decided["edited_args"] == edited
            assert decided["args_digest"] == new_digest and decided["original_args_digest"] == old_digest
            verified = (await srv.get("/api/audit/verify", user="vic")).json()
            # The record's original arguments still match its request on the audit log (no "args_json ... edited").
            assert verified["rows"] and not [p for p in verified["problems"] if "args" in p], verified
            assert verified["ok"], verified  # and every other column too
        finally:
            await agent.close()
