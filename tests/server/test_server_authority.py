"""With ``goldfive serve --policy`` the server is the authority: its rule is the one the API, ``goldfive show`` and
the inbox list (not the fields the agent wrote), its quorum is the one a trusting agent counts to (each vote is
signed with it), and its ``expires`` ends the request at its time (the run records approval_timed_out and the
HUMAN_INTERVENTION_REQUIRED drift; later decisions get 409). The agents' own files here say otherwise."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_support import ORIGIN, Server, eventually, goldfive, serve_process, start_tool_agent
from store_support import REPO, Backend, await_until

from goldfive_core import AgentTools, InMemorySink, Task, wrap
from goldfive_core._util import now_ms
from goldfive_core.pb.v1 import types_pb2
from goldfive_core.policy import parse_policy
from goldfive_core.server import ServerConfig, create_app
from goldfive_core.server.expiry import Expirer
from goldfive_core.signing import SignedDecision, check_decision, decision_bytes, load_or_create_signing_key
from goldfive_core.store import StoreChannel
from goldfive_core.store.execution import GuardedResult, run_approved
from goldfive_core.store.trust import verify_decision
from goldfive_core.store.users import add_user

SERVER_TOML = """
[[rule]]
name = "large transfers"
tool = "transfer_funds"
when = "args.amount > 10000"
action = "ask"
approvers = ["user:ana", "user:bo"]
quorum = 2
grants = ["run"]
expires = "1h"

[[rule]]
name = "quick ones"
tool = "transfer_funds"
action = "ask"
approvers = ["user:ana"]
expires = "5m"
"""
# The agent's own file: the same rule names, another story (dee may approve alone, grants, no expiry).
AGENT_TOML = """
[[rule]]
name = "large transfers"
tool = "transfer_funds"
when = "args.amount > 10000"
action = "ask"
approvers = ["user:dee"]
grants = ["run"]

[[rule]]
name = "quick ones"
tool = "transfer_funds"
action = "ask"
approvers = ["user:dee"]
"""
SERVER_POLICY = parse_policy(SERVER_TOML, source="server.toml")
AGENT_POLICY = parse_policy(AGENT_TOML, source="agent.toml")
USERS = (("ana", "approver"), ("bo", "approver"), ("dee", "approver"), ("vic", "viewer"))
WAIT_MS = 7_200_000  # the agent's own wait (2 h): longer than any expiry of the server's rules


@contextlib.asynccontextmanager
async def authority_server(backend: Backend, tmp_path: Path) -> AsyncIterator[tuple[Server, Any]]:
    store = backend.open()
    signer, _ = load_or_create_signing_key(tmp_path / "keys" / "decision-key.pem")
    config = ServerConfig(signer=signer, decide_timeout_s=20.0, control_timeout_s=20.0, policy=SERVER_POLICY)
    app = create_app(store, config)
    tokens = {name: add_user(store, name, role).token for name, role in USERS}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN) as client:
        yield Server(backend, store, signer, tmp_path, client, tokens), app.state.api
    await app.state.api.events.aclose()


class TrustingAgent:
    """A callable agent in its own StoreChannel that applies only decisions signed by the server's key."""

    def __init__(
        self, backend: Backend, trust: Any, calls: list[Mapping[str, Any]], *, policy: Any = AGENT_POLICY
    ) -> None:
        self.channel = StoreChannel(backend.open(), sweep_interval_s=0.2, trust_key=trust)
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
                        timeout_ms=WAIT_MS,
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


async def _done(agent: TrustingAgent, count: int) -> bool:
    return len(agent.results) >= count


