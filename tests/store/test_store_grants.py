"""Standing grants kept in the store: made by an approval through decide(), listed, revoked from outside a
live run (the next matching call asks again), audited, and still applying after the agent's process is gone
when their scope says so (session, a duration) — never a run grant in another run. Real ADK runs."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from store_support import Backend, await_until

pytest.importorskip("google.adk")

from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.genai import types

from goldfive_adk import GoldfivePlugin
from goldfive_core import SteeringConfig
from goldfive_core.approvals import Principal
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.policy import parse_policy
from goldfive_core.signing import SignedDecision, check_decision, load_or_create_signing_key
from goldfive_core.store import DecideVerdict, Store, StoreChannel, decide
from goldfive_core.store.grants import DECIDERS_STREAM, GrantNotFound, grant_row, grant_rows, revoke_grant
from goldfive_core.testing import Call, ScriptedModel

POLICY = parse_policy(
    """
[[rule]]
name = "payments to acme"
tool = "transfer"
when = "args.to == 'acme'"
action = "ask"
grants = ["run", "session", "1h"]
"""
)
ANA = Principal(name="ana", channel="cli")


class Agent:
    """One agent process: a StoreChannel on the store, a plugin with the policy, an ADK runner."""

    def __init__(
        self, backend: Backend, calls: list[dict[str, Any]], *, on_body: Any = None, trust: Any = None
    ) -> None:
        self.ran: list[dict[str, Any]] = []

        def transfer(amount: int, to: str) -> dict[str, Any]:
            """Move money."""
            self.ran.append({"amount": amount, "to": to})
            if on_body is not None:
                on_body(self, amount)
            return {"moved": amount}

        self.channel = StoreChannel(backend.open(), trust_key=trust)
        config = SteeringConfig(approval_default_timeout_ms=60_000)
        self.plugin = GoldfivePlugin(control=self.channel, sinks=[self.channel.sink], config=config, policy=POLICY)
        script: list[Any] = [Call("transfer", c) for c in calls] + ["done"]
        agent = LlmAgent(name="payer", model=ScriptedModel(script), tools=[FunctionTool(transfer)])
        self.app = App(name="grants_app", root_agent=agent, plugins=[self.plugin])
        self.runner = Runner(app=self.app, session_service=InMemorySessionService())

    async def run(self, session_id: str) -> None:
        await self.runner.session_service.create_session(app_name=self.app.name, user_id="u", session_id=session_id)
        message = types.Content(role="user", parts=[types.Part(text="pay")])
        async for _ in self.runner.run_async(user_id="u", session_id=session_id, new_message=message):
            pass

    async def close(self) -> None:
        await asyncio.to_thread(self.channel.sink.flush)
        await self.channel.aclose()


async def _pending(store: Store, count: int) -> list[Any]:
    """The open requests, once the store holds ``count`` requests in all."""
    await await_until(lambda: len(store.approvals(open_only=False)) >= count, what=f"request #{count} in the store")
    return [r for r in store.approvals() if r.open]


async def test_a_grant_is_a_record_revoked_from_outside_a_live_run_and_the_next_call_asks(backend: Backend) -> None:
    store = backend.open()

    def revoke_after_the_second(agent: Agent, amount: int) -> None:
        if amount == 20:  # ran on the grant; a person revokes it now, while the run goes on
            agent.channel.sink.flush()
            [row] = grant_rows(backend.open(), active_only=True)
            revoke_grant(backend.open(), row.grant_id, by="bo", reason="enough for today", channel="cli")

    calls = [{"amount": 10, "to": "acme"}, {"amount": 20, "to": "acme"}, {"amount": 30, "to": "acme"}]
    agent = Agent(backend, calls, on_body=revoke_after_the_second)
    run = asyncio.create_task(agent.run("s-1"))
    [first] = await _pending(store, 1)
    result = await asyncio.to_thread(decide, store, first.target_id, approve=True, principal=ANA, grant="run")
    assert result.verdict is DecideVerdict.APPLIED, result.detail
    assert "allow transfer calls matching rule 'payments to acme' for the rest of run" in result.detail

    # The third call asks again: the grant was revoked while the run was live.
    await await_until(lambda: len(store.approvals(open_only=False)) == 2, what="the third call's request")
    [third] = [r for r in store.approvals() if r.open]
    assert third.args_json == '{"amount":30,"to":"acme"}'
    assert agent.ran == [{"amount": 10, "to": "acme"}, {"amount": 20, "to": "acme"}]
    rejected = await asyncio.to_thread(decide, store, third.target_id, approve=False, principal=ANA, reason="no")
    assert rejected.ok
    await run
    await agent.close()
    assert [r["amount"] for r in agent.ran] == [10, 20]

    # The record: who, rule, scope, when; revoked by bo; the call it let through names it; all audited.
    [row] = grant_rows(store)
    assert (row.rule, row.tool, row.granted_by, row.scope, row.target_id) == (
        "payments to acme",
        "transfer",
        "ana",
        "run",
        first.target_id,
    )
    assert row.run_id == first.run_id and row.expires_at_ms == 0 and row.channel == "cli"
    assert row.state(store.clock_ms()) == "revoked" and (row.revoked_by, row.revoke_reason) == (
        "bo",
        "enough for today",
    )
    kinds = [(a.kind, a.event()) for a in store.audit_rows(run_id=first.run_id)]
    [applied] = [e.policy_applied for k, e in kinds if k == "policy_applied"]
    assert (applied.grant_id, applied.args_json) == (row.grant_id, '{"amount":20,"to":"acme"}')
    assert [e.grant_created.grant_id for k, e in kinds if k == "grant_created"] == [row.grant_id]
    [revoked] = [a.event().grant_revoked for a in store.audit_rows(run_id=DECIDERS_STREAM)]
    assert (revoked.grant_id, revoked.revoked_by, revoked.reason) == (row.grant_id, "bo", "enough for today")
    assert store.verify_audit().ok

    with pytest.raises(GrantNotFound, match="was already revoked by bo"):
        revoke_grant(store, row.grant_id, by="cy")
    with pytest.raises(GrantNotFound, match="unknown grant 'grant-nope'"):
        revoke_grant(store, "grant-nope", by="cy")


@pytest.mark.parametrize(
    ("scope", "same_session", "asks_again"),
    [("session", True, False), ("1h", False, False), ("run", True, True), ("session", False, True)],
)
async def test_a_grant_outlives_the_agent_process_as_far_as_its_scope_says(
    backend: Backend, scope: str, same_session: bool, asks_again: bool
) -> None:
    store = backend.open()
    first_agent = Agent(backend, [{"amount": 10, "to": "acme"}])
    run = asyncio.create_task(first_agent.run("s-1"))
    [first] = await _pending(store, 1)
    result = await asyncio.to_thread(decide, store, first.target_id, approve=True, principal=ANA, grant=scope)
    assert result.verdict is DecideVerdict.APPLIED, result.detail
    await run
    await first_agent.close()
    [row] = grant_rows(store)
    assert row.scope == ("time" if scope == "1h" else scope)
    # A run grant ends with its run (the list of active grants leaves it out); the others stay active.
    assert row.state(store.clock_ms()) == ("ended" if scope == "run" else "active")
    assert [g.grant_id for g in grant_rows(store, active_only=True)] == ([] if scope == "run" else [row.grant_id])

    # Another process (the first one is gone), the same or another ADK session.
    later = Agent(backend, [{"amount": 40, "to": "acme"}])
    run = asyncio.create_task(later.run("s-1" if same_session else "s-2"))
    if asks_again:
        await _pending(store, 2)
        assert later.ran == []
        [second] = [r for r in store.approvals() if r.open]
        assert (await asyncio.to_thread(decide, store, second.target_id, approve=False, principal=ANA)).ok
        await run
        assert later.ran == []
    else:
        await run
        assert later.ran == [{"amount": 40, "to": "acme"}]
        assert len(store.approvals(open_only=False)) == 1  # nobody was asked
    await later.close()
    applied = [a.event().policy_applied for a in store.audit_rows() if a.kind == "policy_applied"]
    assert [p.grant_id for p in applied] == ([] if asks_again else [row.grant_id])


async def test_a_grant_asked_for_with_an_edit_a_reject_or_a_run_that_is_gone_is_refused(backend: Backend) -> None:
    store = backend.open()
    agent = Agent(backend, [{"amount": 10, "to": "acme"}])
    run = asyncio.create_task(agent.run("s-1"))
    [first] = await _pending(store, 1)
    target = first.target_id
    edited = decide(store, target, approve=True, principal=ANA, grant="run", edited_args={"amount": 1, "to": "acme"})
    assert not edited.ok and "an edited approval never creates a grant" in edited.detail
    rejected = decide(store, target, approve=False, principal=ANA, grant="run")
    assert not rejected.ok and "only an approval can allow matching calls" in rejected.detail
    unoffered = await asyncio.to_thread(decide, store, target, approve=True, principal=ANA, grant="2h")
    assert not unoffered.ok and "does not offer a grant for 2h" in unoffered.detail
    assert grant_rows(store) == [] and first.open and agent.ran == []
    assert (await asyncio.to_thread(decide, store, target, approve=True, principal=ANA)).ok
    await run
    await agent.close()
    assert grant_rows(store) == [] and grant_row(store, "grant-x") is None


@pytest.mark.parametrize("trusting", [False, True])
async def test_an_agent_that_applies_only_signed_decisions_never_applies_a_grant_row_from_the_store(
    backend: Backend, tmp_path: Path, trusting: bool
) -> None:
    """A grant row is not signed: a database writer can write one. An agent given GOLDFIVE_TRUST_KEY ignores it."""
    store = backend.open()
    forged = events_pb2.GrantCreated(
        grant_id="grant-forged",
        rule="payments to acme",
        tool="transfer",
        granted_by="cfo",
        scope="time",
        created_at_ms=store.clock_ms(),
        expires_at_ms=store.clock_ms() + 3_600_000,
        description="forged",
    )
    event = events_pb2.Event(event_id="ev-forged", run_id="run-writer", sequence=0)
    event.grant_created.CopyFrom(forged)
    store.append_events([event], pid=1, host="h")
    signer, _ = load_or_create_signing_key(tmp_path / "k.pem")
    agent = Agent(backend, [{"amount": 10, "to": "acme"}], trust=signer.trust_key if trusting else None)
    run = asyncio.create_task(agent.run("s-1"))
    if trusting:
        [asked] = await _pending(store, 1)  # a person is asked; the forged grant let nothing through
        assert agent.ran == []
        result = await asyncio.to_thread(
            decide, store, asked.target_id, approve=False, principal=ANA, reason="no", signer=signer
        )
        assert result.ok, result.detail
        await run
        assert agent.ran == []
    else:
        await run  # without a trusted key, any row of the store is believed (development mode)
        assert agent.ran == [{"amount": 10, "to": "acme"}]
    await agent.close()


def test_a_decisions_signature_covers_the_grant_it_asks_for(tmp_path: Path) -> None:
    """A grant added to (or changed in) a signed approval on its way to the agent makes the signature fail."""
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
        grant="run",
    )
    signature = signer.sign(facts)

    def check(grant: str, sig: object = signature) -> str | None:
        return check_decision(
            signer.trust_key,
            target_id="c1",
            run_id="r1",
            approved=True,
            edited_args="",
            args_digest="sha256:a",
            decided_by="ana",
            detail="",
            signature=sig,
            grant=grant,
        )

    assert check("run") is None
    assert "does not match what it claims" in (check("1h") or "")
    assert "does not match what it claims" in (check("") or "")
    plain = signer.sign(dataclasses.replace(facts, grant=""))
    assert check("", plain) is None  # a decision without a grant signs what it signed before grants existed
    assert "does not match what it claims" in (check("session", plain) or "")


async def test_when_the_store_cannot_say_which_grants_stand_a_grant_made_in_this_process_applies_no_more(
    sqlite_backend: Backend,
) -> None:
    """ana's run grant lets the second call through; then the store's grants cannot be read (the table is gone):
    the third call asks a person although this process still holds the grant (a revocation there may be
    unseen), fail closed."""
    import sqlite3

    backend = sqlite_backend
    store = backend.open()

    def break_the_grants_after_the_second(agent: Agent, amount: int) -> None:
        if amount == 20:
            agent.channel.sink.flush()
            with contextlib.closing(sqlite3.connect(backend.location)) as db:
                db.execute("ALTER TABLE gf_grants RENAME TO gf_grants_gone")
                db.commit()

    calls = [{"amount": 10, "to": "acme"}, {"amount": 20, "to": "acme"}, {"amount": 30, "to": "acme"}]
    agent = Agent(backend, calls, on_body=break_the_grants_after_the_second)
    run = asyncio.create_task(agent.run("s-1"))
    [first] = await _pending(store, 1)
    result = await asyncio.to_thread(decide, store, first.target_id, approve=True, principal=ANA, grant="run")
    assert result.verdict is DecideVerdict.APPLIED, result.detail
    await await_until(lambda: len(store.approvals(open_only=False)) == 2, what="the third call's request")
    [third] = [r for r in store.approvals() if r.open]
    assert third.args_json == '{"amount":30,"to":"acme"}'
    assert [c["amount"] for c in agent.ran] == [10, 20]
    rejected = await asyncio.to_thread(decide, store, third.target_id, approve=False, principal=ANA, reason="no")
    assert rejected.ok, rejected.detail
    await run
    await agent.close()
    assert [c["amount"] for c in agent.ran] == [10, 20]
