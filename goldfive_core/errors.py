"""The goldfive exception hierarchy: one root, a few precise leaves."""

from __future__ import annotations

__all__ = [
    "ApprovalError",
    "ChannelBusyError",
    "ConfigError",
    "GoldfiveError",
    "InvalidTransitionError",
    "MissingExtraError",
    "RunCancelledError",
    "RunTerminatedError",
]


class GoldfiveError(Exception):
    """Root of every error goldfive raises on purpose."""


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


class MissingExtraError(GoldfiveError, ImportError):
    """An optional integration was used without its extra installed."""

    def __init__(self, what: str, extra: str) -> None:
        super().__init__(f"{what} needs the '{extra}' extra: pip install 'goldfive[{extra}]'")
        self.extra = extra
