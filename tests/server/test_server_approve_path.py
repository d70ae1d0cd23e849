"""One approve through goldfive serve, counted: the approval record is looked up once, not once per layer."""

from __future__ import annotations

from typing import Any

import pytest
from server_support import Server, start_tool_agent


async def test_an_approve_looks_its_approval_up_once(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = start_tool_agent(server.backend, "call-1", {"amount": 10, "to": "ACME"})
    try:
        await server.pending("call-1")
        looked: list[str] = []
        real = server.store.approvals_for

        def counted(target_id: str, *args: Any, **kwargs: Any) -> Any:  # a test-only counter on the real store
            looked.append(target_id)
            return real(target_id, *args, **kwargs)

        monkeypatch.setattr(server.store, "approvals_for", counted)
        ok = await server.post("/api/approvals/call-1/approve", {})
        assert ok.status_code == 200 and ok.json()["result"] == "SUCCESS", ok.text
        assert looked == ["call-1"]  # find_approval once: the route's look-up is the one decide() uses
        result = (await agent.result()).output
        assert result.status == "ran" and agent.ran == [{"amount": 10, "to": "ACME"}]
    finally:
        await agent.close()
