"""goldfive_core.testing.ScriptedReviewer over the store: decisions travel through the inbox like the CLI's."""

from __future__ import annotations

from typing import Any

from store_support import Backend

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.store import StoreChannel
from goldfive_core.store.execution import run_approved
from goldfive_core.testing import Edit, Reject, ReviewRule, ScriptedReviewer


async def test_the_reviewer_edits_and_rejects_through_another_store_channel(backend: Backend) -> None:
    store = backend.open()
    channel = StoreChannel(store)
    decider = StoreChannel(backend.open())  # its own connections, like another process
    reviewer = ScriptedReviewer(
        decider,
        [
            ReviewRule(tool="send_*", where=lambda r: r.args["amount"] > 100, then=Reject("over the limit")),
            ReviewRule(tool="send_*", then=Edit(lambda args: {**args, "to": "bob's savings"}, decided_by="ann")),
        ],
    )
    ran: list[dict[str, Any]] = []

    async def body(args: Any) -> dict[str, Any]:
        ran.append(dict(args))
        return {"sent": args["amount"]}

    async def agent(task: Task, tools: AgentTools) -> list[Any]:
        out = []
        for call_id, amount in (("c-small", 10), ("c-big", 500)):
            outcome = await run_approved(
                tools.session,
                store,
                call_id=call_id,
                tool_name="send_money",
                args={"to": "bob", "amount": amount},
                body=body,
                timeout_ms=10_000,
            )
            out.append((outcome.status, outcome.detail))
        return out

    result = await wrap(agent, control=channel, sinks=[channel.sink, reviewer]).run("pay")
    await channel.aclose()
    await decider.aclose()

    assert ran == [{"to": "bob's savings", "amount": 10}]
    assert result.output[0][0] == "ran"
    assert result.output[1] == ("reject", "over the limit")
    reviews = await reviewer.wait_reviewed(2)
    assert [r.ack.ok for r in reviews if r.ack is not None] == [True, True]
    after = backend.open()
    rows = {target: after.approvals_for(target)[0] for target in ("c-small", "c-big")}
    assert (rows["c-small"].status, rows["c-small"].decided_by) == ("granted", "ann")
    assert rows["c-small"].edited_args_json == '{"amount":10,"to":"bob\'s savings"}'
    assert (rows["c-big"].status, rows["c-big"].decided_by) == ("rejected", "scripted-reviewer")
