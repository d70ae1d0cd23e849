"""Every decision is bound to one request: a re-ask of a target is a new request, and a decision (signed or
not) for an earlier one never resolves it.

The attack these tests replay: every ``report_awaiting_approval`` of one task has the task id as its target, so
a database writer re-posted ana's signed APPROVE of "Spend 5 EUR on a coffee?" onto a later "Wire 50000 EUR
to account 666?" of the same task, and a trusting agent applied it. Now the signature covers the request's
own id and digest (its prompt and arguments), and the agent checks it against its own request.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from server_support import Agent, Server, eventually, goldfive, start_tool_agent
from store_support import Backend, make_event

from goldfive_core import AgentTools, ControlKind, ControlMessage, InMemorySink, Task, wrap
from goldfive_core._util import canonical_json
from goldfive_core.approvals import ApprovalBook, ApprovalRequest, ApprovalStatus, Decision, DecisionVerdict
from goldfive_core.control import ControlAck
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.signing import SignedDecision
from goldfive_core.store import StoreChannel

COFFEE = "Spend 5 EUR on a coffee?"
WIRE = "Wire 50000 EUR to account 666?"


def _two_asks_agent(server: Server, *, trust: bool) -> Agent:
    """One task that asks twice (the same target): the coffee, then the wire."""
    channel = StoreChannel(
        server.backend.open(), trust_key=server.signer.trust_key if trust else None, sweep_interval_s=0.2
    )
    sink = InMemorySink()
    answers: list[dict[str, Any]] = []

    async def agent(task: Task, tools: AgentTools) -> Any:
        await tools.report_task_started("t-spend")
        for prompt in (COFFEE, WIRE):
            answers.append(await tools.report_awaiting_approval(prompt, task_id="t-spend", timeout_ms=120_000))
        return answers

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink, sink]).run("go"))
    return Agent(channel, sink, run, answers)


@contextlib.asynccontextmanager
async def _asked_twice(server: Server, *, trust: bool) -> AsyncIterator[tuple[Agent, dict[str, Any], str]]:
    """ana approves the coffee over the API; yields the agent (now asking for the wire), the coffee's APPROVE
    payload as the database holds it (what a writer can copy), and the run id."""
    agent = _two_asks_agent(server, trust=trust)
    try:
        card = await server.pending("t-spend")
        assert card["prompt"] == COFFEE
        resp = await server.post("/api/approvals/t-spend/approve", {"reason": "ok"})
        assert resp.status_code == 200, resp.text
        # What the writer copies: the decision as it went through the inbox, signature and all.
        ((payload_json, run_id),) = _sql(server, "SELECT payload_json, run_id FROM gf_inbox WHERE kind = 'APPROVE'")
        copied: dict[str, Any] = json.loads(payload_json)
        assert copied["request_id"] and "signature" in copied

        async def wire_pending() -> bool:
            (now,) = server.store.approvals_for("t-spend")
            return now.prompt == WIRE and now.open

        await eventually(wire_pending, "the wire to be asked")
        yield agent, copied, run_id
    finally:
        await agent.close()


def _sql(server: Server, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """The database writer under test: a statement on the store's own connection."""
    store = server.store
    cur = store.db.execute(store.db.conn(), sql, params)  # type: ignore[attr-defined]
    return list(cur.fetchall()) if cur.description else []


async def _post(
    server: Server, payload: dict[str, Any], run_id: str, *, kind: ControlKind = ControlKind.APPROVE
) -> ControlAck:
    msg = ControlMessage(kind, payload)
    await asyncio.to_thread(server.store.post_control, msg, run_id=run_id)

    async def acked() -> ControlAck | None:
        return server.store.get_ack(msg.id)

    ack = await eventually(acked, "the agent's ack of the copied approval")
    assert isinstance(ack, ControlAck)
    return ack


