"""Rule matching, verdicts, evaluation errors and who may approve (table-driven)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goldfive_core.policy import (
    Allow,
    Ask,
    Deny,
    Escalation,
    GrantScope,
    Policy,
    PolicyCall,
    PolicyError,
    Rule,
)

FINANCE = Ask(approvers=("role:finance",), quorum=2, barred=("starter", "agent"))

POLICY = Policy(
    [
        Rule(name="no prod deletes", tool="delete_*", labels={"env": "prod"}, action=Deny(reason="not in prod")),
        Rule(name="small refunds", tool="refund", when="args.amount <= 50", action=Allow()),
        Rule(name="large transfers", tool="transfer_funds", when="args.amount > 10000", action=FINANCE),
        Rule(name="transfers", tool="transfer_funds", action=Ask(approvers=("user:ana", "user:bo"))),
        Rule(name="read only", tool=("get_*", "list_*"), action=Allow()),
        Rule(name="shell", tool="Bash", when="args.command matches '(rm|dd) .*'", action=Deny(reason="no rm")),
        Rule(name="shell ok", tool="Bash", when="args.command matches '(ls|cat) .*'", action=Allow()),
        Rule(name="ops agent", tool="restart", agent="ops-*", action=Allow()),
    ]
)

CASES: list[tuple[str, dict[str, Any], dict[str, Any], str, str]] = [
    # tool, args, extra PolicyCall fields, expected kind, expected rule ("" = none)
    ("refund", {"amount": 20}, {"gated": True}, "allow", "small refunds"),
    ("refund", {"amount": 51}, {"gated": True}, "ask", ""),
    ("refund", {"amount": 51}, {}, "allow", ""),  # an unmarked tool no rule claims runs as without a policy
    ("transfer_funds", {"amount": 20_000}, {}, "ask", "large transfers"),
    ("transfer_funds", {"amount": 20}, {}, "ask", "transfers"),
    ("get_user", {}, {"gated": True}, "allow", "read only"),
    ("list_users", {}, {}, "allow", "read only"),
    ("delete_user", {}, {"labels": {"env": "prod"}}, "deny", "no prod deletes"),
    ("delete_user", {}, {"labels": {"env": "dev"}, "gated": True}, "ask", ""),
    ("delete_user", {}, {"gated": True}, "ask", ""),
    ("Bash", {"command": "rm -rf /"}, {}, "deny", "shell"),
    ("Bash", {"command": "ls -l"}, {}, "allow", "shell ok"),
    ("Bash", {"command": "curl x"}, {"gated": True}, "ask", ""),
    ("restart", {}, {"agent": "ops-1", "gated": True}, "allow", "ops agent"),
    ("restart", {}, {"agent": "billing", "gated": True}, "ask", ""),
    ("Refund", {"amount": 1}, {"gated": True}, "ask", ""),  # globs and names are case-sensitive
]


@pytest.mark.parametrize(("tool", "args", "extra", "kind", "rule"), CASES)
def test_first_matching_rule_decides(
    tool: str, args: dict[str, Any], extra: dict[str, Any], kind: str, rule: str
) -> None:
    verdict = POLICY.evaluate(PolicyCall(tool=tool, args=args, **extra))
    assert (verdict.kind, verdict.rule_name) == (kind, rule)
    assert verdict.error == ""


def test_deny_carries_the_reason_the_model_sees() -> None:
    verdict = POLICY.evaluate(PolicyCall(tool="Bash", args={"command": "dd if=/dev/zero"}))
    assert verdict.reason == "no rm"


def test_ask_verdict_metadata_names_rule_approvers_and_quorum() -> None:
    verdict = POLICY.evaluate(PolicyCall(tool="transfer_funds", args={"amount": 20_000}))
    assert verdict.ask is FINANCE
    assert verdict.metadata() == {
        "policy_rule": "large transfers",
        "policy_action": "ask",
        "policy_approvers": "role:finance",
        "policy_quorum": "2",
        "policy_barred": "starter,agent",
    }
    escalating = Ask(escalate=Escalation(after_ms=1_800_000, to=("role:cfo",)), grants=(GrantScope.parse("1h"),))
    meta = Policy([Rule(name="r", action=escalating)]).evaluate(PolicyCall(tool="t", args={})).metadata()
    assert (meta["policy_escalate_after"], meta["policy_escalate_to"]) == ("30m", "role:cfo")
    assert meta["policy_grants"] == "1h"


ROUND_TRIP = [
    Ask(),
    FINANCE,
    Ask(
        approvers=("role:finance", "user:ana"),
        quorum=2,
        barred=("starter", "agent", "user:bo"),
        escalate=Escalation(after_ms=90_000, to=("role:cfo", "user:cy")),
        grants=(GrantScope.parse("run"), GrantScope.parse("session"), GrantScope.parse("1h30m")),
        reject_ends=False,
        expires_ms=4 * 3_600_000,
    ),
    Ask(barred=()),
]


@pytest.mark.parametrize("ask", ROUND_TRIP)
def test_an_ask_survives_the_request_metadata(ask: Ask) -> None:
    meta = {"policy_rule": "r", "policy_action": "ask", **ask.to_metadata()}
    assert Ask.from_metadata(meta) == ask
    assert all(isinstance(v, str) for v in meta.values())


def test_metadata_without_a_rule_or_unparsable_describes_no_ask() -> None:
    assert Ask.from_metadata({"tool_name": "x"}) is None
    assert Ask.from_metadata({"policy_action": "ask", "policy_quorum": "many"}) is None


ERR_POLICY = Policy(
    [
        Rule(name="small", tool="refund", when="args.amount <= 50", action=Allow()),
        Rule(name="all refunds ok", tool="refund", when="args.reason == 'dup'", action=Allow()),
        Rule(name="to blocked", tool="refund", when="args.to in ['mallory']", action=Deny(reason="blocked")),
        Rule(name="big", tool="pay", when="args.amount > 100", action=Ask(approvers=("role:finance",))),
        Rule(name="after big", tool="pay", action=Allow()),
    ]
)

ERROR_CASES = [
    # an allow rule that cannot be evaluated: later allows are skipped, the call asks
    ("refund", {"amount": "5", "reason": "dup", "to": "x"}, "ask", "", "args.amount is '5', not a number"),
    # ... a later deny still denies
    ("refund", {"amount": "5", "to": "mallory", "reason": "x"}, "deny", "to blocked", "rule 'small'"),
    # an ask rule that cannot be evaluated asks with its own approvers
    ("pay", {"amount": "lots"}, "ask", "big", "rule 'big' could not be evaluated"),
    ("pay", {}, "ask", "big", "args.amount is missing"),
]


@pytest.mark.parametrize(("tool", "args", "kind", "rule", "error"), ERROR_CASES)
def test_an_evaluation_error_never_allows(tool: str, args: dict[str, Any], kind: str, rule: str, error: str) -> None:
    verdict = ERR_POLICY.evaluate(PolicyCall(tool=tool, args=args))
    assert (verdict.kind, verdict.rule_name) == (kind, rule)
    assert error in verdict.error
    assert verdict.metadata()["policy_error"] == verdict.error
    if verdict.kind == "ask" and rule == "big":
        assert verdict.ask is not None and verdict.ask.approvers == ("role:finance",)


def test_evaluate_never_raises_even_on_hostile_args() -> None:
    class Hostile(dict[str, Any]):
        def __contains__(self, key: object) -> bool:
            raise RuntimeError("boom")

        def __getitem__(self, key: str) -> Any:
            raise RuntimeError("boom")

    verdict = ERR_POLICY.evaluate(PolicyCall(tool="pay", args=Hostile()))
    assert verdict.kind == "ask"
    assert "boom" in verdict.error


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["refund", "pay", "transfer_funds", "Bash", "x"]),
    st.dictionaries(
        st.sampled_from(["amount", "to", "reason", "command"]),
        st.none() | st.integers() | st.text(max_size=5) | st.floats(),
    ),
)
def test_evaluate_never_raises(tool: str, args: dict[str, Any]) -> None:
    for policy in (POLICY, ERR_POLICY):
        verdict = policy.evaluate(PolicyCall(tool=tool, args=args, gated=True))
        assert verdict.kind in ("allow", "ask", "deny")
        if verdict.error:
            assert verdict.kind != "allow"


def test_mentions_tells_the_gate_which_unmarked_tools_to_gate() -> None:
    assert POLICY.mentions("Bash") and POLICY.mentions("get_x") and not POLICY.mentions("other")
    assert Policy([Rule(name="all", action=Allow())]).mentions("anything")


def test_the_per_tool_cache_stays_bounded() -> None:
    policy = Policy([Rule(name="g", tool="t*", action=Allow())])
    for i in range(3000):
        policy.evaluate(PolicyCall(tool=f"t{i}", args={}))
    assert len(policy._heads) <= 1024


BUILD_ERRORS: list[tuple[list[Rule], str]] = [
    ([Rule(name="a", action=Allow()), Rule(name="a", tool="x", action=Allow())], "rule name 'a' is used twice"),
    (
        [Rule(name="all", action=Allow()), Rule(name="x", tool="x", action=Deny(reason="r"))],
        "rule 'x' is unreachable: rule 'all' comes first and matches every call",
    ),
    (
        [
            Rule(name="g", tool="del_*", action=Allow()),
            Rule(name="x", tool="del_user", when="args.a == 1", action=Allow()),
        ],
        "rule 'x' is unreachable",
    ),
    (
        [
            Rule(name="a", tool="t", when="args.n==1", action=Allow()),
            Rule(name="b", tool="t", when="args.n == 1", action=Deny(reason="r")),
        ],
        "rule 'b' contradicts rule 'a': the same calls, a different action (allow first, so this deny never applies)",
    ),
    (
        [Rule(name="a", tool="t", action=Ask(quorum=2)), Rule(name="b", tool="t", action=Ask(quorum=2))],
        "rule 'b' repeats rule 'a' and can never apply",
    ),
    (
        [
            Rule(name="a", tool="t", labels={"env": "prod"}, action=Allow()),
            Rule(name="b", tool="t", labels={"env": "prod", "team": "x"}, action=Deny(reason="r")),
        ],
        "rule 'b' is unreachable",
    ),
]


@pytest.mark.parametrize(("rules", "reason"), BUILD_ERRORS)
def test_bad_policies_are_refused_when_built(rules: list[Rule], reason: str) -> None:
    with pytest.raises(PolicyError) as info:
        Policy(rules)
    assert reason in str(info.value)


REACHABLE: list[list[Rule]] = [
    [Rule(name="a", tool="t", when="args.n == 1", action=Allow()), Rule(name="b", tool="t", action=Ask())],
    [Rule(name="a", tool="t*", agent="x", action=Allow()), Rule(name="b", tool="tt", action=Ask())],
    [Rule(name="a", tool="t", labels={"env": "prod"}, action=Allow()), Rule(name="b", tool="t", action=Ask())],
    [Rule(name="a", tool="t?", action=Allow()), Rule(name="b", tool="t*", action=Ask())],
]


@pytest.mark.parametrize("rules", REACHABLE)
def test_narrower_first_is_fine(rules: list[Rule]) -> None:
    assert len(Policy(rules)) == len(rules)


VALUE_ERRORS: list[tuple[Any, str]] = [
    (lambda: Rule(name="", action=Allow()), "a rule needs a name"),
    (lambda: Rule(name="r", action="allow"), "action must be Allow()"),
    (lambda: Rule(name="r", tool=[], action=Allow()), "tool is a name"),
    (lambda: Rule(name="r", labels={"env": 1}, action=Allow()), "labels maps"),
    (lambda: Rule(name="r", when="args.a >", action=Allow()), "when 'args.a >': column 9"),
    (lambda: Deny(reason=" "), "a deny rule needs a reason"),
    (lambda: Ask(quorum=0), "quorum must be a whole number in 1..20"),
    (lambda: Ask(quorum=True), "quorum must be a whole number"),
    (lambda: Ask(approvers=("user:a",), quorum=2), "quorum 2 can never be reached: only 1 user(s)"),
    (lambda: Ask(approvers=("finance",)), "approvers: 'finance' is not 'role:NAME' or 'user:NAME'"),
    (lambda: Ask(approvers="role:x"), "approvers is a list"),
    (lambda: Ask(approvers=("user:a", "user:a")), "listed twice"),
    (lambda: Ask(barred=("boss",)), "barred: 'boss' is not"),
    (lambda: Ask(approvers=("user:a",), barred=("user:a",)), "barred: 'user:a' is also an approver"),
    (lambda: Ask(expires_ms=0), "expires must be a positive duration"),
    (
        lambda: Ask(escalate=Escalation(after_ms=60_000, to=("role:x",)), expires_ms=60_000),
        "escalate.after is not before expires",
    ),
    (lambda: Escalation(after_ms=0, to=("role:x",)), "escalate.after must be a positive duration"),
    (lambda: Escalation(after_ms=1, to=()), "escalate.to names nobody"),
    (lambda: GrantScope.parse("forever"), "grant scope 'forever'"),
]


@pytest.mark.parametrize(("build", "reason"), VALUE_ERRORS)
def test_bad_values_are_refused(build: Any, reason: str) -> None:
    with pytest.raises(ValueError) as info:
        build()
    assert reason in str(info.value)


ANA: dict[str, Any] = {"user": "ana", "roles": {"finance"}}
BO: dict[str, Any] = {"user": "bo", "roles": {"finance"}}
CY: dict[str, Any] = {"user": "cy", "roles": ["cfo"]}
BOT: dict[str, Any] = {"user": "billing-agent", "roles": {"finance"}}
ESCALATING = Ask(
    approvers=("role:finance",),
    barred=("starter", "agent", "user:bo"),
    escalate=Escalation(after_ms=60_000, to=("role:cfo",)),
)

REFUSALS = [
    (ESCALATING, ANA, {}, ""),
    (ESCALATING, ANA, {"started_by": "ana"}, "'ana' started this run and may not approve it"),
    (ESCALATING, BOT, {"agent": "billing-agent"}, "is the agent that asks; it may not approve itself"),
    (ESCALATING, BO, {}, "'bo' is barred by 'user:bo'"),
    (ESCALATING, CY, {}, "'cy' is not among the approvers (role:finance)"),
    (ESCALATING, CY, {"escalated": True}, ""),
    (Ask(), {"user": "anyone"}, {}, ""),
    (Ask(), {"user": "a"}, {"agent": "a"}, "may not approve itself"),
    (Ask(barred=()), {"user": "a"}, {"agent": "a"}, ""),
    (Ask(approvers=("user:ana",)), {"user": ""}, {}, "'an anonymous decider' is not among"),
    (Ask(approvers=("role:ana",)), {"user": "ana"}, {}, "not among the approvers (role:ana)"),
    (Ask(approvers=("user:finance",)), {"user": "x", "roles": ["finance"]}, {}, "not among the approvers"),
    # A rule that names no approvers lets anyone answer, also once it escalated (the group is added, not imposed).
    (Ask(escalate=Escalation(after_ms=1000, to=("role:cfo",))), {"user": "ana"}, {"escalated": True}, ""),
    (Ask(escalate=Escalation(after_ms=1000, to=("role:cfo",))), {"user": "ana"}, {}, ""),
]


@pytest.mark.parametrize(("ask", "who", "context", "reason"), REFUSALS)
def test_who_may_approve(ask: Ask, who: dict[str, Any], context: dict[str, Any], reason: str) -> None:
    refusal = ask.refusal(**who, **context)
    assert reason in refusal if reason else refusal == ""
