"""StoreChannel: a control channel whose rendezvous is a store, so decisions can come from other processes.

It implements :class:`~goldfive_core.control.ControlTransport`, as the in-memory
:class:`~goldfive_core.control.ControlChannel` does, so
``wrap(agent, control=StoreChannel(store), sinks=[channel.sink])`` works unchanged.

It is composed of the two sides of the store's channel:

- agent side: an :class:`~goldfive_core.store.serving.AgentChannel` serving the store's inbox
  (:class:`~goldfive_core.store.inbox.StoreInbox`: a wake socket every commit pokes, or LISTEN/NOTIFY,
  and the sweep), dispatching each message through the bound dispatcher and writing its ack back;
- decider side: a :class:`~goldfive_core.store.sender.StoreSender` (``deliver``) that inserts a message into
  the inbox and waits, bounded, for its ack. A message nobody took in time is withdrawn, never dispatched
  later, and answered with a FAILURE ack.
"""

from __future__ import annotations

from pathlib import Path

from ..control import ControlAck, ControlMessage
from ..signing import TrustKey
from .base import Store
from .claims import FoldedClaims
from .execution import StoreLedger
from .inbox import StoreInbox
from .sender import RUN_LEVEL_KINDS, AmbiguousRunError, DeliveryTimeout, RunGone, StoreSender
from .serving import AgentChannel, new_endpoint, trust_key_of

__all__ = ["RUN_LEVEL_KINDS", "AmbiguousRunError", "DeliveryTimeout", "RunGone", "StoreChannel"]


class StoreChannel(AgentChannel):
    """A control channel backed by a :class:`~goldfive_core.store.base.Store`; implements
    :class:`~goldfive_core.control.ControlTransport`, as the in-memory channel does.

    An :class:`~goldfive_core.store.serving.AgentChannel` over the store's inbox that sends what it does not
    serve through a :class:`~goldfive_core.store.sender.StoreSender` (``channel.sender``). A message this
    process's own run can take (goldfive's escalation PAUSE) is dispatched at once, as in memory; a message
    for an ended run fails at once (``RunGone``).
    """

    store: Store
    """The whole store (an agent channel over the server types its store by the role it uses)."""

    def __init__(
        self,
        store: Store | str | Path,
        *,
        ack_timeout_s: float = 30.0,
        batch_size: int = 100,
        name: str | None = None,
        sweep_interval_s: float = 5.0,
        trust_key: TrustKey | str | None = None,
    ) -> None:
        if isinstance(store, str | Path):
            from ._open import open_store

            store = open_store(store)
        self.sender = StoreSender(store, ack_timeout_s=ack_timeout_s)
        """The decider side: posts into the store's inbox and waits for the ack."""
        endpoint = name or new_endpoint()
        key = trust_key_of(trust_key)
        claims = FoldedClaims()  # an approved call's claim rides on its APPROVE's ack: one commit, not two
        super().__init__(
            store,
            StoreInbox(
                store, endpoint=endpoint, batch_size=batch_size, sweep_interval_s=sweep_interval_s, claims=claims
            ),
            endpoint=endpoint,
            forward=self.sender.send,
            trust_key=key,
            ledger=StoreLedger(store, trust=key, claims=claims),
        )

    @property
    def ack_timeout_s(self) -> float:
        """How long :meth:`deliver` waits for an ack by default."""
        return self.sender.ack_timeout_s

    def address(self, msg: ControlMessage) -> str:
        """The run a message goes to (see :meth:`StoreSender.address`)."""
        return self.sender.address(msg)

    def deliver(self, msg: ControlMessage, *, timeout_s: float | None = None, run_id: str | None = None) -> ControlAck:
        """Post ``msg`` and block until its ack (thread-safe); see :meth:`StoreSender.deliver`."""
        return self.sender.deliver(msg, timeout_s=timeout_s, run_id=run_id)
