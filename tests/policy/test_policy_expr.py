"""The `when` language: what it accepts, what it means, and what it refuses (table-driven)."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goldfive_core.policy import EvalError, ExpressionError, PolicyCall, compile_expression


def call(args: dict[str, Any], *, tool: str = "refund", agent: str = "billing", **labels: str) -> PolicyCall:
    return PolicyCall(tool=tool, args=args, agent=agent, labels=labels)


TRUE_FALSE = [
    # comparisons on numbers
    ("args.amount <= 50", {"amount": 50}, True),
    ("args.amount <= 50", {"amount": 50.5}, False),
    ("args.amount < 50", {"amount": 49.99}, True),
    ("args.amount > 10000", {"amount": 10001}, True),
    ("args.amount >= -5", {"amount": -5}, True),
    ("args.amount == 3", {"amount": 3.0}, True),
    ("args.amount != 3", {"amount": 4}, True),
    ("50 >= args.amount", {"amount": 20}, True),
    ("args.a < args.b", {"a": 1, "b": 2}, True),
    ("args.a < args.b", {"a": "abc", "b": "abd"}, True),
    ("args.amount == 1e3", {"amount": 1000}, True),
    # strict equality across types
    ("args.flag == true", {"flag": True}, True),
    ("args.flag == true", {"flag": 1}, False),
    ("args.n == 1", {"n": True}, False),
    ("args.env == 'prod'", {"env": "prod"}, True),
    ('args.env == "prod"', {"env": "Prod"}, False),
    ("args.env != 'prod'", {"env": 7}, True),
    ("args.x == null", {"x": None}, True),
    ("args.x == args.y", {"x": [1, {"a": 2}], "y": [1, {"a": 2}]}, True),
    ("args.x == args.y", {"x": [1], "y": [True]}, False),
    # nested paths
    ("args.dest.country == 'DE'", {"dest": {"country": "DE"}}, True),
    ("args.items[1].sku == 'b'", {"items": [{"sku": "a"}, {"sku": "b"}]}, True),
    ("args['odd key'] == 1", {"odd key": 1}, True),
    # membership
    ("args.env in ['dev', 'staging']", {"env": "dev"}, True),
    ("args.env in ['dev', 'staging']", {"env": "prod"}, False),
    ("args.env not in ['prod']", {"env": "dev"}, True),
    ("args.n in [1, 2]", {"n": True}, False),
    ("args.n in [1, 2]", {"n": 2.0}, True),
    ("args.n in [1, 2]", {"n": [1]}, False),
    ("args.word in 'hello world'", {"word": "lo w"}, True),
    ("'admin' in args.roles", {"roles": ["user", "admin"]}, True),
    ("'admin' in args.roles", {"roles": {"admin": 1}}, True),
    ("'adm' in args.name", {"name": "badmin"}, True),
    ("args.x in []", {"x": 1}, False),
    # regex: a full match
    ("args.host matches 'example\\\\.com'", {"host": "example.com"}, True),
    ("args.host matches 'example\\\\.com'", {"host": "evil-example.com"}, False),
    ("args.path matches '/srv/.*'", {"path": "/srv/data"}, True),
    ("args.cmd matches 'rm .*|dd .*'", {"cmd": "ls -l"}, False),
    # boolean logic, precedence, parentheses
    ("args.a == 1 and args.b == 2", {"a": 1, "b": 2}, True),
    ("args.a == 1 and args.b == 2", {"a": 1, "b": 3}, False),
    ("args.a == 1 or args.b == 2", {"a": 0, "b": 2}, True),
    ("not args.a == 1", {"a": 2}, True),
    ("not not args.a == 1", {"a": 1}, True),
    ("args.a == 1 or args.a == 2 and args.b == 9", {"a": 1, "b": 0}, True),
    ("(args.a == 1 or args.a == 2) and args.b == 9", {"a": 1, "b": 0}, False),
    ("args.dry_run", {"dry_run": True}, True),
    ("not args.dry_run", {"dry_run": True}, False),
    ("(args.a > 1) == true", {"a": 2}, True),
    # short circuit: exists guards a missing path
    ("exists(args.x) and args.x > 3", {}, False),
    ("not exists(args.x) or args.x > 3", {"x": 4}, True),
    ("exists(args.a.b[2])", {"a": {"b": [0, 1]}}, False),
    ("len(args.to) > 2", {"to": ["a", "b", "c"]}, True),
    ("len(args.s) == 0", {"s": ""}, True),
    # the other roots
    ("tool == 'refund'", {}, True),
    ("agent matches 'bill.*'", {}, True),
    ("labels.env == 'prod'", {}, True),
]


@pytest.mark.parametrize(("source", "args", "expected"), TRUE_FALSE)
def test_expression_result(source: str, args: dict[str, Any], expected: bool) -> None:
    assert compile_expression(source).test(call(args, env="prod")) is expected


EVAL_ERRORS = [
    ("args.amount <= 50", {}, "args.amount is missing"),
    ("args.amount <= 50", {"amount": "5"}, "args.amount is '5', not a number"),
    ("args.amount <= 50", {"amount": True}, "not a number"),
    ("args.amount <= 50", {"amount": None}, "not a number"),
    ("args.amount <= 50", {"amount": math.nan}, "not a finite number"),
    ("args.amount <= 50", {"amount": math.inf}, "not a finite number"),
    ("args.a < args.b", {"a": "x", "b": 1}, "not comparable"),
    ("args.dest.country == 'DE'", {"dest": "DE"}, "args.dest.country is missing"),
    ("args.items[5] == 1", {"items": [1]}, "args.items[5] is missing"),
    ("args.host matches 'x'", {"host": 5}, "not a string"),
    ("args.host matches 'x'", {"host": "x" * 10_001}, "over the 10000"),
    ("args.flag", {"flag": "yes"}, "not true or false"),
    ("args.x in args.y", {"x": 1, "y": 5}, "'in' needs a list"),
    ("args.x in args.y", {"x": 1, "y": "abc"}, "'in' a string needs a string"),
    ("args.x in 'abc'", {"x": 1}, "'in' a string needs a string"),
    ("len(args.n) > 1", {"n": 5}, "has no length"),
    ("labels.team == 'x'", {}, "labels.team is missing"),
]


@pytest.mark.parametrize(("source", "args", "reason"), EVAL_ERRORS)
def test_evaluation_error_says_why(source: str, args: dict[str, Any], reason: str) -> None:
    with pytest.raises(EvalError, match=None) as info:
        compile_expression(source).test(call(args, env="prod"))
    assert reason in str(info.value)


PARSE_ERRORS = [
    ("", "empty expression", 1),
    ("args.amount <=", "expected a value, found the end", 15),
    ("args.amount <= 50 50", "unexpected '50' after a complete expression", 19),
    ("amount <= 50", "unknown name 'amount'", 1),
    ("__import__('os').system('x')", "unknown name '__import__'", 1),
    ("args.__class__ == 1 or x", "unknown name 'x'", 24),
    ("args.a = 1", "unexpected character '='", 8),
    ("args.a == 'unterminated", "unexpected character", 11),
    ("args.a == 'bad \\q escape'", "unknown escape", 11),
    ("args.a matches args.b", "'matches' takes a regex in quotes", 16),
    ("args.a matches '('", "bad regex", 16),
    ("1 < 2", "compares two constants", 3),
    ("'a' == 'a'", "compares two constants", 5),
    ("true", "not a condition", 1),
    ("args.a < true", "compares numbers or strings", 8),
    ("args.a < [1]", "compares numbers or strings", 8),
    ("args.a in 5", "'in' needs a list, a string or a path", 8),
    ("args.a in [args.b]", "a list holds only", 11),
    ("args.a in [[1]]", "a list holds only", 11),
    ("args.a[1.5] == 1", "quoted key or a whole number", 8),
    ("args. == 1", "expected a field name", 7),
    ("tool.x == 1", "tool is a string", 1),
    ("labels == 1", "labels takes exactly one name", 1),
    ("args.a not args.b", "expected 'in' after 'not'", 12),
    ("(args.a == 1", "expected ')'", 13),
    ("exists(1)", "expected a path", 8),
    ("-args.a == 1", "'-' goes only before a number", 1),
    ("args.a == 1e999", "out of range", 11),
    ("not " * 50 + "args.a", "nested more than 40 deep", 165),
    ("(" * 50 + "args.a" + ")" * 50, "nested more than 40 deep", 42),
    ("args.a == 'x'" + " " * 4000, "longer than 4000 characters", 4000),
]


@pytest.mark.parametrize(("source", "reason", "column"), PARSE_ERRORS)
def test_bad_expression_refused_with_column(source: str, reason: str, column: int) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression(source)
    assert reason in info.value.reason
    assert info.value.column == column


def test_paths_and_canonical_form() -> None:
    a = compile_expression("args.a==1 and   args.b.c in ['x']")
    b = compile_expression('args.a == 1 and args.b.c in ["x"]')
    assert a.paths == ("args.a", "args.b.c")
    assert a.canonical == b.canonical
    assert compile_expression("args.a == 2").canonical != compile_expression("args.a == 1").canonical


def test_non_json_args_are_an_evaluation_error_not_a_crash() -> None:
    class Weird:
        def __lt__(self, other: object) -> bool:
            raise RuntimeError("boom")

    with pytest.raises(EvalError, match="not a number"):
        compile_expression("args.x < 3").test(call({"x": Weird()}))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="args.xyin()[]'\"=<>!notandor 0123456789-,", max_size=60))
def test_any_text_parses_or_is_refused_cleanly(source: str) -> None:
    with contextlib.suppress(ExpressionError):
        compile_expression(source)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "x"]), JSON, max_size=3))
def test_any_args_evaluate_or_raise_eval_error(args: dict[str, Any]) -> None:
    expression = compile_expression(
        "args.a < args.b or args.x in args.a or args.b matches 'q.*' or len(args.x) > 1 or args.a.b[0] == args.x"
    )
    with contextlib.suppress(EvalError):
        assert expression.test(call(args)) in (True, False)
