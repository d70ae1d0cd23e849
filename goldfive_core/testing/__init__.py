"""goldfive_core.testing: test your own approval flows offline, with the pieces goldfive's tests use.

* :class:`AwaitableSink` — an event sink you can await (``await sink.first("approval_requested")``),
  so a test is ordered by what the run emitted, never by sleeps.
* :class:`ScriptedReviewer` — a stand-in for the person: it sees each ``ApprovalRequested`` (it is a
  sink) and answers by :class:`ReviewRule` — :class:`Approve`, :class:`Edit`, :class:`Reject` or
  :class:`LetTimeOut` — through any control transport (``ControlChannel``, ``StoreChannel``).
* :class:`ScriptedVerdicts` — a policy rule's reviewer (``Ask(review=RuleReviewer(target=...))``) that
  answers from a script (verdicts, exceptions, :class:`NeverAnswer`, junk) and records what it was given
  (:class:`ReviewSeen`). Not to be confused with :class:`ScriptedReviewer`, the person stand-in.
* :class:`ScriptedModel` — an offline Google ADK model (a real ``BaseLlm``) that plays scripted turns
  (text, :class:`Call`) and records every request (:class:`SeenRequest`), so a test can check what
  the model was told. Needs ``pip install 'goldfive[adk]'``; ADK is imported only when it is first
  used, so ``import goldfive_core.testing`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._reviewer import (
    Action,
    Approve,
    Edit,
    LetTimeOut,
    Reject,
    Review,
    ReviewRequest,
    ReviewRule,
    ScriptedReviewer,
    Transport,
)
from ._sink import AwaitableSink
from ._verdicts import NeverAnswer, ReviewSeen, ScriptedVerdicts

if TYPE_CHECKING:
    from ._adk import Call, ScriptedModel, SeenRequest, Turn

__all__ = [
    "Action",
    "Approve",
    "AwaitableSink",
    "Call",
    "Edit",
    "LetTimeOut",
    "NeverAnswer",
    "Reject",
    "Review",
    "ReviewRequest",
    "ReviewRule",
    "ReviewSeen",
    "ScriptedModel",
    "ScriptedReviewer",
    "ScriptedVerdicts",
    "SeenRequest",
    "Transport",
    "Turn",
]

_ADK_NAMES = frozenset({"Call", "ScriptedModel", "SeenRequest", "Turn"})


def __getattr__(name: str) -> Any:
    # The ADK pieces import google.adk (seconds, and an extra); load them on first use only.
    if name in _ADK_NAMES:
        from . import _adk

        return getattr(_adk, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
