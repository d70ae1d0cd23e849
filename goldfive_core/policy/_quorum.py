"""Quorum: N distinct approvers of the same arguments; an edit restarts the count, a reject may end it."""

from __future__ import annotations

import dataclasses
from typing import Literal

__all__ = ["QuorumStep", "QuorumTally"]

StepKind = Literal["counted", "duplicate", "restarted", "complete", "rejected", "reject_counted", "refused"]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class QuorumStep:
    """What one vote did, and the progress after it (``"1 of 2: ana"``).

    ``final`` is True once the request is decided: ``complete`` (run the call with ``args_digest``)
    or ``rejected``. ``refused`` votes changed nothing and say why in ``detail``.
    """

    kind: StepKind
    detail: str
    progress: str
    args_digest: str
    stale: bool = False
    """A refused approval of arguments that are no longer the ones on the table (an edit replaced them)."""

    @property
    def final(self) -> bool:
        """True when this vote decided the request."""
        return self.kind in ("complete", "rejected")


class QuorumTally:
    """The votes on one request: who approved which arguments, who rejected.

    Approvals count only for the arguments currently on the table (their digest). An approval that
    edits the arguments puts new ones on the table and restarts the count with its author; an
    approval carrying an older digest is refused. The same person counts once. A reject ends the
    request when ``reject_ends`` (the default), else it is recorded and the others may still reach
    the quorum.
    """

    __slots__ = ("_approvers", "_done", "_rejecters", "args_digest", "quorum", "reject_ends")

    def __init__(self, *, quorum: int, args_digest: str, reject_ends: bool = True) -> None:
        if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
            raise ValueError(f"quorum must be a positive whole number, got {quorum!r}")
        self.quorum = quorum
        self.args_digest = args_digest
        self.reject_ends = reject_ends
        self._approvers: list[str] = []
        self._rejecters: list[str] = []
        self._done: StepKind | None = None

    @property
    def approvers(self) -> tuple[str, ...]:
        """Who approved the arguments on the table, in order."""
        return tuple(self._approvers)

    @property
    def rejecters(self) -> tuple[str, ...]:
        """Who rejected (with ``reject_ends=False`` several may have)."""
        return tuple(self._rejecters)

    def progress(self) -> str:
        """``"1 of 2: ana"`` (``"0 of 2"`` before anyone approved)."""
        text = f"{len(self._approvers)} of {self.quorum}"
        if self._approvers:
            text += ": " + ", ".join(self._approvers)
        if self._rejecters:
            text += f"; rejected by {', '.join(self._rejecters)}"
        return text

    def _step(self, kind: StepKind, detail: str, *, stale: bool = False) -> QuorumStep:
        return QuorumStep(kind=kind, detail=detail, progress=self.progress(), args_digest=self.args_digest, stale=stale)

    def approve(self, user: str, *, args_digest: str, edited: bool = False) -> QuorumStep:
        """Count ``user``'s approval of the arguments with ``args_digest`` (``edited``: they changed them)."""
        if self._done is not None:
            return self._step("refused", f"already {'approved' if self._done == 'complete' else 'rejected'}")
        if not user:
            return self._step("refused", "an approval in a quorum must name who approves")
        if edited and args_digest != self.args_digest:
            self.args_digest = args_digest
            self._approvers = [user]
            self._rejecters = [r for r in self._rejecters if r != user]
            if len(self._approvers) >= self.quorum:
                self._done = "complete"
                return self._step("complete", f"approved by {user} with edited arguments")
            return self._step("restarted", f"{user} edited the arguments: the count starts again with them")
        if args_digest and args_digest != self.args_digest:
            return self._step(
                "refused",
                f"refused: {user} approved arguments ({args_digest}) that are no longer the ones on the table "
                f"({self.args_digest}); look again",
                stale=True,
            )
        if user in self._approvers:
            return self._step("duplicate", f"{user} already approved; the same person counts once")
        self._approvers.append(user)
        self._rejecters = [r for r in self._rejecters if r != user]
        if len(self._approvers) >= self.quorum:
            self._done = "complete"
            return self._step("complete", f"approved by {', '.join(self._approvers)}")
        return self._step("counted", f"{user} approved; {self.quorum - len(self._approvers)} more needed")

    def reject(self, user: str, *, reason: str = "") -> QuorumStep:
        """Record ``user``'s reject; it ends the request when ``reject_ends``."""
        if self._done is not None:
            return self._step("refused", f"already {'approved' if self._done == 'complete' else 'rejected'}")
        if user in self._approvers:
            self._approvers.remove(user)
        if user not in self._rejecters:
            self._rejecters.append(user or "someone")
        why = f": {reason}" if reason else ""
        if self.reject_ends:
            self._done = "rejected"
            return self._step("rejected", f"rejected by {user or 'someone'}{why}")
        return self._step("reject_counted", f"{user or 'someone'} rejected{why}; the others may still approve")
