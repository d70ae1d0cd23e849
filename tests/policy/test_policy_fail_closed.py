"""A rule that cannot be evaluated never lets a call through: not by falling back to the adapter's own
configuration, not on a standing grant of that rule; and no quorum request becomes a grant. Plain callable
agents (wrap) with an in-process control channel."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from goldfive_core import AckResult, ControlChannel, ControlKind, ControlMessage, InMemorySink, SteeringConfig, wrap
from goldfive_core._util import args_digest
from goldfive_core.adapters.callable import AgentTools
from goldfive_core.approvals import Principal
from goldfive_core.policy import PolicyAuthority, parse_policy
from goldfive_core.session import Session
from goldfive_core.tasks import Task

ALLOW_SMALL = parse_policy('[[rule]]\nname = "small"\ntool = "pay"\nwhen = "args.amount < 10"\naction = "allow"\n')
SMALL_WITH_GRANTS = parse_policy(
    '[[rule]]\nname = "small"\ntool = "pay"\nwhen = "args.amount < 100"\naction = "ask"\ngrants = ["run"]\n'
)
TWO_WITH_GRANTS = parse_policy('[[rule]]\nname = "two"\ntool = "pay"\naction = "ask"\nquorum = 2\ngrants = ["run"]\n')


async def test_a_rule_that_erred_on_an_unmarked_tool_asks_a_person_never_the_adapters_own_config() -> None:
    """``pay`` is not marked (the adapter would run it); the only rule errs on a string amount: nobody can
    answer here, so the call does not run; the reason is on the record."""
    sink = InMemorySink()
    ran: list[Any] = []

    async def agent(task: Task, tools: AgentTools) -> list[str]:
        if await tools.before_tool("pay", {"amount": "ten"}):
            ran.append("pay")
        return tools.guidance()

    result = await wrap(agent, sinks=[sink], policy=ALLOW_SMALL, config=SteeringConfig()).run("pay")
    assert ran == []
    assert any("needs a person's approval and no one can answer" in note for note in result.output), result.output


async def _next_request(sink: InMemorySink, count: int) -> Any:
    await sink.wait_for("approval_requested", count=count)
    return sink.of("approval_requested")[count - 1].approval_requested


async def test_a_grant_of_a_rule_never_lets_through_a_call_that_rule_could_not_evaluate() -> None:
    """ana approves the first payment with a grant for the run; the next call's amount is a string, so the
    rule cannot say whether it is small: a person is asked (and rejects), the grant does not apply."""
    sink = InMemorySink()
    ran: list[Any] = []
    sessions: list[Session] = []

    async def agent(task: Task, tools: AgentTools) -> None:
        sessions.append(tools.session)
        for amount in (5, "lots"):
            if await tools.before_tool("pay", {"amount": amount}):
                ran.append(amount)

    channel = ControlChannel()
    run = asyncio.create_task(wrap(agent, control=channel, sinks=[sink], policy=SMALL_WITH_GRANTS).run("pay"))
    first = await _next_request(sink, 1)
    granted = sessions[0].dispatch(
        ControlMessage(ControlKind.APPROVE, {"target_id": first.target_id, "decided_by": "ana", "grant": "run"})
    )
    assert granted.ok and "allow pay calls matching rule 'small' for the rest of run" in granted.detail
    second = await _next_request(sink, 2)
    assert second.metadata["policy_rule"] == "small" and "could not be evaluated" in second.metadata["policy_error"]
    no = sessions[0].dispatch(
        ControlMessage(ControlKind.REJECT, {"target_id": second.target_id, "decided_by": "ana", "detail": "no"})
    )
    assert no.ok
    await run
    assert ran == [5]
    assert [e.policy_applied.grant_id for e in sink.of("policy_applied")] == []


async def test_one_approver_of_a_quorum_rule_cannot_create_a_standing_grant() -> None:
    """The rule offers a run grant but needs two approvers: ana's approval asking for it is refused and not
    counted; two plain approvals run the call once; no grant exists and the next call asks again."""
    sink = InMemorySink()
    ran: list[Any] = []
    sessions: list[Session] = []

    async def agent(task: Task, tools: AgentTools) -> None:
        sessions.append(tools.session)
        for amount in (5, 6):
            if await tools.before_tool("pay", {"amount": amount}):
                ran.append(amount)

    channel = ControlChannel()
    run = asyncio.create_task(wrap(agent, control=channel, sinks=[sink], policy=TWO_WITH_GRANTS).run("pay"))
    first = await _next_request(sink, 1)

    def send(kind: ControlKind, target: str, **payload: Any) -> Any:
        return sessions[0].dispatch(ControlMessage(kind, {"target_id": target, **payload}))

    refused = send(ControlKind.APPROVE, first.target_id, decided_by="ana", grant="run")
    assert refused.result is AckResult.FAILURE, refused.detail
    assert "rule 'two' needs 2 approvers; one approver cannot allow later calls" in refused.detail
    assert sink.of("approval_voted") == []
    assert send(ControlKind.APPROVE, first.target_id, decided_by="ana").ok
    assert ran == []
    assert send(ControlKind.APPROVE, first.target_id, decided_by="bo").ok
    second = await _next_request(sink, 2)  # no grant: the next call asks again
    assert send(ControlKind.REJECT, second.target_id, decided_by="bo", detail="enough").ok
    await run
    assert ran == [5] and sink.of("grant_created") == []


def _paying_run() -> tuple[InMemorySink, list[Any], list[Session], asyncio.Task[Any]]:
    """A run under SMALL_WITH_GRANTS that asks once to pay 5: its sink, what ran, its session, its task."""
    sink = InMemorySink()
    ran: list[Any] = []
    sessions: list[Session] = []

    async def agent(task: Task, tools: AgentTools) -> None:
        sessions.append(tools.session)
        if await tools.before_tool("pay", {"amount": 5}):
            ran.append(5)

    run = asyncio.create_task(wrap(agent, control=ControlChannel(), sinks=[sink], policy=SMALL_WITH_GRANTS).run("p"))
    return sink, ran, sessions, run


async def test_a_quorum_the_deciding_server_states_in_a_vote_is_the_one_counted_to() -> None:
    """The run's own rule asks one approver; the decisions state the server's quorum of 2: ana's vote is one of
    two (no grant from it either), bo's completes it; the call runs once, decided by both."""
    sink, ran, sessions, run = _paying_run()
    first = await _next_request(sink, 1)

    def vote(by: str, **extra: Any) -> Any:
        payload = {"target_id": first.target_id, "decided_by": by, "quorum": 2, **extra}
        return sessions[0].dispatch(ControlMessage(ControlKind.APPROVE, payload))

    with_grant = vote("ana", grant="run")
    assert with_grant.result is AckResult.FAILURE and "needs 2 approvers" in with_grant.detail
    counted = vote("ana")
    assert counted.ok and "(1 of 2: ana); the request stays pending" in counted.detail
    assert ran == [] and sink.of("approval_granted") == []
    bad = sessions[0].dispatch(
        ControlMessage(ControlKind.APPROVE, {"target_id": first.target_id, "decided_by": "bo", "quorum": "1"})
    )
    assert bad.result is AckResult.FAILURE and "payload['quorum'] must be a whole number in 2..20" in bad.detail
    assert vote("bo").ok
    await run
    assert ran == [5]
    [granted] = sink.of("approval_granted")
    assert granted.approval_granted.decided_by == "ana, bo"


