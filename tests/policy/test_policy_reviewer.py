"""The reviewer tier in the tool-call gate: a rule's reviewer allows, denies or asks before a person."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

from goldfive_core import ControlKind, ControlMessage, InMemorySink, Session, SteeringConfig
from goldfive_core.policy import Ask, GrantScope, Policy, PolicyError, Rule, RuleReviewer, parse_policy
from goldfive_core.review import ReviewVerdict
from goldfive_core.testing import NeverAnswer, ScriptedVerdicts
from goldfive_core.toolcall import Proceed, Skip, ToolCall, gate_tool_call

CALL = ToolCall(call_id="c1", tool_name="refund", args={"amount": 30, "to": "bob"}, agent="clerk", task_id="t1")


def policy(reviewer: Any, *, mode: str = "act", timeout_ms: int = 5_000, **ask: Any) -> Policy:
    review = RuleReviewer(target=reviewer, mode=mode, timeout_ms=timeout_ms)  # type: ignore[arg-type]
    return Policy([Rule(name="refunds", tool="refund", action=Ask(review=review, **ask))])


def session_with(rules: Policy, sink: InMemorySink, **kwargs: Any) -> Session:
    return Session(
        sinks=[sink],
        config=SteeringConfig(tool_approval_timeout_ms=60_000),
        has_channel=True,
        policy=rules,
        labels={"env": "test"},
        started_by="ana",
        **kwargs,
    )


def verdict_event(sink: InMemorySink) -> Any:
    [event] = sink.of("reviewer_verdict")
    return event.reviewer_verdict


async def opened(session: Session, target: str = "c1") -> None:
    """Until ``target`` is asked (ordered by the run's own event, never by sleeps)."""
    sink = next(s for s in session.events.sinks if isinstance(s, InMemorySink))
    await sink.wait_for("approval_requested", where=lambda e: e.approval_requested.target_id == target, timeout=10)
    assert session.approvals.is_open(target)


def send(session: Session, kind: ControlKind, **payload: Any) -> Any:
    return session.dispatch(ControlMessage(kind, payload))


async def test_an_allow_lets_the_call_through_on_the_reviewers_name_and_asks_nobody() -> None:
    sink = InMemorySink()
    reviewer = ScriptedVerdicts([ReviewVerdict.allow("a small refund to a known customer")], name="refunds-bot")
    session = session_with(policy(reviewer), sink)
    outcome = await gate_tool_call(session, CALL, needs_person=False)
    assert isinstance(outcome, Proceed) and outcome.args == CALL.args
    assert outcome.decision is not None and outcome.decision.decided_by == "reviewer:refunds-bot"
    assert outcome.note == "The reviewer reviewer:refunds-bot allowed this call: a small refund to a known customer"
    assert sink.of("approval_requested") == [] and sink.of("approval_granted") == []
    event = verdict_event(sink)
    assert (event.decided_by, event.channel, event.verdict, event.outcome, event.mode) == (
        "reviewer:refunds-bot",
        "reviewer",
        "allow",
        "allowed",
        "act",
    )
    assert (event.call_id, event.rule, event.tool_name, event.error) == ("c1", "refunds", "refund", "")


async def test_the_reviewer_is_given_a_copy_of_the_call_its_context_and_the_rule() -> None:
    def meddle(seen: Any) -> ReviewVerdict:
        seen.call.args["amount"] = 1_000_000  # whatever it does to the arguments, the reviewed call is what runs
        return ReviewVerdict.allow()

    reviewer = ScriptedVerdicts([meddle])
    session = session_with(policy(reviewer), InMemorySink())
    outcome = await gate_tool_call(session, CALL, needs_person=False)
    assert isinstance(outcome, Proceed) and outcome.args == {"amount": 30, "to": "bob"}
    [seen] = reviewer.seen
    assert seen.call.tool_name == "refund" and seen.rule.name == "refunds"
    ctx = seen.context
    assert (ctx.run_id, ctx.agent, ctx.task_id, ctx.started_by) == (session.run_id, "clerk", "t1", "ana")
    assert dict(ctx.labels) == {"env": "test"}


async def test_a_deny_skips_the_call_and_the_model_reads_the_reason() -> None:
    sink = InMemorySink()
    session = session_with(policy(ScriptedVerdicts([ReviewVerdict.deny("refunds go to the card used")])), sink)
    outcome = await gate_tool_call(session, CALL, needs_person=False)
    assert isinstance(outcome, Skip) and outcome.reason == "reviewer_denied"
    assert outcome.decided_by == "reviewer:scripted"
    assert "refunds go to the card used" in outcome.detail and "reviewer:scripted" in outcome.detail
    assert sink.of("approval_requested") == []
    assert verdict_event(sink).outcome == "denied"


async def test_an_ask_goes_to_a_person_with_the_verdict_on_the_request() -> None:
    sink = InMemorySink()
    session = session_with(policy(ScriptedVerdicts([ReviewVerdict.ask("a new payee")])), sink)
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=False))
    await opened(session)
    [asked] = sink.of("approval_requested")
    meta = asked.approval_requested.metadata
    assert (meta["review_by"], meta["review_verdict"], meta["review_reason"]) == (
        "reviewer:scripted",
        "ask",
        "a new payee",
    )
    assert "review_error" not in meta
    assert send(session, ControlKind.APPROVE, target_id="c1", decided_by="bo").ok
    outcome = await gated
    assert isinstance(outcome, Proceed) and outcome.decision is not None and outcome.decision.decided_by == "bo"
    assert verdict_event(sink).outcome == "asked"


