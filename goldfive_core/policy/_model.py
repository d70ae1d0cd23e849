"""Rules, actions and the call a policy looks at: frozen keyword-only values, checked when built."""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

from .._util import REVIEWER_PREFIX, safe_repr
from ..errors import ExpressionError, PolicyError
from ._expr import Expression, compile_expression

__all__ = [
    "Allow",
    "Ask",
    "Deny",
    "Escalation",
    "GrantScope",
    "PolicyCall",
    "PolicyError",
    "Rule",
    "RuleReviewer",
    "format_duration",
    "parse_duration",
    "tool_pattern_matches",
]

MAX_QUORUM = 20
_PRINCIPAL = re.compile(r"(role|user):[^\s:,][^\s,]{0,199}")
_BARRED_SPECIAL = ("starter", "agent")
_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_DURATION_UNITS = (86_400_000, 3_600_000, 60_000, 1000)
MAX_DURATION_MS = 366 * 86_400_000
DEFAULT_REVIEW_TIMEOUT_MS = 10_000
MAX_REVIEW_TIMEOUT_MS = 300_000
_REVIEW_SPEC = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
)
_REVIEWER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def parse_duration(text: str) -> int:
    """``"15m"``, ``"1h30m"``, ``"2d"``, ``"90s"`` → milliseconds; raises ValueError otherwise."""
    m = _DURATION.fullmatch(text) if isinstance(text, str) else None
    if not text or m is None or not any(m.groups()):
        raise ValueError(f"bad duration {safe_repr(text)}: expected e.g. '90s', '15m', '1h30m', '2d'")
    ms = sum(int(g) * unit for g, unit in zip(m.groups(), _DURATION_UNITS, strict=True) if g)
    if not 0 < ms <= MAX_DURATION_MS:
        raise ValueError(f"duration {text!r} is out of range (1s .. 366d)")
    return ms


def _principals(values: Any, what: str, *, special: tuple[str, ...] = ()) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise ValueError(f"{what} is a list of 'role:NAME' / 'user:NAME', got {safe_repr(values)}")
    out: list[str] = []
    for v in values:
        if not isinstance(v, str) or not (v in special or _PRINCIPAL.fullmatch(v)):
            extra = "".join(f", '{s}'" for s in special)
            raise ValueError(f"{what}: {safe_repr(v)} is not 'role:NAME' or 'user:NAME'{extra}")
        if v in out:
            raise ValueError(f"{what}: {v!r} is listed twice")
        out.append(v)
    return tuple(out)


def names(spec: str, user: str, roles: Collection[str]) -> bool:
    """True if ``spec`` (``role:NAME`` / ``user:NAME``) names ``user`` or one of their ``roles``."""
    kind, _, name = spec.partition(":")
    if kind == "user":
        return name == user
    return kind == "role" and name in roles


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Escalation:
    """After ``after_ms`` without a decision, ``to`` may answer too (and an event says so)."""

    after_ms: int
    to: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.after_ms, bool) or not isinstance(self.after_ms, int) or self.after_ms <= 0:
            raise ValueError(f"escalate.after must be a positive duration, got {safe_repr(self.after_ms)}")
        object.__setattr__(self, "to", _principals(self.to, "escalate.to"))
        if not self.to:
            raise ValueError("escalate.to names nobody: list at least one 'role:NAME' or 'user:NAME'")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class GrantScope:
    """How far an approver may extend an approval: this ``run``, this ``session``, or a ``time`` window."""

    kind: Literal["run", "session", "time"]
    ttl_ms: int | None = None
    """The window for ``time``; for run and session an optional cap on their life."""

    @classmethod
    def parse(cls, text: str) -> GrantScope:
        """``"run"``, ``"session"`` or a duration such as ``"1h"``."""
        if text in ("run", "session"):
            return cls(kind=text)  # type: ignore[arg-type]
        try:
            return cls(kind="time", ttl_ms=parse_duration(text))
        except ValueError:
            raise ValueError(
                f"grant scope {safe_repr(text)}: expected 'run', 'session' or a duration like '1h'"
            ) from None

    def text(self) -> str:
        """The TOML spelling: ``run``, ``session`` or a duration."""
        return format_duration(self.ttl_ms or 0) if self.kind == "time" else self.kind

    def label(self) -> str:
        """Words an approver reads before confirming."""
        if self.kind == "time":
            return f"for {format_duration(self.ttl_ms or 0)}"
        return f"for this {self.kind}"


