"""``detach_after``: park a call that waits for a person, and take it up again when it is resumed.

The tool-call gate decides; this module only moves a call in and out of the store. A call the gate
skipped as ``awaiting_approval`` is *parked*: recorded in ``gf_detached`` and handed to ADK as its own
resumable confirmation (``tool_context.request_confirmation``), so the invocation ends and the client's
request finishes. It comes back when someone answers that confirmation — the
:class:`~goldfive_adk.detach.Resumer` once a person decided, or a client posting the answer itself. A
resume must first hold the store's lease on the call (:meth:`~goldfive_core.store.base.Store.claim_detached`):
one resume runs the call through the gate (whose ledger applies the recorded decision and runs the body at
most once); any other waits for it and then gets the gate's answer for a settled call. The Resumer takes
the lease before it starts the invocation and passes its token in :data:`RESUME_CLAIM` (a context
variable: ADK runs the agent in tasks that copy the caller's context, and nobody else can set it in ours).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import math
import os
import time
from typing import Any

from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext

from goldfive_core._util import new_id
from goldfive_core.errors import GoldfiveError
from goldfive_core.store.base import HOST, DetachedRow, DetachedStatus, Store, StoreError

from ._confirm import skip

__all__ = [
    "RESUME_CLAIM",
    "DecisionPendingError",
    "DetachSettings",
    "Parking",
    "Resume",
    "claim_token",
    "waiting_info",
]

logger = logging.getLogger(__name__)

RESUME_CLAIM: contextvars.ContextVar[str | None] = contextvars.ContextVar("goldfive_resume_claim", default=None)
"""The lease token of the resume this task runs (set by the Resumer around ``run_async``)."""


class DecisionPendingError(GoldfiveError):
    """A parked call was answered through ADK before it could be taken up (nobody decided it yet).

    Raised from ``before_tool_callback`` on purpose: ADK then ends that request with an error event and
    records no response for the call, so the invocation stays resumable and the Resumer answers the same
    confirmation when the decision arrives. Any response (even "still waiting") would consume ADK's
    confirmation for good.
    """

    def __init__(self, message: str, *, target_id: str) -> None:
        super().__init__(message)
        self.target_id = target_id


def claim_token() -> str:
    """A fresh lease token naming this process."""
    return f"{HOST}:{os.getpid()}:{new_id('resume')}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class DetachSettings:
    """How the plugin detaches (see ``GoldfivePlugin(detach_after=...)``)."""

    after_s: float
    inbox_url: str = ""
    lease_s: float = 300.0
    """How long a resume may hold a call before another process may take it over."""
    poll_s: float = 0.2
    """How often a resume that lost the lease looks whether the winner finished."""

    def __post_init__(self) -> None:
        if (
            isinstance(self.after_s, bool)
            or not isinstance(self.after_s, int | float)
            or not math.isfinite(self.after_s)
        ):
            raise ValueError(f"detach_after must be a number of seconds >= 0, got {self.after_s!r}")
        if self.after_s < 0:
            raise ValueError(f"detach_after must be >= 0 (0 = never hold the request), got {self.after_s!r}")
        if isinstance(self.lease_s, bool) or not isinstance(self.lease_s, int | float) or not 0 < self.lease_s < 1e9:
            raise ValueError(f"resume_lease_s must be a number of seconds > 0, got {self.lease_s!r}")

    @property
    def lease_ms(self) -> int:
        return int(self.lease_s * 1000)

    def link(self, approval_id: str) -> str:
        """The inbox link for an approval (``inbox_url`` with ``{approval_id}`` filled in, else "")."""
        if not self.inbox_url:
            return ""
        if "{approval_id}" in self.inbox_url:
            return self.inbox_url.replace("{approval_id}", approval_id)
        return self.inbox_url


def waiting_info(settings: DetachSettings, *, approval_id: str, run_id: str, tool_name: str) -> dict[str, Any]:
    """What the client is told when the invocation ends to wait for a person (JSON-able)."""
    info: dict[str, Any] = {
        "status": "waiting_for_person",
        "approval_id": approval_id,
        "run_id": run_id,
        "tool_name": tool_name,
        "decide": f"goldfive approve {approval_id}  |  goldfive reject {approval_id} --reason ...",
        "resumes": "by itself when a person decides",
    }
    link = settings.link(approval_id)
    if link:
        info["inbox"] = link
    return info


@dataclasses.dataclass(frozen=True, kw_only=True)
class Resume:
    """A parked call being taken up in this invocation."""

    row: DetachedRow
    token: str
    """The lease this resume holds ("" = another resume settled the call; only the gate's answer is given)."""
    expired_ms: int | None = None
    """Nobody decided and the request expired (its timeout in ms): the model hears the timeout."""


class Parking:
    """Parks calls in the store and hands parked ones back to the gate, one resume at a time."""

    def __init__(self, settings: DetachSettings, store: Store) -> None:
        self.settings = settings
        self.store = store

    async def park(self, tool: BaseTool, tool_context: ToolContext, *, call_id: str, run_id: str) -> dict[str, Any]:
        """Record the call as detached and end the invocation with ADK's confirmation naming the approval.

        Returns the placeholder response the call gets now; fails closed (the call was not made, nothing
        is parked) when the store cannot record it.
        """
        try:
            await asyncio.to_thread(
                self.store.record_detached,
                call_id,
                run_id=run_id,
                app_name=tool_context.session.app_name,
                user_id=tool_context.user_id,
                session_id=tool_context.session.id,
                invocation_id=tool_context.invocation_id,
                detail=f"{tool.name} waits for a person",
            )
        except StoreError as exc:
            logger.error("could not park call %s: %s", call_id, exc)
            return skip(
                tool.name,
                "approval_error",
                f"the request could not be parked in the store ({exc}); the call was not made",
            )
        info = waiting_info(self.settings, approval_id=call_id, run_id=run_id, tool_name=tool.name)
        hint = f"goldfive: {tool.name} waits for a person (approval {call_id}); the run resumes when decided"
        if "inbox" in info:
            hint += f": {info['inbox']}"
        tool_context.request_confirmation(hint=hint, payload={"goldfive": info})
        return skip(tool.name, "awaiting_approval", hint, goldfive=info)

    async def take_up(self, tool_context: ToolContext, *, call_id: str, tool_name: str) -> Resume | None:
        """A parked call comes back: hold its lease (or wait for the resume that holds it).

        None: ``call_id`` is not a parked call (the plugin goes on as usual). Raises
        :class:`DecisionPendingError` when nobody decided it yet (the confirmation stays open).
        """
        try:
            return await self._take_up(call_id, tool_name)
        except StoreError as exc:  # fail closed, and keep ADK's confirmation open for a later answer
            raise DecisionPendingError(
                f"the store cannot be reached ({exc}); nothing ran for {call_id}", target_id=call_id
            ) from exc

    async def _take_up(self, call_id: str, tool_name: str) -> Resume | None:
        row = await asyncio.to_thread(self.store.detached, call_id)
        if row is None:
            return None
        token = RESUME_CLAIM.get()
        if token is not None and row.claimed_by == token and row.status is DetachedStatus.RESUMING:
            return await self._with_lease(row, token, tool_name)
        deadline = time.monotonic() + 2 * self.settings.lease_s
        while True:
            if row.status is DetachedStatus.RESUMED:
                return Resume(row=row, token="")
            token = claim_token()
            if await asyncio.to_thread(
                self.store.claim_detached, call_id, owner=token, lease_ms=self.settings.lease_ms
            ):
                return await self._with_lease(row, token, tool_name)
            if time.monotonic() > deadline:
                raise DecisionPendingError(
                    f"another process is resuming {call_id} ({row.claimed_by}) and has not finished; "
                    "read the session for its outcome",
                    target_id=call_id,
                )
            await asyncio.sleep(self.settings.poll_s)  # another resume holds it: wait for its outcome
            fresh = await asyncio.to_thread(self.store.detached, call_id)
            if fresh is None:
                return None
            row = fresh

    async def _with_lease(self, row: DetachedRow, token: str, tool_name: str) -> Resume:
        call_id = row.target_id
        if await asyncio.to_thread(self.store.find_decision, call_id) is not None:
            return Resume(row=row, token=token)
        expired = await self._expired(call_id)
        if expired is not None:
            return Resume(row=row, token=token, expired_ms=expired)
        await self.release(call_id, token)
        link = self.settings.link(call_id)
        raise DecisionPendingError(
            f"approval {call_id} ({tool_name}) is not decided yet; nothing ran. The run resumes by itself when a "
            "person decides" + (f": {link}" if link else f" (goldfive approve {call_id})"),
            target_id=call_id,
        )

    async def _expired(self, call_id: str) -> int | None:
        """The request's timeout in ms when it expired undecided (by the store's clock), else None."""
        rows = await asyncio.to_thread(self.store.approvals_for, call_id)
        row = next((r for r in rows if r.open), None)
        if row is None or not row.expires_at_ms:
            return None
        if row.expires_at_ms > await asyncio.to_thread(self.store.clock_ms):
            return None
        return row.timeout_ms or 0

    async def release(self, call_id: str, token: str) -> None:
        """Give the lease back: the call waits again."""
        try:
            await asyncio.to_thread(self.store.settle_detached, call_id, owner=token, resumed=False)
        except StoreError as exc:  # the lease lapses; the Resumer takes it over then
            logger.warning("could not give back the lease on %s: %s", call_id, exc)

    async def settle(self, call_id: str, token: str, detail: str) -> None:
        """The resume is over: the call is RESUMED (its outcome is in the ledger or the decision)."""
        if not token:
            return
        try:
            await asyncio.to_thread(self.store.settle_detached, call_id, owner=token, resumed=True, detail=detail)
        except StoreError as exc:  # the lease lapses; a later resume finds the ledger / decision settled
            logger.warning("could not mark detached call %s resumed: %s", call_id, exc)
