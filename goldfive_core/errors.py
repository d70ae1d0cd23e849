"""The goldfive exception hierarchy: one root, a few precise leaves, every public one defined here.

Each leaf is also importable from the module that raises it (``goldfive_core.store.StoreError``,
``goldfive_core.policy.PolicyError``, ``goldfive_core.server.ApiError``...); this module imports
nothing of goldfive, so the store, the server and the adapters can all take their errors from it.
A secondary base (``ValueError``, ``ImportError``, ``RuntimeError``) stays where callers catch by it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AgentRefused",
    "AmbiguousApprovalError",
    "AmbiguousRunError",
    "ApiError",
    "ApprovalError",
    "ApprovalLookupError",
    "BadPayload",
    "ChannelBusyError",
    "CheckpointError",
    "ConfigError",
    "DeliveryError",
    "DeliveryTimeout",
    "EvalError",
    "ExpressionError",
    "GoldfiveError",
    "GrantError",
    "GrantNotFound",
    "InDoubt",
    "InvalidTransitionError",
    "LimitError",
    "MissingExtraError",
    "NotStarted",
    "PolicyError",
    "RunCancelledError",
    "RunGone",
    "RunNotLiveError",
    "RunTerminatedError",
    "SchemaVersionError",
    "StoreError",
    "StoreUnavailableError",
    "UnknownApprovalError",
    "UnknownRunError",
    "UnknownUserError",
    "UpstreamError",
    "UpstreamGone",
    "UpstreamTimeout",
    "UserError",
    "UserExistsError",
]


class GoldfiveError(Exception):
    """Root of every error goldfive raises on purpose."""


# -- the core ---------------------------------------------------------------------------------------------------
class ConfigError(GoldfiveError, ValueError):
    """A configuration value is out of range or of the wrong type."""


class InvalidTransitionError(GoldfiveError):
    """A task was asked to move to a state its current state does not allow."""


class ApprovalError(GoldfiveError):
    """An approval request could not be opened (e.g. the target is already pending)."""


class ChannelBusyError(GoldfiveError):
    """A ControlChannel is already bound to another dispatcher."""


class RunCancelledError(GoldfiveError):
    """Raised at a step boundary once a person cancelled the run (CANCEL)."""


class RunTerminatedError(GoldfiveError):
    """Raised at a step boundary once goldfive aborted the run (ladder TERMINATE, deadline)."""


class NotStarted(GoldfiveError):
    """Raised by (or reported for) a tool body that never began: its host knows nothing of it ran (e.g. the
    request was never written to the server that runs it). The ledger's claim is given back ("released, not
    run"); :mod:`goldfive_core.inflight` re-exports it."""


class InDoubt(GoldfiveError):
    """Raised by (or reported for) a tool body its host lost mid-way (sent, and no answer came): it may or may not
    have run. The ledger's entry stays "executing" (in doubt, never run again) and the run is told a person must
    settle it (``goldfive resolve``); :mod:`goldfive_core.inflight` re-exports it."""


class MissingExtraError(GoldfiveError, ImportError):
    """An optional integration was used without its extra installed."""

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f"{what} needs the '{extra}' extra: pip install 'goldfive[{extra}]'")
        self.extra = extra


class LimitError(GoldfiveError, ValueError):
    """A value is bigger (or deeper) than its configured limit; the message names the limit."""


class BadPayload(GoldfiveError):
    """A control message's payload is malformed; the message says which key and what is expected."""


# -- policies (goldfive_core.policy) ----------------------------------------------------------------------------
class PolicyError(ConfigError):
    """A policy that cannot be used: says where (file and line when known) and why."""

    def __init__(self, reason: str, *, source: str = "", line: int = 0) -> None:
        where = f"{source}:{line}: " if source and line else f"{source}: " if source else ""
        super().__init__(f"{where}{reason}")
        self.reason = reason
        self.source = source
        self.line = line


class ExpressionError(GoldfiveError, ValueError):
    """A ``when`` expression that cannot be parsed; ``column`` is 1-based within the expression."""

    def __init__(self, reason: str, column: int) -> None:
        super().__init__(f"column {column}: {reason}")
        self.reason = reason
        self.column = column


