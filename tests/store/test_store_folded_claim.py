"""A StoreChannel's approved call is claimed in its APPROVE's ack: the decision and "executing" in one commit.

The agent acks a person's APPROVE for a call its gate waits on with the ledger's claim beside it (the store's
``ack_controls(..., claims=)``, as the server does for an agent on HTTP), and its ledger waits for that answer
instead of claiming in a commit of its own. So when the body starts, the store already says both that the call
was approved and that it is executing; and a claim the store refuses (the call was claimed before) never runs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from store_support import Backend

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.approvals import Principal
from goldfive_core.store import Store, StoreChannel, decide, run_approved

TARGET = "pay-1"


class Agent:
    """A callable agent on a StoreChannel asking to run ``pay`` (``TARGET``) through the channel's ledger."""

    def __init__(self, backend: Backend) -> None:
        self.store = backend.open()
        self.own_claims: list[str] = []
        """Claims the ledger committed on their own (not in an ack)."""
        claim = self.store.mark_executing

        def counted(target_id: str, **kwargs: Any) -> bool:
            self.own_claims.append(target_id)
            return claim(target_id, **kwargs)

        self.store.mark_executing = counted  # type: ignore[method-assign]
        self.channel = StoreChannel(self.store)
        self.ran: list[dict[str, Any]] = []

    def start(self, body_sees: dict[str, Any], decider: Store) -> asyncio.Task[Any]:
        async def body(args: Mapping[str, Any]) -> str:
            (row,) = decider.approvals_for(TARGET)
            execution = decider.execution(TARGET)
            body_sees.update(decision=row.decision, ledger=execution.state if execution else None)
            self.ran.append(dict(args))
            return "paid"

        async def agent(task: Task, tools: AgentTools) -> Any:
            ledger = self.channel.ledger
            return await run_approved(
                tools.session, self.store, call_id=TARGET, tool_name="pay", args={"n": 1}, body=body, ledger=ledger
            )

        return asyncio.create_task(wrap(agent, control=self.channel, sinks=[self.channel.sink]).run())


async def _pending(decider: Store) -> str:
    for _ in range(1000):
        rows = [r for r in decider.approvals_for(TARGET) if r.open]
        if rows:
            return rows[0].run_id
        await asyncio.sleep(0.01)
    raise AssertionError("no approval request appeared")


async def test_the_body_starts_with_the_decision_and_its_claim_committed_together(backend: Backend) -> None:
    decider, agent = backend.open(), Agent(backend)
    body_sees: dict[str, Any] = {}
    run = agent.start(body_sees, decider)
    await _pending(decider)
    await asyncio.to_thread(decide, decider, TARGET, approve=True, principal=Principal(name="ana"))
    result = await asyncio.wait_for(run, 30)
    await agent.channel.aclose()
    assert result.output.status == "ran" and agent.ran == [{"n": 1}]
    assert body_sees == {"decision": "approve", "ledger": "executing"}
    assert agent.own_claims == []  # the ack was the claim: no commit of its own
    execution = decider.execution(TARGET)
    assert execution is not None and execution.state == "done"


async def test_a_claim_the_store_refuses_in_the_ack_never_runs_the_body(backend: Backend) -> None:
    decider, agent = backend.open(), Agent(backend)
    run = agent.start({}, decider)
    run_id = await _pending(decider)
    # Another process of the same run claimed the call meanwhile (it may be running it): the ack's claim is lost.
    assert decider.mark_executing(TARGET, run_id=run_id, pid=1, host="elsewhere")
    await asyncio.to_thread(decide, decider, TARGET, approve=True, principal=Principal(name="ana"))
    result = await asyncio.wait_for(run, 30)
    await agent.channel.aclose()
    assert result.output.status == "in_doubt" and agent.ran == []
    execution = decider.execution(TARGET)
    assert execution is not None and (execution.state, execution.host) == ("executing", "elsewhere")
