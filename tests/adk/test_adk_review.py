"""The reviewer tier in real ADK runs (scripted models): goldfive's ModelReviewer asks a model through an ADK
``BaseLlm`` (here a second ScriptedModel), and its allow / deny / ask reach the agent's model as they would from
a person's decision — with no ADK-specific reviewer code in the plugin."""

from __future__ import annotations

import asyncio
import json

from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlChannel, ControlKind, ControlMessage, SteeringConfig
from goldfive_core.policy import Ask, Policy, Rule, RuleReviewer
from goldfive_core.review import ModelReviewer
from goldfive_core.testing import AwaitableSink, ScriptedModel, SeenRequest
from tests.adk.conftest import Bank
from tests.adk.scripted import Harness, responses


def judge(seen: SeenRequest) -> str:
    """The reviewing model: reads the call out of its prompt and answers with a verdict."""
    call = json.loads(seen.user_text.split("The call (JSON):\n", 1)[1])
    args = json.loads(call["arguments"])
    if args["to"] == "mallory":
        return '{"verdict": "deny", "reason": "mallory is on the blocked list"}'
    if args["amount"] <= 100:
        return 'Sure. {"verdict": "allow", "reason": "a small transfer to a known account"}'
    if args["amount"] > 100_000:
        return "I think this is fine."  # no verdict at all: the gate must ask a person, never allow
    return '{"verdict": "ask", "reason": "a large amount"}'


def setup(bank: Bank, turns: list[object]) -> tuple[Harness, ControlChannel, AwaitableSink, ScriptedModel]:
    reviewing_model = ScriptedModel(then=judge, model="scripted-reviewer")
    reviewer = ModelReviewer.adk(reviewing_model, name="bank-model")
    policy = Policy([Rule(name="transfers", tool="transfer_funds", action=Ask(review=RuleReviewer(target=reviewer)))])
    channel, sink = ControlChannel(), AwaitableSink()
    config = SteeringConfig(approval_default_timeout_ms=10_000)
    plugin = GoldfivePlugin(control=channel, sinks=[sink], config=config, policy=policy)
    return Harness(tools=bank.tools(confirm=False), turns=turns, plugin=plugin), channel, sink, reviewing_model


async def test_a_model_reviewers_allow_runs_the_body_without_a_person(bank: Bank) -> None:
    h, _, sink, reviewing = setup(bank, [[("transfer_funds", {"amount": 20, "to": "acme"})], "done"])
    events = await h.run(await h.new_session())
    assert bank.transfers == [{"amount": 20, "to": "acme"}] and not sink.of("approval_requested")
    [verdict] = sink.of("reviewer_verdict")
    assert (verdict.reviewer_verdict.decided_by, verdict.reviewer_verdict.outcome) == ("reviewer:bank-model", "allowed")
    assert responses(events)[0].response["ok"] is True  # type: ignore[index]
    # The reviewing model was shown the call as data, with the rule that asked.
    [asked] = reviewing.requests
    assert '"tool": "transfer_funds"' in asked.user_text and '"rule": "transfers"' in asked.user_text


async def test_a_model_reviewers_deny_is_what_the_agents_model_reads(bank: Bank) -> None:
    h, _, sink, _ = setup(bank, [[("transfer_funds", {"amount": 20, "to": "mallory"})], "understood"])
    events = await h.run(await h.new_session())
    assert bank.transfers == [] and not sink.of("approval_requested")
    response = responses(events)[0].response
    assert response is not None and response["reason"] == "reviewer_denied"
    assert "mallory is on the blocked list" in str(h.model.requests[-1].last_response)


async def test_an_ask_and_an_answer_that_is_no_verdict_both_go_to_a_person(bank: Bank) -> None:
    turns = [
        [("transfer_funds", {"amount": 5000, "to": "acme"})],
        [("transfer_funds", {"amount": 500000, "to": "acme"})],
        "ok",
    ]
    h, channel, sink, _ = setup(bank, turns)
    run = asyncio.create_task(h.run(await h.new_session()))
    first = await sink.wait_for("approval_requested", timeout=20)
    meta = first[0].approval_requested.metadata
    assert (meta["review_verdict"], meta["review_reason"]) == ("ask", "a large amount")
    await channel.send(
        ControlMessage(ControlKind.APPROVE, {"target_id": first[0].approval_requested.target_id, "decided_by": "ana"})
    )
    second = (await sink.wait_for("approval_requested", count=2, timeout=20))[1]
    assert "holds no JSON object" in second.approval_requested.metadata["review_error"]
    await channel.send(
        ControlMessage(ControlKind.REJECT, {"target_id": second.approval_requested.target_id, "decided_by": "ana"})
    )
    await asyncio.wait_for(run, 20)
    assert bank.transfers == [{"amount": 5000, "to": "acme"}]
