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

from collections.abc import Callable, Collection, Mapping
from typing import Protocol

from .._util import now_ms
from ._model import Ask, format_duration
from ._policy import Policy

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
        """(the rule's ask, "") or (None, why no decision may be taken) or (None, "") when no rule asked."""
        meta = request.metadata
        name = meta.get("policy_rule", "")
        if self.policy is not None and name:
            rule = next((r for r in self.policy.rules if r.name == name), None)
            if rule is None:
                return None, f"refused: the request names rule {name!r}, which the deciding side's policy does not have"
            if isinstance(rule.action, Ask):
                return rule.action, ""
            # An allow or deny rule of ours, yet the agent asked: it had another policy. Its own fields decide.
        return Ask.from_metadata(meta), ""

    def may_decide(self, principal: _Named, approval: RequestView, *, approve: bool) -> str | None:
        """None when ``principal`` may decide ``approval``; else the sentence saying why not."""
        ask, refusal = self.ask_for(approval)
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