def format_duration(ms: int) -> str:
    """Milliseconds as ``1h30m`` (the inverse of :func:`parse_duration` for whole seconds)."""
    parts = []
    for unit, name in zip(_DURATION_UNITS, "dhms", strict=True):
        if ms >= unit:
            parts.append(f"{ms // unit}{name}")
            ms %= unit
    return "".join(parts) or "0s"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Allow:
    """Run the call without a person; the call and the rule's name go on the audit log."""

    kind: Literal["allow"] = "allow"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Deny:
    """Never run the body; the model is told ``reason``."""

    reason: str
    kind: Literal["deny"] = "deny"

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValueError("a deny rule needs a reason (the model reads it)")
        if len(self.reason) > 1000:
            raise ValueError("a deny reason is at most 1000 characters")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class RuleReviewer:
    """A rule's reviewer: a callable that judges the call before a person is asked (``review = "module:callable"``).

    ``target`` is the ``"module:callable"`` text (imported in the agent's gate when first needed, never by a
    server that only reads the policy) or the callable itself. ``mode`` ``"act"``: its allow or deny decides;
    ``"shadow"``: its verdict is only recorded and a person decides as if there were no reviewer.
    ``timeout_ms`` bounds it (running out means "ask a person"). ``name`` defaults to the callable's name
    (the text after the colon); the audit log names it ``reviewer:<name>``.
    """

    target: str | Callable[..., Any]
    mode: Literal["act", "shadow"] = "act"
    timeout_ms: int = DEFAULT_REVIEW_TIMEOUT_MS
    name: str = ""

    def __post_init__(self) -> None:
        target = self.target
        if isinstance(target, str):
            if not _REVIEW_SPEC.fullmatch(target) or len(target) > 300:
                raise ValueError(f"review is 'module:callable' (e.g. 'acme.review:refunds'), got {safe_repr(target)}")
            default = target.rpartition(":")[2]
        elif callable(target):
            own = getattr(target, "name", None)
            default = own if isinstance(own, str) and own else getattr(target, "__name__", type(target).__name__)
        else:
            raise ValueError(f"review is 'module:callable' or a callable, got {safe_repr(target)}")
        name = self.name or default
        if not isinstance(name, str) or not _REVIEWER_NAME.fullmatch(name):
            raise ValueError(f"a reviewer's name is 1..100 letters, digits, '_', '.' or '-', got {safe_repr(name)}")
        object.__setattr__(self, "name", name)
        if self.mode not in ("act", "shadow"):
            raise ValueError(f"review_mode is 'act' or 'shadow', got {safe_repr(self.mode)}")
        ms = self.timeout_ms
        if isinstance(ms, bool) or not isinstance(ms, int) or not 0 < ms <= MAX_REVIEW_TIMEOUT_MS:
            raise ValueError(f"review_timeout must be a duration in 1s..5m, got {safe_repr(ms)}")

    @property
    def decider(self) -> str:
        """How the audit log names it: ``reviewer:<name>``."""
        return REVIEWER_PREFIX + self.name

    @property
    def spec(self) -> str:
        """The ``module:callable`` text, or the callable's qualified name when built in Python."""
        target = self.target
        if isinstance(target, str):
            return target
        return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(target).__qualname__)}"


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Ask:
    """Ask a person: who may answer, how many distinct approvers, escalation, grants and deadline."""

    approvers: tuple[str, ...] = ()
    """``role:NAME`` / ``user:NAME``; empty = anyone who may decide today (not barred)."""
    quorum: int = 1
    barred: tuple[str, ...] = ("agent",)
    """Never allowed to decide: ``starter`` (who started the run), ``agent`` (the agent's own identity), or names."""
    escalate: Escalation | None = None
    grants: tuple[GrantScope, ...] = ()
    """Scopes an approver may extend an approval to; empty = no grants from this rule."""
    reject_ends: bool = True
    """A reject ends the request (False: it is recorded and the others may still reach the quorum)."""
    expires_ms: int | None = None
    """A decision later than this after the request is refused."""
    review: RuleReviewer | None = None
    """Who judges the call before a person is asked (:class:`RuleReviewer`); None = the person only."""
    kind: Literal["ask"] = "ask"

    def __post_init__(self) -> None:
        object.__setattr__(self, "approvers", _principals(self.approvers, "approvers"))
        object.__setattr__(self, "barred", _principals(self.barred, "barred", special=_BARRED_SPECIAL))
        q = self.quorum
        if isinstance(q, bool) or not isinstance(q, int) or not 1 <= q <= MAX_QUORUM:
            raise ValueError(f"quorum must be a whole number in 1..{MAX_QUORUM}, got {safe_repr(q)}")
        users = [a for a in self.approvers if a.startswith("user:")]
        if self.approvers and len(users) == len(self.approvers) and q > len(users):
            raise ValueError(f"quorum {q} can never be reached: only {len(users)} user(s) may approve")
        both = sorted(set(self.approvers) & set(self.barred))
        if both:
            raise ValueError(f"barred: {both[0]!r} is also an approver")
        if self.expires_ms is not None and (
            isinstance(self.expires_ms, bool) or not isinstance(self.expires_ms, int) or self.expires_ms <= 0
        ):
            raise ValueError(f"expires must be a positive duration, got {safe_repr(self.expires_ms)}")
        if self.escalate is not None and self.expires_ms is not None and self.escalate.after_ms >= self.expires_ms:
            raise ValueError("escalate.after is not before expires: the escalation could never happen")
        if self.review is not None and not isinstance(self.review, RuleReviewer):
            raise ValueError(f"review must be a RuleReviewer, got {safe_repr(self.review)}")

    def to_metadata(self) -> dict[str, str]:
        """String fields for a request's metadata (``policy_*``); :meth:`from_metadata` reads them back."""
        out: dict[str, str] = {}
        if self.approvers:
            out["policy_approvers"] = ",".join(self.approvers)
        if self.quorum > 1:
            out["policy_quorum"] = str(self.quorum)
        if self.barred:
            out["policy_barred"] = ",".join(self.barred)
        if self.escalate is not None:
            out["policy_escalate_after"] = format_duration(self.escalate.after_ms)
            out["policy_escalate_to"] = ",".join(self.escalate.to)
        if self.grants:
            out["policy_grants"] = ",".join(g.text() for g in self.grants)
        if not self.reject_ends:
            out["policy_reject"] = "counts"
        if self.expires_ms is not None:
            out["policy_expires"] = format_duration(self.expires_ms)
        if self.review is not None:  # who judged it first; the reviewer itself is never read back from a request
            out["policy_review"] = self.review.decider
        return out

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, str]) -> Ask | None:
        """The ask a request's metadata describes; None when it names no policy rule or does not parse."""
        if metadata.get("policy_action") != "ask" and "policy_error" not in metadata:
            return None

        def items(key: str) -> tuple[str, ...]:
            value = metadata.get(key, "")
            return tuple(v for v in value.split(",") if v)

        try:
            escalate = None
            if metadata.get("policy_escalate_after"):
                escalate = Escalation(
                    after_ms=parse_duration(metadata["policy_escalate_after"]), to=items("policy_escalate_to")
                )
            expires = metadata.get("policy_expires")
            return cls(
                approvers=items("policy_approvers"),
                quorum=int(metadata.get("policy_quorum", "1")),
                barred=items("policy_barred"),
                escalate=escalate,
                grants=tuple(GrantScope.parse(g) for g in items("policy_grants")),
                reject_ends=metadata.get("policy_reject", "ends") != "counts",
                expires_ms=parse_duration(expires) if expires else None,
            )
        except ValueError:
            return None

    def who(self, *, escalated: bool = False) -> tuple[str, ...]:
        """The principals who may answer now (escalation adds its group)."""
        if escalated and self.escalate is not None:
            return self.approvers + tuple(p for p in self.escalate.to if p not in self.approvers)
        return self.approvers

    def refusal(
        self,
        *,
        user: str,
        roles: Collection[str] = (),
        started_by: str = "",
        agent: str = "",
        escalated: bool = False,
    ) -> str:
        """Why ``user`` (holding ``roles``) may not decide ("" if they may).

        ``started_by`` is who started the run and ``agent`` the asking agent's identity (for ``barred``);
        ``escalated`` adds the escalation group to the approvers.
        """
        for spec in self.barred:
            if spec == "starter":
                if started_by and user == started_by:
                    return f"{user!r} started this run and may not approve it"
            elif spec == "agent":
                if agent and user == agent:
                    return f"{user!r} is the agent that asks; it may not approve itself"
            elif names(spec, user, roles):
                return f"{user!r} is barred by {spec!r}"
        # No approvers named: anyone who may decide today may answer, before and after an escalation.
        allowed = self.who(escalated=escalated) if self.approvers else ()
        if allowed and not any(names(spec, user, roles) for spec in allowed):
            return f"{user or 'an anonymous decider'!r} is not among the approvers ({', '.join(allowed)})"
        return ""