@pytest.mark.parametrize("claim", ["the coffee's request", "the wire's request"])
async def test_a_signed_approval_copied_onto_a_later_request_of_the_task_is_refused(server: Server, claim: str) -> None:
    async with _asked_twice(server, trust=True) as (agent, copied, run_id):
        (wire,) = server.store.approvals_for("t-spend")
        assert wire.request_id and wire.request_id != copied["request_id"]
        if claim == "the wire's request":  # the writer also rewrites the request the payload names
            copied = {**copied, "request_id": wire.request_id}
        ack = await _post(server, copied, run_id)
        assert not ack.ok and "signature does not match" in ack.detail, ack.detail
        refused = agent.sink.of("decision_refused")
        assert [r.decision_refused.request_id for r in refused] == [wire.request_id]
        # Nobody approved the wire: still pending, listed, and only ana's approval of the coffee went through.
        card = await server.pending("t-spend")
        assert (card["prompt"], card["state"]) == (WIRE, "pending")
        assert [a["decision"] for a in agent.ran] == ["approve"]
        resp = await server.post("/api/approvals/t-spend/reject", {"reason": "not this one"})
        assert resp.status_code == 200, resp.text
        answers = (await agent.result()).output
        assert [a["decision"] for a in answers] == ["approve", "reject"]
    # Once the run's last events are written (the agent closed), the record is whole and true.
    report = server.store.verify_audit(trust_key=server.signer.trust_key)
    assert report.ok, report.problems


async def test_without_a_trust_key_a_decision_naming_the_earlier_request_is_refused(server: Server) -> None:
    async with _asked_twice(server, trust=False) as (agent, copied, run_id):
        unsigned = {k: v for k, v in copied.items() if k != "signature"}
        ack = await _post(server, unsigned, run_id)
        assert not ack.ok and "asked again since" in ack.detail, ack.detail
        assert (await server.pending("t-spend"))["prompt"] == WIRE
        # A decision that names no request (a writer from before requests had ids) applies where no key is set.
        legacy = {k: v for k, v in unsigned.items() if k != "request_id"}
        ack = await _post(server, legacy, run_id)
        assert ack.ok, ack.detail
        answers = (await agent.result()).output
        assert [a["decision"] for a in answers] == ["approve", "approve"]


async def test_the_api_decision_carries_and_signs_the_request_it_was_made_on(server: Server) -> None:
    async with _asked_twice(server, trust=True) as (agent, copied, _run_id):
        (requested, _wire) = agent.sink.of("approval_requested")
        ask = requested.approval_requested
        assert copied["request_id"] == ask.request_id and ask.request_digest.startswith("sha256:")
        (granted,) = agent.sink.of("approval_granted")
        assert granted.approval_granted.request_id == ask.request_id
        detail = (await server.get("/api/approvals/t-spend")).json()
        assert detail["request_id"] == agent.sink.of("approval_requested")[1].approval_requested.request_id


async def test_audit_verify_with_the_key_reports_a_signature_moved_from_another_request(
    server: Server, backend: Backend
) -> None:
    async with _asked_twice(server, trust=True) as (agent, copied, _run_id):
        # The wire is approved by ana too, with the same reason: the facts of both decisions are the same but
        # the request's. The writer then swaps the wire's signature for the coffee's.
        resp = await server.post("/api/approvals/t-spend/approve", {"reason": "ok"})
        assert resp.status_code == 200, resp.text
        await agent.result()
        await agent.channel.aclose()
        key = server.signer.trust_key
        assert server.store.verify_audit(trust_key=key).ok
        coffee_sig = json.dumps(copied["signature"], sort_keys=True, separators=(",", ":"))
        _sql(server, "UPDATE gf_approvals SET decision_sig = ? WHERE target_id = 't-spend'", (coffee_sig,))
        report = server.store.verify_audit(trust_key=key)
        assert not report.ok
        assert any("decision_sig does not verify" in p for p in report.problems), report.problems
        out = goldfive(backend, "audit", "verify", "--public-key", key.text())
        assert out.returncode == 1 and "decision_sig does not verify" in out.stdout + out.stderr, out


async def test_a_late_ack_of_a_decision_never_lands_on_the_re_asked_request(backend: Backend) -> None:
    """The race behind the false TAMPERED: the agent applied ana's decision and asked again at once; the ack of
    the first decision reached the store after the re-ask had re-opened the record."""
    store = backend.open()
    first, second = "req-first", "req-second"

    def event(seq: int, **payload: Any) -> events_pb2.Event:
        ev = events_pb2.Event(event_id=f"ev-{seq}", run_id="run-x", session_id="s", sequence=seq, **payload)
        ev.emitted_at.GetCurrentTime()
        return ev

    def asked(seq: int, request_id: str, prompt: str) -> events_pb2.Event:
        return event(
            seq,
            approval_requested=events_pb2.ApprovalRequested(
                target_id="t", kind="task", prompt=prompt, task_id="t", timeout_ms=60_000, request_id=request_id
            ),
        )

    store.append_events(
        [event(0, run_started=events_pb2.RunStarted(adapter="test")), asked(1, first, COFFEE)], pid=1, host="h"
    )
    msg = ControlMessage(
        ControlKind.APPROVE, {"target_id": "t", "run_id": "run-x", "decided_by": "ana", "request_id": first}
    )
    ident = store.post_control(msg, run_id="run-x")
    assert store.claim_controls([ident], endpoint="agent") == [ident]
    granted = events_pb2.ApprovalGranted(target_id="t", decided_by="ana", request_id=first)
    store.append_events([event(2, approval_granted=granted), asked(3, second, WIRE)], pid=1, host="h")
    store.ack_controls([(ident, ControlAck.success(msg.id, "approved 't'", data={"request_id": first}))])
    (record,) = store.approvals_for("t")
    assert (record.request_id, record.prompt, record.status.value, record.decided_by) == (second, WIRE, "pending", "")
    report = store.verify_audit()
    assert report.ok, report.problems


