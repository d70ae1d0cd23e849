"""Policies: rules on a tool call and its arguments → allow, ask (who, how many, escalation, grants) or deny.

A policy is an ordered list of :class:`Rule`; the first rule that matches a call decides. A rule
matches on the tool name (globs), the agent, the run's labels and a ``when`` expression over the
arguments. Build one in Python or load it from TOML (:func:`load_policy`, ``GOLDFIVE_POLICY``)::

    [[rule]]
    name = "small refunds"
    tool = "refund"
    when = "args.amount <= 50"
    action = "allow"

    [[rule]]
    name = "large transfers"
    tool = "transfer_*"
    when = "args.amount > 10000 and args.currency in ['EUR', 'USD']"
    action = "ask"
    approvers = ["role:finance"]
    quorum = 2
    barred = ["starter", "agent"]
    escalate = { after = "30m", to = ["role:cfo"] }

    [[rule]]
    name = "refunds, reviewed first"
    tool = "refund"
    action = "ask"
    review = "acme.review:refunds"    # allow / deny / ask before a person; see goldfive_core.review
    review_mode = "shadow"            # only record what it would have decided
    review_timeout = "20s"

    [[rule]]
    name = "no production deletes"
    tool = "*"
    labels = { env = "prod" }
    when = "args.path matches '/srv/.*'"
    action = "deny"
    reason = "deleting under /srv in production is not allowed"

``when`` is a small language parsed here (never ``eval``): paths ``args.a.b``, ``args['x'][0]``,
``tool``, ``agent``, ``labels.env``; ``== != < <= > >=``, ``in`` / ``not in`` (a list, a string or a
path), ``matches 'regex'`` (full match), ``exists(path)``, ``len(path)``, ``and or not`` and
parentheses. Types are strict (see ``goldfive_core.policy._expr``) and evaluation never raises.
"""

from __future__ import annotations

from ._authority import Judgment, PolicyAuthority, Refusal, RequestView
from ._expr import EvalError, Expression, ExpressionError, compile_expression
from ._grants import Grant, GrantBook, GrantError, GrantRecords, find_grant
from ._load import ENV_VAR, default_policy, load_policy, load_policy_from_env, parse_policy
from ._model import (
    Allow,
    Ask,
    Deny,
    Escalation,
    GrantScope,
    PolicyCall,
    PolicyError,
    Rule,
    RuleReviewer,
    format_duration,
    parse_duration,
    tool_pattern_matches,
)
from ._policy import DEFAULT_ASK, Policy, Verdict
from ._quorum import QuorumStep, QuorumTally

__all__ = [
    "RequestView",
    "Judgment",
    "QuorumTally",
    "QuorumStep",
    "PolicyAuthority",
    "Refusal",
    "GrantError",
    "GrantRecords",
    "GrantBook",
    "Grant",
    "DEFAULT_ASK",
    "ENV_VAR",
    "Allow",
    "Ask",
    "Deny",
    "Escalation",
    "EvalError",
    "Expression",
    "ExpressionError",
    "GrantScope",
    "Policy",
    "PolicyCall",
    "PolicyError",
    "Rule",
    "RuleReviewer",
    "Verdict",
    "compile_expression",
    "default_policy",
    "find_grant",
    "format_duration",
    "load_policy",
    "load_policy_from_env",
    "parse_duration",
    "parse_policy",
    "tool_pattern_matches",
]
