"""How a reviewer's verdicts compare with the people's later decisions (``goldfive review stats``).

Pure counting over what the store holds: each ``ReviewerVerdict`` event, and the decision a person took
on the request the same call opened (in shadow mode every verdict has one; in act mode only the calls it
sent on). ``allow`` agrees with an approval, ``deny`` with a rejection; an ``ask`` is counted by what the
person decided. A review that failed, or that acted on its own (no person was asked), is counted apart.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from ..policy import Ask, Policy

__all__ = ["Agreement", "ReviewStats", "ReviewedCall", "attributed", "review_stats", "selected_stats"]

Agreement = Literal["agree", "disagree", "approved", "rejected", "undecided", "acted", "failed"]
"""Where one verdict stands against the person: agree / disagree (an allow or deny they decided too);
approved / rejected (an ask, by what they chose); undecided (not decided yet, expired or withdrawn);
acted (the reviewer decided and no person was asked); failed (it gave no verdict: a person decided)."""

_ORDER: tuple[Agreement, ...] = ("agree", "disagree", "approved", "rejected", "undecided", "acted", "failed")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ReviewedCall:
    """One reviewer verdict and what the person later decided on the same call."""

    run_id: str
    call_id: str
    tool_name: str
    rule: str
    reviewer: str
    verdict: str
    reason: str
    mode: str
    outcome: str
    error: str = ""
    person: Literal["approve", "reject", ""] = ""
    """The person's decision ("" when none was taken)."""
    decided_by: str = ""
    detail: str = ""
    """The person's reason."""
    verified: bool | None = None
    """Checked against a policy (``--policy``): whether its rule names this reviewer in this mode; None: unchecked."""

    @property
    def agreement(self) -> Agreement:
        """Where this verdict stands against the person."""
        if self.error:
            return "failed"
        if self.outcome in ("allowed", "denied"):
            return "acted"
        if not self.person:
            return "undecided"
        if self.verdict == "ask":
            return "approved" if self.person == "approve" else "rejected"
        agreed = (self.verdict == "allow") == (self.person == "approve")
        return "agree" if agreed else "disagree"

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape (with ``agreement``)."""
        return {**dataclasses.asdict(self), "agreement": self.agreement}


def _counts() -> dict[str, int]:
    return dict.fromkeys(_ORDER, 0)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ReviewStats:
    """Counts of :data:`Agreement` per verdict, per rule and per reviewer, and the disagreements."""

    total: int
    by_verdict: Mapping[str, Mapping[str, int]]
    by_rule: Mapping[str, Mapping[str, int]]
    by_reviewer: Mapping[str, Mapping[str, int]]
    disagreements: tuple[ReviewedCall, ...]
    unverified: tuple[ReviewedCall, ...] = ()
    """Verdicts whose rule, in the policy checked against, names another reviewer or mode (or is missing)."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape ``goldfive review stats --json`` prints."""
        return {
            "total": self.total,
            "by_verdict": {k: dict(v) for k, v in self.by_verdict.items()},
            "by_rule": {k: dict(v) for k, v in self.by_rule.items()},
            "by_reviewer": {k: dict(v) for k, v in self.by_reviewer.items()},
            "disagreements": [c.as_dict() for c in self.disagreements],
            "unverified": [c.as_dict() for c in self.unverified],
        }


def review_stats(calls: Iterable[ReviewedCall]) -> ReviewStats:
    """Count ``calls`` (see the module docstring)."""
    by_verdict: dict[str, dict[str, int]] = collections.defaultdict(_counts)
    by_rule: dict[str, dict[str, int]] = collections.defaultdict(_counts)
    by_reviewer: dict[str, dict[str, int]] = collections.defaultdict(_counts)
    disagreements: list[ReviewedCall] = []
    unverified: list[ReviewedCall] = []
    total = 0
    for call in calls:
        total += 1
        where = call.agreement
        by_verdict[call.verdict][where] += 1
        by_rule[call.rule][where] += 1
        by_reviewer[call.reviewer][where] += 1
        if where == "disagree":
            disagreements.append(call)
        if call.verified is False:
            unverified.append(call)
    return ReviewStats(
        total=total,
        by_verdict=dict(sorted(by_verdict.items())),
        by_rule=dict(sorted(by_rule.items())),
        by_reviewer=dict(sorted(by_reviewer.items())),
        disagreements=tuple(disagreements),
        unverified=tuple(unverified),
    )


def attributed(policy: Policy, call: ReviewedCall) -> bool:
    """Whether ``policy``'s rule of that name names this reviewer, in this mode."""
    rule = next((r for r in policy.rules if r.name == call.rule), None)
    review = rule.action.review if rule is not None and isinstance(rule.action, Ask) else None
    return review is not None and review.decider == call.reviewer and review.mode == call.mode


def selected_stats(
    calls: Iterable[ReviewedCall], *, rule: str = "", reviewer: str = "", policy: Policy | None = None
) -> ReviewStats:
    """:func:`review_stats` over the calls of ``rule`` and ``reviewer`` (``NAME`` or ``reviewer:NAME``; ""
    for all), each checked against ``policy`` when one is given (``goldfive review stats`` and its API)."""
    wanted = reviewer if not reviewer or reviewer.startswith("reviewer:") else "reviewer:" + reviewer
    chosen = (c for c in calls if (not rule or c.rule == rule) and (not wanted or c.reviewer == wanted))
    if policy is not None:
        chosen = (dataclasses.replace(c, verified=attributed(policy, c)) for c in chosen)
    return review_stats(chosen)
