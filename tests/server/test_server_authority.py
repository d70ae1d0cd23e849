"""With ``goldfive serve --policy`` the server is the authority: it judges each tool call itself (tool name and
arguments) by its own file, whatever rule the agent's request names; that rule is the one the API, ``goldfive show``
and the inbox list (not the fields the agent wrote, the disagreement shown), its quorum is the one a trusting agent
counts to (each vote is signed with it), and its ``expires`` ends the request at its time (the run records
approval_timed_out and the HUMAN_INTERVENTION_REQUIRED drift; later decisions get 409). A deny rule lets nobody
approve; an allow rule or no rule leaves the request's own fields; a call it cannot judge is never decided. The
agents' own files here say otherwise."""

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
from server_support import (
    ORIGIN,
    Server,
    eventually,
    goldfive,
    serve_process,
    start_task_agent,
    start_tool_agent,
)
from store_support import REPO, Backend, await_until

from goldfive_core import AgentTools, ControlAck, ControlKind, ControlMessage, InMemorySink, Task, wrap
from goldfive_core._util import args_digest, canonical_json, now_ms
from goldfive_core.pb.v1 import events_pb2, types_pb2
from goldfive_core.policy import parse_policy
from goldfive_core.server import ServerConfig, create_app
from goldfive_core.server.expiry import Expirer
from goldfive_core.signing import (
    TRUST_KEY_ENV,
    SignedDecision,
    check_decision,
    decision_bytes,
    load_or_create_signing_key,
)
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
        self,
        backend: Backend,
        trust: Any,
        calls: list[Mapping[str, Any]],
        *,
        policy: Any = AGENT_POLICY,
        tool: str = "transfer_funds",
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
                        tool_name=tool,
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


@pytest.mark.parametrize(
    ("trusting", "named"), [(False, "large transfers"), (True, "large transfers"), (True, "quick ones")]
)
async def test_goldfive_serve_policy_is_what_goldfive_show_url_lists_and_what_the_run_counts_to(
    sqlite_backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusting: bool, named: str
) -> None:
    """A real ``goldfive serve --policy``: ``goldfive show --url`` lists the server's approvers and quorum, and the
    rule the agent's request named when that is another one; the agent (with or without ``GOLDFIVE_TRUST_KEY``)
    counts the server's two approvals before its call runs, whichever rule its own file picked for the call."""
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
        if trusting:  # the agent applies only decisions the server's key signed (read from the environment)
            monkeypatch.setenv(TRUST_KEY_ENV, load_or_create_signing_key(key)[0].trust_key.text())
        own = AGENT_POLICY if named == "large transfers" else QUICK_ONLY
        agent = TrustingAgent(backend, None, [{"amount": 20_000, "to": "bolt"}], policy=own)
        try:
            assert (agent.channel.trust_key is not None) is trusting
            agent.go[0].set()
            await await_until(lambda: backend.open().approvals(), what="the request")
            assert backend.open().approvals()[0].metadata["policy_rule"] == named
            shown = await _cli(backend, "show", "call-0", url=served.url, token=token["dee"])
            assert shown.returncode == 0, shown.stderr
            assert "rule 'large transfers' (ask)" in shown.stdout, shown.stdout
            assert "approvers user:ana,user:bo" in shown.stdout and "quorum 2" in shown.stdout
            assert "as the server's policy says" in shown.stdout and "user:dee" not in shown.stdout
            if named == "quick ones":
                assert "the request named 'quick ones'" in shown.stdout, shown.stdout
                assert "the server's rule 'large transfers' governs this call" in shown.stdout, shown.stdout
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


# -- the server judges the call itself: the rule a request names is the agent's word, never the server's choice --------
QUICK_ONLY = parse_policy(
    '[[rule]]\nname = "quick ones"\ntool = "transfer_funds"\naction = "ask"\napprovers = ["user:ana"]\n',
    source="agent.toml",
)
"""An agent's file with only the weaker rule: its request for a 20,000 transfer names "quick ones" (one approver)."""
CRYPTO_TOML = SERVER_TOML + (
    '[[rule]]\nname = "no crypto"\ntool = "buy_crypto"\naction = "deny"\nreason = "never"\n\n'
    '[[rule]]\nname = "small buys"\ntool = "buy_coffee"\naction = "allow"\n'
)
"""The server's file with a deny rule and an allow rule besides the transfers."""


