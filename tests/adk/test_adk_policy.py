"""Policy rules in real ADK runs (scripted model): allow without a person (on the record), deny with the
reason the model sees, ask for an unmarked tool with the rule on the request, a quorum of two."""

from __future__ import annotations

import asyncio

from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlAck, ControlChannel, ControlKind, ControlMessage, SteeringConfig
from goldfive_core.policy import parse_policy
from goldfive_core.testing import AwaitableSink as WaitSink
from tests.adk.conftest import Bank
from tests.adk.scripted import Harness, responses

POLICY = parse_policy(
    """
[[rule]]
name = "no mallory"
tool = "*"
when = "exists(args.to) and args.to == 'mallory'"
action = "deny"
reason = "transfers to mallory are not allowed"

[[rule]]
name = "small transfers"
tool = "transfer_funds"
when = "args.amount <= 50"
action = "allow"

[[rule]]
name = "large transfers"
tool = "transfer_funds"
when = "args.amount > 10000"
action = "ask"
approvers = ["user:ana", "user:bo", "user:cy"]
quorum = 2

[[rule]]
name = "lookups of vaults"
tool = "lookup"
when = "args.account matches 'vault-.*'"
action = "ask"
""",
    source="test-policy.toml",
)


def plugin_with(channel: ControlChannel, sink: WaitSink) -> GoldfivePlugin:
    config = SteeringConfig(approval_default_timeout_ms=10_000)
    return GoldfivePlugin(control=channel, sinks=[sink], config=config, policy=POLICY)


async def test_a_rule_allows_a_marked_tool_without_a_person_and_it_is_on_the_record(bank: Bank) -> None:
    channel, sink = ControlChannel(), WaitSink()
    h = Harness(
        tools=bank.tools(),
        turns=[[("transfer_funds", {"amount": 20, "to": "acme"})], "done"],
        plugin=plugin_with(channel, sink),
    )
    events = await h.run(await h.new_session())
    assert bank.transfers == [{"amount": 20, "to": "acme"}]
    assert not sink.of("approval_requested")
    [applied] = sink.of("policy_applied")
    record = applied.policy_applied
    assert (record.rule, record.action, record.tool_name) == ("small transfers", "allow", "transfer_funds")
    assert record.args_json == '{"amount":20,"to":"acme"}' and record.args_digest.startswith("sha256:")
    assert responses(events)[0].response == {"ok": True, "amount": 20, "to": "acme"}


async def test_a_deny_rule_never_runs_the_body_and_the_model_reads_why(bank: Bank) -> None:
    channel, sink = ControlChannel(), WaitSink()
    turns = [[("transfer_funds", {"amount": 20, "to": "mallory"})], "understood"]
    h = Harness(tools=bank.tools(confirm=False), turns=turns, plugin=plugin_with(channel, sink))
    events = await h.run(await h.new_session())
    assert bank.transfers == []
    response = responses(events)[0].response
    assert response is not None and response["skipped"] is True and response["reason"] == "policy_denied"
    assert response["detail"] == "transfers to mallory are not allowed"
    assert "transfers to mallory are not allowed" in str(h.model.requests[-1].last_response)
    [applied] = sink.of("policy_applied")
    assert (applied.policy_applied.rule, applied.policy_applied.action) == ("no mallory", "deny")


