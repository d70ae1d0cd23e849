"""Quorum, grants and who may decide (PolicyAuthority), with a virtual clock; table-driven."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from goldfive_core._util import args_digest, canonical_json
from goldfive_core.policy import (
    Ask,
    Escalation,
    GrantBook,
    GrantError,
    GrantScope,
    Policy,
    PolicyAuthority,
    PolicyCall,
    QuorumTally,
    Rule,
    parse_duration,
)

# -- quorum -----------------------------------------------------------------------------------------------

A, B = "sha256:a", "sha256:b"

QUORUM_SCRIPTS: list[tuple[dict[str, Any], list[tuple[Any, ...]], list[tuple[str, str]]]] = [
    # (tally options, votes, [(step kind, progress) after each vote])
    (
        {"quorum": 2},
        [("approve", "ana", A), ("approve", "bo", A)],
        [("counted", "1 of 2: ana"), ("complete", "2 of 2: ana, bo")],
    ),
    (
        {"quorum": 2},
        [("approve", "ana", A), ("approve", "ana", A), ("approve", "bo", A)],
        [("counted", "1 of 2: ana"), ("duplicate", "1 of 2: ana"), ("complete", "2 of 2: ana, bo")],
    ),
    (
        {"quorum": 2},
        [("approve", "ana", A), ("reject", "bo"), ("approve", "cy", A)],
        [
            ("counted", "1 of 2: ana"),
            ("rejected", "1 of 2: ana; rejected by bo"),
            ("refused", "1 of 2: ana; rejected by bo"),
        ],
    ),
    (
        {"quorum": 2, "reject_ends": False},
        [("reject", "bo"), ("approve", "ana", A), ("approve", "cy", A)],
        [
            ("reject_counted", "0 of 2; rejected by bo"),
            ("counted", "1 of 2: ana; rejected by bo"),
            ("complete", "2 of 2: ana, cy; rejected by bo"),
        ],
    ),
    # an edit puts new arguments on the table and restarts the count with its author
    (
        {"quorum": 2},
        [("approve", "ana", A), ("edit", "bo", B), ("approve", "ana", A), ("approve", "ana", B)],
        [
            ("counted", "1 of 2: ana"),
            ("restarted", "1 of 2: bo"),
            ("refused", "1 of 2: bo"),
            ("complete", "2 of 2: bo, ana"),
        ],
    ),
    ({"quorum": 1}, [("edit", "bo", B)], [("complete", "1 of 1: bo")]),
    ({"quorum": 2}, [("approve", "", A)], [("refused", "0 of 2")]),
]


@pytest.mark.parametrize(("options", "votes", "expected"), QUORUM_SCRIPTS)
def test_quorum(options: dict[str, Any], votes: list[tuple[Any, ...]], expected: list[tuple[str, str]]) -> None:
    tally = QuorumTally(args_digest=A, **options)
    steps = []
    for vote in votes:
        if vote[0] == "reject":
            steps.append(tally.reject(vote[1], reason="no"))
        else:
            steps.append(tally.approve(vote[1], args_digest=vote[2], edited=vote[0] == "edit"))
    assert [(s.kind, s.progress) for s in steps] == expected
    final = [s for s in steps if s.final]
    assert len(final) <= 1  # the call runs (or is rejected) once


def test_the_completed_quorum_carries_the_arguments_all_approved() -> None:
    tally = QuorumTally(quorum=2, args_digest=A)
    tally.approve("ana", args_digest=A)
    tally.approve("bo", args_digest=B, edited=True)
    step = tally.approve("ana", args_digest=B)
    assert step.final and step.args_digest == B and tally.approvers == ("bo", "ana")


def test_a_refused_vote_says_by_a_flag_whether_it_was_for_arguments_replaced_since() -> None:
    tally = QuorumTally(quorum=3, args_digest=A)
    tally.approve("ana", args_digest=A)
    assert not tally.approve("", args_digest=A).stale  # refused: no name, but not stale
    tally.approve("bo", args_digest=B, edited=True)
    stale = tally.approve("cy", args_digest=A)
    assert (stale.kind, stale.stale) == ("refused", True)
    assert tally.approve("ana", args_digest=B).kind == "counted"
    tally.approve("cy", args_digest=B)
    late = tally.approve("dee", args_digest=A)  # refused because it is over, whatever it approved
    assert (late.kind, late.stale) == ("refused", False)


# -- grants -----------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now

    def advance(self, duration: str) -> None:
        self.now += parse_duration(duration)


OFFERING = Ask(
    approvers=("role:ops",), grants=(GrantScope.parse("run"), GrantScope.parse("session"), GrantScope.parse("1h"))
)


def deploy(env: str = "staging") -> PolicyCall:
    return PolicyCall(tool="deploy", args={"env": env})


def test_a_run_grant_lets_matching_calls_of_that_run_through_until_revoked() -> None:
    clock = Clock()
    book = GrantBook(clock=clock)
    grant = book.create(ask=OFFERING, rule="deploys", tool="deploy", scope="run", granted_by="ana", run_id="run-1")
    assert grant.grant_id.startswith("grant-") and grant.expires_at_ms is None
    assert "for the rest of run run-1, granted by ana" in grant.describe()
    assert book.find(deploy(), rule="deploys", run_id="run-1") == grant
    assert book.find(deploy(), rule="deploys", run_id="run-2") is None
    assert book.find(deploy(), rule="deploys") is None  # a call that names no run is in no run the grant covers
    assert book.find(deploy(), rule="other rule", run_id="run-1") is None
    assert book.find(PolicyCall(tool="rollback", args={}), rule="deploys", run_id="run-1") is None
    revoked = book.revoke(grant.grant_id, by="bo")
    assert revoked is not None and revoked.revoked_by == "bo"
    assert book.find(deploy(), rule="deploys", run_id="run-1") is None
    assert book.list() == [] and book.list(include_inactive=True) == [revoked]
    assert book.revoke(grant.grant_id, by="bo") is None


def test_a_timed_grant_expires_on_the_virtual_clock() -> None:
    clock = Clock()
    book = GrantBook(clock=clock)
    grant = book.create(ask=OFFERING, rule="deploys", tool="deploy", scope="1h", granted_by="ana")
    assert "for 1h" in grant.describe()
    clock.advance("59m")
    assert book.find(deploy(), rule="deploys", run_id="any") == grant
    clock.advance("1m")
    assert book.find(deploy(), rule="deploys", run_id="any") is None


def test_a_session_grant_and_an_args_constraint() -> None:
    book = GrantBook(clock=Clock())
    book.create(
        ask=OFFERING,
        rule="deploys",
        tool="deploy",
        scope="session",
        granted_by="ana",
        session_id="s-1",
        args_constraint="args.env == 'staging'",
    )
    assert book.find(deploy("staging"), rule="deploys", session_id="s-1") is not None
    assert book.find(deploy("prod"), rule="deploys", session_id="s-1") is None
    assert book.find(PolicyCall(tool="deploy", args={}), rule="deploys", session_id="s-1") is None  # cannot tell
    assert book.find(deploy("staging"), rule="deploys", session_id="s-2") is None
    assert book.find(deploy("staging"), rule="deploys", run_id="run-1") is None  # a run in no session


GRANT_REFUSALS: list[tuple[dict[str, Any], str]] = [
    ({"edited": True}, "an edited approval never creates a grant"),
    ({"scope": "2h"}, "does not offer a grant for 2h (offered: for this run, for this session, for 1h)"),
    ({"scope": "forever"}, "grant scope 'forever'"),
    ({"run_id": ""}, "needs the run's id"),
    ({"scope": "session"}, "needs a session id"),
    ({"granted_by": ""}, "must name who grants it"),
    ({"args_constraint": "args.x >"}, "args constraint"),
    ({"ask": Ask()}, "offered: none"),
]


@pytest.mark.parametrize(("change", "reason"), GRANT_REFUSALS)
def test_grants_that_may_not_be_created(change: dict[str, Any], reason: str) -> None:
    kwargs: dict[str, Any] = {
        "ask": OFFERING,
        "rule": "deploys",
        "tool": "deploy",
        "scope": "run",
        "granted_by": "ana",
        "run_id": "run-1",
        **change,
    }
    book = GrantBook(clock=Clock())
    with pytest.raises(GrantError, match=None) as info:
        book.create(**kwargs)
    assert reason in str(info.value)
    assert book.list(include_inactive=True) == []


def test_the_grant_book_is_bounded() -> None:
    book = GrantBook(clock=Clock(), limit=2)
    for _ in range(2):
        book.create(ask=OFFERING, rule="r", tool="deploy", scope="1h", granted_by="ana")
    with pytest.raises(GrantError, match="too many grants"):
        book.create(ask=OFFERING, rule="r", tool="deploy", scope="1h", granted_by="ana")


# -- who may decide ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
    target_id: str
    metadata: Mapping[str, str]
    requested_at_ms: int
    kind: str = "tool"
    args_digest: str = ""
    original_args_digest: str = ""


@dataclasses.dataclass(frozen=True)
class Who:
    name: str


PAYMENTS = Policy(
    [
        Rule(
            name="large transfers",
            tool="transfer_funds",
            action=Ask(
                approvers=("role:finance",),
                quorum=2,
                barred=("starter", "agent"),
                escalate=Escalation(after_ms=parse_duration("30m"), to=("role:cfo",)),
                expires_ms=parse_duration("4h"),
            ),
        )
    ]
)
ROLES = {"ana": {"finance"}, "bo": {"finance"}, "cy": {"cfo"}, "pay-agent": {"finance"}}


def request(clock: Clock, **extra: str) -> Row:
    """The agent's request for transfer_funds(amount=20000), as its gate wrote it (``extra``: what it also wrote)."""
    args = {"amount": 20_000}
    verdict = PAYMENTS.evaluate(PolicyCall(tool="transfer_funds", args=args))
    call = {"tool_name": "transfer_funds", "args_json": canonical_json(args)}
    meta = {**verdict.metadata(), **call, "agent_name": "pay-agent", "started_by": "bo", **extra}
    return Row(
        target_id="call-1",
        metadata=meta,
        requested_at_ms=clock.now,
        args_digest=args_digest("transfer_funds", args),
    )


