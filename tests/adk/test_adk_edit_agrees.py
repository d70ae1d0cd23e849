"""The ADK plugin and the inbox judge one edit alike: both check it with argschema against the declared schema.

Before, the plugin checked edits by the function's signature (names and plain ``str``/``int``/``float``/``bool``
hints only) while the inbox checked the declaration the request carries: an edit the inbox refused
(``tags: [1]`` for ``list[str]``) ran the tool with it in-process.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from google.adk.tools.function_tool import FunctionTool

from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlChannel, ControlKind, ControlMessage
from goldfive_core.argschema import edit_problem
from goldfive_core.testing import AwaitableSink
from tests.adk.scripted import Harness

ORDER = {"sku": "a-1", "qty": 2, "tags": ["gift"]}


@pytest.mark.parametrize(
    ("edited", "refused"),
    [
        ({"sku": "b-2", "qty": 3, "tags": []}, False),
        ({"sku": "b-2", "qty": 3, "tags": [1]}, True),  # the plugin took this before
        ({"sku": "b-2", "qty": 3, "tags": "gift"}, True),  # and this
        ({"sku": "b-2", "qty": "3", "tags": []}, True),
        ({"sku": "b-2", "qty": 3, "tags": [], "rush": True}, True),
    ],
)
async def test_the_plugin_refuses_exactly_the_edits_the_inbox_refuses(edited: dict[str, Any], refused: bool) -> None:
    placed: list[dict[str, Any]] = []

    def place_order(sku: str, qty: int, tags: list[str]) -> dict[str, Any]:
        """Place an order."""
        placed.append({"sku": sku, "qty": qty, "tags": tags})
        return {"placed": sku}

    channel, sink = ControlChannel(), AwaitableSink()
    plugin = GoldfivePlugin(control=channel, sinks=[sink])
    h = Harness(
        tools=[FunctionTool(place_order, require_confirmation=True)],
        turns=[[("place_order", ORDER)], "done"],
        plugin=plugin,
    )
    sid = await h.new_session()

    async def decide() -> tuple[str | None, bool, str]:
        (event,) = await sink.wait_for("approval_requested")
        request = event.approval_requested
        inbox = edit_problem(request.kind, dict(request.metadata), edited, tool="place_order")  # what serve says
        ack = await channel.send(
            ControlMessage(ControlKind.APPROVE, {"target_id": request.target_id, "edited_args": edited}), timeout=5
        )
        if not ack.ok:
            plain = ControlMessage(ControlKind.APPROVE, {"target_id": request.target_id})
            assert (await channel.send(plain, timeout=5)).ok
        return (inbox.field if inbox is not None else None), ack.ok, ack.detail

    decider = asyncio.create_task(decide())
    await h.run(sid)
    inbox_field, accepted, detail = await decider

    assert accepted is (inbox_field is None) is (not refused)
    if refused:
        assert inbox_field is not None and inbox_field.split("[")[0] in detail  # both name the same field
    assert placed == [edited if accepted else ORDER]
