"""Bookkeeping of the goldfive runs a plugin serves: one run per active ADK session.

A goldfive run starts at the first callback of an ADK invocation in a session
that has no active run, and ends when the last invocation running in it ends
(``after_run_callback``, ``on_run_error_callback``, or the agent task being
cancelled). Concurrent invocations of one ADK session share the run.
"""

from __future__ import annotations

import asyncio
import dataclasses

from goldfive_core.lifecycle import RunHandle
from goldfive_core.session import Session

__all__ = ["AdkRun"]


@dataclasses.dataclass(eq=False)
class AdkRun:
    """goldfive's state for one active ADK session."""

    adk_session_id: str
    handle: RunHandle
    """The run itself: its session, root task, open/close and final status."""
    session: Session = dataclasses.field(init=False)
    """The run's goldfive session (the handle's; a plain field: every callback reads it)."""
    invocations: dict[str, set[asyncio.Task[object]]] = dataclasses.field(default_factory=dict)
    """Invocation id → the agent tasks seen running it (watched so a cancelled invocation ends the run)."""
    expected: set[str] = dataclasses.field(default_factory=set)
    """Function call ids announced for an early decision and not yet requested."""
    aborted: bool = False
    """A client abort (``abort_signal``) or cancellation ended one of the invocations."""
    error: str = ""
    """Why an invocation failed (on_run_error_callback), if one did."""
    native_waiting: list[str] = dataclasses.field(default_factory=list)
    """Calls ADK's own confirmation flow asked the client about (no channel): the run ends waiting for a person."""
    detached: list[str] = dataclasses.field(default_factory=list)
    """Calls parked to wait for a person (``detach_after``): the run ends DETACHED and resumes when decided."""

    def __post_init__(self) -> None:
        self.session = self.handle.session

    @property
    def root_task_id(self) -> str:
        """The run's root task (the invocation that started it)."""
        return self.handle.root_task_id
