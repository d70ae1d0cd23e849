"""The reviewer tier: a function or a model that judges a tool call after a rule says "ask", before a person.

A policy rule names it (``review = "module:callable"``, :class:`~goldfive_core.policy.RuleReviewer`). The
callable is given the call (a copy), its :class:`ReviewContext` and the rule, and returns a
:class:`ReviewVerdict` — ``allow``, ``deny`` or ``ask`` with a reason — sync or async, within
``review_timeout`` (10 s by default). It runs in the one tool-call gate, so every adapter has it:

* **allow** — the call runs; ``ReviewerVerdict`` on the audit log is decided by ``reviewer:<name>``
  (channel ``reviewer``): never signed as a person, never a quorum vote, never a grant;
* **deny** — the call is skipped (``reviewer_denied``) and the model reads the reason;
* **ask** — a person decides, and the card shows the verdict and its reason (:func:`review_json`);
* a reviewer that raises, times out or returns anything else is an **ask**, recorded as a failure;
* ``review_mode = "shadow"``: only recorded; the person decides as if there were no reviewer, and
  ``goldfive review stats`` compares the two (:func:`review_stats`).

goldfive ships :class:`ModelReviewer` (asks a model through the host's own client) and, for tests,
``goldfive_core.testing.ScriptedVerdicts``.
"""

from __future__ import annotations

from ._card import review_json
from ._gate import CARD_KEYS, REVIEW_CHANNEL, ReviewStep, review_call
from ._model import DEFAULT_INSTRUCTIONS, ModelReviewer, adk_completion, parse_verdict
from ._run import Judged, resolve_reviewer, run_reviewer
from ._stats import Agreement, ReviewedCall, ReviewStats, attributed, review_stats, selected_stats
from ._verdict import MAX_REASON_CHARS, ReviewContext, Reviewer, ReviewVerdict

__all__ = [
    "CARD_KEYS",
    "DEFAULT_INSTRUCTIONS",
    "MAX_REASON_CHARS",
    "REVIEW_CHANNEL",
    "Agreement",
    "Judged",
    "ModelReviewer",
    "ReviewContext",
    "ReviewStats",
    "ReviewStep",
    "ReviewVerdict",
    "ReviewedCall",
    "Reviewer",
    "adk_completion",
    "attributed",
    "parse_verdict",
    "resolve_reviewer",
    "review_call",
    "review_json",
    "review_stats",
    "run_reviewer",
    "selected_stats",
]
