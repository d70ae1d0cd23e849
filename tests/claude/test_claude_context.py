"""The context a Claude run gives an approver: the prompt, the model's text and the tool uses before the request,
as recorded steps of the run, and derived on a store as the card shows them."""

from __future__ import annotations

import asyncio
from pathlib import Path

from goldfive_core import ControlKind
from goldfive_core.steps import StepKind
from goldfive_core.store import open_store
from goldfive_core.store.context import approval_context
from tests.claude.claude_support import LOOKUP, REFUND, Harness, converse
from tests.store.store_support import await_until

PROMPT = "refund order 42, the customer was charged twice"


async def test_the_card_of_a_claude_call_says_what_was_asked_and_the_steps_before_it(
    h: Harness, tmp_path: Path
) -> None:
    async def script() -> None:
        await h.cli.say("Let me look the order up first.")
        await h.cli.use_tool("toolu_L", LOOKUP, {"order_id": "42"})
        # A handshake: the client has read the lookup's result before the model asks for the refund.
        await await_until(lambda: any(s.kind is StepKind.TOOL_RESULT for s in run.session.steps.recent()))
        task = asyncio.create_task(h.cli.use_tool("toolu_R", REFUND, {"order_id": "42", "amount": 30}))
        await h.sink.first("approval_requested")
        ack = await h.control(ControlKind.REJECT, target_id="toolu_R", decided_by="ana", detail="not twice")
        assert ack.ok, ack.detail
        await task
        await h.cli.result("not refunded")

    async with h.run() as run:
        await converse(run, h.cli, PROMPT, script)

    store = open_store(str(tmp_path / "goldfive.db"))
    try:
        store.append_events(h.sink.events, pid=1, host="here")
        (row,) = store.approvals_for("toolu_R")
        context = approval_context(store, row)
    finally:
        store.close()
    assert (context["input"], context["adapter"], context["records_steps"]) == (PROMPT, "claude", True)
    assert [(s["kind"], s["name"], s["text"]) for s in context["steps"]] == [
        ("model_text", "claude", "Let me look the order up first."),
        ("tool_call", LOOKUP, '{"order_id":"42"}'),
        ("tool_result", LOOKUP, "order 42: shipped"),
    ]
    assert context["note"] == "" and context["started_by"]
