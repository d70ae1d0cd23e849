"""The context a gateway's request carries for an approver: the MCP client's name and version, and the session's
earlier calls (a clipped form of their arguments and results), as ``goldfive show`` prints them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from mcp_support import gateway, text


async def test_the_card_names_the_client_and_the_sessions_earlier_calls(tmp_path: Path) -> None:
    async with gateway(tmp_path, "--allow", "read_*") as gw:
        read = await gw.client.call_tool("read_balance", {"account": "ACME"})
        assert not read.is_error and "ACME: 1000.00 EUR" in text(read)
        call = asyncio.create_task(gw.client.call_tool("transfer_funds", {"amount": 120, "to": "ACME"}))
        request = await gw.wait_pending()
        shown = await gw.goldfive("show", request["target_id"], "--json")
        assert shown.returncode == 0, shown.stderr
        context = json.loads(shown.stdout)["context"]
        assert context["adapter"] == "mcp" and context["on_behalf_of"] == request["metadata"]["mcp_client"]
        assert context["input"].startswith("MCP client session mcp-session-")
        assert [(s["kind"], s["name"], s["text"]) for s in context["steps"]] == [
            ("tool_call", "read_balance", '{"account":"ACME"}'),
            ("tool_result", "read_balance", text(read)),
        ]  # the waiting transfer is the card itself, not a step before it
        printed = await gw.goldfive("show", request["target_id"])
        assert "called     read_balance: " in printed.stdout and "for mcp" in printed.stdout, printed.stdout
        decided = await gw.goldfive("reject", request["target_id"], "--by", "ana", "--reason", "not today")
        assert decided.returncode == 0, decided.stderr
        assert (await asyncio.wait_for(call, 30)).is_error