async def test_a_reject_mode_a_vote_states_is_counts_with_a_quorum_or_the_vote_is_refused() -> None:
    """``quorum_reject`` is only ever ``"counts"`` next to a stated quorum: anything else is a FAILURE ack and
    the request stays pending; a well-formed one makes bo's reject one vote, and ana and cid complete it."""
    sink, ran, sessions, run = _paying_run()
    first = await _next_request(sink, 1)

    def vote(kind: ControlKind, by: str, **extra: Any) -> Any:
        payload = {"target_id": first.target_id, "decided_by": by, **extra}
        return sessions[0].dispatch(ControlMessage(kind, payload))

    for bad in ({"quorum": 2, "quorum_reject": "ends"}, {"quorum_reject": "counts"}, {"quorum": 2, "quorum_reject": 1}):
        refused = vote(ControlKind.REJECT, "bo", **bad)
        assert refused.result is AckResult.FAILURE and "payload['quorum_reject'] may only be 'counts'" in refused.detail
    assert sink.of("approval_rejected") == [] and sink.of("approval_voted") == []
    counted = vote(ControlKind.REJECT, "bo", detail="no", quorum=2, quorum_reject="counts")
    assert counted.ok and "the request stays pending" in counted.detail, counted.detail
    assert vote(ControlKind.APPROVE, "ana", quorum=2, quorum_reject="counts").ok and ran == []
    assert vote(ControlKind.APPROVE, "cid", quorum=2, quorum_reject="counts").ok
    await run
    assert ran == [5] and sink.of("approval_rejected") == []


