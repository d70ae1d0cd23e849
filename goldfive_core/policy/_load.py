"""Read a policy from TOML (``--policy FILE`` / ``GOLDFIVE_POLICY``); refuse a bad one with file, line and reason."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._util import safe_repr
from ._model import Allow, Ask, Deny, Escalation, GrantScope, PolicyError, Rule, RuleReviewer, parse_duration
from ._policy import Policy

__all__ = ["ENV_VAR", "MAX_POLICY_BYTES", "default_policy", "load_policy", "load_policy_from_env", "parse_policy"]

ENV_VAR = "GOLDFIVE_POLICY"
MAX_POLICY_BYTES = 1_000_000

_COMMON = ("name", "tool", "agent", "labels", "when", "action")
_BY_ACTION: dict[str, tuple[str, ...]] = {
    "allow": (),
    "deny": ("reason",),
    "ask": (
        "approvers",
        "quorum",
        "barred",
        "escalate",
        "grants",
        "reject",
        "expires",
        "review",
        "review_mode",
        "review_timeout",
    ),
}
_ALL_KEYS = frozenset(_COMMON).union(*_BY_ACTION.values())
_HEADER = re.compile(r"^\s*\[\[\s*rule\s*\]\]\s*(?:#.*)?$")
_AT_LINE = re.compile(r"at line (\d+)")


class _Lines:
    """Where each rule and each of its keys was written (tomllib keeps no positions)."""

    def __init__(self, text: str, count: int) -> None:
        self.lines = text.splitlines()
        headers = [i + 1 for i, line in enumerate(self.lines) if _HEADER.match(line)]
        # Only trust the scan when it found exactly one header per rule (not rules written inline).
        self.starts = headers if len(headers) == count else []

    def rule(self, index: int) -> int:
        return self.starts[index] if index < len(self.starts) else 0

    def key(self, index: int, key: str) -> int:
        start = self.rule(index)
        if not start:
            return 0
        end = self.starts[index + 1] - 1 if index + 1 < len(self.starts) else len(self.lines)
        pattern = re.compile(rf"^\s*(?:[\"']?{re.escape(key)}[\"']?\s*=|\[\s*rule\s*\.\s*{re.escape(key)}\s*\])")
        for number in range(start + 1, end + 1):
            if pattern.match(self.lines[number - 1]):
                return number
        return start


def parse_policy(text: str, *, source: str = "<policy>") -> Policy:
    """Build a :class:`Policy` from TOML text; raises :class:`PolicyError` naming ``source`` and the line."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = _AT_LINE.search(str(exc))
        raise PolicyError(f"not valid TOML: {exc}", source=source, line=int(m.group(1)) if m else 0) from None
    unknown = sorted(k for k in data if k != "rule")
    if unknown:
        line = next(
            (i + 1 for i, s in enumerate(text.splitlines()) if re.match(rf"^\s*\[?\s*{re.escape(unknown[0])}\b", s)), 0
        )
        raise PolicyError(
            f"unknown top-level key {unknown[0]!r}: a policy is a list of [[rule]] tables", source=source, line=line
        )
    raw_rules = data.get("rule", [])
    if not isinstance(raw_rules, list) or not all(isinstance(r, dict) for r in raw_rules):
        raise PolicyError("'rule' must be a list of tables: write each rule under [[rule]]", source=source)
    lines = _Lines(text, len(raw_rules))
    rules = [_rule(raw, index, lines, source) for index, raw in enumerate(raw_rules)]
    return Policy(rules, source=source)


