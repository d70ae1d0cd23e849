"""The Claude adapter fails closed: a gate predicate that raises means "ask a person", never "allow"."""

from __future__ import annotations

from typing import Any

from tests.claude.claude_support import REFUND, converse, make_harness

ARGS = {"order_id": "42", "amount": 30}


def _broken_predicate(tool_name: str, tool_input: Any) -> bool:
    raise RuntimeError("the predicate has a bug")


async def test_a_gate_predicate_that_raises_gates_the_call() -> None:
    # No channel: a gated call is refused at once (nobody could answer); failing open would run the refund.
    h = make_harness(channel=False, gate_tools=_broken_predicate)

    async def script() -> None:
        use = await h.cli.use_tool("toolu_P", REFUND, ARGS)
        assert use.permission is not None and use.permission["behavior"] == "deny"
        assert "approval_unavailable" in use.permission["message"]
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "refund order 42", script)
    assert h.shop.refunds == []
