"""A scripted reviewer tier: a policy rule's reviewer that answers from a script and records what it was given."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..review import ReviewContext, ReviewVerdict

if TYPE_CHECKING:
    from ..policy import Rule
    from ..toolcall import ToolCall

__all__ = ["NeverAnswer", "ReviewSeen", "ScriptedVerdicts"]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class ReviewSeen:
    """One call the scripted reviewer was given, with its context and rule."""

    call: ToolCall
    context: ReviewContext
    rule: Rule


class NeverAnswer:
    """A script step that never answers (the rule's ``review_timeout`` runs out: a person decides)."""


Step = ReviewVerdict | BaseException | NeverAnswer | Callable[[ReviewSeen], Any] | Any
"""One answer: a verdict, an exception to raise, :class:`NeverAnswer`, a function of what was seen, or any
other value (a reviewer returning junk)."""


class ScriptedVerdicts:
    """A reviewer (``review = ...`` of a rule) for tests: plays ``script`` in order, then ``then``; records each call.

    ::

        reviewer = ScriptedVerdicts([ReviewVerdict.allow("small"), ReviewVerdict.deny("too big")])
        rule = Rule(name="refunds", tool="refund", action=Ask(review=RuleReviewer(target=reviewer)))
        ...  # run the agent
        assert [seen.call.args["amount"] for seen in reviewer.seen] == [5, 5000]

    A step may be an exception (raised), :class:`NeverAnswer` (a hang), a function of the
    :class:`ReviewSeen`, or any other value (returned as it is: junk the gate must not take as an allow).
    """

    def __init__(self, script: Sequence[Step] = (), *, then: Step = None, name: str = "scripted") -> None:
        self.script = list(script)
        self.then = ReviewVerdict.ask("the script has ended") if then is None else then
        self.name = name
        self.seen: list[ReviewSeen] = []
        """Every call given to the reviewer, in order."""

    async def __call__(self, call: ToolCall, context: ReviewContext, rule: Rule) -> Any:
        """Record the call and play the next step."""
        seen = ReviewSeen(call=call, context=context, rule=rule)
        index = len(self.seen)
        self.seen.append(seen)
        step = self.script[index] if index < len(self.script) else self.then
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, NeverAnswer):
            await asyncio.Event().wait()  # the gate's timeout cancels this wait
        if callable(step) and not isinstance(step, ReviewVerdict):
            return step(seen)
        return step