def _inbox_payload(srv: Server, target: str, decided_by: str) -> dict[str, Any]:
    """The APPROVE the server posted for ``decided_by`` on ``target`` as the database holds it (a writer copies it)."""
    store = srv.store
    rows = store.db.execute(  # type: ignore[attr-defined]
        store.db.conn(),  # type: ignore[attr-defined]
        "SELECT payload_json FROM gf_inbox WHERE kind = 'APPROVE'",
        (),
    ).fetchall()
    payloads = [json.loads(r[0]) for r in rows]
    return next(p for p in payloads if p["target_id"] == target and p["decided_by"] == decided_by)


async def test_a_request_naming_a_weaker_rule_still_needs_the_quorum_of_the_servers_own_rule_for_the_call(
    backend: Backend, tmp_path: Path
) -> None:
    """The agent's file names "quick ones" (one approver) for a 20,000 transfer; the server's own evaluation of
    the call (tool and arguments) gives "large transfers" (ana and bo, two of them). That rule is shown, the
    disagreement is visible, each vote is signed with quorum 2, and the trusting agent runs the call only after
    both: a copy of ana's vote with its quorum stripped (a complete approval under "quick ones") is refused."""
    async with authority_server(backend, tmp_path) as (srv, _api):
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"amount": 20_000, "to": "bolt"}], policy=QUICK_ONLY)
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert card["metadata"]["policy_rule"] == "quick ones"  # what the agent wrote
            policy = card["policy"]
            assert (policy["rule"], policy["source"], policy["action"], policy["quorum"]) == (
                "large transfers",
                "server",
                "ask",
                2,
            ), policy
            assert policy["approvers"] == ["user:ana", "user:bo"] and policy["expires"] == "1h"
            assert (policy["requested_rule"], policy["disagrees"]) == ("quick ones", True)
            assert "'quick ones'" in policy["note"] and "'large transfers'" in policy["note"], policy["note"]
            assert card["rule"] == "large transfers"
            assert card["expires_at_ms"] == card["requested_at_ms"] + 3_600_000  # the server rule's, not 5m
            detail = (await srv.get("/api/approvals/call-0", user="vic")).json()
            assert detail["policy"] == policy

            first = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
            assert first.status_code == 200, first.text
            assert first.json()["counted"] is True and first.json()["quorum_progress"] == "1 of 2: ana", first.text
            assert agent.ran == []
            vote = _inbox_payload(srv, "call-0", "ana")
            assert vote["quorum"] == 2  # signed into the vote
            stripped = {k: v for k, v in vote.items() if k != "quorum"}
            msg = ControlMessage(ControlKind.APPROVE, stripped)
            await asyncio.to_thread(srv.store.post_control, msg, run_id=vote["run_id"])
            ack = await eventually(lambda: _ack(srv, msg.id), "the agent's ack of the stripped vote")
            assert not ack.ok and "does not match what it claims" in ack.detail, ack.detail
            assert agent.ran == [] and (await srv.pending("call-0"))["quorum_progress"] == "1 of 2: ana"

            second = await srv.post("/api/approvals/call-0/approve", {}, user="bo")
            assert second.status_code == 200 and "(2 of 2: ana, bo)" in second.json()["detail"], second.text
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [{"amount": 20_000, "to": "bolt"}] and agent.results[0].status == "ran"
            [granted] = agent.sink.of("approval_granted")
            assert granted.approval_granted.decided_by == "ana, bo"
        finally:
            await agent.close()


async def _ack(srv: Server, control_id: str) -> ControlAck | None:
    ack: ControlAck | None = await asyncio.to_thread(srv.store.get_ack, control_id)
    return ack


async def test_a_request_naming_the_servers_deny_rule_as_an_ask_cannot_be_approved_by_anyone(
    backend: Backend, tmp_path: Path
) -> None:
    """The agent's file turns the server's deny rule "no crypto" into an ask that mallory may approve. The server
    judges the call by its own file: denied. Mallory is refused (and so is ana), the card says why, and the call
    can only be rejected."""
    own = parse_policy(
        '[[rule]]\nname = "no crypto"\ntool = "buy_crypto"\naction = "ask"\napprovers = ["user:mallory"]\n',
        source="agent.toml",
    )
    async with authority_server(backend, tmp_path) as (srv, api):
        api.policy_authority.policy = parse_policy(CRYPTO_TOML, source="server.toml")
        srv.tokens["mallory"] = add_user(srv.store, "mallory", "approver").token
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"coin": "x"}], policy=own, tool="buy_crypto")
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert card["metadata"]["policy_approvers"] == "user:mallory"  # what the agent wrote
            policy = card["policy"]
            assert (policy["rule"], policy["source"], policy["action"]) == ("no crypto", "server", "deny"), policy
            assert policy["approvers"] == [] and policy["disagrees"] is True
            assert policy["decisions"] == ["reject"] and policy["grants"] == []  # the inbox offers only Reject
            assert "denies this call" in policy["error"] and "can only be rejected" in policy["note"], policy
            for who in ("mallory", "ana"):
                refused = await srv.post("/api/approvals/call-0/approve", {}, user=who)
                assert refused.status_code in (403, 409), refused.text
                assert "denies this call (rule 'no crypto')" in refused.json()["error"], refused.text
            assert agent.ran == [] and (await srv.pending("call-0"))["state"] == "pending"
            rejected = await srv.post("/api/approvals/call-0/reject", {"reason": "no"}, user="ana")
            assert rejected.status_code == 200, rejected.text
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [] and agent.results[0].status == "reject"
        finally:
            await agent.close()