@pytest.mark.parametrize("rounds", [6])
async def test_immediate_re_asks_are_each_asked_and_listed(server: Server, rounds: int) -> None:
    """An agent that asks again the moment it is answered: every request is pending and listed on its own."""
    channel = StoreChannel(server.backend.open(), trust_key=server.signer.trust_key, sweep_interval_s=0.2)
    sink = InMemorySink()

    async def agent(task: Task, tools: AgentTools) -> Any:
        await tools.report_task_started("loop")
        return [
            (await tools.report_awaiting_approval(f"step {n}?", task_id="loop", timeout_ms=120_000))["decision"]
            for n in range(rounds)
        ]

    run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink, sink]).run("go"))
    try:
        for n in range(rounds):

            async def asked(n: int = n) -> bool:
                rows = server.store.approvals_for("loop")
                return bool(rows) and rows[0].prompt == f"step {n}?" and rows[0].open

            await eventually(asked, f"step {n} to be asked")
            resp = await server.post("/api/approvals/loop/approve", {"reason": f"yes {n}"})
            assert resp.status_code == 200, resp.text
        assert await asyncio.wait_for(run, 20) is not None
        assert [e.approval_granted.detail for e in sink.of("approval_granted")] == [f"yes {n}" for n in range(rounds)]
    finally:
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await run
        await channel.aclose()
    report = server.store.verify_audit(trust_key=server.signer.trust_key)
    assert report.ok, report.problems


@pytest.mark.parametrize("kind", ["approve", "reject", "approve with edits", "quorum vote"])
async def test_every_kind_of_signed_decision_is_bound_to_the_request_it_was_signed_for(
    server: Server, kind: str
) -> None:
    """A signature made for another request of the call (another id, or another prompt or arguments) is
    refused whatever the decision says; the one made for this request applies. A quorum vote (one of two, the
    server's rule stated and signed) is bound the same way: a vote signed for request A never counts on B."""
    schema = {"type": "object", "properties": {"amount": {"type": "integer"}, "to": {"type": "string"}}}
    agent = start_tool_agent(
        server.backend, "call-7", {"amount": 5, "to": "bob"}, trust=server.signer.trust_key, args_schema=schema
    )
    try:
        await server.pending("call-7")
        (row,) = server.store.approvals_for("call-7")
        approve = kind != "reject"
        edited = {"amount": 4, "to": "bob"} if kind == "approve with edits" else None

        quorum = 2 if kind == "quorum vote" else 0

        def signed(request_id: str, request_digest: str, by: str = "ana") -> dict[str, Any]:
            facts = SignedDecision(
                target_id="call-7",
                run_id=row.run_id,
                decision="approve" if approve else "reject",
                edited_args_json=canonical_json(edited) if edited else "",
                args_digest=row.args_digest,
                decided_by=by,
                detail="checked",
                channel="api",
                request_id=request_id,
                request_digest=request_digest,
                quorum=quorum,
            )
            payload: dict[str, Any] = {
                "target_id": "call-7",
                "run_id": row.run_id,
                "decided_by": by,
                "channel": "api",
                "detail": "checked",
                "args_digest": row.args_digest,
                "request_id": row.request_id,  # what the decision claims; the agent checks its own request
                "signature": server.signer.sign(facts),
            }
            if edited:
                payload["edited_args"] = edited
            if quorum:  # one vote of the deciding server's rule (two approvers): stated, and signed
                payload["quorum"] = quorum
            return payload

        verb = ControlKind.APPROVE if approve else ControlKind.REJECT
        other_prompt = dataclasses.replace(row, prompt="Allow transfer_funds to account 666?").request_digest
        for forged in (signed("req-another-ask", row.request_digest), signed(row.request_id, other_prompt)):
            ack = await _post(server, forged, row.run_id, kind=verb)
            assert not ack.ok and "signature does not match" in ack.detail, ack.detail
        assert agent.ran == [] and not agent.task.done()
        ack = await _post(server, signed(row.request_id, row.request_digest), row.run_id, kind=verb)
        assert ack.ok and ack.data is not None and ack.data["request_id"] == row.request_id, ack
        if quorum:  # ana's vote counted (one of two); bo's, signed for this request too, completes it
            assert ack.data["quorum_progress"] == "1 of 2: ana" and agent.ran == [], ack
            ack = await _post(server, signed(row.request_id, row.request_digest, by="bo"), row.run_id, kind=verb)
            assert ack.ok, ack
        result = await agent.result()
        assert agent.ran == ([edited or {"amount": 5, "to": "bob"}] if approve else [])
        assert result.output.status == ("ran" if approve else "reject")
        refused = agent.sink.of("decision_refused")
        assert [r.decision_refused.request_id for r in refused] == [row.request_id, row.request_id]
    finally:
        await agent.close()


