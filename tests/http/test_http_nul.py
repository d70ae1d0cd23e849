"""Agents over HTTP with NUL in what a model wrote: asked, decided, reported and audited on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from http_support import AGENT_WAIT_MS, site
from store_support import Backend

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.store.execution import run_approved
from goldfive_core.store.http import HttpChannel

MARK = "\u2400"  # ␀


async def test_an_http_agent_with_nul_ids_prompt_and_args_is_decided_and_its_events_are_kept(
    backend: Backend, tmp_path: Path
) -> None:
    with site(backend, tmp_path) as s:
        channel = HttpChannel(s.url, token=s.tokens["bot"], trust_key=s.servers[0].trust_key)
        ran: list[Mapping[str, Any]] = []

        async def body(call_args: Mapping[str, Any]) -> str:
            ran.append(dict(call_args))
            return "sent"

        async def agent(task: Task, tools: AgentTools) -> Any:
            await tools.report_task_started("t\x00a")
            asked = await tools.report_awaiting_approval("pay 5\x00?", task_id="t\x00a", timeout_ms=AGENT_WAIT_MS)
            guarded = await run_approved(
                tools.session,
                channel.store,
                call_id="c\x00a",
                tool_name="send",
                args={"memo": "x\x00y"},
                body=body,
                timeout_ms=AGENT_WAIT_MS,
                ledger=channel.ledger,
                trust=channel.trust_key,
            )
            return asked["decision"], guarded.status

        run = asyncio.create_task(wrap(agent, control=channel, sinks=[channel.sink]).run("go"))
        try:
            card = await s.pending(f"t{MARK}a")
            assert card["prompt"] == f"pay 5{MARK}?"
            assert (await s.decide(f"t{MARK}a", approve=False, body={"reason": "no\x00"})).status_code == 400
            answer = await s.decide(f"t{MARK}a", approve=False, body={"reason": "not today"})
            assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
            tool = await s.pending(f"c{MARK}a")
            assert tool["args"] == {"memo": "x\x00y"}
            answer = await s.decide(f"c{MARK}a", body={"args_digest": tool["args_digest"]})
            assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
            result = await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
        assert result.output == ("reject", "ran") and ran == [{"memo": "x\x00y"}]
        store = s.backend.open()
        rows = store.audit_rows(run_id=result.run_id)
        kinds = [r.kind for r in rows]
        # The agent's reports of both decisions were accepted (not refused as decisions it made up).
        assert "approval_rejected" in kinds and "approval_granted" in kinds and kinds[-1] == "run_completed"
        numbered = [r.sequence for r in rows if r.kind != "execution_recorded"]
        assert numbered == list(range(len(numbered)))
        async with httpx.AsyncClient(base_url=s.url, timeout=30) as client:
            verify = await client.get("/api/audit/verify", headers=s.auth("ana"))
        assert verify.status_code == 200 and verify.json()["ok"] is True, verify.text
