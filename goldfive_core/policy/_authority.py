"""Who may decide a request, by the rule that asked it: a ``DecisionAuthority`` for ``decide()``.

``decide()`` (the one way in for decisions from outside an agent: the CLI, the HTTP API, the inbox)
asks its authority before anything is recorded or delivered. :class:`PolicyAuthority` answers from
the rule named in the request's metadata (``policy_rule``): barred principals (the user who started
the run, the agent itself, names), approvers (roles and users; the escalation group too once the
escalation time has passed), and the request's expiry.

Give it the deciding side's own policy (``--policy`` / ``GOLDFIVE_POLICY``): then the approvers come
from a file the agent cannot change. Without one it reads the ``policy_*`` fields the agent wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from .._util import now_ms, safe_repr
from ._model import Ask, PolicyCall, format_duration
from ._policy import Policy, Verdict

__all__ = ["PolicyAuthority", "Refusal", "RequestView"]


class Refusal(str):
    """The sentence saying why a decision may not be taken, and which kind of refusal it is.

    ``forbidden``: the decider may not decide this request (not an approver, barred);
    ``expired``: the request is past its deadline. A plain string from another authority counts as
    ``forbidden``.
    """

    kind: str

    def __new__(cls, text: str, kind: str = "forbidden") -> Refusal:
        made = super().__new__(cls, text)
        made.kind = kind
        return made


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class RequestView(Protocol):
    """What the authority reads of a stored request (``goldfive_core.store.ApprovalRow`` fits)."""

    @property
    def target_id(self) -> str: ...
    @property
    def metadata(self) -> Mapping[str, str]: ...
    @property
    def requested_at_ms(self) -> int: ...


Roles = Callable[[str], Collection[str]] | Mapping[str, Collection[str]]


class PolicyAuthority:
    """Refuses decisions the request's rule does not allow; requests no rule asked are left as they are.

    ``roles`` maps a user name to their roles (a mapping, or a function such as the server's user
    table lookup). ``clock`` returns milliseconds; tests pass a virtual one.
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        roles: Roles | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.policy = policy
        self._roles = roles
        self._clock = clock

    def roles_of(self, user: str) -> Collection[str]:
        """The roles ``user`` holds (none when unknown)."""
        if self._roles is None:
            return ()
        if callable(self._roles):
            return self._roles(user)
        return self._roles.get(user, ())

    def ask_for(self, request: RequestView) -> tuple[Ask | None, str]:
        """(the rule's ask, "") or (None, why no decision may be taken) or (None, "") when no rule asked.

        A tool call whose request names no rule (its agent had no policy, or none that matched) is judged by
        the deciding side's own policy: that rule's ask, its deny, or its error governs it.
        """
        meta = request.metadata
        name = meta.get("policy_rule", "")
        if self.policy is not None and not name:
            judged = self._judge(meta)
            if judged is not None:
                return judged
        if self.policy is not None and name:
            rule = next((r for r in self.policy.rules if r.name == name), None)
            if rule is None:
                return None, f"refused: the request names rule {name!r}, which the deciding side's policy does not have"
            if isinstance(rule.action, Ask):
                return rule.action, ""
            # An allow or deny rule of ours, yet the agent asked: it had another policy. Its own fields decide.
        return Ask.from_metadata(meta), ""

    def governing_rule(self, metadata: Mapping[str, str]) -> str:
        """The name of the rule that governs a request: the one it names, else the deciding side's for its call."""
        name = metadata.get("policy_rule", "")
        if name or self.policy is None:
            return name
        verdict = self._verdict(metadata)
        return verdict.rule_name if verdict is not None else ""

    def _verdict(self, meta: Mapping[str, str]) -> Verdict | None:
        """The deciding side's verdict on the tool call a request holds; None when its policy has no rule for it."""
        tool = meta.get("tool_name", "")
        if self.policy is None or not tool or not self.policy.mentions(tool):
            return None
        try:
            args = json.loads(meta.get("args_json", "") or "null")
        except (ValueError, RecursionError):
            args = None
        if not isinstance(args, dict):  # a rule may read the arguments: one that cannot be read is no pass
            return Verdict(kind="ask", error=f"the arguments of {safe_repr(tool)} are not a JSON object")
        return self.policy.evaluate(PolicyCall(tool=tool, args=args, agent=meta.get("agent_name", ""), gated=True))

    def _judge(self, meta: Mapping[str, str]) -> tuple[Ask | None, str] | None:
        """The deciding side's rule for a call whose request names none (None: its policy asks nothing of it)."""
        verdict = self._verdict(meta)
        if verdict is None:
            return None
        if verdict.error:  # fail closed: what the rule would have said is unknown
            return None, Refusal(
                f"refused: the deciding side's policy could not judge this call ({verdict.error}); nothing was decided"
            )
        if verdict.kind == "deny":
            return None, Refusal(
                f"refused: the deciding side's policy denies this call (rule {verdict.rule_name!r}): "
                f"{verdict.reason or 'denied'}; it can only be rejected",
                "denied",
            )
        if verdict.kind == "ask" and verdict.rule is not None:
            return verdict.ask, ""
        return None

    def may_decide(self, principal: _Named, approval: RequestView, *, approve: bool) -> str | None:
        """None when ``principal`` may decide ``approval``; else the sentence saying why not."""
        ask, refusal = self.ask_for(approval)
        if isinstance(refusal, Refusal) and refusal.kind == "denied" and not approve:
            return None  # what the deciding side denies, a person may still reject (the call never runs)
        if refusal:
            return refusal
        if ask is None:
            return None
        now = self._clock()
        started = approval.requested_at_ms
        if ask.expires_ms is not None and started and now >= started + ask.expires_ms:
            return Refusal(
                f"refused: {approval.target_id!r} expired {format_duration(ask.expires_ms)} after it was asked; "
                "a decision can no longer be taken",
                "expired",
            )
        escalated = ask.escalate is not None and bool(started) and now >= started + ask.escalate.after_ms
        meta = approval.metadata
        why = ask.refusal(
            user=principal.name,
            roles=self.roles_of(principal.name),
            started_by=meta.get("started_by", ""),
            agent=meta.get("agent_name", ""),
            escalated=escalated,
        )
        if why:
            verb = "approval" if approve else "rejection"
            return Refusal(f"refused ({verb} of {approval.target_id!r}): {why}; the request stays pending")
        return None