Action = Allow | Ask | Deny


def _globs(value: Any, what: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items:
        raise ValueError(f"{what} is a name, a glob or a non-empty list of them, got {safe_repr(value)}")
    for item in items:
        if not isinstance(item, str) or not item or len(item) > 200:
            raise ValueError(f"{what}: {safe_repr(item)} is not a name or glob")
    return tuple(items)


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


class _NameMatcher:
    """Exact names and globs (``fnmatchcase``: case-sensitive, ``*`` ``?`` ``[seq]``)."""

    __slots__ = ("exact", "regex", "star")

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.star = "*" in patterns
        self.exact = frozenset(p for p in patterns if not _is_glob(p))
        globs = [p for p in patterns if _is_glob(p)]
        self.regex = re.compile("|".join(fnmatch.translate(p) for p in globs)) if globs else None

    def __call__(self, name: str) -> bool:
        if self.star or name in self.exact:
            return True
        return self.regex is not None and self.regex.match(name) is not None


def tool_pattern_matches(pattern: str, name: str) -> bool:
    """Whether one entry of a rule's ``tool`` (a name or a glob) matches the tool ``name``, as the rule matches it."""
    return _NameMatcher((pattern,))(name)


def covers(wide: tuple[str, ...], narrow: tuple[str, ...]) -> bool:
    """True if every name ``narrow`` matches is surely matched by ``wide`` (conservative for globs)."""
    if "*" in wide:
        return True
    m = _NameMatcher(wide)
    return all((not _is_glob(p) and m(p)) or p in wide for p in narrow)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PolicyCall:
    """One tool call as a policy sees it."""

    tool: str
    args: Mapping[str, Any]
    agent: str = ""
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    gated: bool = False
    """The adapter would ask a person for this call without a policy (a marked tool)."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    """One rule: what it matches (tool, agent, run labels, ``when``) and its action."""

    name: str
    action: Action
    tool: str | tuple[str, ...] = "*"
    agent: str | tuple[str, ...] = "*"
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Run labels that must be present; values are globs."""
    when: str = ""
    """An expression over the call (see ``goldfive_core.policy``); empty = always."""
    line: int = 0
    """Where it was written (TOML line), for messages; 0 when built in Python."""
    expression: Expression | None = dataclasses.field(default=None, init=False, compare=False, repr=False)
    _tool: _NameMatcher = dataclasses.field(init=False, compare=False, repr=False)
    _agent: _NameMatcher = dataclasses.field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or len(self.name) > 200:
            raise ValueError(f"a rule needs a name (1..200 characters), got {safe_repr(self.name)}")
        if not isinstance(self.action, Allow | Ask | Deny):
            raise ValueError(f"action must be Allow(), Ask(...) or Deny(reason=...), got {safe_repr(self.action)}")
        tools = _globs(self.tool, "tool")
        agents = _globs(self.agent, "agent")
        object.__setattr__(self, "tool", tools)
        object.__setattr__(self, "agent", agents)
        if not isinstance(self.labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) and k and v for k, v in self.labels.items()
        ):
            raise ValueError(f"labels maps label names to values (globs), got {safe_repr(self.labels)}")
        object.__setattr__(self, "labels", dict(self.labels))
        object.__setattr__(self, "_tool", _NameMatcher(tools))
        object.__setattr__(self, "_agent", _NameMatcher(agents))
        if not isinstance(self.when, str):
            raise ValueError(f"when is an expression in a string, got {safe_repr(self.when)}")
        if self.when.strip():
            try:
                object.__setattr__(self, "expression", compile_expression(self.when))
            except ExpressionError as exc:
                raise ValueError(f"when {safe_repr(self.when, 80)}: {exc}") from None

    @property
    def tools(self) -> tuple[str, ...]:
        """The tool names and globs, always as a tuple."""
        return self.tool if isinstance(self.tool, tuple) else (self.tool,)

    @property
    def agents(self) -> tuple[str, ...]:
        """The agent names and globs, always as a tuple."""
        return self.agent if isinstance(self.agent, tuple) else (self.agent,)

    def where(self) -> str:
        """``rule 'name' (line 12)`` for messages."""
        return f"rule {self.name!r}" + (f" (line {self.line})" if self.line else "")

    def matches_tool(self, tool: str, agent: str) -> bool:
        """Tool and agent only (not labels, not ``when``)."""
        return self._tool(tool) and self._agent(agent)

    def matches_head(self, call: PolicyCall) -> bool:
        """Tool, agent and labels (not ``when``)."""
        if not self.matches_tool(call.tool, call.agent):
            return False
        for key, pattern in self.labels.items():
            value = call.labels.get(key)
            if value is None or not fnmatch.fnmatchcase(value, pattern):
                return False
        return True
