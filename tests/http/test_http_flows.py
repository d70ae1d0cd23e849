"""Agents over HTTP: the held flows against a real ``goldfive serve`` subprocess, with no database on the agent side."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from http_support import AGENT_WAIT_MS, site
from store_support import Backend

from goldfive_core import AgentTools, InMemorySink, Task, wrap
from goldfive_core.store.http import HttpChannel


async def test_flow_a_callable_is_approved_over_http(backend: Backend, tmp_path: Path) -> None:
    with site(backend, tmp_path) as s:
        channel = HttpChannel(s.url, token=s.tokens["bot"])
        sink = InMemorySink()

        async def agent(task: Task, tools: AgentTools) -> Any:
            await tools.report_task_started("pay-1")
            return await tools.report_awaiting_approval("pay 10 to bob?", task_id="pay-1", timeout_ms=AGENT_WAIT_MS)

        run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink, sink]).run("go"))
        try:
            card = await s.pending("pay-1")
            assert card["prompt"] == "pay 10 to bob?" and card["state"] == "pending"
            answer = await s.decide("pay-1", body={"reason": "fine"})
            assert answer.status_code == 200, answer.text
            assert answer.json()["verdict"] == "applied"
            result = await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
        assert result.output["decision"] == "approve"
        assert "fine" in result.output["detail"]
