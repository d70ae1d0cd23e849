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
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from ._text import inert
from .cli_remote import Client
from .cli_text import EXIT_OK, EXIT_USAGE, _Exit, _Out
from .policy import Policy, PolicyError, load_policy
from .review import selected_stats
from .store import Store
from .store.reviews import reviewed_calls

__all__ = ["add_parser", "review_command", "review_remote", "reviewed_calls", "stats_text"]
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


def review_command(store: Store, args: argparse.Namespace, out: _Out) -> int:
    """``goldfive review stats``."""
    policy: Policy | None = None
    if args.policy:
        try:
            policy = load_policy(args.policy)
        except PolicyError as exc:
            raise _Exit(EXIT_USAGE, str(exc)) from None
    calls = reviewed_calls(store, run_id=args.run)
    stats = selected_stats(calls, rule=args.rule or "", reviewer=args.reviewer or "", policy=policy).as_dict()
    out.emit(stats_text(stats, max(args.limit, 0)), stats)
    return EXIT_OK


def review_remote(client: Client, args: argparse.Namespace, out: _Out) -> int:
    """``goldfive review stats --url``: the server counts, checked against its own ``serve --policy``."""
    if args.policy:
        raise _Exit(EXIT_USAGE, "--policy is not used with --url: the server checks against its own serve --policy")
    query = {k: v for k, v in (("run", args.run), ("rule", args.rule), ("reviewer", args.reviewer)) if v}
    stats = client.call("GET", "/api/review/stats" + ("?" + urllib.parse.urlencode(query) if query else ""))
    out.emit(stats_text(stats, max(args.limit, 0)), stats)
    return EXIT_OK


def _table(title: str, rows: Mapping[str, Mapping[str, Any]]) -> list[str]:
    width = max([len(title), *(len(inert(str(k), 60)) for k in rows)]) + 2
    lines = [f"{title:<{width}}" + "".join(f"{c:>10}" for c in _COLUMNS)]
    for key, counts in rows.items():
        cells = "".join(f"{_n(counts.get(c)):>10}" for c in _COLUMNS)
        lines.append(f"{inert(str(key) or '-', 60):<{width}}" + cells)
    return lines


def stats_text(stats: Mapping[str, Any], limit: int) -> str:
    """What ``goldfive review stats`` prints for the JSON shape of :meth:`ReviewStats.as_dict` (ours or a
    server's: every value is made text and inert here)."""
    if not stats.get("total"):
        return 'no reviewer verdicts recorded (a rule names its reviewer with review = "module:callable")'
    lines = [f"{_n(stats['total'])} reviewer verdicts", ""]
    lines += [*_table("verdict", stats.get("by_verdict") or {}), ""]
    lines += [*_table("rule", stats.get("by_rule") or {}), ""]
    lines += _table("reviewer", stats.get("by_reviewer") or {})
    disagreements: list[Mapping[str, Any]] = stats.get("disagreements") or []
    if disagreements:
        lines += ["", f"disagreements ({len(disagreements)}):"]
        for call in disagreements[:limit]:
            reason, detail = _s(call, "reason", 200), _s(call, "detail", 200)
            said = f"{_s(call, 'reviewer', 80)} said {_s(call, 'verdict', 10)}" + (f" ({reason})" if reason else "")
            chose = "approved" if call.get("person") == "approve" else "rejected"
            did = f"{_s(call, 'decided_by', 80) or 'a person'} {chose}" + (f" ({detail})" if detail else "")
            lines.append(
                f"  {_s(call, 'call_id', 80)}  {_s(call, 'tool_name', 60)}  run {_s(call, 'run_id', 60)}: {said}; {did}"
            )
        if len(disagreements) > limit:
            lines.append(f"  ... {len(disagreements) - limit} more (--limit N, or --json for all)")
    unverified: list[Mapping[str, Any]] = stats.get("unverified") or []
    if unverified:
        lines += ["", f"NOT VERIFIED against the policy ({len(unverified)}):"]
        for call in unverified[:limit]:
            lines.append(
                f"  {_s(call, 'call_id', 80)}  run {_s(call, 'run_id', 60)}: {_s(call, 'reviewer', 80)} "
                f"({_s(call, 'mode', 10)}) on rule {_s(call, 'rule', 80)!r}, "
                "which the policy does not give that reviewer"
            )
    return "\n".join(lines)


def _s(call: Mapping[str, Any], key: str, limit: int) -> str:
    value = call.get(key)
    return inert("" if value is None else str(value), limit)


def _n(value: Any) -> int:
    return value if isinstance(value, int) else 0
