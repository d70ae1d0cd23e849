"""A threshold ladder (rules that start ``args.amount > N and ...``) is skipped as a whole for a value below every
threshold; the verdict is always the one the rules give one by one (checked at and around every boundary)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from goldfive_core.policy import EvalError, Policy, PolicyCall, parse_policy

LADDER = """
[[rule]]
name = "a"
tool = "pay"
when = "args.amount > 100 and args.to == 'x'"
action = "allow"

[[rule]]
name = "b"
tool = "pay"
when = "args.amount >= 10 and args.to == 'y'"
action = "deny"
reason = "no y"

[[rule]]
name = "c"
tool = "pay"
when = "args.amount > 20 and args.to matches 'z.*'"
action = "ask"

[[rule]]
name = "d"
tool = "pay"
when = "args.amount < 5 and args.to == 'x'"
action = "deny"
reason = "too small"

[[rule]]
name = "e"
tool = "pay"
when = "args.amount <= 8 and args.to == 'w'"
action = "allow"

[[rule]]
name = "f"
tool = "pay"
when = "args.to == 'x'"
action = "ask"
"""
POLICY = parse_policy(LADDER)
# The same with the strict thresholds the outermost ones, so each bound of the skip test decides somewhere.
STRICT_OUTER = parse_policy(LADDER.replace("args.amount >= 10", "args.amount >= 50").replace("<= 8", "<= 1"))
AMOUNTS: list[Any] = [
    *(-1, 0, 1, 1.0, 1.5, 4, 4.999, 5, 7.9, 8, 8.0, 8.1, 9.99, 10, 10.0, 11, 19, 20, 20.0, 20.5, 21),
    *(49, 49.99, 50, 51, 100, 100.0, 100.01, 101, 10**30, math.inf, -math.inf, math.nan, True, "60", None),
]


def one_by_one(policy: Policy, call: PolicyCall) -> tuple[str, str]:
    """The first rule that matches, evaluating every rule's condition itself (no skipping)."""
    for rule in policy.rules:
        if not rule.matches_head(call):
            continue
        assert rule.expression is not None
        try:
            hit = rule.expression.test(call)
        except EvalError:
            return "error", rule.name
        if hit:
            return rule.action.kind, rule.name
    return "none", ""


@pytest.mark.parametrize("policy", [POLICY, STRICT_OUTER], ids=["loose-outer", "strict-outer"])
@pytest.mark.parametrize("to", ["x", "y", "zed", "w", "q"])
@pytest.mark.parametrize("amount", AMOUNTS, ids=repr)
def test_the_ladder_gives_the_verdict_of_the_rules_one_by_one(policy: Policy, amount: Any, to: str) -> None:
    args: dict[str, Any] = {"to": to} if amount is None else {"amount": amount, "to": to}
    call = PolicyCall(tool="pay", args=args)
    verdict = policy.evaluate(call)
    kind, name = one_by_one(policy, call)
    if kind == "error":
        assert verdict.error and "could not be evaluated" in verdict.error  # never a silent skip
        assert verdict.kind != "allow"
        return
    assert (verdict.kind if verdict.rule else "none", verdict.rule_name) == (kind, name)


def test_the_ladder_is_cut_into_segments_that_can_be_skipped() -> None:
    call = PolicyCall(tool="pay", args={"amount": 3, "to": "q"})
    segments = POLICY._candidates(call)
    assert [len(group) for _, group in segments] == [3, 2, 1]
    assert [skip is not None for skip, _ in segments] == [True, True, False]
