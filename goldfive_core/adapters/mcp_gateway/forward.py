"""A ``tools/call`` the gate let through, sent to its upstream — and what each fault on the way means.

The upstream's link is looked up here, when the call is about to be sent (never before the gate: a call that
waited for a person while its upstream died and was started again goes to the new connection). Then:

* the request was **never written** (the link had ended, or the write was refused): nothing of it ran. It is sent
  on the upstream's next connection when one comes within :data:`~.upstreams.RESTART_WAIT_S` (at most
  :data:`SEND_TRIES` connections), else :class:`~goldfive_core.inflight.NotStarted` — the ledger's claim is given
  back ("released, not run") and the client is told it was not sent;
* it was written and the connection ended before the answer (**lost in flight**), or no answer came within the
  upstream's timeout: :class:`~goldfive_core.inflight.InDoubt` — it may or may not have run; the ledger keeps it
  "executing" (in doubt, never sent again) and the client is told so.

A call of several rounds (an ``input_required`` upstream, :mod:`.input_required`) started once its first round was
written: a later round's fault is in doubt, never re-sent.

A client that gives up on the call (``notifications/cancelled``) while it is with its upstream is told nothing (MCP
answers no cancelled request), and the upstream is told it was cancelled; the ledger says what is known:
:class:`ClientGaveUp` — an :class:`~goldfive_core.inflight.InDoubt` once a round was written (the upstream may have
run it, cancel or not), a :class:`~goldfive_core.inflight.NotStarted` before. The caller records it and ends the
request as cancelled (never "done": nobody saw it finish).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...inflight import InDoubt, NotStarted
from .input_required import Answer, call_with_input
from .link import Link, UpstreamGone, UpstreamTimeout
from .upstreams import RESTART_WAIT_S, Connections

__all__ = ["SEND_TRIES", "send_call"]

SEND_TRIES = 2
"""On how many of the upstream's connections a call whose request was never written is tried."""


class ClientGaveUp(Exception):
    """The client cancelled the call while it was being sent: the ledger's record of it (the caller re-raises the
    cancellation once it is recorded). Internal to the gateway: no caller outside it ever sees one, so it is not
    among the public errors of :mod:`goldfive_core.errors`."""


class GaveUpInDoubt(ClientGaveUp, InDoubt):
    """Cancelled by the client after a round reached the upstream: it may or may not have run."""


class GaveUpNotStarted(ClientGaveUp, NotStarted):
    """Cancelled by the client before any round reached the upstream: nothing of it ran."""


async def send_call(upstreams: Connections, upstream: str, params: dict[str, Any], answer: Answer) -> dict[str, Any]:
    """Send ``tools/call`` ``params`` to ``upstream`` (answering its ``input_required`` rounds with ``answer``).

    Raises NotStarted, InDoubt, UpstreamError (its error answer) or Unanswerable (a round it cannot answer); a
    cancellation of the caller comes out as :class:`ClientGaveUp` (for the ledger; the caller re-raises it)."""
    timeout_s = upstreams.timeout_of(upstream)
    stale: Link | None = None
    sending: _Sending | None = None
    try:
        for _ in range(SEND_TRIES):
            link = await upstreams.live(upstream, within_s=min(RESTART_WAIT_S, timeout_s), stale=stale)
            if link is None:
                raise NotStarted(f"its MCP server {upstream!r} {upstreams.why_not(upstream)}")
            sending = _Sending(link, timeout_s)
            try:
                return await call_with_input(sending.request, params, answer)
            except UpstreamTimeout as exc:
                raise InDoubt(f"its MCP server {upstream!r} did not answer within {exc.after_s:g} s") from exc
            except UpstreamGone as exc:
                upstreams.lost(upstream, link, exc)  # later calls are told at once (an old link changes nothing)
                if sending.written:
                    raise InDoubt(f"its MCP server {upstream!r} stopped answering after it was sent ({exc})") from exc
                stale = link  # it never reached the upstream: tried on the next connection, if one comes
    except asyncio.CancelledError:
        if sending is not None and sending.written:
            raise GaveUpInDoubt(f"the client cancelled it after it was sent to its MCP server {upstream!r}") from None
        raise GaveUpNotStarted(f"the client cancelled it before its MCP server {upstream!r} got it") from None
    raise NotStarted(f"its MCP server {upstream!r} stopped answering before it got the call")


class _Sending:
    """One try of a call on one link: whether any of its rounds reached the upstream."""

    def __init__(self, link: Link, timeout_s: float) -> None:
        self.link = link
        self.timeout_s = timeout_s
        self.written = False

    async def request(self, params: dict[str, Any]) -> dict[str, Any]:
        try:
            result = await self.link.request("tools/call", params, timeout_s=self.timeout_s, on_written=self._wrote)
        except UpstreamGone as exc:
            self.written = self.written or exc.written
            raise
        self.written = True  # answered: this round reached the upstream
        return result

    def _wrote(self) -> None:
        self.written = True
