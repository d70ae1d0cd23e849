"""The server's rule ends a request at its ``expires``: a signed expiry notice to the run that asked.

With ``goldfive serve --policy``, the agent may not know the server's rule (its own file may say nothing
about expiry). Once a rule's ``expires`` has passed for an open request of a live run, the server tells
that run, once, that the request expired: the run ends its wait as a timeout would (``approval_timed_out``,
the HUMAN_INTERVENTION_REQUIRED drift) and never runs the call. A run parked by ``detach_after`` is not
live: for its parked call the server closes the record as expired, with its signature of the expiry, which
resumes the call and is replayed as the same timeout (never a rejection, and never run). Decisions after that
time are refused (409) in any case, by :class:`~goldfive_core.policy.PolicyAuthority`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from .._util import now_ms, shorten
from ..policy import Ask, Policy, PolicyAuthority, format_duration
from ..signing import DecisionSigner
from ..store.base import ApprovalRow, Store
from ..store.decide import DecideVerdict, expire, record_expiry
from ..store.witness import Appended, witnessed

__all__ = ["Expirer", "expiring"]

logger = logging.getLogger(__name__)

SWEEP_EVERY_S = 1.0
"""How often the server looks for requests its rules say have expired (only with such a rule)."""


def expiring(policy: Policy | None) -> bool:
    """True when some rule of ``policy`` names an ``expires`` (else the server has nothing to watch)."""
    return policy is not None and any(isinstance(r.action, Ask) and r.action.expires_ms for r in policy.rules)


class Expirer:
    """Finds open requests past their server rule's ``expires``: sends a live run its expiry, records it for a
    parked call, once each."""

    def __init__(
        self,
        store: Store,
        rules: PolicyAuthority,
        signer: DecisionSigner | None,
        *,
        clock: Callable[[], int] = now_ms,
        ack_timeout_s: float = 10.0,
        vouch_rows: Callable[[Sequence[Appended]], None] | None = None,
    ) -> None:
        self.store = store
        self.vouch_rows = vouch_rows
        """Holds the audit rows an expiry wrote (the server's own record of it) to what they say until a checkpoint
        covers them (``CheckpointWriter.vouch_events``); None: nobody does."""
        self.rules = rules
        self.signer = signer
        self._clock = clock
        self._ack_timeout_s = ack_timeout_s
        self._sent: set[tuple[int, int]] = set()

    async def run(self, every_s: float = SWEEP_EVERY_S) -> None:
        """Sweep every ``every_s`` seconds until cancelled; a failed sweep is logged and retried."""
        while True:
            try:
                await asyncio.to_thread(self.sweep)
            except Exception as exc:  # a store outage: the next sweep tries again; decisions stay refused
                logger.warning("could not look for expired requests: %s", shorten(str(exc), 300))
            await asyncio.sleep(every_s)

    def sweep(self) -> int:
        """Send the expiry of every request now past its rule's ``expires``; returns how many runs took one."""
        rows = self.store.approvals(open_only=True, limit=1000, oldest_first=True)
        self._sent &= {(r.id, r.requested_at_ms) for r in rows}  # bounded by what is still open
        now = self._clock()
        sent = 0
        for row in rows:
            why, expires_ms = self._expired(row, now)
            if not why or (row.id, row.requested_at_ms) in self._sent:
                continue
            if self.store.liveness_of(self.store.run(row.run_id)).live:
                self._sent.add((row.id, row.requested_at_ms))
                result, written = witnessed(
                    expire, self.store, row, why=why, signer=self.signer, timeout_s=self._ack_timeout_s
                )
            elif self.store.detached(row.target_id) is not None:
                # Parked (detach_after): kept as the run's decision, which resumes the call to hear it.
                self._sent.add((row.id, row.requested_at_ms))
                result, written = witnessed(
                    record_expiry, self.store, row, why=why, signer=self.signer, expires_ms=expires_ms
                )
            else:
                continue  # nobody to tell: decisions are refused, the listing says when it expired
            if written and self.vouch_rows is not None:
                self.vouch_rows(written)
            if result.verdict in (DecideVerdict.APPLIED, DecideVerdict.RECORDED):
                sent += 1
            else:
                logger.info("expiry of %s in run %s: %s", shorten(row.target_id, 80), row.run_id, result.detail)
        return sent

    def _expired(self, row: ApprovalRow, now: int) -> tuple[str, int]:
        """Why ``row`` has expired under the server's rule ("" when it has not), and the rule's ``expires`` in ms."""
        judged = self.rules.judge(row)  # the server's own rule for the call, whatever rule the request names
        ask = judged.ask
        if ask is None or ask.expires_ms is None or not row.requested_at_ms:
            return "", 0
        if now < row.requested_at_ms + ask.expires_ms:
            return "", 0
        rule = judged.rule
        why = (
            f"expired: rule {shorten(rule, 80)!r} allows {format_duration(ask.expires_ms)} for a decision "
            "and none was taken; the call was not made"
        )
        return why, ask.expires_ms