AUTHORITY_CASES = [
    # (who, minutes after the request, with the deciding side's own policy?, refusal substring or "")
    ("ana", "1m", True, ""),
    ("ana", "1m", False, ""),
    ("bo", "1m", True, "'bo' started this run and may not approve it"),
    ("pay-agent", "1m", True, "'pay-agent' is the agent that asks; it may not approve itself"),
    ("cy", "29m", True, "'cy' is not among the approvers (role:finance)"),
    ("cy", "30m", True, ""),  # escalated: the cfo group may answer now
    ("cy", "30m", False, ""),
    ("mallory", "1m", True, "'mallory' is not among the approvers"),
    ("ana", "4h", True, "'call-1' expired 4h after it was asked"),
    ("ana", "4h", False, "expired"),
]


@pytest.mark.parametrize(("who", "after", "own_policy", "refusal"), AUTHORITY_CASES)
def test_who_may_decide(who: str, after: str, own_policy: bool, refusal: str) -> None:
    clock = Clock()
    row = request(clock)
    clock.advance(after)
    authority = PolicyAuthority(PAYMENTS if own_policy else None, roles=ROLES, clock=clock)
    for approve in (True, False):
        answer = authority.may_decide(Who(who), row, approve=approve)
        if refusal:
            assert answer is not None and refusal in answer
            assert ("can no longer be taken" if "expired" in refusal else "the request stays pending") in answer
        else:
            assert answer is None


