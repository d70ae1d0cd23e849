"""With a policy of its own (``goldfive serve --policy``, ``goldfive approve --policy``) the deciding side judges each
tool call itself, by its tool name and arguments; the rule a request names is only the agent's word.

Table-driven over :class:`PolicyAuthority` (the served cases are in ``tests/server/test_server_authority.py``): which
rule governs, who may approve or reject, and what happens to requests the deciding side's rules do not cover
(an allow rule, no rule, a task's approval, a request for input) or cannot judge (fail closed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from goldfive_core._util import args_digest, canonical_json
from goldfive_core.policy import Judgment, PolicyAuthority, PolicyCall, parse_policy

SERVER = parse_policy(
    """
[[rule]]
name = "large transfers"
tool = "transfer_funds"
when = "args.amount > 10000"
action = "ask"
approvers = ["user:ana", "user:bo"]
quorum = 2
expires = "1h"

[[rule]]
name = "quick ones"
tool = "transfer_funds"
action = "ask"
approvers = ["user:ana"]
expires = "5m"

[[rule]]
name = "no crypto"
tool = "buy_crypto"
action = "deny"
reason = "never"

[[rule]]
name = "small buys"
tool = "buy_coffee"
action = "allow"
""",
    source="server.toml",
)
MALLORY = {"policy_action": "ask", "policy_approvers": "user:mallory", "policy_barred": ""}
"""What an agent writes to make itself (mallory) the approver."""


@dataclasses.dataclass(frozen=True)
class Row:
    target_id: str
    kind: str
    metadata: Mapping[str, str]
    args_digest: str
    requested_at_ms: int = 1
    original_args_digest: str = ""


@dataclasses.dataclass(frozen=True)
class Who:
    name: str


def call(tool: str, args: Any, *, digest: str | None = None, **meta: str) -> Row:
    """A tool call's request as the agent's gate writes it; ``meta``: what the agent's own rule wrote."""
    text = args if isinstance(args, str) else canonical_json(args)
    if digest is None:
        digest = args_digest(tool, args) if not isinstance(args, str) else ""
    return Row(target_id="c1", kind="tool", metadata={"tool_name": tool, "args_json": text, **meta}, args_digest=digest)


def other(kind: str, **meta: str) -> Row:
    """A request that holds no tool call (a task's approval, a request for input)."""
    return Row(target_id="t1", kind=kind, metadata=dict(meta), args_digest="")


BIG = {"amount": 20_000, "to": "bolt"}
ROWS: dict[str, Row] = {
    "names a weaker rule": call("transfer_funds", BIG, policy_rule="quick ones", **MALLORY),
    "names no rule": call("transfer_funds", BIG),
    "names the rule with other terms": call("transfer_funds", BIG, policy_rule="large transfers", **MALLORY),
    "names the server's rule with its terms": call(
        "transfer_funds", BIG, **SERVER.evaluate(PolicyCall(tool="transfer_funds", args=BIG)).metadata()
    ),
    "names the deny rule as an ask": call("buy_crypto", {"coin": "x"}, policy_rule="no crypto", **MALLORY),
    "allowed by the server": call("buy_coffee", {"cups": 2}, policy_rule="coffee", **MALLORY),
    "no server rule": call("send_gift", {"to": "bo"}, policy_rule="gifts", **MALLORY),
    "arguments not JSON": call("transfer_funds", "{amount: 20000}", policy_rule="quick ones", **MALLORY),
    "arguments not an object": call("transfer_funds", "[20000]", policy_rule="quick ones", **MALLORY),
    "arguments the digest does not cover": call(
        "transfer_funds", {"amount": 5}, digest=args_digest("transfer_funds", BIG), policy_rule="quick ones", **MALLORY
    ),
    "no digest": call("transfer_funds", {"amount": 5}, digest="", policy_rule="quick ones", **MALLORY),
    "a task naming a rule": other("task", policy_rule="quick ones", **MALLORY),
    "a task": other("task"),
    "a request for input": other("input", tool_name="transfer_funds"),
}

# (row, source, governing rule, action, disagrees, quorum or None for no ask, refusal substring or "")
JUDGED = [
    ("names a weaker rule", "server", "large transfers", "ask", True, 2, ""),
    ("names no rule", "server", "large transfers", "ask", False, 2, ""),
    ("names the rule with other terms", "server", "large transfers", "ask", True, 2, ""),
    # An agent with the server's own file: the same rule, the same terms, nothing to flag.
    ("names the server's rule with its terms", "server", "large transfers", "ask", False, 2, ""),
    ("names the deny rule as an ask", "server", "no crypto", "deny", True, None, "denies this call"),
    ("allowed by the server", "server", "small buys", "allow", True, 1, ""),
    ("no server rule", "request", "gifts", "ask", False, 1, ""),
    ("arguments not JSON", "server", "", "", True, None, "are not a JSON object"),
    ("arguments not an object", "server", "", "", True, None, "are not a JSON object"),
    ("arguments the digest does not cover", "server", "", "", True, None, "not the ones its digest"),
    ("no digest", "server", "", "", True, None, "not the ones its digest (none)"),
    ("a task naming a rule", "server", "", "", True, None, "judges tool calls only"),
    ("a task", "request", "", "", False, None, ""),
    ("a request for input", "request", "", "", False, None, ""),
]


