"""``goldfive review stats``: how the reviewers' verdicts compare with the people's later decisions (database only).

The reviewers run in the agents' own gates, and the agents write these records; ``--policy FILE`` (the policy
``goldfive serve --policy`` enforces) checks each against it: a verdict whose rule there names another reviewer or
mode, or that the policy has no such rule for, is listed as not verified.

Reads every ``ReviewerVerdict`` on the audit log and, for each call a person was asked about (every call in
shadow mode, the ones sent on in act mode), that person's decision; counts agree / disagree per verdict, per
rule and per reviewer (:func:`goldfive_core.review.review_stats`) and lists the disagreements.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ._text import inert
from .approvals import DECIDED_STATUSES
from .cli_text import EXIT_OK, EXIT_USAGE, _Exit, _Out
from .policy import Ask, Policy, PolicyError, load_policy
from .review import ReviewedCall, ReviewStats, review_stats
from .store import Store

__all__ = ["add_parser", "review_command", "reviewed_calls"]

_PAGE = 1000
_COLUMNS = ("agree", "disagree", "approved", "rejected", "undecided", "acted", "failed")


def add_parser(cmd: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """The ``review`` subcommand's arguments."""
    p = cmd("review", "the reviewer tier: compare the reviewers' verdicts with the people's decisions")
    p.add_argument("action", choices=["stats"], help="stats: agree/disagree per verdict, rule and reviewer")
    p.add_argument("--run", help="only this run's calls")
    p.add_argument("--rule", help="only calls of this rule")
    p.add_argument("--reviewer", help="only this reviewer ('reviewer:NAME' or NAME)")
    p.add_argument("--limit", type=int, default=20, help="disagreements listed (default 20; all with --json)")
    p.add_argument("--policy", metavar="FILE", help="check each verdict's reviewer against this policy (serve's)")


def reviewed_calls(store: Store, *, run_id: str | None = None) -> Iterator[ReviewedCall]:
    """Every reviewer verdict on the audit log, oldest first, with the person's decision on the same call."""
    after = 0
    while True:
        rows = store.audit_rows(after_seq=after, run_id=run_id, limit=_PAGE)
        for row in rows:
            if row.kind == "reviewer_verdict":
                yield _with_person(store, row.run_id, row.event().reviewer_verdict)
        if len(rows) < _PAGE:
            return
        after = rows[-1].seq


def _with_person(store: Store, run_id: str, verdict: Any) -> ReviewedCall:
    decided = next(
        (r for r in store.approvals_for(verdict.call_id) if r.run_id == run_id and r.status in DECIDED_STATUSES),
        None,
    )
    person = decided.decision if decided is not None and decided.decision in ("approve", "reject") else ""
    return ReviewedCall(
        run_id=run_id,
        call_id=verdict.call_id,
        tool_name=verdict.tool_name,
        rule=verdict.rule,
        reviewer=verdict.decided_by,
        verdict=verdict.verdict,
        reason=verdict.reason,
        mode=verdict.mode,
        outcome=verdict.outcome,
        error=verdict.error,
        person=person,  # type: ignore[arg-type]  # checked just above
        decided_by=decided.decided_by if decided is not None and person else "",
        detail=decided.detail if decided is not None and person else "",
    )


def review_command(store: Store, args: argparse.Namespace, out: _Out) -> int:
    """``goldfive review stats``."""
    wanted = args.reviewer or ""
    if wanted and not wanted.startswith("reviewer:"):
        wanted = "reviewer:" + wanted
    calls = [
        c
        for c in reviewed_calls(store, run_id=args.run)
        if (not args.rule or c.rule == args.rule) and (not wanted or c.reviewer == wanted)
    ]
    if args.policy:
        try:
            policy = load_policy(args.policy)
        except PolicyError as exc:
            raise _Exit(EXIT_USAGE, str(exc)) from None
        calls = [dataclasses.replace(c, verified=_attributed(policy, c)) for c in calls]
    stats = review_stats(calls)
    out.emit(_text(stats, max(args.limit, 0)), stats.as_dict())
    return EXIT_OK


def _attributed(policy: Policy, call: ReviewedCall) -> bool:
    """Whether ``policy``'s rule of that name names this reviewer, in this mode."""
    rule = next((r for r in policy.rules if r.name == call.rule), None)
    review = rule.action.review if rule is not None and isinstance(rule.action, Ask) else None
    return review is not None and review.decider == call.reviewer and review.mode == call.mode


def _table(title: str, rows: Mapping[str, Mapping[str, int]]) -> list[str]:
    width = max([len(title), *(len(inert(k, 60)) for k in rows)]) + 2
    lines = [f"{title:<{width}}" + "".join(f"{c:>10}" for c in _COLUMNS)]
    for key, counts in rows.items():
        lines.append(f"{inert(key or '-', 60):<{width}}" + "".join(f"{counts.get(c, 0):>10}" for c in _COLUMNS))
    return lines


def _text(stats: ReviewStats, limit: int) -> str:
    if not stats.total:
        return 'no reviewer verdicts recorded (a rule names its reviewer with review = "module:callable")'
    lines = [f"{stats.total} reviewer verdicts", ""]
    lines += [*_table("verdict", stats.by_verdict), ""]
    lines += [*_table("rule", stats.by_rule), ""]
    lines += _table("reviewer", stats.by_reviewer)
    if stats.disagreements:
        lines += ["", f"disagreements ({len(stats.disagreements)}):"]
        for call in stats.disagreements[:limit]:
            said = f"{inert(call.reviewer, 80)} said {call.verdict}" + (
                f" ({inert(call.reason, 200)})" if call.reason else ""
            )
            did = f"{inert(call.decided_by, 80) or 'a person'} {'approved' if call.person == 'approve' else 'rejected'}"
            why = f" ({inert(call.detail, 200)})" if call.detail else ""
            lines.append(
                f"  {inert(call.call_id, 80)}  {inert(call.tool_name, 60)}  run {inert(call.run_id, 60)}: "
                f"{said}; {did}{why}"
            )
        if len(stats.disagreements) > limit:
            lines.append(f"  ... {len(stats.disagreements) - limit} more (--limit N, or --json for all)")
    if stats.unverified:
        lines += ["", f"NOT VERIFIED against the policy ({len(stats.unverified)}):"]
        for call in stats.unverified[:limit]:
            lines.append(
                f"  {inert(call.call_id, 80)}  run {inert(call.run_id, 60)}: {inert(call.reviewer, 80)} ({call.mode}) "
                f"on rule {inert(call.rule, 80)!r}, which the policy does not give that reviewer"
            )
    return "\n".join(lines)
