"""Policy rules for a plain callable agent (wrap) and the GOLDFIVE_POLICY file on the agent side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from goldfive_core import InMemorySink, Session, SteeringConfig, wrap
from goldfive_core.adapters.callable import AgentTools
from goldfive_core.policy import PolicyError, parse_policy
from goldfive_core.tasks import Task

POLICY = parse_policy(
    """
[[rule]]
name = "no prod deploys"
tool = "deploy"
labels = { env = "prod" }
action = "deny"
reason = "deploys to prod go through the release train"

[[rule]]
name = "staging deploys"
tool = "deploy"
action = "allow"
"""
)


@pytest.mark.parametrize(
    ("labels", "runs", "rule"), [({"env": "prod"}, False, "no prod deploys"), ({}, True, "staging deploys")]
)
async def test_a_callable_agents_own_tool_is_ruled_by_the_run_labels(
    labels: dict[str, str], runs: bool, rule: str
) -> None:
    sink = InMemorySink()
    ran: list[str] = []

    async def agent(task: Task, tools: AgentTools) -> Any:
        if await tools.before_tool("deploy", {"service": "api"}):
            ran.append("deploy")
        return tools.guidance()

    result = await wrap(agent, sinks=[sink], policy=POLICY, labels=labels, config=SteeringConfig()).run("ship it")
    assert ran == (["deploy"] if runs else [])
    [applied] = sink.of("policy_applied")
    assert applied.policy_applied.rule == rule
    if not runs:
        assert result.output == ["deploys to prod go through the release train"]


def test_the_agent_side_reads_goldfive_policy_and_refuses_a_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = tmp_path / "policy.toml"
    good.write_text('[[rule]]\nname = "r"\ntool = "t"\naction = "allow"\n')
    monkeypatch.setenv("GOLDFIVE_POLICY", str(good))
    session = Session(config=SteeringConfig())
    assert session.policy is not None and [r.name for r in session.policy.rules] == ["r"]
    assert Session(config=SteeringConfig()).policy is session.policy  # read once while the file is unchanged
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\nname = "r"\naction = "allow"\nwhen = "args.x >"\n')
    monkeypatch.setenv("GOLDFIVE_POLICY", str(bad))
    with pytest.raises(PolicyError, match=r"bad\.toml:4: rule 'r': when 'args.x >': column 9"):
        Session(config=SteeringConfig())
    monkeypatch.delenv("GOLDFIVE_POLICY")
    assert Session(config=SteeringConfig()).policy is None
