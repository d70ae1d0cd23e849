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


TEAM = parse_policy(
    """
[[rule]]
name = "deploys"
tool = "Bash"
when = "args.command matches 'deploy .*'"
action = "ask"
quorum = 2

[[rule]]
name = "builds"
tool = "Bash"
when = "args.command matches 'make .*'"
action = "ask"
grants = ["run"]
""",
    source="claude-team.toml",
)


async def test_a_quorum_of_two_and_a_run_grant_in_a_claude_run() -> None:
    h = make_harness(policy=TEAM)

    async def script() -> None:
        # Two distinct approvers; the same person twice counts once; Bash runs once, after the last approval.
        deploy = asyncio.create_task(h.cli.use_tool("toolu_deploy", "Bash", {"command": "deploy prod"}))
        (asked,) = await h.sink.wait_for("approval_requested")
        first = await h.control(ControlKind.APPROVE, target_id="toolu_deploy", decided_by="ana")
        assert (
            first.ok
            and "(1 of 2: ana)" in first.detail
            and first.data
            == {
                "decision": "counted",
                "quorum_progress": "1 of 2: ana",
                "request_id": asked.approval_requested.request_id,  # the request the vote counts for
            }
        )
        again = await h.control(ControlKind.APPROVE, target_id="toolu_deploy", decided_by="ana")
        assert "ana already approved; the same person counts once" in again.detail
        assert not deploy.done()
        grant = await h.control(ControlKind.APPROVE, target_id="toolu_deploy", decided_by="bo", grant="run")
        assert not grant.ok and "needs 2 approvers; one approver cannot allow later calls" in grant.detail
        last = await h.control(ControlKind.APPROVE, target_id="toolu_deploy", decided_by="bo")
        assert last.ok and "(2 of 2: ana, bo)" in last.detail
        assert (await deploy).allowed
        votes = [(v.approval_voted.decided_by, v.approval_voted.progress) for v in h.sink.of("approval_voted")]
        assert votes == [("ana", "1 of 2: ana"), ("ana", "1 of 2: ana"), ("bo", "2 of 2: ana, bo")]

        # A run grant: the next matching build runs without asking, on the record with the grant's id.
        build = asyncio.create_task(h.cli.use_tool("toolu_make1", "Bash", {"command": "make all"}))
        await h.sink.wait_for("approval_requested", count=2)
        granted = await h.control(ControlKind.APPROVE, target_id="toolu_make1", decided_by="ana", grant="run")
        assert granted.ok and "allow Bash calls matching rule 'builds' for the rest of run" in granted.detail
        assert (await build).allowed
        again_build = await h.cli.use_tool("toolu_make2", "Bash", {"command": "make test"})
        assert again_build.allowed
        assert len(h.sink.of("approval_requested")) == 2  # nobody was asked for the second build
        await h.cli.result()

    async with h.run() as run:
        await converse(run, h.cli, "ship it", script)
    [created] = h.sink.of("grant_created")
    assert (created.grant_created.rule, created.grant_created.scope, created.grant_created.granted_by) == (
        "builds",
        "run",
        "ana",
    )
    [applied] = h.sink.of("policy_applied")
    assert (applied.policy_applied.grant_id, applied.policy_applied.call_id) == (
        created.grant_created.grant_id,
        "toolu_make2",
    )
