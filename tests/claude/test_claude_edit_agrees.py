"""The Claude adapter and the inbox judge one edit alike: both check it with argschema against the tool's schema.

Before, the adapter checked edits with ``jsonschema`` and the inbox with argschema: ``5.0`` for an integer ran the
tool in-process though the inbox refused it, and an edit the adapter refused (a ``$ref``'d field too short,
repeated items) was accepted by the inbox, which only then learnt the agent would not take it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from goldfive_core import ControlKind
from goldfive_core.argschema import edit_problem
from tests.claude.claude_support import REFUND, converse, make_harness

ARGS = {"order_id": "42", "amount": 30}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {"OrderId": {"type": "string", "minLength": 2}},
    "properties": {
        "order_id": {"$ref": "#/$defs/OrderId"},
        "amount": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "uniqueItems": True},
    },
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("edited", "refused"),
    [
        ({"order_id": "42", "amount": 5}, False),
        ({"order_id": "42", "amount": 5.0}, True),  # the adapter took this before
        ({"order_id": "4", "amount": 5}, True),  # the inbox took this before
        ({"order_id": "42", "amount": 5, "tags": ["a", "a"]}, True),  # and this
        ({"order_id": "42", "amount": -1}, True),
    ],
)
async def test_the_adapter_refuses_exactly_the_edits_the_inbox_refuses(edited: dict[str, Any], refused: bool) -> None:
    h = make_harness(tool_schemas={REFUND: SCHEMA})
    verdicts: list[tuple[str | None, bool, str]] = []

    async def script() -> None:
        task = asyncio.create_task(h.cli.use_tool("toolu_X", REFUND, ARGS))
        (event,) = await h.sink.wait_for("approval_requested")
        request = event.approval_requested
        inbox = edit_problem(request.kind, dict(request.metadata), edited, tool=REFUND)  # what serve says
        ack = await h.control(ControlKind.APPROVE, target_id="toolu_X", edited_args=edited)
        if not ack.ok:
            assert (await h.control(ControlKind.APPROVE, target_id="toolu_X")).ok
        verdicts.append((inbox.field if inbox is not None else None, ack.ok, ack.detail))
        await task
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund", script)

    ((inbox_field, accepted, detail),) = verdicts
    assert accepted is (inbox_field is None) is (not refused)
    if refused:
        assert inbox_field is not None and repr(inbox_field) in detail  # both name the same field
    assert h.shop.refunds == [edited if accepted else ARGS]
