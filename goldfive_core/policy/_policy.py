"""A policy: an ordered list of rules, checked when built, evaluated per call without ever raising."""

from __future__ import annotations

import dataclasses
import logging
import operator
from collections.abc import Callable, Iterable, Sequence
from math import isfinite
from typing import Any, Literal

from .._util import shorten
from ._expr import FOREIGN_ERRORS, EvalError, Evaluator, Guard, foreign_error
from ._model import Allow, Ask, Deny, PolicyCall, PolicyError, Rule, covers

__all__ = ["DEFAULT_ASK", "Policy", "Verdict"]

logger = logging.getLogger(__name__)

DEFAULT_ASK = Ask()
"""How an unmatched gated call is asked: anyone who may decide today, one approval."""

_CACHE_LIMIT = 1024


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """What a policy says about one call.

    ``kind`` is ``allow`` (no person), ``ask`` (with ``ask``'s approvers, quorum, ...) or ``deny``
    (``reason`` is what the model is told). ``rule`` is the rule that decided, None when no rule
    matched. ``error`` says why a rule could not be evaluated; such a call is never allowed.
    """

    kind: Literal["allow", "ask", "deny"]
    rule: Rule | None = None
    ask: Ask | None = None
    reason: str = ""
    error: str = ""

    @property
    def rule_name(self) -> str:
        """The deciding rule's name, "" if none."""
        return self.rule.name if self.rule is not None else ""

    @property
    def matched(self) -> bool:
        """True if a rule decided (not the default)."""
        return self.rule is not None

    def metadata(self) -> dict[str, str]:
        """String fields for an ApprovalRequested event / audit row (empty when nothing is to say)."""
        out: dict[str, str] = {}
        if self.rule is not None:
            out["policy_rule"] = self.rule.name
            out["policy_action"] = self.kind
        if self.error:
            out["policy_error"] = self.error
        if self.ask is not None and self.kind == "ask":
            out.update(self.ask.to_metadata())
        return out


_Candidate = tuple[Rule, Evaluator | None, Verdict, Guard | None]
_Skip = tuple[str, Callable[[Any], bool]]
"""(key, fails_all): a finite number ``args[key]`` for which ``fails_all`` is true fails every rule of the run."""
_Segment = tuple[_Skip | None, tuple[_Candidate, ...]]

_ABOVE = (operator.gt, operator.ge)
_BELOW = (operator.lt, operator.le)


def _segments(candidates: list[_Candidate]) -> tuple[_Segment, ...]:
    """Cut the candidate rules into runs that a single test can skip, and the rest (checked one by one).

    A run is two or more consecutive rules whose ``when`` starts with ``args.KEY`` compared, in one
    direction, to a number (``> 1000``, ``>= 5000``, ...): a value below every threshold of the run
    (above, for ``<``/``<=``) fails them all.
    """
    out: list[_Segment] = []
    i = 0
    while i < len(candidates):
        guard = candidates[i][3]
        j = i + 1
        if guard is not None and guard[1] in (*_ABOVE, *_BELOW):
            side = _ABOVE if guard[1] in _ABOVE else _BELOW
            while j < len(candidates):
                other = candidates[j][3]
                if other is None or other[0] != guard[0] or other[1] not in side:
                    break
                j += 1
        group = tuple(candidates[i:j])
        out.append((_skip_of(group) if len(group) > 1 else None, group))
        i = j
    return tuple(out)


def _skip_of(group: tuple[_Candidate, ...]) -> _Skip:
    guards = [c[3] for c in group if c[3] is not None]
    key = guards[0][0]
    strict = [g[2] for g in guards if g[1] in (operator.gt, operator.lt)]
    loose = [g[2] for g in guards if g[1] in (operator.ge, operator.le)]
    if guards[0][1] in _ABOVE:  # v > a fails when v <= a; v >= b fails when v < b
        lo_strict = min(strict) if strict else None
        lo_loose = min(loose) if loose else None
        return key, lambda v: (lo_strict is None or v <= lo_strict) and (lo_loose is None or v < lo_loose)
    hi_strict = max(strict) if strict else None
    hi_loose = max(loose) if loose else None
    return key, lambda v: (hi_strict is None or v >= hi_strict) and (hi_loose is None or v > hi_loose)


