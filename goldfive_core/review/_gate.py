"""The reviewer's step in the tool-call gate: after a rule says "ask", before a person is asked.

The gate (``goldfive_core.toolcall``) calls :func:`review_call` for a call whose rule names a reviewer.
What the reviewer said goes on the run's record as ``ReviewerVerdict`` (decided by ``reviewer:<name>``,
channel ``reviewer``), and the gate acts on :attr:`ReviewStep.outcome`:

* ``allowed`` — the call proceeds (the ledger's at-most-once record and the step gate still apply);
* ``denied`` — it is skipped; the model reads the reviewer's reason;
* ``asked`` — a person decides; the request carries the verdict for the card (:attr:`ReviewStep.card`).

A reviewer's allow never stands in for people a quorum rule asks for (its verdict goes on the card instead),
never makes a grant and is never signed: it is a record of this agent's own gate, not a person's decision.
In ``shadow`` mode every call is ``asked`` and the card carries nothing of the verdict, so the person decides
as if there were no reviewer (``goldfive review stats`` compares the two afterwards).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from .._util import shorten
from ..pb.v1 import events_pb2
from ._run import Judged, run_reviewer
from ._verdict import ReviewContext

if TYPE_CHECKING:
    from ..policy import Ask, Rule, RuleReviewer
    from ..session import Session
    from ..toolcall import ToolCall

__all__ = ["CARD_KEYS", "REVIEW_CHANNEL", "ReviewStep", "review_call"]

REVIEW_CHANNEL = "reviewer"
"""The channel every reviewer's record names."""

CARD_KEYS = ("review_by", "review_verdict", "review_reason", "review_error", "review_note")
"""The request metadata that shows a reviewer's verdict on the card (act mode only)."""

Outcome = Literal["allowed", "denied", "asked"]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ReviewStep:
    """What the gate does after the reviewer: proceed, skip, or ask a person with ``card`` on the request."""

    outcome: Outcome
    decided_by: str
    """``reviewer:<name>``."""
    reason: str = ""
    card: Mapping[str, str] = dataclasses.field(default_factory=dict)


async def review_call(session: Session, call: ToolCall, rule: Rule, *, args_json: str, digest: str) -> ReviewStep:
    """Run the rule's reviewer on ``call``, record its verdict and say what the gate does. Never raises."""
    ask: Ask = rule.action  # type: ignore[assignment]  # the gate calls this for an ask rule with a reviewer
    reviewer = ask.review
    assert reviewer is not None
    # The reviewer gets a copy: whatever it does to the arguments, the call that runs is the one reviewed.
    seen = dataclasses.replace(call, args=json.loads(args_json), metadata=dict(call.metadata))
    current = session.tasks.current
    task_id = call.task_id or (current.id if current is not None else "")
    context = ReviewContext(
        run_id=session.run_id,
        session_id=session.session_id,
        agent=call.agent,
        task_id=task_id,
        labels=dict(session.labels),
        started_by=session.started_by,
        prompt=call.prompt,
        host=dict(call.metadata),
        args_schema=call.args_schema,
    )
    judged = await run_reviewer(reviewer, seen, context, rule)
    step = _step(reviewer, ask, judged)
    session.events.emit(
        events_pb2.ReviewerVerdict(
            call_id=call.call_id,
            tool_name=call.tool_name,
            rule=rule.name,
            decided_by=reviewer.decider,
            verdict=judged.verdict.action,
            reason=judged.verdict.reason,
            mode=reviewer.mode,
            outcome=step.outcome,
            error=judged.error,
            args_digest=digest,
            agent=call.agent,
            channel=REVIEW_CHANNEL,
            elapsed_ms=judged.elapsed_ms,
            task_id=task_id,
        )
    )
    return step


def _step(reviewer: RuleReviewer, ask: Ask, judged: Judged) -> ReviewStep:
    """What the gate does with a verdict (the one place a reviewer's verdict becomes an action)."""
    by = reviewer.decider
    verdict = judged.verdict
    if reviewer.mode == "shadow":  # recorded only: the person decides as if there were no reviewer
        return ReviewStep(outcome="asked", decided_by=by)
    card = {"review_by": by, "review_verdict": verdict.action, "review_reason": verdict.reason}
    if judged.failed:  # raised, timed out, junk: never allow
        return ReviewStep(outcome="asked", decided_by=by, card={**card, "review_error": shorten(judged.error, 500)})
    if verdict.action == "deny":
        return ReviewStep(outcome="denied", decided_by=by, reason=verdict.reason)
    if verdict.action == "allow" and ask.quorum > 1:  # a reviewer is never one of the people a quorum needs
        note = f"the rule needs {ask.quorum} people's approvals; a reviewer's allow is advice, not a vote"
        return ReviewStep(outcome="asked", decided_by=by, card={**card, "review_note": note})
    if verdict.action == "allow":
        return ReviewStep(outcome="allowed", decided_by=by, reason=verdict.reason)
    return ReviewStep(outcome="asked", decided_by=by, card=card)
