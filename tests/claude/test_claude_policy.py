"""Policy rules in Claude runs (fake CLI transport): built-in Bash denied or allowed by its command, an
unmarked Bash command asked with the rule on the request, a gated MCP tool allowed by a rule."""

from __future__ import annotations

import asyncio

from goldfive_core import ControlKind
from goldfive_core.policy import parse_policy
from tests.claude.claude_support import REFUND, converse, make_harness

POLICY = parse_policy(
    """
[[rule]]
name = "no rm"
tool = "Bash"
when = "args.command matches '(rm|dd) .*'"
action = "deny"
reason = "deleting files is not allowed in this project"

[[rule]]
name = "listing is fine"
tool = "Bash"
when = "args.command matches '(ls|pwd)( .*)?'"
action = "allow"

[[rule]]
name = "other shell commands"
tool = "Bash"
action = "ask"

[[rule]]
name = "small refunds"
tool = "mcp__shop__refund"
when = "args.amount <= 50"
action = "allow"
""",
    source="claude-policy.toml",
)


async def test_bash_is_ruled_by_its_command_and_a_gated_refund_by_its_amount() -> None:
    h = make_harness(gate_tools=[REFUND], policy=POLICY)

    async def script() -> None:
        denied = await h.cli.use_tool("toolu_rm", "Bash", {"command": "rm -rf /srv"})
        assert denied.permission is not None and denied.permission["behavior"] == "deny"
        assert "deleting files is not allowed in this project" in denied.permission["message"]
        assert not denied.ran

        listed = await h.cli.use_tool("toolu_ls", "Bash", {"command": "ls -l"})
        assert listed.allowed

        refund = await h.cli.use_tool("toolu_R", REFUND, {"order_id": "42", "amount": 30})
        assert refund.allowed and refund.ran
        assert not h.sink.of("approval_requested")  # nobody was asked so far

        asked_use = asyncio.create_task(h.cli.use_tool("toolu_curl", "Bash", {"command": "curl example.com"}))
        (asked,) = await h.sink.wait_for("approval_requested")
        meta = asked.approval_requested.metadata
        assert (meta["policy_rule"], meta["tool_name"]) == ("other shell commands", "Bash")
        assert (await h.control(ControlKind.REJECT, target_id="toolu_curl", detail="not now")).ok
        rejected = await asked_use
        assert rejected.permission is not None and rejected.permission["behavior"] == "deny"
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "tidy up", script)
    assert h.shop.refunds == [{"order_id": "42", "amount": 30}]
    applied = [(e.policy_applied.rule, e.policy_applied.action) for e in h.sink.of("policy_applied")]
    assert applied == [("no rm", "deny"), ("listing is fine", "allow"), ("small refunds", "allow")]
