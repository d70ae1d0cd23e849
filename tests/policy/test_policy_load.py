"""The TOML loader: the documented shape loads; a bad policy is refused with file, line and reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from goldfive_core.policy import (
    Allow,
    Ask,
    Deny,
    Escalation,
    GrantScope,
    PolicyCall,
    PolicyError,
    load_policy,
    load_policy_from_env,
    parse_policy,
)

FULL = """\
# every key a rule may have
[[rule]]
name = "small refunds"
tool = "refund"
when = "args.amount <= 50"
action = "allow"

[[rule]]
name = "large transfers"
tool = ["transfer_funds", "wire_*"]
agent = "billing*"
labels = { env = "prod" }
when = "args.amount > 10000"
action = "ask"
approvers = ["role:finance", "user:ana"]
quorum = 2
barred = ["starter", "agent"]
escalate = { after = "30m", to = ["role:cfo"] }
grants = ["run", "session", "1h"]
reject = "counts"
expires = "4h"

[[rule]]
name = "prod shell"
tool = "Bash"
when = "args.command matches 'rm .*'"
action = "deny"
reason = "no rm in this project"
"""


def test_the_documented_shape_loads(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(FULL)
    policy = load_policy(path)
    small, large, shell = policy.rules
    assert (small.name, small.action, small.line) == ("small refunds", Allow(), 2)
    assert large.tools == ("transfer_funds", "wire_*") and large.agents == ("billing*",)
    assert large.labels == {"env": "prod"} and large.line == 8
    assert large.action == Ask(
        approvers=("role:finance", "user:ana"),
        quorum=2,
        barred=("starter", "agent"),
        escalate=Escalation(after_ms=30 * 60_000, to=("role:cfo",)),
        grants=(GrantScope(kind="run"), GrantScope(kind="session"), GrantScope(kind="time", ttl_ms=3_600_000)),
        reject_ends=False,
        expires_ms=4 * 3_600_000,
    )
    assert shell.action == Deny(reason="no rm in this project")
    call = PolicyCall(tool="wire_eu", args={"amount": 20_000}, agent="billing-1", labels={"env": "prod"})
    assert policy.evaluate(call).rule_name == "large transfers"
    assert policy.source == str(path)


def test_inline_rule_arrays_load_without_line_numbers() -> None:
    policy = parse_policy('rule = [{ name = "a", tool = "t", action = "allow" }]')
    assert policy.rules[0].line == 0
    with pytest.raises(PolicyError, match=r"rule 'a': unknown key 'x' \(known for an allow rule.*\(rule #1\)"):
        parse_policy('rule = [{ name = "a", action = "allow", x = 1 }]')


BAD = [
    ('[[rule]]\nname = "a"\naction = "allow"\nfoo = 1\n', 4, "rule 'a': unknown key 'foo' (known for an allow rule"),
    ('[[rule]]\nname = "a"\naction = "maybe"\n', 3, "action must be 'allow', 'ask' or 'deny', got 'maybe'"),
    ('[[rule]]\nname = "a"\n', 1, "action must be 'allow', 'ask' or 'deny', got None"),
    (
        '[[rule]]\nname = "a"\naction = "allow"\nquorum = 2\n',
        4,
        "'quorum' applies to ask rules only; this rule's action is 'allow'",
    ),
    ('[[rule]]\nname = "a"\naction = "ask"\nreason = "x"\n', 4, "'reason' applies to deny rules only"),
    ('[[rule]]\nname = "a"\naction = "deny"\n', 1, "a deny rule needs a reason"),
    ('[[rule]]\nname = "a"\naction = "deny"\nreason = 5\n', 4, "reason must be a string"),
    ('[[rule]]\nname = "a"\n\nwhen = "args.x >"\naction = "ask"\n', 4, "when 'args.x >': column 9: expected a value"),
    ('[[rule]]\nname = "a"\nwhen = "import os"\naction = "ask"\n', 3, "unknown name 'import'"),
    (
        '[[rule]]\nname = "a"\naction = "ask"\napprovers = ["finance"]\n',
        4,
        "'finance' is not 'role:NAME' or 'user:NAME'",
    ),
    ('[[rule]]\nname = "a"\naction = "ask"\nquorum = 0\n', 4, "quorum must be a whole number in 1..20"),
    ('[[rule]]\nname = "a"\naction = "ask"\nquorum = "2"\n', 4, "quorum must be a whole number"),
    ('[[rule]]\nname = "a"\naction = "ask"\napprovers = ["user:a"]\nquorum = 3\n', 5, "quorum 3 can never be reached"),
    (
        '[[rule]]\nname = "a"\naction = "ask"\nescalate = { after = "soon", to = ["role:x"] }\n',
        4,
        "bad duration 'soon'",
    ),
    (
        '[[rule]]\nname = "a"\naction = "ask"\nescalate = { after = "1m", who = ["role:x"] }\n',
        4,
        "escalate: unknown key 'who'",
    ),
    ('[[rule]]\nname = "a"\naction = "ask"\nescalate = { after = "1m" }\n', 4, "escalate needs both"),
    ('[[rule]]\nname = "a"\naction = "ask"\n[rule.escalate]\nafter = "1m"\nto = []\n', 4, "escalate.to names nobody"),
    ('[[rule]]\nname = "a"\naction = "ask"\ngrants = ["forever"]\n', 4, "grant scope 'forever'"),
    ('[[rule]]\nname = "a"\naction = "ask"\ngrants = ["run", "run"]\n', 4, "grants lists the same scope twice"),
    ('[[rule]]\nname = "a"\naction = "ask"\nreject = "maybe"\n', 4, "reject is 'ends'"),
    ('[[rule]]\nname = "a"\naction = "ask"\nexpires = "0s"\n', 4, "out of range"),
    (
        '[[rule]]\nname = "a"\naction = "ask"\nexpires = "1m"\nescalate = { after = "5m", to = ["role:x"] }\n',
        5,
        "escalate.after is not before expires",
    ),
    ('[[rule]]\nname = "a"\ntool = 3\naction = "allow"\n', 3, "tool is a name, a glob or a non-empty list"),
    ('[[rule]]\nname = "a"\nlabels = { env = 1 }\naction = "allow"\n', 3, "labels maps label names"),
    ('[[rule]]\naction = "allow"\n', 1, "rule #1: a rule needs a name"),
    (
        '[[rule]]\nname = "a"\naction = "allow"\n\n[[rule]]\nname = "b"\ntool = "x"\naction = "deny"\nreason = "r"\n',
        5,
        "rule 'b' (line 5) is unreachable: rule 'a' (line 1) comes first",
    ),
    (
        '[[rule]]\nname = "a"\ntool = "t"\naction = "allow"\n[[rule]]\nname = "a"\ntool = "u"\naction = "allow"\n',
        5,
        "rule name 'a' is used twice (first at rule 'a' (line 1))",
    ),
    (
        '[[rule]]\nname = "a"\ntool = "t"\nwhen = "args.x == 1"\naction = "allow"\n\n'
        '[[rule]]\nname = "b"\ntool = "t"\nwhen = "args.x==1"\naction = "ask"\n',
        7,
        "rule 'b' (line 7) contradicts rule 'a' (line 1)",
    ),
    ('[[rule]]\nname = "a"\naction = "allow"\nname = "b"\n', 4, "not valid TOML"),
    ('[[rule]]\nname = "a\n', 2, "not valid TOML"),
    ('version = 2\n[[rule]]\nname = "a"\naction = "allow"\n', 1, "unknown top-level key 'version'"),
    ('[rules]\nname = "a"\n', 1, "unknown top-level key 'rules'"),
    ("rule = 5\n", 0, "'rule' must be a list of tables"),
]


@pytest.mark.parametrize(("text", "line", "reason"), BAD)
def test_bad_policy_refused_with_file_line_and_reason(text: str, line: int, reason: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, source="team.toml")
    error = info.value
    assert (error.source, error.line) == ("team.toml", line)
    assert reason in error.reason
    assert str(error).startswith(f"team.toml:{line}: " if line else "team.toml: ")


def test_an_empty_policy_is_allowed() -> None:
    assert len(parse_policy("# nothing yet\n")) == 0


def test_unreadable_files_are_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"missing\.toml: cannot read the policy file: No such file"):
        load_policy(tmp_path / "missing.toml")
    big = tmp_path / "big.toml"
    big.write_text("#" * 1_000_001)
    with pytest.raises(PolicyError, match="larger than 1000000 bytes"):
        load_policy(big)
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"name = '\xff'")
    with pytest.raises(PolicyError, match=r"not UTF-8 text \(byte 8\)"):
        load_policy(binary)


def test_goldfive_policy_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(FULL)
    assert load_policy_from_env({}) is None
    assert load_policy_from_env({"GOLDFIVE_POLICY": "  "}) is None
    loaded = load_policy_from_env({"GOLDFIVE_POLICY": str(path)})
    assert loaded is not None and len(loaded) == 3
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy_from_env({"GOLDFIVE_POLICY": str(tmp_path / "nope.toml")})