@pytest.mark.parametrize(
    ("step", "error"),
    [
        (RuntimeError("the review service is down"), "raised RuntimeError: the review service is down"),
        (NeverAnswer(), "did not answer within 0.05 s"),
        ("allow", "returned str, not a ReviewVerdict"),
        ({"verdict": "allow"}, "returned dict, not a ReviewVerdict"),
    ],
    ids=["raises", "times-out", "junk-text", "junk-dict"],
)
async def test_a_reviewer_that_fails_means_ask_a_person_never_allow(step: Any, error: str) -> None:
    sink = InMemorySink()
    session = session_with(policy(ScriptedVerdicts([step]), timeout_ms=50), sink)
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=False))
    await opened(session)
    meta = sink.of("approval_requested")[0].approval_requested.metadata
    assert error in meta["review_error"] and meta["review_verdict"] == "ask"
    event = verdict_event(sink)
    assert (event.verdict, event.outcome) == ("ask", "asked") and error in event.error
    assert send(session, ControlKind.REJECT, target_id="c1", decided_by="bo", detail="no").ok
    outcome = await gated
    assert isinstance(outcome, Skip) and outcome.reason == "user_rejected"


async def test_shadow_mode_records_the_verdict_and_asks_the_person_as_if_there_were_no_reviewer() -> None:
    sink = InMemorySink()
    session = session_with(policy(ScriptedVerdicts([ReviewVerdict.deny("looks wrong")]), mode="shadow"), sink)
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=False))
    await opened(session)
    meta = sink.of("approval_requested")[0].approval_requested.metadata
    assert not [key for key in meta if key.startswith("review_")]  # the person is not told what it said
    event = verdict_event(sink)
    assert (event.verdict, event.reason, event.mode, event.outcome) == ("deny", "looks wrong", "shadow", "asked")
    assert send(session, ControlKind.APPROVE, target_id="c1", decided_by="bo").ok
    outcome = await gated
    assert isinstance(outcome, Proceed) and outcome.decision is not None and outcome.decision.decided_by == "bo"


async def test_a_reviewers_allow_is_never_one_of_the_people_a_quorum_needs() -> None:
    sink = InMemorySink()
    session = session_with(policy(ScriptedVerdicts([ReviewVerdict.allow("fine")]), quorum=2), sink)
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=False))
    await opened(session)
    meta = sink.of("approval_requested")[0].approval_requested.metadata
    assert meta["review_verdict"] == "allow" and "advice, not a vote" in meta["review_note"]
    first = send(session, ControlKind.APPROVE, target_id="c1", decided_by="bo")
    assert first.ok and first.data["quorum_progress"].startswith("1")
    assert session.approvals.is_open("c1") and not gated.done()
    assert send(session, ControlKind.APPROVE, target_id="c1", decided_by="cy").ok
    outcome = await gated
    assert isinstance(outcome, Proceed) and outcome.decision is not None
    assert "reviewer" not in outcome.decision.decided_by and verdict_event(sink).outcome == "asked"


async def test_a_reviewers_allow_makes_no_grant_the_next_call_is_reviewed_again() -> None:
    sink = InMemorySink()
    reviewer = ScriptedVerdicts([ReviewVerdict.allow("ok"), ReviewVerdict.ask("again?")])
    session = session_with(policy(reviewer, grants=(GrantScope(kind="run"),)), sink)
    assert isinstance(await gate_tool_call(session, CALL, needs_person=False), Proceed)
    second = ToolCall(call_id="c2", tool_name="refund", args={"amount": 30, "to": "bob"}, agent="clerk")
    gated = asyncio.create_task(gate_tool_call(session, second, needs_person=False))
    await opened(session, "c2")
    assert len(reviewer.seen) == 2 and sink.of("grant_created") == []
    gated.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gated


@pytest.mark.parametrize(
    "claim",
    [{"decided_by": "reviewer:scripted"}, {"decided_by": "mallory", "channel": "reviewer"}],
    ids=["by", "channel"],
)
async def test_a_decision_from_outside_that_claims_a_reviewer_is_refused_and_grants_nothing(
    claim: dict[str, str],
) -> None:
    sink = InMemorySink()
    session = session_with(policy(ScriptedVerdicts([ReviewVerdict.ask("?")]), grants=(GrantScope(kind="run"),)), sink)
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=False))
    await opened(session)
    ack = send(session, ControlKind.APPROVE, target_id="c1", grant="run", **claim)
    assert not ack.ok and "only taken in the agent's own gate" in ack.detail
    assert session.approvals.is_open("c1") and sink.of("grant_created") == [] and not gated.done()
    assert send(session, ControlKind.REJECT, target_id="c1", decided_by="bo").ok
    assert isinstance(await gated, Skip)


