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
    schema_from_metadata,
    schema_json,
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
