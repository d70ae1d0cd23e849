"""Text that is not text (a lone surrogate, "\\ud800") from a model or a control message: refused in words.

A Python string can hold a lone surrogate; UTF-8, protobuf and every store cannot. A model's reporting
tool argument or a person's steer text, reason or name holding one must be answered with words that say
what is wrong (an ``{"error": ...}`` for the model, a FAILURE ack for the sender), the run going on, and
nothing half-done (no event, no request, no state change).
"""

from __future__ import annotations

from typing import Any

import pytest

from goldfive_core import (
    AckResult,
    ControlKind,
    ControlMessage,
    InMemorySink,
    RunStatus,
    Session,
    SteeringConfig,
)
from goldfive_core.approvals import ApprovalStatus
from goldfive_core.reporting import TOOL_SPECS, call_reporting_tool
from goldfive_core.run_state import RunState

LONE = "\ud800"

_FILLERS: dict[str, Any] = {
    "task_id": "root",
    "parent_id": "root",
    "title": "a title",
    "message": "half way",
    "result": "done",
    "reason": "site down",
    "blocker": "no key",
    "needed": "a key",
    "description": "also a hotel",
    "prompt": "pay 20 EUR?",
}

_TEXT_ARGS = [
    (name, key)
    for name, spec in TOOL_SPECS.items()
    for key, prop in spec.parameters["properties"].items()
    if prop["type"] == "string"
]


def _session() -> tuple[Session, InMemorySink]:
    sink = InMemorySink()
    session = Session(sinks=[sink], config=SteeringConfig(), has_channel=True)
    session.start_task("root", title="the run")
    return session, sink


@pytest.mark.parametrize(("name", "key"), _TEXT_ARGS, ids=[f"{n}.{k}" for n, k in _TEXT_ARGS])
async def test_a_reporting_tool_argument_that_is_not_text_is_refused_in_words(name: str, key: str) -> None:
    session, sink = _session()
    spec = TOOL_SPECS[name].parameters
    args = {k: _FILLERS[k] for k in spec["required"]}
    args[key] = f"pay{LONE}"
    before = len(sink.events)
    out = await call_reporting_tool(session, name, args)
    assert set(out) == {"error", "tool"} and out["tool"] == name
    assert out["error"].startswith(f"{name}: ") and f"'{key}' is not text" in out["error"]
    assert "lone surrogate" in out["error"]
    out["error"].encode()  # the answer itself is text the model (and any store) can take
    assert len(sink.events) == before  # nothing happened: no event, no task change
    assert session.approvals.statistics().live == 0
    assert session.tasks.get("root").status.value == "RUNNING"  # type: ignore[union-attr]


async def test_a_prompt_that_is_not_text_leaves_the_run_going_and_a_clean_ask_still_works(harness) -> None:
    answers: list[dict[str, Any]] = []

    async def agent(task, tools):
        answers.append(await tools.report_awaiting_approval(prompt=f"wire 50 EUR {LONE}?", timeout_ms=60_000))
        answers.append(await tools.report_awaiting_approval(prompt="wire 50 EUR?", timeout_ms=60_000))
        return "finished"

    h = harness(agent)
    h.start()
    requested = await h.sink.first("approval_requested")
    assert requested.approval_requested.prompt == "wire 50 EUR?"  # the first ask never reached a person
    ack = await h.channel.send(
        ControlMessage(ControlKind.APPROVE, {"target_id": requested.approval_requested.target_id})
    )
    assert ack.ok, ack.detail
    result = await h.result()
    assert result.output == "finished" and result.status is RunStatus.COMPLETED
    assert "'prompt' is not text" in answers[0]["error"]
    assert answers[1]["decision"] == "approve"
    assert len(h.sink.of("approval_requested")) == 1


_PAYLOADS: list[tuple[ControlKind, dict[str, Any], str]] = [
    (ControlKind.STEER, {"text": f"go {LONE}"}, "'text'"),
    (ControlKind.STEER, {"text": "go", "author": f"ana{LONE}"}, "'author'"),
    (ControlKind.GOLDFIVE_STEER, {"note": f"go {LONE}"}, "'note'"),
    (ControlKind.INJECT_MESSAGE, {"text": f"go {LONE}"}, "'text'"),
    (ControlKind.PAUSE, {"reason": f"lunch {LONE}"}, "'reason'"),
    (ControlKind.CANCEL, {"reason": f"stop {LONE}"}, "'reason'"),
    (ControlKind.GOLDFIVE_PAUSE_ESCALATE, {"reason": f"look {LONE}"}, "'reason'"),
    (ControlKind.REJECT, {"target_id": "root", "reason": f"no {LONE}"}, "'reason'"),
    (ControlKind.REJECT, {"target_id": "root", "detail": f"no {LONE}"}, "'detail'"),
    (ControlKind.REJECT, {"target_id": "root", "decided_by": f"ana{LONE}"}, "'decided_by'"),
    (ControlKind.APPROVE, {"target_id": "root", "detail": f"ok {LONE}"}, "'detail'"),
    (ControlKind.APPROVE, {"target_id": "root", "edited_args": {"to": f"DE{LONE}"}}, "'edited_args.to'"),
    (ControlKind.REJECT, {"target_id": "root", "expired": True, "detail": f"late {LONE}"}, "'detail'"),
    (ControlKind.STATUS_QUERY, {f"k{LONE}": 1}, "a key that is not text"),
]


@pytest.mark.parametrize(("kind", "payload", "named"), _PAYLOADS, ids=[f"{k.value}-{n}" for k, _, n in _PAYLOADS])
async def test_a_control_message_with_text_that_is_not_text_gets_a_failure_ack_and_changes_nothing(
    harness, kind: ControlKind, payload: dict[str, Any], named: str
) -> None:
    async def agent(task, tools):
        return await tools.report_awaiting_approval(prompt="pay 20 EUR?", timeout_ms=60_000)

    h = harness(agent)
    h.start()
    target = (await h.sink.first("approval_requested")).approval_requested.target_id
    if "target_id" in payload:
        payload = {**payload, "target_id": target}
    before = len(h.sink.events)
    ack = await h.channel.send(ControlMessage(kind, payload, id="m-1"))
    assert ack.result is AckResult.FAILURE and ack.control_id == "m-1"
    assert named in ack.detail and "lone surrogate" in ack.detail and "nothing was done" in ack.detail
    ack.detail.encode()
    session = h.runner.session
    assert session is not None and session.state is RunState.RUNNING
    record = session.approvals.get(target)
    assert record is not None and record.status is ApprovalStatus.PENDING
    assert session.take_guidance() == []
    assert len(h.sink.events) == before
    # The run goes on: a clean decision still lands.
    ack = await h.channel.send(ControlMessage(ControlKind.REJECT, {"target_id": target, "reason": "no"}))
    assert ack.ok, ack.detail
    assert (await h.result()).output["decision"] == "reject"


async def test_a_control_message_id_that_is_not_text_is_refused() -> None:
    session, _ = _session()
    ack = session.dispatch(ControlMessage(ControlKind.PAUSE, {"reason": "lunch"}, id=f"m{LONE}"))
    assert ack.result is AckResult.FAILURE and "control message id" in ack.detail and "lone surrogate" in ack.detail
    assert ack.control_id == ""
    assert session.state is RunState.RUNNING