_PASS = Verdict(kind="allow")  # an unmarked tool no rule mentions: runs as without a policy
_DEFAULT = Verdict(kind="ask", ask=DEFAULT_ASK)


class Policy:
    """An ordered list of rules; the first that matches decides.

    Built from Python (``Policy([Rule(...), ...])``) or TOML (:func:`load_policy`). Building checks
    the rules: duplicate names, rules that can never apply because an earlier one always wins, and
    rules that say something else for exactly the same calls are refused with a :class:`PolicyError`.

    :meth:`evaluate` never raises. A rule whose ``when`` cannot be evaluated for a call (a missing
    path, a value of the wrong type) never lets that call through: the rules after it still run, the
    first that matches decides unless it would allow (then the call asks a person), with the reason
    in :attr:`Verdict.error`. An ``ask`` rule that cannot be evaluated asks with its own approvers.
    """

    __slots__ = ("_compiled", "_heads", "_label_keys", "rules", "source")

    def __init__(self, rules: Iterable[Rule], *, source: str = "") -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.source = source
        for r in self.rules:
            if not isinstance(r, Rule):
                raise PolicyError(f"a policy holds Rule objects, got {type(r).__name__}", source=source)
        _check(self.rules, source)
        self._compiled = tuple(
            (
                r,
                r.expression._fn if r.expression else None,
                _verdict_of(r),
                r.expression.guard if r.expression else None,
            )
            for r in self.rules
        )
        self._label_keys = tuple(sorted({k for r in self.rules for k in r.labels}))
        """The run labels some rule reads: only those tell two calls' candidate rules apart."""
        self._heads: dict[tuple[str, str, tuple[str | None, ...]], tuple[_Segment, ...]] = {}

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        return f"Policy({len(self.rules)} rules{', ' + self.source if self.source else ''})"

    def mentions(self, tool: str) -> bool:
        """True if some rule could match a call of ``tool`` (so an unmarked tool must go through the gate)."""
        return any(r._tool(tool) for r in self.rules)

    def _candidates(self, call: PolicyCall) -> tuple[_Segment, ...]:
        """The rules whose tool, agent and labels match, in order, with their compiled ``when``, in segments.

        Cached per (tool, agent, labels): within a run those repeat, so a call only runs conditions.
        """
        labels = call.labels
        key = (call.tool, call.agent, tuple([labels.get(k) for k in self._label_keys]) if self._label_keys else ())
        hit = self._heads.get(key)
        if hit is None:
            hit = _segments([self._compiled[i] for i, r in enumerate(self.rules) if r.matches_head(call)])
            if len(self._heads) >= _CACHE_LIMIT:
                self._heads.clear()  # bounded: tool names come from a model
            self._heads[key] = hit
        return hit

    def evaluate(self, call: PolicyCall) -> Verdict:
        """The verdict for ``call``; never raises (see the class docstring)."""
        try:
            return self._evaluate(call)
        except Exception as exc:  # a bug or a hostile args object: ask, never crash the agent's loop
            logger.warning("policy evaluation failed for tool %r: %s", shorten(str(call.tool), 80), exc)
            return Verdict(kind="ask", ask=DEFAULT_ASK, error=f"the policy could not be evaluated: {shorten(str(exc))}")

    def _evaluate(self, call: PolicyCall) -> Verdict:
        errors: list[str] | None = None
        args = call.args
        get = args.get if isinstance(args, dict) else None
        for skip, group in self._candidates(call):
            if skip is not None and get is not None:
                # A run of rules that all start with ``args.KEY > N and ...`` (a threshold ladder): a number
                # below every threshold makes all of them false, with no error possible; skipped at once.
                w: Any = get(skip[0])
                cls = w.__class__
                if (cls is int or (cls is float and isfinite(w))) and skip[1](w):
                    continue
            verdict_or_none, errors = self._group(call, group, errors)
            if verdict_or_none is not None:
                return verdict_or_none
        if errors:
            return _erred(None, DEFAULT_ASK, errors)
        return _DEFAULT if call.gated else _PASS

    def _group(
        self, call: PolicyCall, group: tuple[_Candidate, ...], errors: list[str] | None
    ) -> tuple[Verdict | None, list[str] | None]:
        """The rules of one segment in order: (the verdict of the first that decides, or None; errors so far)."""
        for rule, test, verdict, _guard in group:
            if test is not None:
                try:
                    hit = test(call)
                except (EvalError, *FOREIGN_ERRORS) as exc:
                    problem = exc if isinstance(exc, EvalError) else foreign_error(exc)
                    errors = errors or []
                    errors.append(f"{rule.where()} could not be evaluated: {problem}")
                    if isinstance(rule.action, Ask):
                        return _erred(rule, rule.action, errors), errors
                    continue
                if not hit:
                    continue
            action = rule.action
            if isinstance(action, Allow):
                if errors:
                    continue  # an earlier rule could not say whether this call is theirs: never allow it
                return verdict, errors
            if isinstance(action, Deny):
                return Verdict(kind="deny", rule=rule, reason=action.reason, error="; ".join(errors or ())), errors
            if not errors:
                return verdict, errors
            return Verdict(kind="ask", rule=rule, ask=action, error="; ".join(errors)), errors
        return None, errors


