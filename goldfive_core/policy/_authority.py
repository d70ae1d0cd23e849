"""Who may decide a request, and by which rule: a ``DecisionAuthority`` for ``decide()``.

``decide()`` (the one way in for decisions from outside an agent: the CLI, the HTTP API, the inbox)
asks its authority before anything is recorded or delivered. :class:`PolicyAuthority` answers from
the rule that governs the request (:meth:`PolicyAuthority.judge`): barred principals (the user who
started the run, the agent itself, names), approvers (roles and users; the escalation group too once
the escalation time has passed), the quorum and reject mode each vote is signed with, and the
request's expiry.

Give it the deciding side's own policy (``--policy`` / ``GOLDFIVE_POLICY``): then it judges each tool
call itself, by its tool name and arguments (checked against the request's digest), and the rule a
request names is only the agent's word (shown beside the server's, never used in its place). Without
one it reads the ``policy_*`` fields the agent wrote.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal, Protocol

from .._stored import NUL_MARK
from .._util import args_digest, now_ms, safe_repr, shorten
from ._model import Allow, Ask, GrantScope, PolicyCall, format_duration
from ._policy import Policy, Verdict

__all__ = ["Judgment", "PolicyAuthority", "Refusal", "RequestView"]


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
    def kind(self) -> str: ...
    @property
    def metadata(self) -> Mapping[str, str]: ...
    @property
    def requested_at_ms(self) -> int: ...
    @property
    def args_digest(self) -> str: ...
    @property
    def original_args_digest(self) -> str: ...


Roles = Callable[[str], Collection[str]] | Mapping[str, Collection[str]]

_IGNORED_META = frozenset({"policy_error", "policy_review"})
"""``policy_*`` fields that say how the agent's evaluation went, not what its rule says (left out of the
comparison with the deciding side's rule)."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Judgment:
    """The rule that governs one request on the deciding side, and what it lets a person do.

    ``source``: ``"server"`` when the deciding side's policy judged the call (its rule governs: ask, deny or
    allow; or it could not judge the call, and nothing may be decided), ``"request"`` when the request's own
    fields govern (no policy on the deciding side, no rule of it for the call, or a request that is not a tool
    call). ``ask`` is whom it asks and how many (None: anyone who may decide, one); ``refusal`` says why no
    decision may be taken ("" when one may). ``requested_rule`` is the rule the request names (the agent's);
    ``disagrees`` is True when the deciding side's rule is another one, or the same name with other terms.
    """

    source: Literal["server", "request"]
    rule: str
    """The governing rule's name ("" when none)."""
    action: str
    """``ask``, ``deny`` or ``allow`` ("" when no rule governs)."""
    ask: Ask | None
    refusal: str = ""
    requested_rule: str = ""
    disagrees: bool = False
    note: str = ""
    """A sentence for a person: why this rule governs (the disagreement, a deny, an allow); "" when plain."""

    @property
    def decisions(self) -> tuple[Literal["approve", "reject"], ...]:
        """What the governing rule lets anyone decide (who may is another matter): both; only ``reject`` when the
        deciding side's rule denies the call; nothing when the call could not be judged (fail closed)."""
        if not self.refusal:
            return ("approve", "reject")
        if isinstance(self.refusal, Refusal) and self.refusal.kind == "denied":
            return ("reject",)
        return ()

    @property
    def grants(self) -> tuple[GrantScope, ...]:
        """The scopes an approver may extend an approval to under this judgment (empty: no grant may be made)."""
        if self._no_grant() or self._other_rule() or self.ask is None:
            return ()
        return self.ask.grants

    def grant_refusal(self, scope: str) -> str:
        """Why an approval may not also create the standing grant ``scope`` ("" when it may).

        Only an ``ask`` rule that governs the request and offers ``scope`` (the kind, and a duration as written, so
        never a longer one) allows it, to one approver: never a rule with a quorum, never a deny or an allow rule of
        the deciding side's policy. And never when the request names another rule (or other terms) than the
        deciding side's: the run keeps a grant under the rule its request names, so the rule that allows it must be
        that one.
        """
        bar = self._no_grant()
        if bar:
            return bar
        assert self.ask is not None
        try:
            wanted = GrantScope.parse(scope)
        except ValueError as exc:
            return str(exc)
        if wanted not in self.ask.grants:  # a duration is offered as written: never a longer one
            return f"{self._whose()} does not offer a grant {wanted.label()} (offered: {_offered(self.ask)})"
        return self._other_rule()

    def _whose(self) -> str:
        return f"{'the server' if self.source == 'server' else 'the request'}'s rule {shorten(self.rule, 80)!r}"

    def _no_grant(self) -> str:
        """Why the governing rule offers no grant at all ("" when it offers scopes to one approver)."""
        if self.refusal:
            return self.refusal
        if self.source == "server" and self.action != "ask":
            what = "allows this call without a person" if self.action == "allow" else f"is {self.action or 'none'}"
            return f"{self._whose()} {what} and offers no grants"
        if self.ask is None or not self.rule:
            return "no policy rule asked for this call, so none offers a grant"
        if self.ask.quorum > 1:
            return f"{self._whose()} needs {self.ask.quorum} distinct approvers; one approver cannot allow later calls"
        if not self.ask.grants:
            return f"{self._whose()} offers no grants"
        return ""

    def _other_rule(self) -> str:
        """Why a grant of the deciding side's rule cannot be kept by the run: its request names another rule."""
        if self.source != "server" or (not self.disagrees and self.requested_rule == self.rule):
            return ""
        if not self.requested_rule:
            named = "no rule, not"
        elif self.requested_rule == self.rule:
            named = "this rule with other terms than"
        else:
            named = f"rule {shorten(self.requested_rule, 80)!r}, not"
        return (
            f"the agent's request names {named} {self._whose()}; the run keeps a grant under the rule its request "
            "names, so the server's rule cannot offer one here"
        )


