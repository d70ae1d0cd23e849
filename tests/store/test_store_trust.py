"""An agent given the server's public key applies only decisions that key signed, whatever their kind.

Every decision kind is checked — approve, reject, an approval with edited arguments, a quorum vote —
and each signature is bound to the session's own run, not to the run a payload claims. The genuine
decisions go through ``decide(..., signer=)`` (what ``goldfive serve`` calls); the forged ones are
what a database writer without the key can post to the inbox or write into an approval row. Each
test pins a line of the mutation list in ``scripts/mutation.py``: it fails when that line is broken.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from store_support import Backend, await_until, make_event

from goldfive_core import AgentTools, ControlAck, ControlKind, ControlMessage, InMemorySink, Task, wrap
from goldfive_core._util import args_digest, canonical_json
from goldfive_core.approvals import ApprovalStatus, Principal
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.policy import Ask, GrantScope, Policy, Rule
from goldfive_core.signing import TRUST_KEY_ENV, DecisionSigner, SignedDecision, TrustKey, load_or_create_signing_key
from goldfive_core.store import ApprovalRow, DecideVerdict, Store, StoreChannel, decide, run_approved

TOOL = "transfer"
ARGS: dict[str, Any] = {"amount": 10, "to": "bob"}
ANA = Principal(name="ana", channel="web")
BO = Principal(name="bo", channel="web")
TWO_APPROVERS = Policy([Rule(name="two people", tool=TOOL, action=Ask(quorum=2))])
GRANTS = Policy([Rule(name="grantable", tool=TOOL, action=Ask(grants=(GrantScope.parse("run"),)))])


@pytest.fixture
def signer(tmp_path: Path) -> DecisionSigner:
    return load_or_create_signing_key(tmp_path / "signing.pem")[0]


class Agent:
    """A callable agent asking for ``transfer(ARGS)`` as ``target`` through a StoreChannel (trusting ``trust``)."""

    def __init__(
        self,
        backend: Backend,
        target: str,
        *,
        trust: TrustKey | None,
        policy: Policy | None = None,
        timeout_ms: int = 30_000,
    ) -> None:
        self.backend = backend
        self.target = target
        self.channel = StoreChannel(backend.open(), trust_key=trust, sweep_interval_s=0.05)
        self.events = InMemorySink()
        self.ran: list[dict[str, Any]] = []
        ledger_store = backend.open()

        async def body(call_args: Mapping[str, Any]) -> str:
            self.ran.append(dict(call_args))
            return "moved"

        async def agent(task: Task, tools: AgentTools) -> Any:
            outcome = await run_approved(
                tools.session,
                ledger_store,
                call_id=target,
                tool_name=TOOL,
                args=ARGS,
                body=body,
                timeout_ms=timeout_ms,
                trust=trust,
            )
            return outcome.status

        runner = wrap(agent, control=self.channel, sinks=[self.channel.sink, self.events], policy=policy)
        self.task = asyncio.create_task(runner.run())

    async def pending(self) -> ApprovalRow:
        store = self.backend.open()
        await await_until(lambda: [r for r in store.approvals_for(self.target) if r.open], what=f"{self.target} open")
        return next(r for r in store.approvals_for(self.target) if r.open)

    def row(self) -> ApprovalRow:
        return self.backend.open().approvals_for(self.target)[0]

    def refused(self) -> list[tuple[str, str]]:
        return [
            (e.decision_refused.decision, e.decision_refused.decided_by) for e in self.events.of("decision_refused")
        ]

    async def result(self) -> Any:
        return (await asyncio.wait_for(self.task, 20)).output

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.channel.aclose()


def facts(row: ApprovalRow, *, approve: bool = True, by: str = "ana", **changes: Any) -> SignedDecision:
    base = SignedDecision(
        target_id=row.target_id,
        run_id=row.run_id,
        decision="approve" if approve else "reject",
        edited_args_json="",
        args_digest="",
        decided_by=by,
        detail="",
        channel="web",
    )
    return dataclasses.replace(base, **changes)


async def post(backend: Backend, row: ApprovalRow, kind: ControlKind, **payload: Any) -> ControlAck:
    """What a database writer without the key can do: put a decision in the inbox, addressed to the run."""
    msg = ControlMessage(kind, {"target_id": row.target_id, "run_id": row.run_id, "channel": "web", **payload})
    return await asyncio.to_thread(StoreChannel(backend.open()).deliver, msg, timeout_s=10, run_id=row.run_id)


async def decide_signed(backend: Backend, agent: Agent, signer: DecisionSigner, **kw: Any) -> Any:
    kw.setdefault("principal", ANA)
    return await asyncio.to_thread(decide, backend.open(), agent.target, signer=signer, **kw)


def orphaned(store: Store, target: str) -> ApprovalRow:
    """``target`` asked for ``transfer(ARGS)`` in a run whose process is gone."""
    request = events_pb2.ApprovalRequested(
        target_id=target,
        kind="tool",
        prompt="transfer?",
        metadata={"tool_name": TOOL, "args_json": canonical_json(ARGS)},
        args_digest=args_digest(TOOL, ARGS),
        timeout_ms=60_000,
    )
    store.append_events([make_event("run-old", 1, request)], pid=0, host="elsewhere")
    return store.approvals_for(target)[0]


async def test_an_unsigned_or_forged_reject_is_refused_and_a_signed_one_applies(
    sqlite_backend: Backend, signer: DecisionSigner
) -> None:
    agent = Agent(sqlite_backend, "pay-r", trust=signer.trust_key)
    try:
        row = await agent.pending()
        unsigned = await post(sqlite_backend, row, ControlKind.REJECT, decided_by="mallory", detail="no")
        assert not unsigned.ok and "not signed" in unsigned.detail and "stays pending" in unsigned.detail
        # The signature of an approval does not pass on a rejection (nor the other way round).
        approval_sig = signer.sign(facts(row, approve=True, by="ana"))
        swapped = await post(sqlite_backend, row, ControlKind.REJECT, decided_by="ana", signature=approval_sig)
        assert not swapped.ok and "does not match" in swapped.detail
        assert agent.refused() == [("reject", "mallory"), ("reject", "ana")]
        assert agent.row().status is ApprovalStatus.PENDING and not agent.task.done()
        signed = await decide_signed(sqlite_backend, agent, signer, approve=False, reason="not today")
        assert signed.verdict is DecideVerdict.APPLIED, signed.detail
        assert await agent.result() == "reject" and agent.ran == []
        assert [e.approval_rejected.decided_by for e in agent.events.of("approval_rejected")] == ["ana"]
    finally:
        await agent.close()


async def test_the_signature_of_a_rejection_never_approves(sqlite_backend: Backend, signer: DecisionSigner) -> None:
    agent = Agent(sqlite_backend, "pay-a", trust=signer.trust_key)
    try:
        row = await agent.pending()
        reject_sig = signer.sign(facts(row, approve=False, by="ana"))
        forged = await post(sqlite_backend, row, ControlKind.APPROVE, decided_by="ana", signature=reject_sig)
        assert not forged.ok and "does not match" in forged.detail
        assert agent.ran == [] and agent.refused() == [("approve", "ana")]
        signed = await decide_signed(sqlite_backend, agent, signer, approve=True)
        assert signed.verdict is DecideVerdict.APPLIED, signed.detail
        assert await agent.result() == "ran" and agent.ran == [ARGS]
    finally:
        await agent.close()


async def test_a_signature_is_bound_to_the_sessions_run_not_the_run_the_payload_names(
    sqlite_backend: Backend, signer: DecisionSigner
) -> None:
    # A signed approval of this very request (its id and digest) but for another run (yesterday's run asked for
    # "pay-b" too), delivered to today's run with the payload still naming yesterday's: only the run differs, and
    # it must not verify here. The same forgery made for today's run applies: the run is what was refused.
    agent = Agent(sqlite_backend, "pay-b", trust=signer.trust_key)
    try:
        row = await agent.pending()
        assert row.request_id and row.request_digest
        bound = {"request_id": row.request_id, "request_digest": row.request_digest}
        elsewhere = signer.sign(facts(row, run_id="run-yesterday", **bound))
        ack = await post(
            sqlite_backend,
            row,
            ControlKind.APPROVE,
            decided_by="ana",
            signature=elsewhere,
            run_id="run-yesterday",
            request_id=row.request_id,
        )
        assert not ack.ok and "does not match" in ack.detail, ack.detail
        assert agent.ran == [] and agent.row().status is ApprovalStatus.PENDING
        assert agent.refused() == [("approve", "ana")]
        here = signer.sign(facts(row, **bound))
        ack = await post(
            sqlite_backend, row, ControlKind.APPROVE, decided_by="ana", signature=here, request_id=row.request_id
        )
        assert ack.ok, ack.detail
        assert await agent.result() == "ran" and agent.ran == [ARGS]
    finally:
        await agent.close()


async def test_edited_arguments_added_to_a_signed_plain_approval_are_refused(
    sqlite_backend: Backend, signer: DecisionSigner
) -> None:
    agent = Agent(sqlite_backend, "pay-e", trust=signer.trust_key)
    try:
        row = await agent.pending()
        plain = signer.sign(facts(row))
        forged = await post(
            sqlite_backend,
            row,
            ControlKind.APPROVE,
            decided_by="ana",
            signature=plain,
            edited_args={"amount": 1_000_000, "to": "mallory"},
        )
        assert not forged.ok and "does not match" in forged.detail and agent.ran == []
        edit = {"amount": 7, "to": "bob"}
        signed = await decide_signed(sqlite_backend, agent, signer, approve=True, edited_args=edit)
        assert signed.verdict is DecideVerdict.APPLIED, signed.detail
        assert await agent.result() == "ran" and agent.ran == [edit]
    finally:
        await agent.close()


async def test_a_grant_added_to_a_signed_one_off_approval_is_refused(
    sqlite_backend: Backend, signer: DecisionSigner
) -> None:
    agent = Agent(sqlite_backend, "pay-g", trust=signer.trust_key, policy=GRANTS)
    try:
        row = await agent.pending()
        once = signer.sign(facts(row, request_id=row.request_id, request_digest=row.request_digest))
        forged = await post(
            sqlite_backend,
            row,
            ControlKind.APPROVE,
            decided_by="ana",
            signature=once,
            request_id=row.request_id,
            grant="run",
            grant_rule="grantable",
        )
        assert not forged.ok and "does not match" in forged.detail
        # Signed with the grant, but not with the rule it was allowed under: which calls it may let through is unsaid.
        unruled = signer.sign(facts(row, request_id=row.request_id, request_digest=row.request_digest, grant="run"))
        bare = await post(
            sqlite_backend,
            row,
            ControlKind.APPROVE,
            decided_by="ana",
            signature=unruled,
            request_id=row.request_id,
            grant="run",
        )
        assert not bare.ok and "names no rule it was allowed under" in bare.detail, bare.detail
        # Signed for another rule than the one the request names (the run would keep it under its own).
        other = facts(row, request_id=row.request_id, request_digest=row.request_digest, grant="run", grant_rule="x")
        elsewhere = await post(
            sqlite_backend,
            row,
            ControlKind.APPROVE,
            decided_by="ana",
            signature=signer.sign(other),
            request_id=row.request_id,
            grant="run",
            grant_rule="x",
        )
        assert not elsewhere.ok and "the grant was allowed under rule 'x', not 'grantable'" in elsewhere.detail
        assert agent.ran == [] and not agent.events.of("grant_created")
        signed = await decide_signed(sqlite_backend, agent, signer, approve=True, grant="run")
        assert signed.verdict is DecideVerdict.APPLIED, signed.detail
        assert await agent.result() == "ran" and len(agent.events.of("grant_created")) == 1
    finally:
        await agent.close()


async def test_each_quorum_vote_is_checked_and_one_vote_is_never_recorded_as_the_decision(
    sqlite_backend: Backend, signer: DecisionSigner
) -> None:
    agent = Agent(sqlite_backend, "pay-q", trust=signer.trust_key, policy=TWO_APPROVERS)
    try:
        row = await agent.pending()
        first = await decide_signed(sqlite_backend, agent, signer, approve=True, principal=ANA)
        assert first.verdict is DecideVerdict.APPLIED and "1 of 2: ana" in first.detail, first.detail
        # One vote: the store still shows the request pending (a replay must not find an approval in it).
        assert agent.row().status is ApprovalStatus.PENDING and agent.row().decision == ""
        unsigned = await post(sqlite_backend, row, ControlKind.APPROVE, decided_by="cy")
        assert not unsigned.ok and "not signed" in unsigned.detail
        copied = await post(
            sqlite_backend, row, ControlKind.APPROVE, decided_by="cy", signature=signer.sign(facts(row, by="ana"))
        )
        assert not copied.ok and "does not match" in copied.detail
        assert agent.ran == [] and agent.refused() == [("approve", "cy"), ("approve", "cy")]
        assert agent.row().quorum_progress == "1 of 2: ana"
        last = await decide_signed(sqlite_backend, agent, signer, approve=True, principal=BO)
        assert last.verdict is DecideVerdict.APPLIED, last.detail
        assert await agent.result() == "ran" and agent.ran == [ARGS]
        assert agent.row().status is ApprovalStatus.GRANTED and agent.row().decided_by == "ana, bo"
    finally:
        await agent.close()


async def test_an_edit_recorded_in_the_store_while_the_run_was_cut_off_runs_with_its_arguments(
    sqlite_backend: Backend,
) -> None:
    agent = Agent(sqlite_backend, "pay-s", trust=None)
    try:
        row = await agent.pending()
        edit = {"amount": 3, "to": "bob"}
        store = sqlite_backend.open()
        assert store.decide_in_store(
            row.id, approved=True, detail="smaller", decided_by="ana", edited_args_json=canonical_json(edit)
        )
        assert await agent.result() == "ran" and agent.ran == [edit]
    finally:
        await agent.close()


async def test_a_signed_edit_forged_into_the_store_row_is_not_replayed(
    sqlite_backend: Backend, signer: DecisionSigner
) -> None:
    # A run asked and its process is gone; a person approved the call as it was (signed, recorded in the store).
    store = sqlite_backend.open()
    orphaned(store, "pay-f")
    approved = await asyncio.to_thread(decide, store, "pay-f", approve=True, principal=ANA, signer=signer)
    assert approved.verdict is DecideVerdict.RECORDED, approved.detail
    # A database writer adds an edit to the signed row before the call is replayed.
    store.db.conn().execute(  # type: ignore[attr-defined]
        "UPDATE gf_approvals SET edited_args_json = ? WHERE target_id = 'pay-f'",
        (canonical_json({"amount": 1_000_000, "to": "mallory"}),),
    )
    replay = Agent(sqlite_backend, "pay-f", trust=signer.trust_key, timeout_ms=200)
    try:
        assert await replay.result() == "timeout"  # asked again (and nobody answered): the forgery never ran
        assert replay.ran == [] and replay.refused() == [("approve", "ana")]
    finally:
        await replay.close()


@pytest.mark.parametrize("request_id", ["", "req-asked-before"])
async def test_a_signed_decision_recorded_in_the_store_is_replayed_for_a_record_with_or_without_a_request_id(
    sqlite_backend: Backend, signer: DecisionSigner, request_id: str
) -> None:
    # A record written before requests had ids is verified as it was signed (no request); one with an id, with it.
    store = sqlite_backend.open()
    if request_id:
        request = events_pb2.ApprovalRequested(
            target_id="pay-h",
            kind="tool",
            prompt="transfer?",
            metadata={"tool_name": TOOL, "args_json": canonical_json(ARGS)},
            args_digest=args_digest(TOOL, ARGS),
            timeout_ms=60_000,
            request_id=request_id,
        )
        store.append_events([make_event("run-old", 1, request)], pid=0, host="elsewhere")
    else:
        orphaned(store, "pay-h")
    approved = await asyncio.to_thread(decide, store, "pay-h", approve=True, principal=ANA, signer=signer)
    assert approved.verdict is DecideVerdict.RECORDED, approved.detail
    replay = Agent(sqlite_backend, "pay-h", trust=signer.trust_key, timeout_ms=200)
    try:
        assert await replay.result() == "ran"
        assert replay.ran == [dict(ARGS)] and replay.refused() == []
    finally:
        await replay.close()


async def test_run_approved_without_trust_uses_the_key_the_environment_names(
    sqlite_backend: Backend, signer: DecisionSigner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GOLDFIVE_TRUST_KEY makes the agent's channel apply only signed decisions; the replay of a call
    # through run_approved (no trust= given) must not apply an unsigned decision written into the store.
    monkeypatch.setenv(TRUST_KEY_ENV, signer.trust_key.text())
    store = sqlite_backend.open()
    row = orphaned(store, "pay-env")
    assert store.decide_in_store(row.id, approved=True, detail="", decided_by="mallory")
    replay = Agent(sqlite_backend, "pay-env", trust=None, timeout_ms=200)
    try:
        assert replay.channel.trust_key is not None and replay.channel.trust_key.key_id == signer.key_id
        assert await replay.result() == "timeout"  # asked again: the unsigned decision was refused
        assert replay.ran == [] and replay.refused() == [("approve", "mallory")]
    finally:
        await replay.close()


@pytest.mark.parametrize("first", ["ack", "event"])
async def test_a_signed_approval_is_written_to_its_record_once_at_its_event_s_time(
    sqlite_backend: Backend, signer: DecisionSigner, first: str
) -> None:
    # Every write that touches a record's decision is counted by the database itself. Whichever of the agent's ack
    # and its ApprovalGranted reaches the store first records the decision (with the server's signature and the
    # event's time) in one write; the other has nothing left to write. (Before: the ack's write, its signature's,
    # the event's time.) The two race in a live agent: each order is made here, the other held until it is in.
    agent = Agent(sqlite_backend, "pay-once", trust=signer.trust_key)
    store = agent.channel.store
    append, ack = store.append_events, store.ack_controls

    def decided() -> bool:
        return agent.row().decision == "approve"

    def granted_in() -> bool:
        return any(r.kind == "approval_granted" for r in sqlite_backend.open().audit_rows(limit=1000))

    def held_until(done: Any) -> None:  # on the writer's own thread: bounded, then it goes ahead anyway
        deadline = time.monotonic() + 10
        while not done() and time.monotonic() < deadline:
            time.sleep(0.01)

    def events_after_the_ack(events: Any, *args: Any, **kw: Any) -> Any:
        if any(e.HasField("approval_granted") for e in events):
            held_until(decided)
        return append(events, *args, **kw)

    def ack_after_the_event(acks: Any, *args: Any, **kw: Any) -> Any:
        held_until(granted_in)
        return ack(acks, *args, **kw)

    if first == "ack":
        store.append_events = events_after_the_ack  # type: ignore[method-assign]
    else:
        store.ack_controls = ack_after_the_event  # type: ignore[method-assign]
    try:
        await agent.pending()
        with contextlib.closing(sqlite3.connect(sqlite_backend.location)) as db:
            db.executescript(
                "CREATE TABLE t_writes (target_id TEXT);"
                "CREATE TRIGGER t_decision_written AFTER UPDATE OF status, decision, decided_by, decided_at_ms, "
                "decision_sig, decided_via ON gf_approvals BEGIN INSERT INTO t_writes VALUES (new.target_id); END;"
            )
        approved = await decide_signed(sqlite_backend, agent, signer, approve=True)
        assert approved.verdict is DecideVerdict.APPLIED, approved.detail
        assert await agent.result() == "ran" and agent.ran == [ARGS]
    finally:
        await agent.close()
    with contextlib.closing(sqlite3.connect(sqlite_backend.location)) as db:
        writes = db.execute("SELECT count(*) FROM t_writes WHERE target_id = 'pay-once'").fetchone()[0]
    row = agent.row()
    (granted,) = agent.events.of("approval_granted")
    assert writes == 1
    assert row.decided_at_ms == granted.emitted_at.ToMilliseconds() and row.decision_sig and row.decided_by == "ana"
    assert sqlite_backend.open().verify_audit(trust_key=signer.trust_key).ok