@pytest.mark.parametrize(("case", "source", "rule", "action", "disagrees", "quorum", "refusal"), JUDGED)
def test_the_rule_that_governs_a_request(
    case: str, source: str, rule: str, action: str, disagrees: bool, quorum: int | None, refusal: str
) -> None:
    judged = PolicyAuthority(SERVER).judge(ROWS[case])
    assert isinstance(judged, Judgment)
    assert (judged.source, judged.rule, judged.action, judged.disagrees) == (source, rule, action, disagrees), judged
    assert (judged.ask.quorum if judged.ask is not None else None) == quorum, judged
    assert refusal in judged.refusal and bool(refusal) == bool(judged.refusal), judged.refusal
    # What the card may offer: both; only a rejection of what the server's rule denies; nothing it could not judge.
    offered = ("approve", "reject") if not refusal else ("reject",) if action == "deny" else ()
    assert judged.decisions == offered, judged
    if disagrees and judged.rule:
        assert repr(judged.rule) in judged.note, judged.note


# (row, who, approve?, refusal substring or "" for allowed)
DECISIONS = [
    ("names a weaker rule", "mallory", True, "not among the approvers (user:ana, user:bo)"),
    ("names a weaker rule", "ana", True, ""),
    ("names the rule with other terms", "mallory", True, "not among the approvers"),
    ("names the deny rule as an ask", "mallory", True, "denies this call (rule 'no crypto')"),
    ("names the deny rule as an ask", "ana", True, "denies this call (rule 'no crypto')"),
    ("names the deny rule as an ask", "ana", False, ""),  # a denied call can still be rejected
    ("allowed by the server", "dee", True, "not among the approvers (user:mallory)"),  # the request's own
    ("allowed by the server", "mallory", True, ""),
    ("no server rule", "mallory", True, ""),
    ("no server rule", "ana", True, "not among the approvers (user:mallory)"),
    ("arguments not JSON", "mallory", True, "could not judge this call"),
    ("arguments not JSON", "ana", False, "could not judge this call"),
    ("arguments the digest does not cover", "ana", True, "could not judge this call"),
    ("no digest", "ana", True, "could not judge this call"),
    ("a task naming a rule", "mallory", True, "judges tool calls only"),
    ("a task naming a rule", "ana", True, "judges tool calls only"),
    ("a task", "anyone", True, ""),
    ("a request for input", "anyone", True, ""),
]


@pytest.mark.parametrize(("case", "who", "approve", "refusal"), DECISIONS)
def test_who_may_decide_under_the_deciding_sides_policy(case: str, who: str, approve: bool, refusal: str) -> None:
    authority = PolicyAuthority(SERVER, clock=lambda: 60_000)  # a minute after the requests were asked
    answer = authority.may_decide(Who(who), ROWS[case], approve=approve)
    if refusal:
        assert answer is not None and refusal in answer, answer
    else:
        assert answer is None


def test_without_a_policy_of_its_own_the_deciding_side_takes_the_requests_fields() -> None:
    """``goldfive serve`` without ``--policy``: the request's own rule and fields, as the agent wrote them."""
    authority = PolicyAuthority(clock=lambda: 60_000)
    row = ROWS["names a weaker rule"]
    judged = authority.judge(row)
    assert (judged.source, judged.rule, judged.disagrees) == ("request", "quick ones", False)
    assert authority.may_decide(Who("mallory"), row, approve=True) is None
    assert authority.may_decide(Who("ana"), row, approve=True) is not None


def test_the_call_is_judged_by_its_own_arguments_after_an_approver_of_a_quorum_edited_them() -> None:
    """An edit of a quorum puts other arguments on the table; the request's own call (and its digest) is what the
    deciding side judged and keeps judging, so the rule does not change mid-count."""
    row = dataclasses.replace(
        ROWS["names no rule"], args_digest="sha256:edited", original_args_digest=ROWS["names no rule"].args_digest
    )
    judged = PolicyAuthority(SERVER).judge(row)
    assert (judged.rule, judged.refusal) == ("large transfers", "")


LABELLED = parse_policy(
    """
[[rule]]
name = "staging is free"
tool = "deploy"
labels = { env = "staging" }
action = "allow"

[[rule]]
name = "no prod deletes"
tool = "delete"
labels = { env = "prod" }
action = "deny"
reason = "not in production"

[[rule]]
name = "deletes"
tool = "delete"
action = "ask"
approvers = ["user:ana"]

[[rule]]
name = "deploys"
tool = "deploy"
action = "ask"
approvers = ["user:ana"]
""",
    source="server.toml",
)