class PolicyAuthority:
    """Refuses decisions the governing rule does not allow; requests no rule asked are left as they are.

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
        """(the governing rule's ask, "") or (None, why no decision may be taken) or (None, "") when no rule asks."""
        judged = self.judge(request)
        return judged.ask, judged.refusal

    def governing_rule(self, request: RequestView) -> str:
        """The name of the rule that governs ``request`` ("" when none): see :meth:`judge`."""
        return self.judge(request).rule

    def judge(self, request: RequestView) -> Judgment:
        """The rule that governs ``request`` and what it lets a person do.

        Without a policy of the deciding side: the request's own fields. With one, for a tool call: the deciding
        side evaluates the call itself (the tool name and the arguments the request shows, which must be the ones
        its digest covers) and never takes the rule the request names in its place --

        - an ``ask`` rule governs: its approvers, quorum, reject mode and expiry;
        - a ``deny`` rule: nobody may approve; a person may still reject (the call never runs);
        - an ``allow`` rule, or no rule for the call: the deciding side asks no person for it, so the request's
          own fields say who answers (they can only add to what the deciding side asks);
        - a call it cannot judge (arguments that are not a JSON object, or not the ones the digest covers; a rule
          that erred): nothing may be decided (fail closed).

        A request that is not a tool call (a task's approval, a request for input) holds nothing the rules judge:
        its own fields, unless it names a rule, which only a tool call can have (refused: fail closed).
        """
        meta = request.metadata
        named = meta.get("policy_rule", "")
        own = Ask.from_metadata(meta)
        if self.policy is None:
            return Judgment(source="request", rule=named, action=meta.get("policy_action", ""), ask=own)
        if request.kind != "tool":
            if not named:
                return Judgment(source="request", rule="", action=meta.get("policy_action", ""), ask=own)
            return Judgment(
                source="server",
                rule="",
                action="",
                ask=None,
                refusal=Refusal(
                    f"refused: this {safe_repr(request.kind, 40)} request names policy rule {safe_repr(named, 80)}, "
                    "but the deciding side's policy judges tool calls only and this request holds none; "
                    "nothing was decided"
                ),
                requested_rule=named,
                disagrees=True,
            )
        verdict = self._verdict(request)
        if verdict is None or (verdict.rule is None and not verdict.error):
            # The deciding side's policy has no rule for this call: it asks nobody in particular of it.
            return Judgment(
                source="request",
                rule=named,
                action=meta.get("policy_action", ""),
                ask=own,
                requested_rule=named,
                note="the server's policy has no rule for this call; the request's own fields say who decides",
            )
        return self._governed(verdict, meta, named, own)

    def _governed(self, verdict: Verdict, meta: Mapping[str, str], named: str, own: Ask | None) -> Judgment:
        """The judgment of a call the deciding side's policy has a verdict on (a rule, or an error)."""
        rule = verdict.rule_name
        disagrees = bool(named) and _terms(meta) != _terms(verdict.metadata())
        said = _disagreement(named, rule) if disagrees else ""
        action = verdict.kind if verdict.rule is not None else ""  # no rule decided: it could not judge the call
        base = Judgment(source="server", rule=rule, action=action, ask=None, requested_rule=named, disagrees=disagrees)
        if verdict.kind == "deny":  # first: a rule that erred before it changes nothing of a deny
            return dataclasses.replace(
                base,
                refusal=Refusal(
                    f"refused: the deciding side's policy denies this call (rule {rule!r}): "
                    f"{verdict.reason or 'denied'}; it can only be rejected",
                    "denied",
                ),
                note=_join(said, f"the server's rule {rule!r} denies this call: it can only be rejected"),
            )
        if verdict.error:  # fail closed: what the rule would have said is unknown
            return dataclasses.replace(
                base,
                refusal=Refusal(
                    f"refused: the deciding side's policy could not judge this call ({verdict.error}); "
                    "nothing was decided"
                ),
                note=said,
            )
        if verdict.kind == "allow":
            return dataclasses.replace(
                base,
                ask=own,
                note=_join(
                    said,
                    f"the server's rule {rule!r} allows this call without a person; the agent asked anyway, "
                    "and the request's own fields say who decides",
                ),
            )
        return dataclasses.replace(base, ask=verdict.ask, note=said)

    def _verdict(self, request: RequestView) -> Verdict | None:
        """The deciding side's verdict on the tool call ``request`` holds; None when its policy has no rule for the
        tool. A call it cannot read (arguments that are not a JSON object, or not the ones the request's digest
        covers: another call than the one that would run) is an error verdict, never a pass."""
        assert self.policy is not None
        meta = request.metadata
        tool = meta.get("tool_name", "")
        try:
            args = json.loads(meta.get("args_json", "") or "null")
        except (ValueError, RecursionError):
            args = None
        if not isinstance(args, dict):  # a rule may read the arguments: one that cannot be read is no pass
            return Verdict(kind="ask", error=f"the arguments of {safe_repr(tool)} are not a JSON object")
        digest = request.original_args_digest or request.args_digest
        if not _digest_of(tool, args, digest):
            return Verdict(
                kind="ask",
                error=f"the arguments of {safe_repr(tool)} the request shows are not the ones its digest "
                f"({shorten(digest, 80) or 'none'}) covers",
            )
        if not self.policy.mentions(tool):
            return None
        call = PolicyCall(tool=tool, args=args, agent=meta.get("agent_name", ""), gated=True)
        verdict = self.policy.evaluate(call)
        unseen = _label_rule_before(self.policy, call, verdict)
        if unseen:  # it might have decided first; what it says is unknown: never a pass, never another rule
            return Verdict(
                kind="ask",
                error=f"{unseen} matches on run labels, which a request does not carry, and would come first",
            )
        return verdict

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


def _terms(meta: Mapping[str, str]) -> dict[str, str]:
    """What a rule says of a request, as its ``policy_*`` fields: its name, action and ask."""
    return {k: v for k, v in meta.items() if k.startswith("policy_") and k not in _IGNORED_META}


def _disagreement(named: str, rule: str) -> str:
    if named == rule:
        return f"the agent's request states other terms for rule {shorten(named, 80)!r} than the server's file"
    governs = f"the server's rule {rule!r} governs this call" if rule else "the server's policy governs this call"
    return f"the agent's request names rule {shorten(named, 80)!r}; {governs}"


def _offered(ask: Ask) -> str:
    return ", ".join(g.label() for g in ask.grants) or "none"


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _digest_of(tool: str, args: Mapping[str, Any], digest: str) -> bool:
    """Whether ``digest`` is the agent's digest of this call: of the tool name as stored, or as the agent had it
    when the store keeps its NULs as ␀ (the digest is the agent's, of the name it was given)."""
    if not digest:
        return False
    names = {tool, tool.replace(NUL_MARK, "\x00")}
    try:
        return any(args_digest(name, args) == digest for name in names)
    except (TypeError, ValueError):
        return False


def _label_rule_before(policy: Policy, call: PolicyCall, verdict: Verdict) -> str:
    """The first ask or deny rule (as ``rule 'name' (line N)``) that matches on run labels and could have decided
    ``call`` before the rule that did (or before the default, when none did); "" when there is none.

    A request does not carry its run's labels, so the deciding side cannot tell whether such a rule applies. An
    allow rule is left out: had it applied, nobody would be needed, so the rule after it is the stricter answer.
    """
    for rule in policy.rules:
        if rule is verdict.rule:
            return ""
        if rule.labels and not isinstance(rule.action, Allow) and rule.matches_tool(call.tool, call.agent):
            return rule.where()
    return ""