def _verdict_of(rule: Rule) -> Verdict:
    """The verdict a rule gives when it matches and nothing went wrong."""
    action = rule.action
    if isinstance(action, Allow):
        return Verdict(kind="allow", rule=rule)
    if isinstance(action, Deny):
        return Verdict(kind="deny", rule=rule, reason=action.reason)
    return Verdict(kind="ask", rule=rule, ask=action)


def _erred(rule: Rule | None, ask: Ask, errors: list[str]) -> Verdict:
    return Verdict(kind="ask", rule=rule, ask=ask, error=shorten("; ".join(errors), 500))


def _same_head(a: Rule, b: Rule) -> bool:
    return set(a.tools) == set(b.tools) and set(a.agents) == set(b.agents) and dict(a.labels) == dict(b.labels)


def _head_covers(wide: Rule, narrow: Rule) -> bool:
    if not covers(wide.tools, narrow.tools) or not covers(wide.agents, narrow.agents):
        return False
    return all(narrow.labels.get(k) == v for k, v in wide.labels.items())


def _check(rules: Sequence[Rule], source: str) -> None:
    seen: dict[str, Rule] = {}
    for index, rule in enumerate(rules):
        if rule.name in seen:
            raise PolicyError(
                f"rule name {rule.name!r} is used twice (first at {seen[rule.name].where()})",
                source=source,
                line=rule.line,
            )
        seen[rule.name] = rule
        for earlier in rules[:index]:
            problem = _shadowed(earlier, rule)
            if problem:
                raise PolicyError(problem, source=source, line=rule.line)


def _shadowed(earlier: Rule, rule: Rule) -> str:
    """Why ``rule`` can never apply because of ``earlier`` ("" if it can)."""
    e_when = earlier.expression.canonical if earlier.expression is not None else ""
    r_when = rule.expression.canonical if rule.expression is not None else ""
    if _same_head(earlier, rule) and e_when == r_when:
        if earlier.action != rule.action:
            return (
                f"{rule.where()} contradicts {earlier.where()}: the same calls, a different action "
                f"({earlier.action.kind} first, so this {rule.action.kind} never applies)"
            )
        return f"{rule.where()} repeats {earlier.where()} and can never apply"
    if _head_covers(earlier, rule) and (not e_when or e_when == r_when):
        why = "matches every call this one does" if not e_when else "has the same 'when' and covers it"
        return f"{rule.where()} is unreachable: {earlier.where()} comes first and {why}"
    return ""
