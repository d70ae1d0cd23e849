"""What a reviewer is given and what it returns: small frozen values."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from ..policy import Rule
    from ..toolcall import ToolCall

__all__ = ["MAX_REASON_CHARS", "ReviewContext", "ReviewVerdict", "Reviewer"]

MAX_REASON_CHARS = 1000
"""A reviewer's reason is clipped to this (it reaches the model and the approver's card)."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ReviewVerdict:
    """A reviewer's answer: ``allow`` (the call runs), ``deny`` (it does not; the model reads ``reason``) or
    ``ask`` (a person decides, and sees ``reason`` on the card)."""

    action: Literal["allow", "deny", "ask"]
    reason: str = ""

    def __post_init__(self) -> None:
        if self.action not in ("allow", "deny", "ask"):
            raise ValueError(f"a review verdict is 'allow', 'deny' or 'ask', got {self.action!r}")
        if not isinstance(self.reason, str):
            raise ValueError(f"a review verdict's reason is a string, got {type(self.reason).__name__}")

    @classmethod
    def allow(cls, reason: str = "") -> ReviewVerdict:
        """Let the call run without a person."""
        return cls(action="allow", reason=reason)

    @classmethod
    def deny(cls, reason: str) -> ReviewVerdict:
        """Refuse the call; the model reads ``reason``."""
        return cls(action="deny", reason=reason)

    @classmethod
    def ask(cls, reason: str = "") -> ReviewVerdict:
        """Send the call on to a person, with ``reason`` on the card."""
        return cls(action="ask", reason=reason)


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ReviewContext:
    """Where the call comes from: its run, agent and task, and what the host put on the call."""

    run_id: str
    session_id: str = ""
    agent: str = ""
    task_id: str = ""
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    started_by: str = ""
    """Who started the run."""
    prompt: str = ""
    """What a person would be asked."""
    host: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """What the host has about the call (the adapter's metadata on it: agent name, tool description, ...)."""
    args_schema: Mapping[str, Any] | None = None
    """The tool's parameters as JSON Schema, when the host knows them."""


class Reviewer(Protocol):
    """A reviewer: given the call (a copy: changing it changes nothing), its context and the rule; sync or async."""

    def __call__(self, call: ToolCall, context: ReviewContext, rule: Rule) -> ReviewVerdict | Awaitable[ReviewVerdict]:
        """Judge one call."""
        ...
