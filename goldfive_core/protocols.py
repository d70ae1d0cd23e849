"""What plugs into a run: a :class:`Detector` watches its steps, a :class:`Steerer` acts on drift.

Kept apart from :mod:`goldfive_core.session` so that detectors and steerers
(and the built-in ones in :mod:`goldfive_core.detectors` and
:mod:`goldfive_core.steering`) need the session only as a type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from .drift import Drift, InterventionLevel

if TYPE_CHECKING:
    from .session import Session

__all__ = ["Detector", "Steerer"]


class Steerer(Protocol):
    """Decides what a drift leads to (the intervention ladder lives behind this)."""

    async def handle_drift(self, drift: Drift) -> InterventionLevel:
        """Act on one drift and return the level applied."""


class Detector:
    """Watches a run's steps and reports drift. Subclass and override what you watch.

    Adapters call the ``Session.observe_*`` methods at their step boundaries;
    the session asks every detector and routes what they report through
    :meth:`Session.handle_drift`.
    """

    def on_tool_call(self, session: Session, tool_name: str, args: Mapping[str, Any]) -> Drift | None:
        """A tool is about to run."""
        return None

    def on_model_call(self, session: Session) -> Drift | None:
        """The model is about to be called (one agent step)."""
        return None

    def on_transfer(self, session: Session, to_agent: str) -> Drift | None:
        """Control is being handed to another agent."""
        return None
