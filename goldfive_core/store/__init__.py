"""Durable approvals: a store (SQLite by default, PostgreSQL across hosts), its control channel and audit sink.

::

    from goldfive_core import wrap
    from goldfive_core.store import StoreChannel, open_store

    channel = StoreChannel(open_store("goldfive.db"))
    runner = wrap(agent, control=channel, sinks=[channel.sink])

Then, from another terminal: ``goldfive pending`` and ``goldfive approve ID``.
``PostgresStore`` needs ``pip install 'goldfive[postgres]'`` and is imported on
first use only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._open import open_store
from .base import (
    ApprovalRow,
    AuditReport,
    AuditRow,
    DetachedRow,
    DetachedStatus,
    ExecutionRow,
    ExecutionState,
    InboxRow,
    RunRow,
    SchemaVersionError,
    Store,
    StoredDecision,
    StoreError,
    StoreUnavailableError,
    run_liveness,
)
from .channel import DeliveryTimeout, RunGone, StoreChannel
from .decide import (
    DEFAULT_DECIDE_TIMEOUT_S,
    AmbiguousApprovalError,
    ApprovalLookupError,
    DecideResult,
    DecideVerdict,
    DecisionAuthority,
    UnknownApprovalError,
    decide,
    find_approval,
)
from .execution import GuardedResult, run_approved
from .liveness import Liveness, RunLiveness, StoredRunStatus, judge_liveness
from .roles import (
    ApprovalRecords,
    AuditLog,
    CallLedger,
    ControlInbox,
    DecisionSource,
    EventLog,
    ExecutionRecords,
    GrantReader,
    Heartbeats,
    LedgerStore,
    ParkedCalls,
    RunRegistry,
    StoreHandle,
    UserDirectory,
)
from .sender import StoreSender, send_control
from .sink import SinkStatistics, StoreSink
from .sqlite import DEFAULT_DB_PATH, SqliteStore

if TYPE_CHECKING:
    from .postgres import PostgresStore

__all__ = [
    "DEFAULT_DB_PATH",
    "DEFAULT_DECIDE_TIMEOUT_S",
    "AmbiguousApprovalError",
    "ApprovalLookupError",
    "ApprovalRecords",
    "ApprovalRow",
    "AuditLog",
    "AuditReport",
    "AuditRow",
    "CallLedger",
    "ControlInbox",
    "DecideResult",
    "DecideVerdict",
    "DecisionAuthority",
    "DecisionSource",
    "DeliveryTimeout",
    "DetachedRow",
    "DetachedStatus",
    "EventLog",
    "ExecutionRecords",
    "ExecutionRow",
    "ExecutionState",
    "GrantReader",
    "GuardedResult",
    "Heartbeats",
    "InboxRow",
    "LedgerStore",
    "Liveness",
    "ParkedCalls",
    "PostgresStore",
    "RunGone",
    "RunLiveness",
    "RunRegistry",
    "RunRow",
    "SchemaVersionError",
    "SinkStatistics",
    "SqliteStore",
    "Store",
    "StoreChannel",
    "StoreError",
    "StoreHandle",
    "StoreSender",
    "StoreSink",
    "StoreUnavailableError",
    "StoredDecision",
    "StoredRunStatus",
    "UnknownApprovalError",
    "UserDirectory",
    "decide",
    "find_approval",
    "judge_liveness",
    "open_store",
    "run_approved",
    "run_liveness",
    "send_control",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresStore":  # psycopg is imported only when PostgreSQL is used
        from .postgres import PostgresStore

        return PostgresStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
