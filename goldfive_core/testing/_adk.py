"""A scripted ADK model: plays model turns from a script and records every request it was sent.

Needs the ``adk`` extra; imported only when ``goldfive_core.testing.ScriptedModel`` (or ``Call``,
``SeenRequest``) is first used.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from ..errors import MissingExtraError

try:
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.genai import types
    from pydantic import Field, PrivateAttr
except ImportError as exc:
    raise MissingExtraError("goldfive_core.testing.ScriptedModel", "adk") from exc

__all__ = ["Call", "ScriptedModel", "SeenRequest", "Turn"]

GUIDANCE_PREFIX = "[goldfive]"
"""Text goldfive adds to a model request (STEER text, nudges) starts with this; it is not the user speaking."""


@dataclasses.dataclass(frozen=True)
class Call:
    """One function call the scripted model makes: ``Call("transfer", {"amount": 10})``."""

    name: str
    args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    _: dataclasses.KW_ONLY
    id: str | None = None
    """The call id; ``None`` lets ADK assign one (``adk-<uuid>``), as for most real models."""


def _is_user_message(content: types.Content) -> bool:
    return content.role == "user" and any(
        p.text and not p.text.startswith(GUIDANCE_PREFIX) for p in content.parts or []
    )


@dataclasses.dataclass(frozen=True, kw_only=True)
class SeenRequest:
    """A model request as the scripted model read it.

    ``step`` counts the model turns since the user's latest message (0 for the first answer to it);
    goldfive's own notes (``[goldfive] ...``) do not count as the user speaking. The other views are
    computed when read, so a model that never looks at them costs nothing.
    """

    contents: list[types.Content]
    step: int
    user_index: int
    """Where the user's latest message is in ``contents`` (-1: none)."""

    @classmethod
    def of(cls, contents: Sequence[types.Content]) -> SeenRequest:
        """Read the contents of a request (``llm_request.contents``)."""
        step = 0
        for index in range(len(contents) - 1, -1, -1):
            content = contents[index]
            if _is_user_message(content):
                return cls(contents=list(contents), step=step, user_index=index)
            if content.role == "model":
                step += 1
        return cls(contents=list(contents), step=step, user_index=-1)

    @property
    def user_text(self) -> str:
        """The text of the user's latest message."""
        if self.user_index < 0:
            return ""
        return "\n".join(p.text for p in self.contents[self.user_index].parts or [] if p.text)

    @property
    def since_user(self) -> list[str]:
        """Text parts and function responses (as JSON) after the user's latest message, oldest first."""
        seen: list[str] = []
        for content in self.contents[self.user_index + 1 :]:
            for part in content.parts or []:
                if part.text:
                    seen.append(part.text)
                if part.function_response is not None:
                    seen.append(json.dumps(part.function_response.response, sort_keys=True, default=str))
        return seen

    @property
    def text(self) -> str:
        """Every text part of the request, joined by newlines (all the model read, as text)."""
        return "\n".join(p.text for c in self.contents for p in c.parts or [] if p.text)

    @property
    def function_responses(self) -> list[types.FunctionResponse]:
        """Every function response in the request, oldest first."""
        return [p.function_response for c in self.contents for p in c.parts or [] if p.function_response]

    @property
    def last_response(self) -> dict[str, Any] | None:
        """The newest function response's ``response`` dict, or ``None`` when no tool answered yet."""
        found = self.function_responses
        return dict(found[-1].response or {}) if found else None


Reply = str | Call | tuple[str, Mapping[str, Any]]
"""One part of a model turn: text, or a function call (``Call`` or a ``(name, args)`` pair)."""

Turn = Reply | Sequence[Reply] | Callable[[SeenRequest], Any]
"""One model turn: a reply, several (parallel calls, text + call), or a function of the request returning those."""


def _part(reply: Any) -> types.Part:
    if isinstance(reply, str):
        return types.Part(text=reply)
    if isinstance(reply, Call):
        return types.Part(function_call=types.FunctionCall(name=reply.name, args=dict(reply.args), id=reply.id))
    if isinstance(reply, tuple) and len(reply) == 2 and isinstance(reply[0], str) and isinstance(reply[1], Mapping):
        return types.Part(function_call=types.FunctionCall(name=reply[0], args=dict(reply[1])))
    raise TypeError(f"a scripted reply is text, a Call or a (name, args) pair; got {reply!r}")


def _parts(turn: Any, seen: SeenRequest) -> list[types.Part]:
    if callable(turn):
        turn = turn(seen)
    if isinstance(turn, str | Call) or (isinstance(turn, tuple) and len(turn) == 2 and isinstance(turn[1], Mapping)):
        return [_part(turn)]
    if isinstance(turn, Sequence):
        return [_part(reply) for reply in turn]
    raise TypeError(f"a scripted turn is a reply, a list of replies or a function of the request; got {turn!r}")


def _done(seen: SeenRequest) -> str:
    return f"done after {seen.step} turns"


class ScriptedModel(BaseLlm):
    """An offline ADK model (a real ``BaseLlm``) that plays ``turns`` and records what it was sent.

    Turn ``step`` answers the request whose :attr:`SeenRequest.step` is ``step`` — the model turns
    since the user's latest message — so one instance serves concurrent sessions and resumed
    invocations without state. After the script, ``then`` answers (default: the text
    ``"done after N turns"``). A turn is text, a :class:`Call` / ``(name, args)`` pair, a list of
    those (parallel calls, or text and a call), or a function of the :class:`SeenRequest`::

        model = ScriptedModel([Call("transfer", {"amount": 10}),
                               lambda seen: f"the bank said {seen.last_response}"])
        agent = LlmAgent(name="teller", model=model, tools=[FunctionTool(transfer, require_confirmation=True)])
        ...
        assert "user_rejected" in model.requests[-1].text

    ``ScriptedModel(then=fn)`` with no turns is a model that answers every request by rule.
    ``requests`` holds a :class:`SeenRequest` per call (copies of the contents; ``record=False``
    keeps none, for benchmarks). Responses carry token usage so ADK logs no warning.
    """

    model: str = "scripted"
    turns: list[Any] = Field(default_factory=list)
    then: Any = _done
    record: bool = True
    _requests: list[SeenRequest] = PrivateAttr(default_factory=list)

    def __init__(self, turns: Sequence[Turn] | None = None, /, **data: Any) -> None:
        if turns is not None:
            if "turns" in data:
                raise TypeError("ScriptedModel got turns twice (positionally and as turns=)")
            data["turns"] = list(turns)
        super().__init__(**data)

    @property
    def requests(self) -> list[SeenRequest]:
        """Every request the model was sent, oldest first."""
        return self._requests

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """Answer with the scripted turn for this request."""
        contents = llm_request.contents
        if self.record:  # only the contents: the rest (tools, config) holds live objects that do not copy
            contents = [c.model_copy(deep=True) for c in contents]
        seen = SeenRequest.of(contents)
        if self.record:
            self._requests.append(seen)
        turn = self.turns[seen.step] if seen.step < len(self.turns) else self.then
        yield LlmResponse(
            content=types.Content(role="model", parts=_parts(turn, seen)),
            usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=1, candidates_token_count=1),
        )