async def test_a_call_the_servers_rule_allows_is_still_decided_by_the_requests_approvers_and_says_so(
    backend: Backend, tmp_path: Path
) -> None:
    """The server's rule allows the call without a person; the agent's own file asks ana. Decisions are still
    taken (the agent waits for one) by the request's own approvers, which can only add to what the server's rule
    asks (nobody): dee is refused, ana's approval runs it. The card says the server's rule allows it."""
    own = parse_policy(
        '[[rule]]\nname = "coffee"\ntool = "buy_coffee"\naction = "ask"\napprovers = ["user:ana"]\n',
        source="agent.toml",
    )
    async with authority_server(backend, tmp_path) as (srv, api):
        api.policy_authority.policy = parse_policy(CRYPTO_TOML, source="server.toml")
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"cups": 2}], policy=own, tool="buy_coffee")
        try:
            agent.go[0].set()
            policy = (await srv.pending("call-0"))["policy"]
            assert (policy["rule"], policy["source"], policy["action"]) == ("small buys", "server", "allow"), policy
            assert policy["approvers"] == ["user:ana"] and policy["requested_rule"] == "coffee"
            assert "allows this call without a person" in policy["note"], policy["note"]
            dee = await srv.post("/api/approvals/call-0/approve", {}, user="dee")
            assert dee.status_code == 403 and "not among the approvers (user:ana)" in dee.text, dee.text
            ana = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
            assert ana.status_code == 200, ana.text
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [{"cups": 2}]
        finally:
            await agent.close()


async def test_a_call_the_servers_policy_has_no_rule_for_keeps_the_requests_own_rule(
    backend: Backend, tmp_path: Path
) -> None:
    """The server's file says nothing about send_gift: the request's own rule (dee) decides, shown as the request's."""
    own = parse_policy(
        '[[rule]]\nname = "gifts"\ntool = "send_gift"\naction = "ask"\napprovers = ["user:dee"]\n', source="agent.toml"
    )
    async with authority_server(backend, tmp_path) as (srv, _api):
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"to": "bo"}], policy=own, tool="send_gift")
        try:
            agent.go[0].set()
            policy = (await srv.pending("call-0"))["policy"]
            assert (policy["rule"], policy["source"], policy["approvers"]) == ("gifts", "request", ["user:dee"])
            assert policy["disagrees"] is False and "no rule for this call" in policy["note"], policy
            ana = await srv.post("/api/approvals/call-0/approve", {}, user="ana")
            assert ana.status_code == 403, ana.text
            dee = await srv.post("/api/approvals/call-0/approve", {}, user="dee")
            assert dee.status_code == 200, dee.text
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [{"to": "bo"}]
        finally:
            await agent.close()


async def test_the_servers_expires_is_the_one_of_its_own_rule_for_the_call_not_the_one_the_request_names(
    backend: Backend, tmp_path: Path
) -> None:
    """The agent's file names "large transfers" (no expiry) for a 5 EUR transfer; the server's evaluation gives
    "quick ones", which expires after 5 minutes: at that time the run is told, and the call is not made."""
    own = parse_policy(
        '[[rule]]\nname = "large transfers"\ntool = "transfer_funds"\naction = "ask"\napprovers = ["user:ana"]\n',
        source="agent.toml",
    )
    async with authority_server(backend, tmp_path) as (srv, api):
        agent = TrustingAgent(backend, srv.signer.trust_key, [{"amount": 5, "to": "acme"}], policy=own)
        try:
            agent.go[0].set()
            card = await srv.pending("call-0")
            assert (card["policy"]["rule"], card["policy"]["requested_rule"]) == ("quick ones", "large transfers")
            assert card["expires_at_ms"] == card["requested_at_ms"] + 300_000
            later = Expirer(srv.store, api.policy_authority, srv.signer, clock=lambda: now_ms() + 300_000)
            assert await asyncio.to_thread(later.sweep) == 1
            await eventually(lambda: _done(agent, 1), "the agent's call")
            assert agent.ran == [] and agent.results[0].status != "ran"
            [timed_out] = agent.sink.of("approval_timed_out")
            assert "expired: rule 'quick ones' allows 5m for a decision" in timed_out.approval_timed_out.detail
        finally:
            await agent.close()


