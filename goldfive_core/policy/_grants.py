"""Grants: "approve, and allow matching calls for this run / this session / for 1 h" as a record.

A grant is offered by an ``ask`` rule (``grants = ["run", "session", "1h"]``) and created when an
approver picks one of those scopes with an unedited approval. It lets later calls through that the
same rule would ask about, for the same tool, within its scope and before it expires, and that satisfy
its optional argument constraint. Grants are listed, revocable, and every call one lets through is
reported with its id so it can be audited.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from typing import Literal, Protocol, runtime_checkable

from .._util import now_ms, safe_repr
from ..errors import EvalError, ExpressionError, GrantError
from ._expr import Expression, compile_expression
from ._model import Ask, GrantScope, PolicyCall, format_duration

__all__ = ["Grant", "GrantBook", "GrantError", "GrantRecords", "find_grant"]

logger = logging.getLogger(__name__)

MAX_GRANTS = 10_000


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Grant:
    """A standing approval: who granted it, under which rule, for which tool, how far and until when."""

    grant_id: str
    rule: str
    tool: str
    granted_by: str
    scope: Literal["run", "session", "time"]
    run_id: str = ""
    session_id: str = ""
    args_constraint: str = ""
    """A ``when`` expression later calls must also satisfy ("" = any call the rule asks about)."""
    created_at_ms: int
    expires_at_ms: int | None = None
    revoked_at_ms: int | None = None
    revoked_by: str = ""
    _constraint: Expression | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.args_constraint and self._constraint is None:
            try:  # a grant read back from a store: its constraint as text
                object.__setattr__(self, "_constraint", compile_expression(self.args_constraint))
            except ExpressionError as exc:
                raise ValueError(f"grant {self.grant_id}: args constraint: {exc}") from None

    def describe(self) -> str:
        """Words an approver reads before confirming, and a list shows afterwards."""
        where = {
            "run": f"for the rest of run {self.run_id}",
            "session": f"for the rest of session {self.session_id}",
            "time": "",
        }[self.scope]
        until = ""
        if self.expires_at_ms is not None:
            until = f"for {format_duration(max(self.expires_at_ms - self.created_at_ms, 0))}"
        scope = " ".join(p for p in (where, until) if p)
        constraint = f" where {self.args_constraint}" if self.args_constraint else ""
        return f"allow {self.tool} calls matching rule {self.rule!r}{constraint} {scope}, granted by {self.granted_by}"

    def active(self, at_ms: int) -> bool:
        """Not revoked and not expired at ``at_ms``."""
        return self.revoked_at_ms is None and (self.expires_at_ms is None or at_ms < self.expires_at_ms)

    def covers(self, call: PolicyCall, *, rule: str, run_id: str, session_id: str, at_ms: int) -> bool:
        """True if this grant lets ``call`` (asked about by ``rule``) through at ``at_ms``; never raises."""
        if not self.active(at_ms) or rule != self.rule or call.tool != self.tool:
            return False
        if self.scope == "run" and (not run_id or run_id != self.run_id):
            return False
        if self.scope == "session" and (not session_id or session_id != self.session_id):
            return False
        if self._constraint is None:
            return True
        try:
            return self._constraint.test(call)
        except EvalError:
            return False  # cannot tell: the call asks a person as it would without the grant


class GrantBook:
    """The grants of one process (an agent, a server): create, list, revoke, and find the one covering a call.

    ``clock`` returns milliseconds (tests pass a virtual clock).
    """

    def __init__(self, *, clock: Callable[[], int] = now_ms, limit: int = MAX_GRANTS) -> None:
        self._clock = clock
        self._limit = limit
        self._grants: dict[str, Grant] = {}

    def create(
        self,
        *,
        ask: Ask,
        rule: str,
        tool: str,
        scope: str,
        granted_by: str,
        run_id: str = "",
        session_id: str = "",
        args_constraint: str = "",
        edited: bool = False,
    ) -> Grant:
        """Create the grant ``scope`` (``run`` / ``session`` / a duration) that ``rule`` offers.

        Raises :class:`GrantError` when the rule does not offer that scope, the approval edited the
        arguments (an edited approval never creates a grant), the scope has no run or session to bind
        to, or the constraint is not a valid expression.
        """
        if edited:
            raise GrantError("an edited approval never creates a grant: approve the edited call alone")
        if not granted_by:
            raise GrantError("a grant must name who grants it")
        try:
            wanted = GrantScope.parse(scope)
        except ValueError as exc:
            raise GrantError(str(exc)) from None
        if wanted not in ask.grants:
            offered = ", ".join(g.label() for g in ask.grants) or "none"
            raise GrantError(f"rule {rule!r} does not offer a grant {wanted.label()} (offered: {offered})")
        if wanted.kind == "run" and not run_id:
            raise GrantError("a grant for this run needs the run's id")
        if wanted.kind == "session" and not session_id:
            raise GrantError("a grant for this session needs a session id (the run has none)")
        constraint = None
        if args_constraint:
            try:
                constraint = compile_expression(args_constraint)
            except ExpressionError as exc:
                raise GrantError(f"args constraint {safe_repr(args_constraint, 80)}: {exc}") from None
        now = self._clock()
        self._prune(now)
        if len(self._grants) >= self._limit:
            raise GrantError(f"too many grants ({self._limit}); revoke some first")
        grant = Grant(
            grant_id=f"grant-{os.urandom(6).hex()}",
            rule=rule,
            tool=tool,
            granted_by=granted_by,
            scope=wanted.kind,
            run_id=run_id if wanted.kind == "run" else "",
            session_id=session_id if wanted.kind == "session" else "",
            args_constraint=args_constraint,
            created_at_ms=now,
            expires_at_ms=now + wanted.ttl_ms if wanted.ttl_ms is not None else None,
            _constraint=constraint,
        )
        self._grants[grant.grant_id] = grant
        return grant

    def revoke(self, grant_id: str, *, by: str) -> Grant | None:
        """Revoke a grant; returns it revoked, or None when there is no such active grant."""
        grant = self._grants.get(grant_id)
        if grant is None or grant.revoked_at_ms is not None:
            return None
        revoked = dataclasses.replace(grant, revoked_at_ms=self._clock(), revoked_by=by)
        self._grants[grant_id] = revoked
        return revoked

    def get(self, grant_id: str) -> Grant | None:
        """The grant with that id (active, expired or revoked), if this book still holds it."""
        return self._grants.get(grant_id)

    def list(self, *, include_inactive: bool = False) -> list[Grant]:
        """Grants, oldest first; only active ones unless ``include_inactive``."""
        now = self._clock()
        return [g for g in self._grants.values() if include_inactive or g.active(now)]

    def find(self, call: PolicyCall, *, rule: str, run_id: str = "", session_id: str = "") -> Grant | None:
        """The first active grant that lets ``call`` (asked about by ``rule``) through, else None."""
        now = self._clock()
        for grant in self._grants.values():
            if grant.covers(call, rule=rule, run_id=run_id, session_id=session_id, at_ms=now):
                return grant
        return None

    def _prune(self, now: int) -> None:
        """Forget grants that ended more than a day ago (the audit log keeps them)."""
        horizon = now - 86_400_000
        for grant_id, g in list(self._grants.items()):
            ended = g.revoked_at_ms if g.revoked_at_ms is not None else g.expires_at_ms
            if ended is not None and ended < horizon:
                del self._grants[grant_id]


@runtime_checkable
class GrantRecords(Protocol):
    """Where grants are kept beyond one process (a store's sink): listed and revoked from outside the run."""

    async def standing_grants(self, *, rule: str, tool: str) -> Sequence[Grant] | None:
        """Every kept grant of ``rule`` for ``tool``, revoked and expired ones included; None = cannot tell now."""
        ...


async def find_grant(
    book: GrantBook,
    records: GrantRecords | None,
    call: PolicyCall,
    *,
    rule: str,
    run_id: str,
    session_id: str,
    at_ms: int | None = None,
) -> Grant | None:
    """The grant that lets ``call`` (asked about by ``rule``) through, else None (a person is asked).

    ``book`` holds the grants made in this process; ``records`` those kept in a store, which also says
    which were revoked from outside (a revocation there wins) and holds grants an earlier process made.
    When the records cannot be read, no grant applies: the call asks a person (fail closed).
    """
    if records is None:
        return book.find(call, rule=rule, run_id=run_id, session_id=session_id)
    try:
        kept = await records.standing_grants(rule=rule, tool=call.tool)
    except Exception as exc:  # a store's bug must not let a revoked grant through, nor crash the gate
        logger.warning("could not read the grants of rule %r: %s", rule, exc)
        kept = None
    if kept is None:
        return None
    now = book._clock() if at_ms is None else at_ms
    for grant in kept:
        if grant.revoked_at_ms is not None:
            book.revoke(grant.grant_id, by=grant.revoked_by or "someone")
    local = book.find(call, rule=rule, run_id=run_id, session_id=session_id)
    if local is not None:
        return local  # made here; if the store does not have it yet, nobody outside can have revoked it
    for grant in kept:
        if grant.covers(call, rule=rule, run_id=run_id, session_id=session_id, at_ms=now):
            return grant
    return None