async def test_a_rule_gates_an_unmarked_tool_and_the_request_names_the_rule(bank: Bank) -> None:
    channel, sink = ControlChannel(), WaitSink()
    turns = [[("lookup", {"account": "vault-1"})], [("lookup", {"account": "petty"})], "done"]
    h = Harness(tools=bank.tools(), turns=turns, plugin=plugin_with(channel, sink))
    run = asyncio.ensure_future(h.run(await h.new_session()))
    [requested] = await sink.wait_for("approval_requested")
    meta = requested.approval_requested.metadata
    assert (meta["policy_rule"], meta["policy_action"], meta["tool_name"]) == ("lookups of vaults", "ask", "lookup")
    assert bank.lookups == []
    target = requested.approval_requested.target_id
    assert (await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": target, "decided_by": "ana"}))).ok
    await run
    assert bank.lookups == ["vault-1", "petty"]  # the second lookup matched no rule: an unmarked tool runs
    assert len(sink.of("approval_requested")) == 1


async def test_a_quorum_of_two_distinct_approvers_runs_the_call_once(bank: Bank) -> None:
    channel, sink = ControlChannel(), WaitSink()
    turns = [[("transfer_funds", {"amount": 20_000, "to": "acme"})], "done"]
    h = Harness(tools=bank.tools(), turns=turns, plugin=plugin_with(channel, sink))
    run = asyncio.ensure_future(h.run(await h.new_session()))
    [requested] = await sink.wait_for("approval_requested")
    meta = requested.approval_requested.metadata
    assert (meta["policy_rule"], meta["policy_quorum"]) == ("large transfers", "2")
    target = requested.approval_requested.target_id

    async def vote(who: str) -> str:
        ack = await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": target, "decided_by": who}))
        assert ack.ok, ack.detail
        return ack.detail

    assert "(1 of 2: ana)" in await vote("ana")
    assert "the same person counts once" in await vote("ana")
    for _ in range(20):
        await asyncio.sleep(0)
    assert bank.transfers == [] and not run.done()
    assert "(2 of 2: ana, bo)" in await vote("bo")
    await run
    assert bank.transfers == [{"amount": 20_000, "to": "acme"}]
    [granted] = sink.of("approval_granted")
    assert granted.approval_granted.decided_by == "ana, bo"


GRANTING = parse_policy(
    """
[[rule]]
name = "payments to acme"
tool = "transfer_funds"
when = "args.to == 'acme'"
action = "ask"
grants = ["run", "1h"]
"""
)


async def test_an_approval_that_grants_the_run_lets_matching_calls_through_on_the_record(bank: Bank) -> None:
    channel, sink = ControlChannel(), WaitSink()
    config = SteeringConfig(approval_default_timeout_ms=10_000)
    plugin = GoldfivePlugin(control=channel, sinks=[sink], config=config, policy=GRANTING)
    turns = [
        [("transfer_funds", {"amount": 10, "to": "acme"})],
        [("transfer_funds", {"amount": 20, "to": "acme"})],
        [("transfer_funds", {"amount": 30, "to": "bolt"})],
        "done",
    ]
    h = Harness(tools=bank.tools(), turns=turns, plugin=plugin)
    run = asyncio.ensure_future(h.run(await h.new_session()))
    [first] = await sink.wait_for("approval_requested")
    target = first.approval_requested.target_id

    async def approve(target: str, **extra: object) -> ControlAck:
        return await channel.send(
            ControlMessage(ControlKind.APPROVE, {"target_id": target, "decided_by": "ana", **extra})
        )

    edited = await approve(target, grant="run", edited_args={"amount": 5, "to": "acme"})
    assert not edited.ok and "an edited approval never creates a grant" in edited.detail
    unoffered = await approve(target, grant="session")
    assert not unoffered.ok and "does not offer a grant for this session" in unoffered.detail
    rejected = await channel.send(
        ControlMessage(ControlKind.REJECT, {"target_id": target, "decided_by": "ana", "grant": "run"})
    )
    assert not rejected.ok and "only an approval can allow matching calls" in rejected.detail
    assert plugin.sessions[0].grants.list() == [] and bank.transfers == []  # nothing decided, nothing granted
    granted = await approve(target, grant="run")
    assert granted.ok and "allow transfer_funds calls matching rule 'payments to acme'" in granted.detail
    # The second acme payment runs on the grant; the payment to bolt is not covered and asks.
    requests = await sink.wait_for("approval_requested", count=2)
    assert requests[-1].approval_requested.metadata["args_json"] == '{"amount":30,"to":"bolt"}'
    assert bank.transfers == [{"amount": 10, "to": "acme"}, {"amount": 20, "to": "acme"}]
    [applied] = sink.of("policy_applied")
    grant_id = plugin.sessions[0].grants.list()[0].grant_id
    assert (applied.policy_applied.rule, applied.policy_applied.grant_id) == ("payments to acme", grant_id)
    await channel.send(ControlMessage(ControlKind.REJECT, {"target_id": requests[-1].approval_requested.target_id}))
    await run
