"""The Claude adapter with a ledger replays a tool use by the decision recorded while no agent ran.

Black-box, as for the callable agent and ADK (tests/store/test_store_replay.py): a decision is
recorded through ``decide()`` for a request whose run is gone, then a new conversation replays the
same tool use id; the tests assert whether the refund ran and what the model was told.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from goldfive_core import SteeringConfig, args_digest, canonical_json
from goldfive_core.adapters.claude import FakeToolUse
from goldfive_core.approvals import Principal
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import DecideVerdict, SqliteStore, Store, decide
from goldfive_core.store.execution import StoreLedger
from tests.claude.claude_support import REFUND, Harness, converse, make_harness

ARGS = {"order_id": "42", "amount": 30}
ANN = Principal(name="ann", channel="cli")


def _orphaned(store: Store, target: str, args: Mapping[str, Any] = ARGS) -> None:
    """``target`` was asked for ``refund(args)`` by a run whose process is gone."""
    request = events_pb2.ApprovalRequested(
        target_id=target,
        kind="tool",
        prompt="refund?",
        metadata={"tool_name": REFUND, "args_json": canonical_json(dict(args))},
        args_digest=args_digest(REFUND, dict(args)),
        timeout_ms=60_000,
    )
    event = events_pb2.Event(event_id=f"ev-{target}", run_id="run-old", sequence=1, approval_requested=request)
    store.append_events([event], pid=0, host="elsewhere")


def _record(store: Store, target: str, *, approve: bool, **kw: Any) -> None:
    result = decide(store, target, approve=approve, principal=ANN, reason="recorded offline", **kw)
    assert result.verdict is DecideVerdict.RECORDED, result.detail


async def _replay(store: Store, target: str, **harness: Any) -> tuple[Harness, FakeToolUse]:
    h = make_harness(ledger=StoreLedger(store), **harness)
    uses: list[FakeToolUse] = []

    async def script() -> None:
        uses.append(await h.cli.use_tool(target, REFUND, ARGS))
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund order 42", script)
    return h, uses[0]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return SqliteStore(str(tmp_path / "gf.db"))


async def test_a_recorded_rejection_is_denied_with_its_reason(store: Store) -> None:
    _orphaned(store, "toolu_1")
    _record(store, "toolu_1", approve=False)
    h, use = await _replay(store, "toolu_1")
    assert not use.ran and h.shop.refunds == []
    assert use.permission is not None and use.permission["behavior"] == "deny"
    assert "rejected this mcp__shop__refund call: recorded offline" in use.permission["message"]
    assert h.sink.of("approval_requested") == []  # nobody asked again


async def test_a_recorded_approval_runs_once_with_the_recorded_edit(store: Store) -> None:
    _orphaned(store, "toolu_2")
    edited = {"order_id": "42", "amount": 5}
    _record(store, "toolu_2", approve=True, edited_args=edited)
    h, use = await _replay(store, "toolu_2")
    assert use.ran and h.shop.refunds == [edited]
    again, use = await _replay(store, "toolu_2")
    assert not use.ran and again.shop.refunds == []
    assert use.permission is not None and use.permission["message"].startswith("already_done: ")


async def test_an_approval_recorded_for_other_input_is_not_applied(store: Store) -> None:
    _orphaned(store, "toolu_3", {"order_id": "42", "amount": 9999})
    _record(store, "toolu_3", approve=True)
    h, use = await _replay(store, "toolu_3", config=SteeringConfig(tool_approval_timeout_ms=1))
    assert not use.ran and h.shop.refunds == []
    assert use.permission is not None and "approval_timeout" in use.permission["message"]  # asked again


async def test_a_recorded_edit_that_does_not_fit_the_schema_never_reaches_the_tool(store: Store) -> None:
    _orphaned(store, "toolu_4")
    _record(store, "toolu_4", approve=True, edited_args={"order_id": "42", "amount": -1})
    h, use = await _replay(store, "toolu_4")
    assert not use.ran and h.shop.refunds == []
    assert use.permission is not None and "do not fit" in use.permission["message"]
