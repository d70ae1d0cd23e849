"""The SQL store, by role: one module per role over one shared connection-and-transaction helper.

``db`` (:class:`SqlDb`: per-thread connections, transactions, the error boundary, retries) and ``chain``
(appending to the audit chain) are what every role and the modules beside the store (agents, grants,
outbox) write SQL through. The roles: :mod:`.audit` (the audit log), :mod:`.approvals` (approval
records), :mod:`.runs` (runs and liveness), :mod:`.ledger` (execution records), :mod:`.parking` (parked
calls), :mod:`.inbox` (the control inbox), :mod:`.users` (users and web sessions); :class:`SqlStore` is
them all over one ``db``.
"""

from __future__ import annotations

from .chain import ChainWriter, appending, next_sequence
from .db import SqlDb, SqlRole
from .store import DEFAULT_RETRY_BUDGET_S, SqlStore

__all__ = [
    "DEFAULT_RETRY_BUDGET_S",
    "ChainWriter",
    "SqlDb",
    "SqlRole",
    "SqlStore",
    "appending",
    "next_sequence",
]