def load_policy(path: str | os.PathLike[str]) -> Policy:
    """Read and check the policy file at ``path``."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            blob = f.read(MAX_POLICY_BYTES + 1)
    except OSError as exc:
        raise PolicyError(f"cannot read the policy file: {exc.strerror or exc}", source=source) from None
    if len(blob) > MAX_POLICY_BYTES:
        raise PolicyError(f"the policy file is larger than {MAX_POLICY_BYTES} bytes", source=source)
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"not UTF-8 text (byte {exc.start})", source=source) from None
    return parse_policy(text, source=source)


def load_policy_from_env(environ: Mapping[str, str] | None = None) -> Policy | None:
    """The policy named by ``GOLDFIVE_POLICY``, or None when the variable is unset or empty."""
    env = os.environ if environ is None else environ
    path = env.get(ENV_VAR, "").strip()
    return load_policy(Path(path)) if path else None


_cached: tuple[tuple[str, int, int], Policy] | None = None


def default_policy() -> Policy | None:
    """The agent side's policy: ``GOLDFIVE_POLICY``, read again only when the file changes; None when unset.

    A bad file raises :class:`PolicyError` (file, line, reason): a run never starts under a policy it
    could not read.
    """
    global _cached
    path = os.environ.get(ENV_VAR, "").strip()
    if not path:
        return None
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
    except OSError:
        key = (path, -1, -1)  # load_policy says why it cannot be read
    if _cached is not None and _cached[0] == key:
        return _cached[1]
    policy = load_policy(path)
    _cached = (key, policy)
    return policy


def _rule(raw: dict[str, Any], index: int, lines: _Lines, source: str) -> Rule:
    name = raw.get("name")
    label = f"rule {name!r}" if isinstance(name, str) else f"rule #{index + 1}"

    def fail(reason: str, key: str = "") -> PolicyError:
        line = lines.key(index, key) if key else lines.rule(index)
        where = f" (rule #{index + 1})" if not lines.rule(index) else ""
        return PolicyError(f"{label}: {reason}{where}", source=source, line=line)

    action = raw.get("action")
    if action not in _BY_ACTION:
        raise fail(f"action must be 'allow', 'ask' or 'deny', got {safe_repr(action)}", "action")
    for key in raw:
        if key not in _ALL_KEYS:
            known = ", ".join(_COMMON + _BY_ACTION[action])
            raise fail(f"unknown key {key!r} (known for an {action} rule: {known})", key)
        if key not in _COMMON and key not in _BY_ACTION[action]:
            owner = next(a for a, keys in _BY_ACTION.items() if key in keys)
            raise fail(f"{key!r} applies to {owner} rules only; this rule's action is {action!r}", key)

    def field(key: str, convert: Any) -> Any:
        try:
            return convert(raw[key])
        except PolicyError:
            raise
        except (ValueError, TypeError) as exc:
            raise fail(str(exc), key) from None

    try:
        result: Allow | Ask | Deny
        if action == "allow":
            result = Allow()
        elif action == "deny":
            if "reason" not in raw:
                raise fail("a deny rule needs a reason (the model reads it)")
            result = field("reason", lambda v: Deny(reason=_str(v, "reason")))
        else:
            kwargs: dict[str, Any] = {}
            if "approvers" in raw:
                kwargs["approvers"] = field("approvers", tuple)
            if "quorum" in raw:
                kwargs["quorum"] = raw["quorum"]
            if "barred" in raw:
                kwargs["barred"] = field("barred", tuple)
            if "escalate" in raw:
                kwargs["escalate"] = field("escalate", _escalation)
            if "grants" in raw:
                kwargs["grants"] = field("grants", _grants)
            if "reject" in raw:
                kwargs["reject_ends"] = field("reject", _reject)
            if "expires" in raw:
                kwargs["expires_ms"] = field("expires", lambda v: parse_duration(_str(v, "expires")))
            if "review" in raw:
                kwargs["review"] = field("review", lambda v: _reviewer(v, raw))
            elif "review_mode" in raw or "review_timeout" in raw:
                key = "review_mode" if "review_mode" in raw else "review_timeout"
                raise fail(f"{key!r} needs 'review' (the reviewer, 'module:callable') in the same rule", key)
            result = Ask(**kwargs)
        extra = {k: raw[k] for k in ("tool", "agent", "labels", "when") if k in raw}
        return Rule(name=name, action=result, line=lines.rule(index), **extra)  # type: ignore[arg-type]
    except PolicyError:
        raise
    except (ValueError, TypeError) as exc:
        message = str(exc)
        key = re.split(r"[\s.:]", message, maxsplit=1)[0]
        raise fail(message, key if key in raw else "") from None


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, got {safe_repr(value)}")
    return value


def _escalation(value: Any) -> Escalation:
    if not isinstance(value, dict):
        raise ValueError(f'escalate is a table {{ after = "30m", to = ["role:NAME"] }}, got {safe_repr(value)}')
    unknown = sorted(set(value) - {"after", "to"})
    if unknown:
        raise ValueError(f"escalate: unknown key {unknown[0]!r} (known: after, to)")
    if "after" not in value or "to" not in value:
        raise ValueError("escalate needs both 'after' (a duration) and 'to' (who is asked next)")
    return Escalation(after_ms=parse_duration(_str(value["after"], "escalate.after")), to=value["to"])


def _grants(value: Any) -> tuple[GrantScope, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError(
            f"grants is a non-empty list of 'run', 'session' or durations like '1h', got {safe_repr(value)}"
        )
    scopes = tuple(GrantScope.parse(_str(v, "grants")) for v in value)
    if len(set(scopes)) != len(scopes):
        raise ValueError("grants lists the same scope twice")
    return scopes


def _reviewer(value: Any, raw: Mapping[str, Any]) -> RuleReviewer:
    """``review``, ``review_mode`` and ``review_timeout`` of one rule (the reviewer is imported later, by the gate)."""
    mode = raw.get("review_mode", "act")
    if mode not in ("act", "shadow"):
        raise ValueError(f"review_mode is 'act' or 'shadow', got {safe_repr(mode)}")
    kwargs: dict[str, Any] = {"target": _str(value, "review"), "mode": mode}
    if "review_timeout" in raw:
        kwargs["timeout_ms"] = parse_duration(_str(raw["review_timeout"], "review_timeout"))
    return RuleReviewer(**kwargs)


def _reject(value: Any) -> bool:
    if value not in ("ends", "counts"):
        raise ValueError(f"reject is 'ends' (a reject ends the request) or 'counts', got {safe_repr(value)}")
    return bool(value == "ends")
