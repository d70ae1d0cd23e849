"""HttpChannel: an agent's control channel that speaks HTTP to ``goldfive serve`` — no database on the agent's host.

It implements :class:`~goldfive_core.control.ControlTransport` like the in-memory and store channels, so
``wrap(agent, control=HttpChannel(url, token=...), sinks=[channel.sink])``, ``GoldfivePlugin(control=...)``
and ``GoldfiveClaude(control=...)`` work unchanged. It composes the same
:class:`~goldfive_core.store.serving.AgentChannel` as :class:`~goldfive_core.store.StoreChannel` (the same
dispatch, signature checks, sweep and sink) with the server as its store (:class:`RemoteStore`), the server's
event stream as its inbox (:class:`~goldfive_core.store.http._inbox.HttpInbox`) and a ledger that fails
closed (:class:`HttpLedger`). An agent sends nothing but to its own runs: people decide through the server.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ..._util import shorten
from ...control import ControlAck, ControlMessage
from ...retry import Backoff, aretry
from ...session import Session
from ...signing import TrustKey
from ...toolcall import Replay, ToolCall
from ..base import StoreError, StoreUnavailableError
from ..claims import FoldedClaims
from ..execution import StoreLedger, release_folded
from ..serving import AgentChannel, new_endpoint, trust_key_of
from ._inbox import HttpInbox
from ._remote import RemoteStore

__all__ = ["DEFAULT_UNREACHABLE_AFTER_S", "HttpChannel", "HttpLedger"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_UNREACHABLE_AFTER_S = 30.0
"""How long the channel tries to reach a server before it fails its open approvals closed."""

_SERVER_BACK = Backoff(first_s=0.05, cap_s=1.0)
"""Retries of one ledger call while the server is out of reach."""


async def _refuse_others(msg: ControlMessage, timeout: float | None) -> ControlAck:  # noqa: ASYNC109 (the Forward signature)
    return ControlAck.failure(
        msg.id,
        "not delivered: an agent's HttpChannel cannot send control messages to other runs; "
        "people decide and control runs through goldfive serve",
    )


class HttpChannel(AgentChannel):
    """A control channel over HTTP to ``goldfive serve`` with an ``agent`` token; see the module docstring.

    ``url`` is one server or several behind one PostgreSQL (tried in turn). ``trust_key`` (or
    ``GOLDFIVE_TRUST_KEY``): apply only decisions the server signed. ``timeout_s`` bounds each request;
    ``unreachable_after_s`` bounds how long open approvals wait for an unreachable server.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        token: str,
        trust_key: TrustKey | str | None = None,
        timeout_s: float = 10.0,
        unreachable_after_s: float = DEFAULT_UNREACHABLE_AFTER_S,
        sweep_interval_s: float = 30.0,
        name: str | None = None,
    ) -> None:
        if unreachable_after_s <= 0:
            raise ValueError(f"unreachable_after_s must be > 0, got {unreachable_after_s}")
        remote = RemoteStore([url] if isinstance(url, str) else list(url), token=token, timeout_s=timeout_s)
        key = trust_key_of(trust_key)
        claims = FoldedClaims()
        inbox = HttpInbox(
            remote,
            endpoint=name or new_endpoint(),
            sweep_interval_s=sweep_interval_s,
            unreachable_after_s=unreachable_after_s,
            claims=claims,
        )
        super().__init__(
            remote,
            inbox,
            endpoint=inbox.endpoint,
            forward=_refuse_others,
            trust_key=key,
            ledger=HttpLedger(remote, trust=key, unreachable_after_s=unreachable_after_s, claims=claims),
        )
        self.remote = remote
        self.inbox = inbox
        self.unreachable_after_s = unreachable_after_s
        inbox.sink_of = lambda: self._sink  # acks ride with the sink's events (when the run writes through it)

    def __repr__(self) -> str:
        return repr(self.inbox)

    @property
    def connects(self) -> int:
        """How many times the stream (re)connected (observability and tests)."""
        return self.inbox.connects

    @property
    def failed_closed(self) -> int:
        """How many open approvals were withdrawn because no server could be reached."""
        return self.inbox.failed_closed