async def test_the_server_lists_its_own_rule_and_a_trusting_agent_waits_for_the_servers_quorum(
    backend: Backend, tmp_path: Path
) -> None:
    """The agent's file lets dee approve alone; the server's says ana and bo, two of them: dee gets 403, ana's
    approval is one vote of two (no grant from it), bo's completes it and the body runs once."""
    async with authority_server(backend, tmp_path) as (srv, _api):
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"amount": 20_000, "to": "bolt"}])
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert card["metadata"]["policy_approvers"] == "user:dee"  # what the agent wrote
            policy = card["policy"]
            assert (policy["source"], policy["approvers"], policy["quorum"]) == ("server", ["user:ana", "user:bo"], 2)
            assert policy["grants"] == [] and policy["expires"] == "1h"
            assert card["expires_at_ms"] == card["requested_at_ms"] + 3_600_000  # the rule's expiry, not the wait's
            detail = (await srv.get("/api/approvals/call-0", user="vic")).json()
            assert detail["policy"] == policy and detail["expires_at_ms"] == card["expires_at_ms"]

            dee = await srv.post("/api/approvals/call-0/approve", {}, user="dee")
            assert dee.status_code == 403 and "not among the approvers (user:ana, user:bo)" in dee.text

            granting = await srv.post("/api/approvals/call-0/approve", {"grant": "run"}, user="ana")
            assert granting.status_code == 409, granting.text
            assert "needs 2 distinct approvers; one approver cannot allow later calls" in granting.json()["error"]

            first = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
            assert first.status_code == 200, first.text
            assert first.json()["counted"] is True and first.json()["quorum_progress"] == "1 of 2: ana"
            assert agent.ran == [] and (await srv.pending("call-0"))["state"] == "pending"

            second = await srv.post("/api/approvals/call-0/approve", {}, user="bo")
            assert second.status_code == 200 and "(2 of 2: ana, bo)" in second.json()["detail"], second.text
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [{"amount": 20_000, "to": "bolt"}] and agent.results[0].status == "ran"
            assert agent.sink.of("decision_refused") == [] and agent.sink.of("grant_created") == []
            [granted] = agent.sink.of("approval_granted")
            assert granted.approval_granted.decided_by == "ana, bo"
        finally:
            await agent.close()


async def test_a_call_whose_request_names_no_rule_is_judged_by_the_servers_policy(
    backend: Backend, tmp_path: Path
) -> None:
    """The agent has no policy at all, so its request names no rule: the server judges the call by its own file.
    Its rule asks ana and bo, two of them; dee may not decide, ana alone is one vote; a call the server's policy
    denies can be rejected but never approved."""
    deny = SERVER_TOML + '[[rule]]\nname = "no crypto"\ntool = "buy_crypto"\naction = "deny"\nreason = "never"\n'
    async with authority_server(backend, tmp_path) as (srv, api):
        api.policy_authority.policy = parse_policy(deny, source="server.toml")
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"amount": 20_000, "to": "bolt"}], policy=None)
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert "policy_rule" not in card["metadata"]  # the agent named no rule
            policy = card["policy"]
            assert (policy["rule"], policy["source"], policy["quorum"]) == ("large transfers", "server", 2), policy
            dee = await srv.post("/api/approvals/call-0/approve", {}, user="dee")
            assert dee.status_code == 403 and "not among the approvers (user:ana, user:bo)" in dee.text
            first = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
            assert first.status_code == 200 and first.json()["counted"] is True, first.text
            assert agent.ran == []
            second = await srv.post("/api/approvals/call-0/approve", {}, user="bo")
            assert second.status_code == 200, second.text
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [{"amount": 20_000, "to": "bolt"}]
        finally:
            await agent.close()
        crypto = start_tool_agent(backend, "buy-1", {"coin": "x"}, trust=srv.signer.trust_key, tool="buy_crypto")
        try:
            await srv.pending("buy-1")
            refused = await srv.post("/api/approvals/buy-1/approve", {}, user="ana")
            assert refused.status_code == 409 and "denies this call (rule 'no crypto')" in refused.text, refused.text
            rejected = await srv.post("/api/approvals/buy-1/reject", {"reason": "no"}, user="ana")
            assert rejected.status_code == 200, rejected.text
            assert (await crypto.result()).output.status == "reject" and crypto.ran == []
        finally:
            await crypto.close()


async def test_the_servers_expires_ends_the_request_at_its_time(backend: Backend, tmp_path: Path) -> None:
    """The agent's rule names no expiry and it would wait 2 h; the server's rule gives 5 minutes. At that time
    (a clock 5 minutes on) the server tells the run, signed: the run records approval_timed_out and the
    HUMAN_INTERVENTION_REQUIRED drift, the call is not made, and a decision after it is refused with 409."""
    async with authority_server(backend, tmp_path) as (srv, api):
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"amount": 5, "to": "acme"}])
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert card["policy"]["expires"] == "5m" and card["expires_at_ms"] == card["requested_at_ms"] + 300_000
            assert await asyncio.to_thread(api.expirer.sweep) == 0  # not yet

            later = Expirer(srv.store, api.policy_authority, srv.signer, clock=lambda: now_ms() + 300_000)
            assert await asyncio.to_thread(later.sweep) == 1
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [] and agent.results[0].status != "ran"
            [timed_out] = agent.sink.of("approval_timed_out")
            assert "expired: rule 'quick ones' allows 5m for a decision" in timed_out.approval_timed_out.detail
            assert not timed_out.approval_timed_out.still_open
            drifts = [e.drift_detected for e in agent.sink.of("drift_detected")]
            assert [d.kind for d in drifts] == [types_pb2.HUMAN_INTERVENTION_REQUIRED]
            assert agent.sink.of("decision_refused") == []  # the signed notice was taken

            await asyncio.to_thread(agent.channel.sink.flush)
            expired = await srv.pending("call-0", state="expired")
            assert expired["status"] == "expired"
            late = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
            assert late.status_code == 409, late.text
            assert await asyncio.to_thread(later.sweep) == 0  # once
            await agent.close()
            verified = (await srv.get("/api/audit/verify", user="vic")).json()
            assert verified["ok"], verified  # the expired record matches its approval_timed_out on the audit log
        finally:
            await agent.close()


