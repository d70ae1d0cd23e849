"""A run told to stop right after the APPROVE's ack took the call's "executing" claim (shared by store and HTTP tests).

:class:`StopAfterFold` is the channel's own :class:`~goldfive_core.store.claims.FoldedClaims`, except that the
moment an approval's claim is folded into its ack, the run is sent a CANCEL or PAUSE (as a person would, a moment
later): the gate then finds the run stopped or paused before the body starts, with a claim the store will say it won.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from goldfive_core import ControlKind, ControlMessage, Session
from goldfive_core.control import ControlAck
from goldfive_core.store.base import InboxRow
from goldfive_core.store.claims import FoldedClaims


class StopAfterFold(FoldedClaims):
    def __init__(self, then: ControlKind) -> None:
        super().__init__()
        self.then = then
        self.folded = 0
        """How many claims rode on an ack (the test's premise: at least one did)."""

    def fold(self, ident: int, row: InboxRow, ack: ControlAck, sessions: Iterable[Session]) -> None:
        sessions = list(sessions)
        super().fold(ident, row, ack, sessions)
        if self.owed(ident) is None:
            return
        self.folded += 1
        for session in sessions:
            if session.run_id == self.owed(ident).run_id:  # type: ignore[union-attr]
                assert session.dispatch(ControlMessage(self.then, {})).ok


def install(channel: Any, then: ControlKind) -> StopAfterFold:
    """Put a :class:`StopAfterFold` in ``channel``'s inbox and ledger (a StoreChannel's or an HttpChannel's)."""
    claims = StopAfterFold(then)
    channel.source.claims = claims  # the inbox (StoreInbox, HttpInbox)
    if hasattr(channel.ledger, "folded"):
        channel.ledger.folded = claims  # StoreLedger
    else:
        channel.ledger.claims = claims  # HttpLedger
    return claims
