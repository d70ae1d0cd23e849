"""The names the gateway gives upstream tools, and a policy written for other names: said at start-up.

With one upstream the client sees (and the policy matches) the upstream's own tool names; with several, every
tool is ``UPSTREAM__tool`` (:data:`SEPARATOR`). So a rule that names ``transfer_funds`` stops matching the day a
second upstream is added — its deny no longer denies, its allow no longer allows, and the call falls to a later
rule or the gateway's default — and one that names ``bank__transfer_funds`` stops matching the day the second
upstream goes. :func:`name_warnings` finds each entry of a rule's ``tool`` that matches none of the tools the
client sees but would match one under the other naming, and says which exposed name to write.

It never rewrites a rule to match another name. The names it proposes each carry one upstream's prefix, never
``*__transfer_funds``: an allow meant for one upstream's tool must not cover a tool of the same name that another
(perhaps untrusted) upstream offers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableSet

from ..._util import shorten
from ...policy import Policy, tool_pattern_matches
from .upstreams import SEPARATOR

__all__ = ["SEPARATOR", "name_warnings", "warn_policy_names"]

logger = logging.getLogger(__name__)

_SHOWN = 5
"""The most tool names one warning lists."""


def name_warnings(policy: Policy | None, tools: Mapping[str, tuple[str, str]], *, prefixed: bool) -> list[str]:
    """One message per rule ``tool`` entry that matches none of ``tools`` (exposed name → (upstream, its own
    name)) but would under the other naming (``prefixed``: the gateway prefixes names, several upstreams)."""
    if policy is None or not tools:
        return []
    out = []
    for rule in policy.rules:
        for pattern in rule.tools:
            if any(tool_pattern_matches(pattern, exposed) for exposed in tools):
                continue
            message = _bare(pattern, tools) if prefixed else _prefixed(pattern, tools)
            if message:
                out.append(f"{rule.where()} names the tool {shorten(pattern, 80)!r}, {message}")
    return out


def _bare(pattern: str, tools: Mapping[str, tuple[str, str]]) -> str:
    """``pattern`` written for an upstream's own names, behind a gateway that prefixes them."""
    meant: dict[str, list[str]] = {}
    for exposed, (upstream, own) in tools.items():
        if tool_pattern_matches(pattern, own):
            meant.setdefault(upstream, []).append(exposed)
    if not meant:
        return ""
    write = " or ".join(repr(f"{upstream}{SEPARATOR}{pattern}") for upstream in sorted(meant)[:_SHOWN])
    return (
        f"which matches none of this gateway's tools: with several upstreams each is named UPSTREAM{SEPARATOR}tool, "
        f"so this rule never applies to them. It would match {_listed(meant)}: write {write} "
        f"(one upstream's prefix each; '*{SEPARATOR}' would also match every other upstream's tool of that name)"
    )


def _prefixed(pattern: str, tools: Mapping[str, tuple[str, str]]) -> str:
    """``pattern`` written for prefixed names, behind a gateway with one upstream (whose names it keeps)."""
    meant: dict[str, list[str]] = {}
    for exposed, (upstream, own) in tools.items():
        if tool_pattern_matches(pattern, f"{upstream}{SEPARATOR}{own}"):
            meant.setdefault(upstream, []).append(exposed)
    if not meant:
        return ""
    suggestions = sorted(
        {pattern.removeprefix(f"{upstream}{SEPARATOR}") for upstream in meant}
        if all(pattern.startswith(f"{upstream}{SEPARATOR}") for upstream in meant)
        else {name for names in meant.values() for name in names}
    )
    write = " or ".join(repr(s) for s in suggestions[:_SHOWN])
    return (
        f"which matches none of this gateway's tools: with one upstream the tools keep their own names (no "
        f"UPSTREAM{SEPARATOR} prefix), so this rule never applies to them. It would match {_listed(meant)}: "
        f"write {write}"
    )


def _listed(meant: Mapping[str, list[str]]) -> str:
    names = sorted(name for names in meant.values() for name in names)
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(shorten(name, 80) for name in names[:_SHOWN]) + more


def warn_policy_names(
    policy: Policy | None, tools: Mapping[str, tuple[str, str]], *, prefixed: bool, said: MutableSet[str]
) -> list[str]:
    """Log each of :func:`name_warnings` not in ``said`` yet (a gateway says each once); the new ones."""
    new = [message for message in name_warnings(policy, tools, prefixed=prefixed) if message not in said]
    for message in new:
        said.add(message)
        logger.warning("goldfive mcp: %s", message)
    return new