def _asked_event(run_id: str, target: str, *, kind: str, meta: Mapping[str, str], digest: str) -> events_pb2.Event:
    """A request as a run (or a database writer) put it in the store, asked now."""
    event = events_pb2.Event(event_id=f"ev-{run_id}-{target}", run_id=run_id, sequence=1)
    event.emitted_at.GetCurrentTime()
    event.approval_requested.CopyFrom(
        events_pb2.ApprovalRequested(
            target_id=target,
            kind=kind,
            prompt="allow?",
            task_id=target if kind == "task" else "",
            metadata=dict(meta),
            args_digest=digest,
            timeout_ms=600_000,
            request_id=f"req-{target}",
        )
    )
    return event


NAMES_QUICK = {"policy_rule": "quick ones", "policy_action": "ask", "policy_approvers": "user:mallory"}
"""What an agent writes to pick the server's weaker rule, with itself (mallory) as the approver."""


@pytest.mark.parametrize(
    ("case", "kind", "meta", "digest", "refusal"),
    [
        (
            "arguments that are not JSON",
            "tool",
            {"tool_name": "transfer_funds", "args_json": "{amount: 20000}"},
            args_digest("transfer_funds", {"amount": 20_000}),
            "could not judge this call",
        ),
        (
            "arguments that are not the ones the digest covers",
            "tool",
            {"tool_name": "transfer_funds", "args_json": canonical_json({"amount": 5})},
            args_digest("transfer_funds", {"amount": 20_000}),
            "could not judge this call",
        ),
        (
            "no digest",
            "tool",
            {"tool_name": "transfer_funds", "args_json": canonical_json({"amount": 5})},
            "",
            "could not judge this call",
        ),
        ("a task naming a rule", "task", {}, "", "judges tool calls only"),
    ],
)
async def test_a_request_the_server_cannot_judge_is_never_decided_by_the_rule_it_names(
    backend: Backend, tmp_path: Path, case: str, kind: str, meta: Mapping[str, str], digest: str, refusal: str
) -> None:
    """Fail closed: with a policy, the server decides only requests it could judge; the named rule and the
    approvers the request wrote (mallory) never stand in for its own evaluation. Nothing is recorded."""
    async with authority_server(backend, tmp_path) as (srv, _api):
        srv.tokens["mallory"] = add_user(srv.store, "mallory", "approver").token
        event = _asked_event("run-gone", "c1", kind=kind, meta={**meta, **NAMES_QUICK}, digest=digest)
        await asyncio.to_thread(srv.store.append_events, [event], pid=0, host="elsewhere")
        card = await srv.pending("c1", state="open")
        assert card["policy"]["source"] == "server" and refusal in card["policy"]["error"], card["policy"]
        assert card["policy"]["decisions"] == []  # the inbox offers no decision at all
        for who in ("mallory", "ana"):
            resp = await srv.post("/api/approvals/c1/approve", {}, user=who)
            assert resp.status_code == 403 and refusal in resp.json()["error"], (case, resp.text)
        (row,) = srv.store.approvals_for("c1")
        assert row.open and row.decision == ""


async def test_a_task_approval_is_decided_by_its_own_fields_under_a_server_policy(
    backend: Backend, tmp_path: Path
) -> None:
    """A task's approval (report_awaiting_approval) holds no tool call: the server's rules (about tool calls) say
    nothing of it, and any user who may decide answers it, as without --policy."""
    async with authority_server(backend, tmp_path) as (srv, _api):
        agent = start_task_agent(backend, "t-pay", trust=srv.signer.trust_key)
        try:
            card = await srv.pending("t-pay")
            assert card["policy"] is None and card["kind"] == "task"
            viewer = await srv.post("/api/approvals/t-pay/approve", {}, user="vic")
            assert viewer.status_code == 403, viewer.text
            dee = await srv.post("/api/approvals/t-pay/approve", {}, user="dee")
            assert dee.status_code == 200, dee.text
            assert (await agent.result()).output["decision"] == "approve"
        finally:
            await agent.close()