class EvalError(GoldfiveError):
    """An expression could not be evaluated against a call (missing path, wrong type, ...)."""


class GrantError(GoldfiveError, ValueError):
    """A grant that may not be created (not offered by the rule, an edited approval, ...)."""


# -- the store (goldfive_core.store) ----------------------------------------------------------------------------
class StoreError(GoldfiveError):
    """A store operation failed (bad input or a backend error)."""


class StoreUnavailableError(StoreError):
    """The store cannot be reached or opened (missing file, server down, locked too long)."""


class SchemaVersionError(StoreError):
    """The database was written by a newer goldfive (or is not a goldfive store)."""


class DeliveryTimeout(StoreError):
    """No agent took the message within the timeout; it was withdrawn and will never be dispatched."""


class RunGone(DeliveryTimeout):
    """The addressed run ended (or its process died) before taking the message; it was withdrawn."""

    def __init__(self, message: str, *, liveness: object | None = None) -> None:
        super().__init__(message)
        self.liveness = liveness
        """How the run stood when the message was withdrawn (a ``goldfive_core.store.RunLiveness``; None: not
        said)."""


class AmbiguousRunError(StoreError):
    """A run-level message named no run while several runs are live on the store; nothing was posted."""


class UnknownRunError(StoreError):
    """A run control named a run the store has never seen; nothing was posted."""


class RunNotLiveError(StoreError):
    """A run control's run is not running (or no run is); nothing was posted."""


class GrantNotFound(StoreError):
    """No such grant, or it was already revoked."""


class AgentRefused(StoreError):
    """The server refused an agent request (4xx): a bad token, a run of another agent, a malformed request."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ApprovalLookupError(GoldfiveError):
    """The approval a decider named cannot be picked out of the store."""


class UnknownApprovalError(ApprovalLookupError):
    """No approval has that target id (in that run)."""


class AmbiguousApprovalError(ApprovalLookupError):
    """The target id is open in several runs; the decider must name one."""


class CheckpointError(GoldfiveError):
    """A checkpoint is malformed, signed by another key, or for another log."""


class UserError(GoldfiveError):
    """A user command was refused (bad name, unknown role, name taken, unknown user)."""


class UnknownUserError(UserError):
    """No user has that name."""


class UserExistsError(UserError):
    """A user of that name exists already."""


# -- goldfive serve (goldfive_core.server) ----------------------------------------------------------------------
class ApiError(GoldfiveError):
    """A request ``goldfive serve`` refuses: HTTP ``status`` and a sentence for the client.

    The one refusal type of every route (``AuthError`` and ``AgentError`` are its other names): ``extra``
    holds more fields of the JSON body, and ``retry_after_s`` > 0 sends ``Retry-After`` (a 429's wait).
    """

    def __init__(self, status: int, message: str, *, retry_after_s: int = 0, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after_s = retry_after_s
        self.extra = extra


class DeliveryError(GoldfiveError):
    """A notification channel did not take a notice (it is retried with backoff, then marked failed)."""


# -- the MCP gateway ---------------------------------------------------------------------------------------------
class UpstreamGone(GoldfiveError):
    """An MCP upstream's transport ended before it answered (the gateway reports its tools unavailable).

    ``written``: whether the request had been written to the upstream when it ended — False means the upstream
    never received it (nothing of it ran); True means it was lost in flight (it may or may not have run)."""

    def __init__(self, message: str, *, written: bool = True) -> None:
        super().__init__(message)
        self.written = written


class UpstreamTimeout(GoldfiveError):
    """An MCP upstream was sent a request and did not answer within its time (it is alive, or hung): the request
    may or may not have run. ``after_s``: the time it had."""

    def __init__(self, message: str, *, after_s: float) -> None:
        super().__init__(message)
        self.after_s = after_s


class UpstreamError(GoldfiveError):
    """An MCP upstream answered with a JSON-RPC error (``code`` is its error code)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
