"""goldfive_core.argschema: the check a decider outside the agent makes of edited arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest

from goldfive_core.argschema import (
    EDITABLE_KEY,
    MAX_SCHEMA_CHARS,
    SCHEMA_KEY,
    check_args,
    edit_problem,
    edit_validator,
    schema_from_metadata,
    schema_json,
    schema_problem,
)

PAY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "amount": {"type": "integer", "minimum": 1, "maximum": 1000},
        "to": {"type": "string", "minLength": 2, "maxLength": 10},
        "currency": {"enum": ["EUR", "USD"]},
        "urgent": {"type": "boolean"},
        "memo": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "lines": {
            "type": "array",
            "maxItems": 2,
            "items": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        },
    },
    "required": ["amount", "to"],
    "additionalProperties": False,
}
OK: dict[str, Any] = {"amount": 5, "to": "bob"}


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        ({"to": "bob"}, "amount", "is required and missing"),
        ({**OK, "amount": "5"}, "amount", "must be an integer, got string '5'"),
        ({**OK, "amount": 5.5}, "amount", "must be an integer"),
        ({**OK, "amount": True}, "amount", "must be an integer, got boolean"),
        ({**OK, "amount": 0}, "amount", "must be at least 1"),
        ({**OK, "amount": 1001}, "amount", "must be at most 1000"),
        ({**OK, "to": "b"}, "to", "at least 2 characters"),
        ({**OK, "to": "b" * 11}, "to", "at most 10 characters"),
        ({**OK, "currency": "GBP"}, "currency", "must be one of 'EUR', 'USD'"),
        ({**OK, "urgent": 1}, "urgent", "must be true or false"),
        ({**OK, "memo": 3}, "memo", "fits none of the 2 allowed shapes"),
        ({**OK, "lines": [{"sku": "a"}, {}]}, "lines[1].sku", "is required and missing"),
        ({**OK, "lines": [{"sku": 1}]}, "lines[0].sku", "must be a string"),
        ({**OK, "lines": [{"sku": "a"}] * 3}, "lines", "at most 2 items"),
        (
            {**OK, "cc": "x"},
            "cc",
            "is not a parameter of this tool (it takes: amount, currency, lines, memo, to, urgent)",
        ),
    ],
)
def test_each_problem_names_its_field(edit: dict[str, Any], field: str, words: str) -> None:
    problem = check_args(PAY, edit, tool="pay")
    assert problem is not None and problem.field == field
    assert words in problem.message and "checked against pay's parameters" in problem.message


def test_arguments_that_fit_pass() -> None:
    assert check_args(PAY, {**OK, "currency": "EUR", "memo": None, "urgent": False, "lines": [{"sku": "a"}]}) is None


def test_genai_style_schemas_and_unknown_keywords() -> None:
    genai = {"type": "OBJECT", "properties": {"n": {"type": "NUMBER", "nullable": True}}, "required": ["n"]}
    assert check_args(genai, {"n": None}) is None and check_args(genai, {"n": 2}) is None
    assert check_args(genai, {"n": "2"}) is not None
    assert check_args(genai, {"n": 1, "other": 2}) is None  # no additionalProperties: other keys pass
    assert check_args({"type": "object", "properties": {"s": {"pattern": "^x", "$ref": "#/x"}}}, {"s": "y"}) is None
    assert check_args({"type": "object", "properties": {"n": {"type": "number"}}}, {"n": float("nan")}) is not None


def test_the_schema_travels_bounded_and_is_read_back_only_when_whole() -> None:
    text = schema_json(PAY)
    assert schema_from_metadata({SCHEMA_KEY: text}) == json.loads(text)
    huge = {"type": "object", "description": "x" * MAX_SCHEMA_CHARS}
    assert schema_json(huge) == ""
    assert schema_json(None) == "" and schema_json({}) == ""
    assert schema_from_metadata({SCHEMA_KEY: "{not json"}) is None
    assert schema_from_metadata({SCHEMA_KEY: "[1]"}) is None
    assert schema_from_metadata({}) is None


def test_edit_problem_refuses_edits_where_the_agent_takes_none() -> None:
    assert "task approval takes no edited arguments" in str(edit_problem("task", {}, {"a": 1}))
    assert "pay's approval takes no edited" in str(edit_problem("tool", {EDITABLE_KEY: "no"}, {"a": 1}, tool="pay"))
    assert edit_problem("tool", {}, {"a": 1}) is None  # nothing known: the agent decides
    assert edit_problem("tool", {SCHEMA_KEY: schema_json(PAY)}, {"a": 1}, tool="pay") is not None


def test_a_readable_event_line_leaves_the_schema_out() -> None:
    from goldfive_core.events import format_event
    from goldfive_core.pb.v1 import events_pb2

    event = events_pb2.Event(sequence=2)
    event.approval_requested.target_id = "c1"
    event.approval_requested.metadata.update({"tool_name": "pay", SCHEMA_KEY: schema_json(PAY)})
    line = format_event(event)
    assert "tool_name': 'pay'" in line and "args_schema" not in line and "minimum" not in line


LINES: dict[str, Any] = {
    "type": "object",
    "$defs": {"Line": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}},
    "properties": {
        "line": {"$ref": "#/$defs/Line"},
        "qty": {"type": "integer", "multipleOf": 5},
        "tags": {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        "flag": {"const": 1},
        "meta": {"type": "object", "minProperties": 1, "maxProperties": 2},
        "gift": {"type": "boolean"},
        "note": {"type": "string"},
    },
    "dependentRequired": {"gift": ["note"]},
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        ({"line": {}}, "line.sku", "is required and missing"),
        ({"line": {"sku": 3}}, "line.sku", "must be a string"),
        ({"qty": 7}, "qty", "must be a multiple of 5"),
        ({"tags": ["a", "a"]}, "tags[1]", "the items must be unique"),
        ({"pair": ["1", "a"]}, "pair[0]", "must be an integer"),
        ({"pair": [1, "a", 2]}, "pair[2]", "one item too many"),
        ({"flag": True}, "flag", "must be 1, got boolean"),
        ({"meta": {}}, "meta", "at least 1 keys"),
        ({"meta": {"a": 1, "b": 2, "c": 3}}, "meta", "at most 2 keys"),
        ({"gift": True}, "note", "is required with 'gift' and missing"),
    ],
)
def test_the_keywords_tool_schemas_use_beyond_the_basics(edit: dict[str, Any], field: str, words: str) -> None:
    problem = check_args(LINES, edit, tool="order")
    assert problem is not None and problem.field == field and words in problem.message


def test_those_keywords_pass_what_fits() -> None:
    fits = {"line": {"sku": "a"}, "qty": 10, "tags": ["a", "b"], "pair": [1, "a"], "flag": 1.0, "meta": {"a": 1}}
    assert check_args(LINES, {**fits, "gift": True, "note": "for ana"}) is None


def test_a_problem_names_every_field_with_it_and_unknown_keys_come_first() -> None:
    problem = check_args(PAY, {"amount": 5, "cc": 1, "bcc": 2})
    assert problem is not None and (problem.kind, problem.fields) == ("unknown", ("cc", "bcc"))
    problem = check_args(PAY, {"urgent": True})
    assert problem is not None and (problem.kind, problem.fields) == ("missing", ("amount", "to"))
    assert check_args(PAY, {**OK, "amount": "5"}).kind == "type"  # type: ignore[union-attr]


def test_keys_a_pattern_may_take_are_never_refused_as_unknown() -> None:
    schema = {"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False}
    assert check_args(schema, {"x-trace": "1", "other": 2}) is None  # no pattern is run: the agent judges


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        ({"type": 12}, "'type' at the top level must be one of"),
        ({"properties": {"a": {"type": "text"}}}, "'type' at /properties/a"),
        ({"required": "a"}, "'required' at the top level must be an array of strings"),
        ({"minLength": -1}, "'minLength'"),
        ({"anyOf": []}, "'anyOf' at the top level must be a non-empty array"),
        ({"pattern": "("}, "is not a regular expression"),
        ({"items": 3}, "/items must be an object or a boolean"),
        ([], "the schema must be an object"),
    ],
)
def test_schema_problem_names_what_is_not_a_schema(schema: Any, words: str) -> None:
    problem = schema_problem(schema)
    assert problem is not None and words in problem


def test_schema_problem_reads_the_schemas_it_checks_with() -> None:
    assert schema_problem(PAY) is None and schema_problem(LINES) is None and schema_problem(True) is None


def test_edit_validator_checks_the_object_then_the_schema_in_the_callers_words() -> None:
    check = edit_validator(PAY, tool="pay", against="input schema")
    assert check({**OK}) is None
    assert "must be a JSON object, got list" in (check([1]) or "")  # type: ignore[arg-type]
    assert "must have string keys" in (check({1: 2}) or "")
    assert "checked against pay's input schema" in (check({"to": "bob"}) or "")
    assert edit_validator(None)({"anything": [1]}) is None  # no schema: any JSON object
    worded = edit_validator(PAY, words=lambda problem, edited: f"{problem.kind}:{','.join(problem.fields)}")
    assert worded({"amount": 5, "to": "bob", "cc": 1}) == "unknown:cc"


def test_argschema_never_refuses_what_json_schema_takes_but_a_whole_float_for_an_integer() -> None:
    """Against jsonschema (where installed): argschema refuses no edit the whole schema takes — except ``5.0``
    for an integer, on purpose: a tool that declares an integer gets one (as ADK's own check always said)."""
    jsonschema = pytest.importorskip("jsonschema")
    assert jsonschema.Draft202012Validator(PAY).is_valid({**OK, "amount": 5.0})
    assert check_args(PAY, {**OK, "amount": 5.0}) is not None
    edits = [
        OK,
        {**OK, "memo": None},
        {**OK, "lines": [{"sku": "a", "extra": 1}]},
        {"line": {"sku": "a", "n": 1}, "qty": 0, "tags": [], "pair": [1], "flag": 1, "meta": {"a": None}},
        {"gift": False, "note": ""},
    ]
    for schema in (PAY, LINES):
        validator = jsonschema.Draft202012Validator(schema)
        for edit in edits:
            if validator.is_valid(edit):
                assert check_args(schema, edit) is None, edit