def test_a_decision_kept_early_for_another_request_never_applies_when_the_call_is_asked() -> None:
    book = ApprovalBook()
    book.expect("call-9")
    kept = book.decide("call-9", Decision(approved=True, decided_by="ana", request_id="req-earlier"))
    assert kept.verdict is DecisionVerdict.KEPT_EARLY
    record, _ = book.open(ApprovalRequest(target_id="call-9", kind="tool", timeout_ms=1000, request_id="req-now"))
    assert record.status is ApprovalStatus.PENDING and record.decision is None
    # One that names no request (or this one) applies as before.
    book.close("call-9", "test")
    book.expect("call-9")
    book.decide("call-9", Decision(approved=True, decided_by="ana", request_id="req-then"))
    record, _ = book.open(ApprovalRequest(target_id="call-9", kind="tool", timeout_ms=1000, request_id="req-then"))
    assert record.status is ApprovalStatus.GRANTED


def test_a_decision_recorded_in_the_store_for_an_earlier_ask_is_not_recorded_on_the_re_ask(backend: Backend) -> None:
    store = backend.open()
    asked = [
        make_event("run-y", 0, events_pb2.RunStarted(adapter="test")),
        make_event(
            "run-y", 1, events_pb2.ApprovalRequested(target_id="t", kind="task", prompt=COFFEE, request_id="r1")
        ),
    ]
    store.append_events(asked, pid=1, host="h")
    (seen,) = store.approvals_for("t")
    again = events_pb2.ApprovalRequested(target_id="t", kind="task", prompt=WIRE, request_id="r2")
    store.append_events([make_event("run-y", 2, again)], pid=1, host="h")
    assert not store.decide_in_store(seen.id, approved=True, detail="", decided_by="ana", request_id=seen.request_id)
    (now,) = store.approvals_for("t")
    assert (now.request_id, now.status.value, now.decided_by) == ("r2", "pending", "")
    assert store.decide_in_store(seen.id, approved=False, detail="no", decided_by="ana", request_id="r2")
    assert store.verify_audit().ok


@pytest.mark.parametrize("verb", ["approve", "reject"])
async def test_a_click_on_the_card_of_an_earlier_ask_is_refused_and_the_new_ask_stays_pending(
    server: Server, verb: str
) -> None:
    """The page drew the coffee; the task then asked for the wire (same target, another prompt). A click sent with
    the coffee's request id (what the inbox sends for the card it drew) never decides the wire."""
    async with _asked_twice(server, trust=False) as (agent, copied, _run_id):
        drawn = copied["request_id"]  # the request the page showed, and ana approved
        resp = await server.post(f"/api/approvals/t-spend/{verb}", {"reason": "the coffee", "request_id": drawn})
        assert resp.status_code == 409, resp.text
        assert "asked again since you looked" in resp.json()["error"], resp.text
        card = await server.pending("t-spend")
        assert (card["prompt"], card["state"]) == (WIRE, "pending")
        assert [a["decision"] for a in agent.ran] == ["approve"]
        # The card of the wire, drawn now, decides it.
        resp = await server.post("/api/approvals/t-spend/reject", {"reason": "no", "request_id": card["request_id"]})
        assert resp.status_code == 200, resp.text
        answers = (await agent.result()).output
        assert [a["decision"] for a in answers] == ["approve", "reject"]