def test_the_deciding_sides_policy_wins_over_what_the_agent_wrote() -> None:
    """The agent's fields (mallory, nobody barred) and the rule it names (one the deciding side does not have, or
    no rule at all) never stand in for the deciding side's own evaluation of the call."""
    clock = Clock()
    authority = PolicyAuthority(PAYMENTS, roles=lambda user: ROLES.get(user, ()), clock=clock)
    for named in ({}, {"policy_rule": "made up"}, {"policy_rule": ""}):
        forged = request(clock, policy_approvers="user:mallory", policy_barred="", **named)
        assert authority.may_decide(Who("mallory"), forged, approve=True) is not None, named
        assert authority.may_decide(Who("ana"), forged, approve=True) is None, named
        judged = authority.judge(forged)
        assert (judged.rule, judged.source, judged.ask) == ("large transfers", "server", PAYMENTS.rules[0].action)
        assert judged.disagrees is bool(forged.metadata["policy_rule"])


def test_requests_no_rule_asked_are_left_alone() -> None:
    row = Row(target_id="t", metadata={"tool_name": "x", "args_json": "{}"}, requested_at_ms=1)
    row = dataclasses.replace(row, args_digest=args_digest("x", {}))
    assert PolicyAuthority(PAYMENTS).may_decide(Who("anyone"), row, approve=True) is None
    assert PolicyAuthority().may_decide(Who("anyone"), row, approve=False) is None