def test_a_rule_on_run_labels_the_request_does_not_carry_is_never_skipped_to_a_weaker_one() -> None:
    """A request does not carry its run's labels: a deny (or ask) rule on labels that would come first might
    apply, so the call cannot be decided (fail closed) rather than falling to the rule after it. An allow rule on
    labels is left out: the rule after it is the stricter answer."""
    authority = PolicyAuthority(LABELLED, clock=lambda: 60_000)
    delete = call("delete", {"path": "/srv/x"}, policy_rule="deletes", **MALLORY)
    judged = authority.judge(delete)
    assert "rule 'no prod deletes' (line 8) matches on run labels" in judged.refusal, judged
    assert authority.may_decide(Who("ana"), delete, approve=True) is not None
    deploy = call("deploy", {"version": "1.2"})
    judged = authority.judge(deploy)
    assert (judged.rule, judged.refusal) == ("deploys", "")
    assert authority.may_decide(Who("ana"), deploy, approve=True) is None
    assert authority.may_decide(Who("mallory"), deploy, approve=True) is not None


GRANTING = parse_policy(
    """
[[rule]]
name = "refunds"
tool = "refund"
action = "ask"
approvers = ["user:ana"]
grants = ["run", "1h"]

[[rule]]
name = "payouts"
tool = "payout"
action = "ask"
approvers = ["user:ana"]

[[rule]]
name = "pairs"
tool = "wire"
action = "ask"
quorum = 2
grants = ["run"]

[[rule]]
name = "small buys"
tool = "buy_coffee"
action = "allow"
""",
    source="server.toml",
)


def _terms_of(tool: str, args: Mapping[str, Any]) -> dict[str, str]:
    """The ``policy_*`` fields an agent with the server's own file writes for this call."""
    return GRANTING.evaluate(PolicyCall(tool=tool, args=args)).metadata()


REFUND = _terms_of("refund", {"amount": 5})
GRANT_ROWS: dict[str, Row] = {
    "the server's rule, its terms": call("refund", {"amount": 5}, **REFUND),
    "the server's rule, a longer grant": call("refund", {"amount": 5}, **{**REFUND, "policy_grants": "run,1h,2d"}),
    "another rule's name": call("refund", {"amount": 5}, **{**REFUND, "policy_rule": "quick refunds"}),
    "no rule named": call("refund", {"amount": 5}),
    "a rule offering none": call("payout", {"amount": 5}, **{**_terms_of("payout", {}), "policy_grants": "session"}),
    "a quorum rule": call("wire", {"amount": 5}, **_terms_of("wire", {})),
    "an allow rule": call("buy_coffee", {"cups": 1}, policy_rule="coffee", policy_action="ask", policy_grants="run"),
    "no server rule": call("send_gift", {"to": "bo"}, policy_rule="gifts", policy_action="ask", policy_grants="run"),
}

# (row, scope asked, refusal substring or "" when allowed, the scopes the card offers)
GRANTS = [
    ("the server's rule, its terms", "run", "", ["run", "1h"]),
    ("the server's rule, its terms", "1h", "", ["run", "1h"]),
    (
        "the server's rule, its terms",
        "2h",
        "rule 'refunds' does not offer a grant for 2h (offered: for this run, for 1h)",
        ["run", "1h"],
    ),
    ("the server's rule, its terms", "session", "does not offer a grant for this session", ["run", "1h"]),
    ("the server's rule, its terms", "forever", "grant scope 'forever'", ["run", "1h"]),
    ("the server's rule, a longer grant", "2d", "does not offer a grant for 2d (offered: for this run, for 1h)", []),
    ("the server's rule, a longer grant", "1h", "names this rule with other terms than the server's rule", []),
    ("another rule's name", "run", "names rule 'quick refunds', not the server's rule 'refunds'", []),
    ("no rule named", "run", "names no rule, not the server's rule 'refunds'", []),
    ("a rule offering none", "session", "the server's rule 'payouts' offers no grants", []),
    ("a quorum rule", "run", "needs 2 distinct approvers; one approver cannot allow later calls", []),
    ("an allow rule", "run", "the server's rule 'small buys' allows this call without a person", []),
    ("no server rule", "run", "", ["run"]),  # the server's file says nothing of the tool: the request's own rule
]


@pytest.mark.parametrize(("case", "scope", "refusal", "offered"), GRANTS)
def test_a_grant_only_as_the_deciding_sides_rule_offers_it(
    case: str, scope: str, refusal: str, offered: list[str]
) -> None:
    """With a policy of its own the deciding side allows a standing grant only as its rule for the call offers it
    (the scope as written: never a longer duration), to one approver, and only when the request names that same rule
    with its terms (the run keeps a grant under the rule its request names); the card offers exactly those."""
    judged = PolicyAuthority(GRANTING).judge(GRANT_ROWS[case])
    why = judged.grant_refusal(scope)
    assert (refusal in why and bool(why)) if refusal else why == "", why
    assert [g.text() for g in judged.grants] == offered, judged


def test_without_a_policy_of_its_own_a_grant_is_what_the_requests_rule_offers() -> None:
    authority = PolicyAuthority()
    row = GRANT_ROWS["the server's rule, its terms"]
    assert authority.judge(row).grant_refusal("run") == ""
    assert "does not offer a grant for this session" in authority.judge(row).grant_refusal("session")
    assert "no policy rule asked" in authority.judge(GRANT_ROWS["no rule named"]).grant_refusal("run")
