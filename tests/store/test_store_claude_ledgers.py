"""Claude Agent SDK hosts named by ``GoldfiveClaude(app_name=)`` keep their tool uses in their own ledger (issue #27).

Two Claude hosts of other names on one store, each replaying the tool use id "toolu_A" with the same input, each run
the refund once and are handed their own recorded result when restarted; an unnamed host still reads the shared
ledger, and a named one still honours a row the shared ledger holds from before. The real claude-agent-sdk client
against FakeClaudeCLI (its transport), a real store (SQLite and PostgreSQL).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from store_support import Backend

from goldfive_core import ControlKind, args_digest, canonical_json
from goldfive_core.errors import ConfigError
from goldfive_core.store import ExecutionState, Store
from goldfive_core.store.execution import StoreLedger

pytest.importorskip("claude_agent_sdk")

from claude_agent_sdk import create_sdk_mcp_server, tool

from goldfive_core.adapters.claude import FakeToolUse
from tests.claude.claude_support import REFUND, REFUND_SCHEMA, Harness, Shop, converse, make_harness

ARGS = {"order_id": "42", "amount": 30}


@pytest.fixture(autouse=True)
def _no_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOLDFIVE_AGENT_ID", raising=False)


def _shop(name: str) -> Shop:
    """A refund tool whose result names the host it ran in."""
    refunds: list[dict[str, Any]] = []

    @tool("refund", "Refund an order", REFUND_SCHEMA)
    async def refund(args: dict[str, Any]) -> dict[str, Any]:
        refunds.append(args)
        return {"content": [{"type": "text", "text": f"refunded by {name}"}]}

    return Shop(refunds, [], create_sdk_mcp_server("shop", tools=[refund]))


async def _converse(store: Store, app_name: str, *, approve: bool = True) -> tuple[Harness, FakeToolUse]:
    """One conversation of host ``app_name`` (a new GoldfiveClaude: as after a restart) using "toolu_A"."""
    made = make_harness(ledger=StoreLedger(store), app_name=app_name)
    h = Harness(made.gf, made.channel, made.sink, _shop(app_name or "nobody"), made.cli)
    uses: list[FakeToolUse] = []

    async def script() -> None:
        use = asyncio.create_task(h.cli.use_tool("toolu_A", REFUND, ARGS))
        asked = asyncio.create_task(h.sink.wait_for("approval_requested"))
        done, _ = await asyncio.wait({use, asked}, return_when=asyncio.FIRST_COMPLETED)
        if asked in done:
            assert approve, "asked again for a tool use its ledger holds"
            assert (await h.control(ControlKind.APPROVE, target_id="toolu_A")).ok
        else:
            asked.cancel()
        uses.append(await use)
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund order 42", script)
    return h, uses[0]


def _denied_with(use: FakeToolUse) -> str:
    assert not use.ran and use.permission is not None and use.permission["behavior"] == "deny"
    return str(use.permission["message"])


async def test_two_claude_hosts_reusing_a_tool_use_id_each_run_it_once(backend: Backend) -> None:
    store = backend.open()
    shop_a, use_a = await _converse(store, "shop-a")
    shop_b, use_b = await _converse(store, "shop-b")  # another host, the same tool use id and input
    assert use_a.ran and use_b.ran
    assert (shop_a.shop.refunds, shop_b.shop.refunds) == ([ARGS], [ARGS])
    rows = sorted((r.owner, r.state) for r in store.executions())
    assert rows == [("app:shop-a", ExecutionState.DONE), ("app:shop-b", ExecutionState.DONE)]
    # Each restarted: its own tool use done, its own recorded result handed to the model, nothing run again.
    for name in ("shop-a", "shop-b"):
        again, use = await _converse(store, name, approve=False)
        message = _denied_with(use)
        assert message.startswith("already_done: ") and f"refunded by {name}" in message
        assert again.shop.refunds == []


async def test_a_shared_row_from_before_still_stops_a_named_claude_host(backend: Backend) -> None:
    store = backend.open()
    digest = args_digest(REFUND, ARGS)
    assert store.mark_executing("toolu_A", run_id="run-old", pid=1, host="gone", args_digest=digest)
    assert store.mark_done("toolu_A", result_json=canonical_json("refunded before"), run_id="run-old")
    h, use = await _converse(store, "shop-a", approve=False)
    assert "refunded before" in _denied_with(use) and h.shop.refunds == []
    assert [r.owner for r in store.executions()] == [""]  # nothing claimed anew in the host's ledger


async def test_an_unnamed_claude_host_keeps_the_shared_ledger(backend: Backend) -> None:
    store = backend.open()
    _, use = await _converse(store, "")
    assert use.ran and [r.owner for r in store.executions()] == [""]
    again, use = await _converse(store, "shop-a", approve=False)  # a named host reads the shared row
    assert "refunded by nobody" in _denied_with(use) and again.shop.refunds == []


def test_an_app_name_that_is_no_string_is_refused_at_once() -> None:
    with pytest.raises(ConfigError, match="app_name must be a string, got bytes"):
        make_harness(app_name=b"shop-a")