async def test_a_rule_that_cannot_be_evaluated_asks_a_person_without_its_reviewer() -> None:
    reviewer = ScriptedVerdicts([ReviewVerdict.allow()])
    rules = Policy(
        [Rule(name="big", tool="refund", when="args.amount > 10", action=Ask(review=RuleReviewer(target=reviewer)))]
    )
    sink = InMemorySink()
    session = session_with(rules, sink)
    odd = ToolCall(call_id="c1", tool_name="refund", args={"amount": "lots"})
    gated = asyncio.create_task(gate_tool_call(session, odd, needs_person=False))
    await opened(session)
    assert reviewer.seen == [] and sink.of("reviewer_verdict") == []
    gated.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gated


# -- the policy file --------------------------------------------------------------------------------------
def test_a_policy_file_names_a_reviewer_its_mode_and_timeout() -> None:
    rules = parse_policy(
        textwrap.dedent(
            """
            [[rule]]
            name = "refunds"
            tool = "refund"
            action = "ask"
            review = "acme.review:refunds"
            review_mode = "shadow"
            review_timeout = "20s"
            """
        )
    )
    ask = rules.rules[0].action
    assert isinstance(ask, Ask) and ask.review is not None
    assert (ask.review.spec, ask.review.mode, ask.review.timeout_ms) == ("acme.review:refunds", "shadow", 20_000)
    assert ask.review.decider == "reviewer:refunds"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ('review = "not a spec"', "review is 'module:callable'"),
        ('review = "m:f"\nreview_mode = "loud"', "review_mode is 'act' or 'shadow'"),
        ('review = "m:f"\nreview_timeout = "1h"', "review_timeout must be a duration in 1s..5m"),
        ('review_mode = "shadow"', "'review_mode' needs 'review'"),
    ],
)
def test_a_bad_reviewer_in_a_policy_file_is_refused_with_its_line(extra: str, words: str) -> None:
    text = f'[[rule]]\nname = "r"\ntool = "t"\naction = "ask"\n{extra}\n'
    with pytest.raises(PolicyError, match=words) as caught:
        parse_policy(text, source="p.toml")
    assert caught.value.line >= 1


def test_only_an_ask_rule_may_name_a_reviewer() -> None:
    with pytest.raises(PolicyError, match="'review' applies to ask rules only"):
        parse_policy('[[rule]]\nname = "r"\ntool = "t"\naction = "allow"\nreview = "m:f"\n')


async def test_a_reviewer_named_by_module_and_callable_is_imported_by_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "acme_review.py").write_text(
        textwrap.dedent(
            """
            from goldfive_core.review import ReviewVerdict

            def refunds(call, context, rule):  # a plain function: the gate runs it off the event loop
                if call.args["amount"] <= 50:
                    return ReviewVerdict.allow(f"{call.args['amount']} is small")
                return ReviewVerdict.deny("too big for a bot")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    rules = parse_policy(
        '[[rule]]\nname = "refunds"\ntool = "refund"\naction = "ask"\nreview = "acme_review:refunds"\n'
    )
    sink = InMemorySink()
    session = session_with(rules, sink)
    small = await gate_tool_call(session, CALL, needs_person=False)
    big = await gate_tool_call(
        session, ToolCall(call_id="c2", tool_name="refund", args={"amount": 500}), needs_person=False
    )
    assert isinstance(small, Proceed) and small.note.endswith("30 is small")
    assert isinstance(big, Skip) and big.reason == "reviewer_denied" and "too big for a bot" in big.detail


async def test_a_reviewer_that_cannot_be_imported_means_ask() -> None:
    rules = parse_policy('[[rule]]\nname = "r"\ntool = "refund"\naction = "ask"\nreview = "no_such_module_here:f"\n')
    sink = InMemorySink()
    session = session_with(rules, sink)
    gated = asyncio.create_task(gate_tool_call(session, CALL, needs_person=False))
    await opened(session)
    assert "ModuleNotFoundError" in verdict_event(sink).error
    gated.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gated


def test_the_review_packages_public_names_are_pinned_and_documented() -> None:
    import goldfive_core.review as review

    assert review.__all__ == sorted(review.__all__, key=lambda n: (not n.isupper(), n))
    assert set(review.__all__) == {
        "CARD_KEYS",
        "DEFAULT_INSTRUCTIONS",
        "MAX_REASON_CHARS",
        "REVIEW_CHANNEL",
        "Agreement",
        "Judged",
        "ModelReviewer",
        "ReviewContext",
        "ReviewStats",
        "ReviewStep",
        "ReviewVerdict",
        "ReviewedCall",
        "Reviewer",
        "adk_completion",
        "attributed",
        "parse_verdict",
        "resolve_reviewer",
        "review_call",
        "review_json",
        "review_stats",
        "run_reviewer",
        "selected_stats",
    }
    for name in review.__all__:
        obj = getattr(review, name)
        if isinstance(obj, type) or (callable(obj) and name != "Agreement"):  # Agreement is a Literal alias
            assert obj.__doc__, f"goldfive_core.review.{name} has no docstring"