QUICK = parse_policy('[[rule]]\nname = "quick"\ntool = "pay"\naction = "ask"\nexpires = "1s"\n')


async def test_a_rules_expires_is_the_longest_the_run_waits_for_a_person() -> None:
    """The tool's own wait is 10 minutes; the rule says 1 s: the request says it expires then, and then the wait
    ends as a timeout (approval_timed_out, the call not made)."""
    sink = InMemorySink()
    ran: list[Any] = []

    async def agent(task: Task, tools: AgentTools) -> None:
        if await tools.before_tool("pay", {"amount": 5}):
            ran.append(5)

    config = SteeringConfig(tool_approval_timeout_ms=600_000)
    run = wrap(agent, control=ControlChannel(), sinks=[sink], policy=QUICK, config=config).run("pay")
    await asyncio.wait_for(run, 30)
    [asked] = sink.of("approval_requested")
    assert asked.approval_requested.timeout_ms == 1000
    [timed_out] = sink.of("approval_timed_out")
    assert timed_out.approval_timed_out.target_id == asked.approval_requested.target_id
    assert ran == []


def test_a_call_the_deciding_sides_policy_cannot_judge_cannot_be_decided() -> None:
    """A request that names no rule is judged by the deciding side's policy; when that policy errs on the call (or
    cannot read its arguments) nobody may decide it, rather than falling back to the request's own fields."""
    policy = parse_policy(
        '[[rule]]\nname = "big"\ntool = "pay"\nwhen = "args.amount > 10"\naction = "ask"\napprovers = ["user:ana"]\n',
        source="server.toml",
    )
    authority = PolicyAuthority(policy, roles={"ana": ("approver",), "bo": ("approver",)})

    def view(args_json: str) -> SimpleNamespace:
        try:
            digest = args_digest("pay", json.loads(args_json))
        except ValueError:
            digest = "sha256:unknown"
        return SimpleNamespace(
            target_id="c",
            kind="tool",
            metadata={"tool_name": "pay", "args_json": args_json},
            requested_at_ms=0,
            args_digest=digest,
            original_args_digest="",
        )

    for bad in ('{"amount": "lots"}', "[1]", "not json"):
        why = authority.may_decide(Principal(name="ana"), view(bad), approve=True)
        assert why is not None and "could not judge this call" in why, (bad, why)
    assert authority.may_decide(Principal(name="bo"), view('{"amount": 50}'), approve=True) is not None  # the rule's
    assert authority.may_decide(Principal(name="ana"), view('{"amount": 50}'), approve=True) is None
    assert authority.may_decide(Principal(name="bo"), view('{"amount": 5}'), approve=True) is None  # no rule asks