class HttpLedger:
    """The server's execution ledger for the gate, failing closed: a call the server cannot vouch for is not run.

    Composed over a :class:`StoreLedger` on the server (``records``): each look-up or claim is retried while the
    server cannot be reached, for at most ``unreachable_after_s``; then the gate skips the call
    (``store_unavailable``) with words the model reads — never an exception into the agent's loop. "done" is
    retried in the background by the StoreLedger itself.
    """

    def __init__(
        self,
        remote: RemoteStore,
        *,
        trust: TrustKey | None,
        unreachable_after_s: float,
        claims: FoldedClaims | None = None,
    ) -> None:
        self.records = StoreLedger(remote, trust=trust, agent="")  # the server keys the ledger by the token's user
        self.unreachable_after_s = unreachable_after_s
        self.claims = claims if claims is not None else FoldedClaims()
        """Claims folded into APPROVE acks by the channel's inbox (see :mod:`goldfive_core.store.claims`)."""

    @property
    def trust(self) -> TrustKey | None:
        """The key a decision recorded on the server must be signed with (None: any is used)."""
        return self.records.trust

    async def _bounded(self, call: ToolCall, attempt: Callable[[], Awaitable[T]]) -> T:
        return await aretry(
            attempt,
            budget_s=self.unreachable_after_s,
            on=StoreUnavailableError,
            what=f"the ledger's record of {shorten(call.call_id, 80)!r}",
            policy=_SERVER_BACK,
            logger=logger,
        )

    async def lookup(self, session: Session, call: ToolCall, digest: str) -> Replay:
        """What the server knows about the call; a server out of reach (or refusing) → not run."""
        try:
            replay = await self._bounded(call, lambda: self.records.check(session, call, digest))
        except StoreError as exc:
            return _not_run(call, exc)
        if replay.kind == "none":  # a person will be asked: the approval's ack may carry the claim
            self.claims.expect(session.run_id, call.call_id, digest)
        return replay

    async def begin(self, session: Session, call: ToolCall, digest: str) -> Replay | None:
        """Record "executing" before the body runs; a server out of reach (or refusing) → not run.

        When the approval's ack carried the claim (see :mod:`goldfive_core.store.claims`), the server's answer to
        that ack is the claim: no round trip of its own. Only a claim the server said it won lets the body run.
        """
        try:
            won = await self.claims.wait(session.run_id, call.call_id, within_s=self.unreachable_after_s)
        except TimeoutError:
            why = StoreUnavailableError(f"no answer to the ack that claimed it in {self.unreachable_after_s:g} s")
            return _not_run(call, why)
        if won is True:
            self.records.adopt(session, call, digest)
            return None
        # Not folded, not won (claimed before: done or in doubt), or a server that does not fold claims: claim.
        try:
            return await self._bounded(call, lambda: self.records.claim(session, call, digest))
        except StoreError as exc:
            return _not_run(call, exc)

    async def release(self, session: Session, call: ToolCall, digest: str) -> None:
        """Give back the claim the APPROVE's ack won when the gate will not start the body (the run was cancelled or
        paused first), or the claim ``begin`` made when the body did not start after all; the server's answer or the
        release out of reach past ``unreachable_after_s``: the call stays in doubt (never released by guess). Never
        raises."""

        async def write() -> None:
            await self._bounded(call, lambda: self.records.release_claim(session, call, digest))

        if await self.records.give_back(session, call, digest, write=write):
            return
        await release_folded(
            self.claims,
            session,
            call,
            within_s=self.unreachable_after_s,
            write=write,
            where="goldfive serve",
        )

    async def finish(
        self, call_id: str, digest: str, *, result: Any = None, error: BaseException | None = None
    ) -> None:
        """Record "done" (kept and retried through an outage; never raises)."""
        await self.records.finish(call_id, digest, result=result, error=error)


def _not_run(call: ToolCall, exc: StoreError) -> Replay:
    detail = (
        f"did not run: {call.tool_name} was NOT run because goldfive serve could not record or vouch for it "
        f"({shorten(str(exc), 300)}). No one could be asked; do not assume it was approved. "
        "Try again later or stop."
    )
    logger.error("%s", detail)
    return Replay(kind="unavailable", detail=detail)
