"""The "executing" claim an agent folds into an APPROVE's ack: the decision and the right to run, in one commit.

When the gate looked a call up in the ledger and found nothing (:meth:`FoldedClaims.expect`), the person's
APPROVE for it is acked with the claim beside it (:meth:`FoldedClaims.fold`); the store writes the ack, the
decision and the claim in one transaction and answers whether the claim was won (:meth:`FoldedClaims.answered`).
The ledger's ``begin`` then waits for that answer (:meth:`FoldedClaims.take`) instead of claiming on its own: an
agent on HTTP (:mod:`goldfive_core.store.http`) saves the ``/executing`` round trip, a
:class:`~goldfive_core.store.StoreChannel` a commit and a thread hop, and either knows its decision is durable
before the body runs. A claim is folded only while the run is not paused (a paused call may wait long before its
body runs) and only for a call the gate is waiting on; a store that does not answer claims (an older server)
leaves the ledger to claim the usual way.
"""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..control import AckVerdict, ControlAck, ControlKind
from ..session import Session
from .base import HOST, ExecutionClaim, InboxRow

__all__ = ["FoldedClaims"]

_EXPECTED = 1024
"""How many looked-up calls are remembered while they wait for a person (older ones fall back to /executing)."""

_Key = tuple[str, str]
"""(run id, call id)."""


class FoldedClaims:
    """Claims riding on APPROVE acks, shared by a channel's inbox (which acks with them) and ledger (which waits)."""

    def __init__(self) -> None:
        self._expected: collections.OrderedDict[_Key, str] = collections.OrderedDict()
        self._answers: dict[_Key, asyncio.Future[bool | None]] = {}
        self._by_inbox: dict[int, tuple[_Key, ExecutionClaim, asyncio.Future[bool | None]]] = {}

    def expect(self, run_id: str, call_id: str, digest: str) -> None:
        """The gate found nothing recorded for this call and may ask a person: its approval may carry the claim."""
        self._expected[(run_id, call_id)] = digest
        self._expected.move_to_end((run_id, call_id))
        while len(self._expected) > _EXPECTED:
            self._expected.popitem(last=False)

    def fold(self, ident: int, row: InboxRow, ack: ControlAck, sessions: Iterable[Session]) -> None:
        """After dispatching inbox row ``ident``: when it approved a call the gate waits on, claim it with the ack."""
        if row.kind != ControlKind.APPROVE or not ack.ok or ack.verdict not in (AckVerdict.APPLIED, AckVerdict.QUORUM):
            return
        target = row.payload.get("target_id")
        for session in sessions:
            key = (session.run_id, target if isinstance(target, str) else "")
            digest = self._expected.get(key)
            if digest is None or (row.run_id and row.run_id != session.run_id):
                continue
            if session.paused or key in self._answers:
                return  # a paused call claims when it is let through; one claim per call
            del self._expected[key]
            claim = ExecutionClaim(target_id=key[1], run_id=key[0], pid=os.getpid(), host=HOST, args_digest=digest)
            answer: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
            self._answers[key] = answer
            self._by_inbox[ident] = (key, claim, answer)
            return

    def owed(self, ident: int) -> ExecutionClaim | None:
        """The claim to post with inbox row ``ident``'s ack (None: none, or it was withdrawn)."""
        found = self._by_inbox.get(ident)
        return found[1] if found is not None else None

    def answered(self, idents: Iterable[int], claims: Any) -> None:
        """The server answered the acks of ``idents``: ``claims`` maps inbox ids (as text) to whether each was won;
        an answer without it (an older server) leaves each claim to the ledger's own round trip."""
        won = claims if isinstance(claims, Mapping) else {}
        for ident in idents:
            found = self._by_inbox.pop(ident, None)
            if found is None:
                continue
            value = won.get(str(ident))
            if not found[2].done():
                found[2].set_result(value if isinstance(value, bool) else None)

    def take(self, run_id: str, call_id: str) -> asyncio.Future[bool | None] | None:
        """The answer the ledger's ``begin`` awaits (None: this call's claim was not folded)."""
        self._expected.pop((run_id, call_id), None)
        return self._answers.pop((run_id, call_id), None)

    async def wait(self, run_id: str, call_id: str, *, within_s: float) -> bool | None:
        """For the ledger's ``begin``: whether the claim folded into this call's APPROVE ack was won (None: no claim
        was folded, or the store did not answer it: claim on your own). No answer within ``within_s`` withdraws the
        claim from an ack still owed and raises TimeoutError: the body must not run."""
        folded = self.take(run_id, call_id)
        if folded is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.shield(folded), within_s)
        except TimeoutError:
            self.withdraw(run_id, call_id)
            raise
        except asyncio.CancelledError:  # the call was cancelled while it waited: a release still finds the answer
            self._answers.setdefault((run_id, call_id), folded)
            raise

    def withdraw(self, run_id: str, call_id: str) -> None:
        """The ledger gave up waiting: an ack still owed goes without the claim (the body will not run)."""
        for ident, (key, _, _) in list(self._by_inbox.items()):
            if key == (run_id, call_id):
                del self._by_inbox[ident]