def test_a_votes_signature_covers_the_quorum_it_states(tmp_path: Path) -> None:
    """A writer who strips (or lowers) the quorum from a signed vote makes it fail; a decision stating none signs
    the same bytes as before the field existed."""
    signer, _ = load_or_create_signing_key(tmp_path / "k.pem")
    facts = SignedDecision(
        target_id="c1",
        run_id="r1",
        decision="approve",
        edited_args_json="",
        args_digest="sha256:a",
        decided_by="ana",
        detail="",
        channel="web",
        quorum=2,
    )
    signature = signer.sign(facts)

    def check(quorum: int) -> str | None:
        return check_decision(
            signer.trust_key,
            target_id="c1",
            run_id="r1",
            approved=True,
            edited_args=None,
            args_digest="sha256:a",
            decided_by="ana",
            detail="",
            signature=signature,
            quorum=quorum,
        )

    assert check(2) is None
    for wrong in (0, 3):
        problem = check(wrong)
        assert problem is not None and "does not match what it claims" in problem and "quorum" in problem


async def _cli(backend: Backend, *args: str, url: str, token: str) -> subprocess.CompletedProcess[str]:
    env = backend.env()
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


@pytest.mark.parametrize("trusting", [False, True])
async def test_goldfive_serve_policy_is_what_goldfive_show_url_lists_and_what_the_run_counts_to(
    sqlite_backend: Backend, tmp_path: Path, trusting: bool
) -> None:
    """A real ``goldfive serve --policy``: ``goldfive show --url`` lists the server's approvers and quorum; the
    agent (with or without the trust key) counts the server's two approvals before its call runs."""
    backend = sqlite_backend
    backend.open()
    token = {
        name: goldfive(backend, "users", "add", name, "--role", "approver").stdout.strip().splitlines()[-1]
        for name in ("ana", "bo", "dee")
    }
    policy_file = tmp_path / "server-policy.toml"
    policy_file.write_text(SERVER_TOML)
    key = tmp_path / "k.pem"
    with serve_process(backend, key, "--policy", str(policy_file)) as served:
        trust = load_or_create_signing_key(key)[0].trust_key if trusting else None
        agent = TrustingAgent(backend, trust, [{"amount": 20_000, "to": "bolt"}])
        try:
            agent.go[0].set()
            await await_until(lambda: backend.open().approvals(), what="the request")
            shown = await _cli(backend, "show", "call-0", url=served.url, token=token["dee"])
            assert shown.returncode == 0, shown.stderr
            assert "approvers user:ana,user:bo" in shown.stdout and "quorum 2" in shown.stdout
            assert "as the server's policy says" in shown.stdout and "user:dee" not in shown.stdout
            first = await _cli(backend, "approve", "call-0", url=served.url, token=token["ana"])
            assert first.returncode == 0 and "1 of 2: ana" in first.stdout, first.stdout + first.stderr
            assert agent.ran == []
            second = await _cli(backend, "approve", "call-0", url=served.url, token=token["bo"])
            assert second.returncode == 0, second.stderr
            await eventually(lambda: _done(agent, 1), "the agent's call", limit_s=30)
            assert agent.ran == [{"amount": 20_000, "to": "bolt"}]
        finally:
            await agent.close()


def _votes_toml(reject: str) -> str:
    """One rule: two of ana, ben and cid must approve; ``reject`` says whether one rejection ends the request."""
    return (
        '[[rule]]\nname = "votes"\ntool = "transfer_funds"\naction = "ask"\n'
        f'approvers = ["user:ana", "user:ben", "user:cid"]\nquorum = 2\nreject = "{reject}"\n'
    )


