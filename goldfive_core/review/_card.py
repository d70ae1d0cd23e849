"""What a card shows of a reviewer's verdict: one JSON shape for the API, the inbox and ``goldfive show``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._util import shorten
from ._verdict import MAX_REASON_CHARS

if TYPE_CHECKING:
    from ..policy import PolicyAuthority

__all__ = ["review_json"]


def review_json(
    meta: Mapping[str, str], *, rules: PolicyAuthority | None = None, rule: str | None = None
) -> dict[str, Any] | None:
    """The reviewer's verdict a request carries (``review_*`` metadata, act mode only); None without one.

    The agent wrote these fields. With ``rules`` holding the deciding side's policy (``serve --policy``),
    ``verified`` says whether that policy's rule of this request names the same reviewer (True), another or
    none (False, with ``verified_note``); None when there is no policy to check against. ``rule`` is the rule
    that governs the request there (:meth:`~goldfive_core.policy.PolicyAuthority.judge`; default: the one the
    request names).
    """
    by = meta.get("review_by", "")
    if not by:
        return None
    verified: bool | None = None
    note = ""
    if rules is not None and rules.policy is not None:
        name = meta.get("policy_rule", "") if rule is None else rule
        found = next((r for r in rules.policy.rules if r.name == name), None)
        review = getattr(found.action, "review", None) if found is not None else None
        expected = review.decider if review is not None else ""
        verified = bool(expected) and expected == by
        if not verified:
            said = f"names {expected}" if expected else "names no reviewer"
            note = f"the server's rule {name!r} {said}; this verdict was not checked by goldfive serve"
    verdict = meta.get("review_verdict", "")
    return {
        "by": shorten(by, 120),
        "verdict": verdict if verdict in ("allow", "deny", "ask") else "ask",
        "reason": shorten(meta.get("review_reason", ""), MAX_REASON_CHARS),
        "error": shorten(meta.get("review_error", ""), 500),
        "note": shorten(meta.get("review_note", ""), 300),
        "verified": verified,
        "verified_note": note,
    }
