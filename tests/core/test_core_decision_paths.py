"""The decision path inside one run: what is announced, what runs, and what a quorum or the gate refuses.

Each test pins a safety line of the mutation list in ``scripts/mutation.py`` (it fails when that
line is broken): through a Session, its control dispatch and the tool-call gate, asserting on acks,
events and whether the call proceeds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from loop_support import wait_all_tasks_blocked

from goldfive_core import (
    AckResult,
    ApprovalRequest,
    ControlKind,
    ControlMessage,
    Decision,
    InMemorySink,
    Session,
    SteeringConfig,
)
from goldfive_core._util import args_digest
from goldfive_core.drift import Drift, DriftKind, DriftSeverity, InterventionLevel
from goldfive_core.policy import Ask, Policy, PolicyCall, Rule
from goldfive_core.protocols import Detector
from goldfive_core.toolcall import PolicyVerdict, Proceed, Replay, Skip, ToolCall, gate_tool_call

CALL = ToolCall(call_id="c1", tool_name="pay", args={"to": "bob", "amount": 10})
QUORUM = Policy([Rule(name="two people", tool="pay", action=Ask(quorum=2))])


def new_session(sink: InMemorySink) -> Session:
    return Session(sinks=[sink], config=SteeringConfig(tool_approval_timeout_ms=60_000), has_channel=True)


def send(session: Session, kind: ControlKind, **payload: Any) -> Any:
    return session.dispatch(ControlMessage(kind, payload))


def amount_is_a_number(edited: Mapping[str, Any]) -> str | None:
    return None if isinstance(edited.get("amount"), int) else "amount must be a number"


def quorum_request(target: str = "c1") -> ApprovalRequest:
    verdict = QUORUM.evaluate(PolicyCall(tool="pay", args=CALL.args))
    return ApprovalRequest(
        target_id=target,
        kind="tool",
        metadata={"tool_name": "pay", **verdict.metadata()},
        args_digest=args_digest("pay", CALL.args),
        timeout_ms=60_000,
        validate_edit=amount_is_a_number,
    )


# -- what the run announces ------------------------------------------------------------------------------------
async def test_an_early_decision_applied_at_open_is_announced_once() -> None:
    sink = InMemorySink()
    session = new_session(sink)
    session.expect_approval("t1")
    assert send(session, ControlKind.REJECT, target_id="t1", decided_by="ana", detail="no").ok
    outcome = await session.request_approval(ApprovalRequest(target_id="t1", kind="task", timeout_ms=60_000))
    assert (outcome.decision, outcome.decided_by) == ("reject", "ana")
    assert [e.approval_rejected.decided_by for e in sink.of("approval_rejected")] == ["ana"]
    assert not sink.of("approval_granted")


async def test_a_decision_after_the_wait_timed_out_is_announced_as_what_it_was() -> None:
    sink = InMemorySink()
    session = new_session(sink)
    request = ApprovalRequest(target_id="t2", kind="task", timeout_ms=1, keep_open_on_timeout=True)
    assert (await session.request_approval(request)).decision == "timeout"
    late = send(session, ControlKind.REJECT, target_id="t2", decided_by="bo", detail="too late anyway")
    assert late.ok and "after its wait timed out" in late.detail
    assert [e.approval_rejected.decided_by for e in sink.of("approval_rejected")] == ["bo"]
    assert not sink.of("approval_granted")


# -- quorum ------------------------------------------------------------------------------------------------------
async def test_an_early_approval_counts_as_one_vote_of_a_quorum_when_the_request_opens() -> None:
    sink = InMemorySink()
    session = new_session(sink)
    session.expect_approval("c1")
    assert send(session, ControlKind.APPROVE, target_id="c1", decided_by="ana").ok
    waiting = asyncio.create_task(session.request_approval(quorum_request()))
    await wait_all_tasks_blocked()
    assert not waiting.done() and not sink.of("approval_granted")
    assert session.status()["pending_approvals"][0]["quorum"] == "1 of 2: ana"
    assert send(session, ControlKind.APPROVE, target_id="c1", decided_by="bo").ok
    assert (await waiting).decided_by == "ana, bo"


async def test_a_quorum_vote_with_an_edit_that_does_not_fit_is_refused_and_counts_nothing() -> None:
    sink = InMemorySink()
    session = new_session(sink)
    waiting = asyncio.create_task(session.request_approval(quorum_request()))
    await sink.wait_for("approval_requested")
    assert send(session, ControlKind.APPROVE, target_id="c1", decided_by="ana").ok
    bad = send(session, ControlKind.APPROVE, target_id="c1", decided_by="bo", edited_args={"amount": "all of it"})
    assert bad.result is AckResult.FAILURE and "amount must be a number" in bad.detail
    assert session.status()["pending_approvals"][0]["quorum"] == "1 of 2: ana" and not waiting.done()
    assert len(sink.of("approval_voted")) == 1
    waiting.cancel()


# -- the tool-call gate --------------------------------------------------------------------------------------------
class _Rules:
    def __init__(self, verdict: PolicyVerdict) -> None:
        self.verdict = verdict

    def check(self, call: ToolCall, *, gated: bool) -> PolicyVerdict | None:
        return self.verdict


async def test_a_policy_ask_on_a_call_the_adapter_does_not_gate_asks_a_person() -> None:
    sink = InMemorySink()
    session = new_session(sink)
    ask = _Rules(PolicyVerdict(action="ask", rule="always ask"))
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=False, policy=ask))
    await sink.wait_for("approval_requested")
    assert not gated.done()
    assert send(session, ControlKind.REJECT, target_id="c1", decided_by="ana").ok
    outcome = await gated
    assert isinstance(outcome, Skip) and outcome.reason == "user_rejected"


class _Ledger:
    """A ledger that answers the look-up with ``replay`` (or raises) and records begins."""

    def __init__(self, replay: Replay | None = None, *, raises: bool = False) -> None:
        self.replay = replay or Replay(kind="none")
        self.raises = raises
        self.begun: list[str] = []

    async def lookup(self, session: Session, call: ToolCall, digest: str) -> Replay:
        if self.raises:
            raise OSError("the ledger's disk is gone")
        return self.replay

    async def begin(self, session: Session, call: ToolCall, digest: str) -> Replay | None:
        self.begun.append(call.call_id)
        return None

    async def finish(
        self, call_id: str, digest: str, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        return None


async def test_a_ledger_out_of_reach_at_the_look_up_skips_the_call_and_asks_nobody() -> None:
    sink = InMemorySink()
    ledger = _Ledger(raises=True)
    outcome = await gate_tool_call(new_session(sink), CALL, needs_person=True, ledger=ledger)
    assert isinstance(outcome, Skip) and outcome.reason == "store_unavailable" and "did not run" in outcome.detail
    assert not sink.of("approval_requested") and ledger.begun == []


async def test_a_recorded_edit_of_a_tool_that_takes_no_edits_never_reaches_the_body() -> None:
    recorded = Decision(approved=True, decided_by="ana", edited_args={"to": "mallory", "amount": 10})
    ledger = _Ledger(Replay(kind="decided", decision=recorded))
    outcome = await gate_tool_call(new_session(InMemorySink()), CALL, needs_person=True, ledger=ledger)
    assert isinstance(outcome, Skip) and outcome.reason == "approval_error"
    assert "edits are refused for this tool" in outcome.detail and ledger.begun == []


async def test_an_approved_edit_proceeds_marked_as_edited_with_the_edited_arguments() -> None:
    sink = InMemorySink()
    session = new_session(sink)
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=True, validate_edit=amount_is_a_number))
    await sink.wait_for("approval_requested")
    edit = {"to": "bob", "amount": 5}
    assert send(session, ControlKind.APPROVE, target_id="c1", decided_by="ana", edited_args=edit).ok
    outcome = await gated
    assert isinstance(outcome, Proceed) and outcome.edited and dict(outcome.args) == edit


async def test_a_call_nobody_decided_in_time_is_skipped() -> None:
    sink = InMemorySink()
    outcome = await gate_tool_call(new_session(sink), CALL, needs_person=True, timeout_ms=1)
    assert isinstance(outcome, Skip) and outcome.reason == "approval_timeout"
    assert [e.drift_detected.kind for e in sink.of("drift_detected")] == [DriftKind.HUMAN_INTERVENTION_REQUIRED]


class _EveryCall(Detector):
    def on_tool_call(self, session: Session, tool_name: str, args: Mapping[str, Any]) -> Drift | None:
        return Drift(DriftKind.LOOPING_TOOL_CALL, DriftSeverity.CRITICAL, f"{tool_name} again")


class _ReinvokeSteerer:
    """The ladder's answer for every drift: cancel the step and re-invoke it."""

    async def handle_drift(self, drift: Drift) -> InterventionLevel:
        return InterventionLevel.CANCEL_REINVOKE


async def test_a_call_the_ladder_cancels_for_re_invocation_never_runs() -> None:
    sink = InMemorySink()
    session = new_session(sink)
    session.add_detectors([_EveryCall()])
    session.set_steerer(_ReinvokeSteerer())
    outcome = await gate_tool_call(session, CALL, needs_person=False)
    assert isinstance(outcome, Skip) and outcome.reason == "goldfive_intervention"
    assert "CANCEL_REINVOKE" in outcome.detail