@contextlib.asynccontextmanager
async def _votes(
    backend: Backend, tmp_path: Path, *, server: str, agent: str
) -> AsyncIterator[tuple[Server, TrustingAgent]]:
    """The server's rule says ``reject = server``, the trusting agent's own file ``reject = agent``."""
    async with authority_server(backend, tmp_path) as (srv, api):
        api.policy_authority.policy = parse_policy(_votes_toml(server), source="server.toml")
        for name in ("ben", "cid"):
            srv.tokens[name] = add_user(srv.store, name, "approver").token
        own = parse_policy(_votes_toml(agent), source="agent.toml")
        trusting = TrustingAgent(backend, srv.signer.trust_key, [{"amount": 7, "to": "bolt"}], policy=own)
        try:
            trusting.go[0].set()
            await srv.pending("call-0")
            yield srv, trusting
        finally:
            await trusting.close()


async def test_the_servers_reject_counts_is_the_one_a_trusting_agent_counts_by(
    backend: Backend, tmp_path: Path
) -> None:
    """The server's rule says a rejection is one vote; the agent's file says it ends the request. Ben rejects
    (counted, still pending), ana and cid approve: the call runs once, decided by ana and cid."""
    async with _votes(backend, tmp_path, server="counts", agent="ends") as (srv, agent):
        ben = await srv.post("/api/approvals/call-0/reject", {"reason": "too much"}, user="ben")
        assert ben.status_code == 200 and ben.json()["counted"] is True, ben.text
        assert agent.results == [] and (await srv.pending("call-0"))["state"] == "pending"
        ana = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
        assert ana.status_code == 200 and ana.json()["counted"] is True, ana.text
        cid = await srv.post("/api/approvals/call-0/approve", {}, user="cid")
        assert cid.status_code == 200, cid.text
        await eventually(lambda: _done(agent, 1), "the agent's call")
        assert agent.ran == [{"amount": 7, "to": "bolt"}] and agent.results[0].status == "ran"
        assert agent.sink.of("decision_refused") == [] and agent.sink.of("approval_rejected") == []
        [granted] = agent.sink.of("approval_granted")
        assert granted.approval_granted.decided_by == "ana, cid"


async def test_the_servers_reject_ends_is_the_one_a_trusting_agent_counts_by(backend: Backend, tmp_path: Path) -> None:
    """The reverse: the server's rule says a rejection ends the request, the agent's file says it counts. Ben's
    reject ends it at the agent: the call is never made and a later approval is refused."""
    async with _votes(backend, tmp_path, server="ends", agent="counts") as (srv, agent):
        ben = await srv.post("/api/approvals/call-0/reject", {"reason": "too much"}, user="ben")
        assert ben.status_code == 200 and not ben.json().get("counted"), ben.text
        await eventually(lambda: _done(agent, 1), "the agent's call")
        assert agent.ran == [] and agent.results[0].status != "ran"
        [rejected] = agent.sink.of("approval_rejected")
        assert rejected.approval_rejected.decided_by == "ben"
        late = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
        assert late.status_code == 409, late.text
        assert agent.ran == []


def test_a_votes_signature_covers_the_reject_mode_it_states(tmp_path: Path) -> None:
    """A writer who strips "counts" from a signed reject (or adds it to one signed without) makes the agent refuse
    it; a vote of the default mode signs the same bytes as before the field existed."""
    signer, _ = load_or_create_signing_key(tmp_path / "k.pem")
    fields: dict[str, Any] = {
        "target_id": "c1",
        "run_id": "r1",
        "decision": "reject",
        "edited_args_json": "",
        "args_digest": "sha256:a",
        "decided_by": "ben",
        "detail": "no",
        "channel": "web",
        "request_id": "q1",
        "request_digest": "sha256:q",
        "quorum": 2,
    }
    default = SignedDecision(**fields)
    assert b"quorum_reject" not in decision_bytes(default, key_id=signer.key_id, signed_at_ms=1)
    assert b"quorum_reject" in decision_bytes(
        SignedDecision(**fields, quorum_reject="counts"), key_id=signer.key_id, signed_at_ms=1
    )

    def payload(signed: str, sent: str | None) -> dict[str, Any]:
        sig = signer.sign(SignedDecision(**fields, quorum_reject=signed))
        out = {"target_id": "c1", "decided_by": "ben", "detail": "no", "args_digest": "sha256:a", "quorum": 2}
        return {**out, "signature": sig} | ({"quorum_reject": sent} if sent is not None else {})

    def check(body: dict[str, Any]) -> str | None:
        binding = {"run_id": "r1", "request_id": "q1", "request_digest": "sha256:q"}
        return verify_decision(signer.trust_key, body, approved=False, **binding)

    assert check(payload("counts", "counts")) is None and check(payload("", None)) is None
    for altered in (payload("counts", None), payload("", "counts"), payload("counts", "ends")):
        problem = check(altered)
        assert problem is not None and "does not match what it claims" in problem and "reject mode" in problem
