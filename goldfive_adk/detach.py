"""Resume detached ADK invocations when a person decides (``GoldfivePlugin(detach_after=...)``).

A plugin with ``detach_after`` ends an invocation that waits for a person the way ADK's own resumable
confirmation ends it, and records it in the store. A :class:`Resumer` runs in the app's process (next to
ADK's HTTP server, or any host of the App): it watches the store, and when a detached call's approval is
decided — from the ``goldfive`` command, the HTTP API or the inbox, in any process — it takes the store's
lease on it and resumes the invocation through ADK's resumability: the same invocation id, answering the
``adk_request_confirmation`` call the invocation ended with. The resumed call goes through the tool-call
gate again, whose ledger applies the decision recorded in the store (never the answer's ``confirmed``
flag) and runs the tool body at most once; the rest of the run's events land in the ADK session and in
goldfive's events.

At start-up it finds the invocations detached before a restart. Several processes may share one store:
the lease lets exactly one resume each call; a lease whose holder died lapses after ``resume_lease_s``.

With ADK's HTTP server::

    resumer = Resumer(app, session_service=SqliteSessionService(db_path="sessions.db"))
    api = get_fast_api_app(agents_dir=..., agent_loader=..., session_service_uri="sqlite:///sessions.db",
                           web=False, lifespan=resumer.lifespan)
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

from google.adk.apps import App
from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.session import Session as AdkSession
from google.genai import types

from goldfive_core._util import shorten
from goldfive_core.errors import GoldfiveError
from goldfive_core.store.base import DetachedRow, DetachedStatus, Store, StoreError
from goldfive_core.store.channel import StoreChannel

from ._asked import ASK_CONFIRMATION as _CONFIRMATION
from ._detach import RESUME_CLAIM, claim_token
from .plugin import _GoldfiveADKPlugin

__all__ = ["Resumed", "Resumer"]

logger = logging.getLogger(__name__)

_MAX_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True, kw_only=True)
class Resumed:
    """One resume this process ran."""

    target_id: str
    invocation_id: str
    session_id: str
    events: int
    error: str = ""


class Resumer:
    """Resumes the detached invocations of ``app`` in this process when their approvals are decided.

    ``session_service`` must reach the same ADK sessions as the server that ran them (e.g. the same
    SQLite file or database). The store is the plugin's (``GoldfivePlugin(control=StoreChannel(...))``).
    ``poll_interval_s`` bounds how long a decision waits to be noticed.
    """

    def __init__(
        self,
        app: App,
        *,
        session_service: BaseSessionService,
        poll_interval_s: float = 1.0,
        **runner_services: Any,
    ) -> None:
        plugin = next((p for p in app.plugins if isinstance(p, _GoldfiveADKPlugin)), None)
        if plugin is None or plugin.detach is None or not isinstance(plugin.control, StoreChannel):
            raise ValueError(
                f"app {app.name!r} has no GoldfivePlugin with detach_after and a StoreChannel; nothing to resume"
            )
        if app.resumability_config is None or not app.resumability_config.is_resumable:
            raise ValueError(f"app {app.name!r} is not resumable: add ResumabilityConfig(is_resumable=True)")
        if not poll_interval_s > 0:
            raise ValueError(f"poll_interval_s must be > 0, got {poll_interval_s!r}")
        self.app = app
        self.plugin = plugin
        self.store: Store = plugin.control.store
        self.session_service = session_service
        self.poll_interval_s = poll_interval_s
        self.runner = Runner(app=app, session_service=session_service, **runner_services)
        self.lease_ms = plugin.detach.lease_ms
        self.resumed: list[Resumed] = []
        self._failures: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None

    # -- one pass ----------------------------------------------------------------------------
    async def resume_ready(self) -> list[Resumed]:
        """Resume every detached invocation of this app whose approval is decided (or whose lease lapsed)."""
        done: list[Resumed] = []
        rows = await asyncio.to_thread(self.store.detached_runs, status=None, app_name=self.app.name)
        for row in rows:
            if self._failures.get(row.target_id, 0) >= _MAX_ATTEMPTS or not await self._ready(row):
                continue
            token = claim_token()
            won = await asyncio.to_thread(self.store.claim_detached, row.target_id, owner=token, lease_ms=self.lease_ms)
            if won:
                done.append(await self._resume(row, token))
        return done

    async def _ready(self, row: DetachedRow) -> bool:
        if row.status is DetachedStatus.RESUMED:
            return False
        now = await asyncio.to_thread(self.store.clock_ms)  # leases and expiry run on the store's clock
        if row.status is DetachedStatus.RESUMING:
            return row.lease_until_ms < now  # its holder died: take it over
        if await asyncio.to_thread(self.store.find_decision, row.target_id) is not None:
            return True
        approvals = await asyncio.to_thread(self.store.approvals_for, row.target_id)
        open_row = next((a for a in approvals if a.open), None)
        # Expired undecided: resume so the model hears "approval_timeout" instead of waiting forever.
        return open_row is not None and 0 < open_row.expires_at_ms <= now

    async def _resume(self, row: DetachedRow, token: str) -> Resumed:
        task = asyncio.create_task(self._drive(row, token), name=f"goldfive-resume-{row.target_id}")
        try:
            count = await task
        except Exception as exc:
            if isinstance(exc, Unresumable):
                logger.error("cannot resume %s (invocation %s): %s", row.target_id, row.invocation_id, exc)
                self._failures[row.target_id] = _MAX_ATTEMPTS
            else:
                logger.exception("resuming %s (invocation %s) failed", row.target_id, row.invocation_id)
                self._failures[row.target_id] = self._failures.get(row.target_id, 0) + 1
            with contextlib.suppress(StoreError):
                await asyncio.to_thread(self.store.settle_detached, row.target_id, owner=token, resumed=False)
            result = Resumed(
                target_id=row.target_id,
                invocation_id=row.invocation_id,
                session_id=row.session_id,
                events=0,
                error=shorten(repr(exc), 500),
            )
        else:
            # A resume that never reached the call (ADK paused it again) gives the lease back.
            gave_back = False
            with contextlib.suppress(StoreError):
                gave_back = await asyncio.to_thread(
                    self.store.settle_detached, row.target_id, owner=token, resumed=False
                )
            error = ""
            if gave_back:
                self._failures[row.target_id] = self._failures.get(row.target_id, 0) + 1
                error = "the resumed invocation did not reach the call"
                logger.warning("resuming %s: %s", row.target_id, error)
            result = Resumed(
                target_id=row.target_id,
                invocation_id=row.invocation_id,
                session_id=row.session_id,
                events=count,
                error=error,
            )
        self.resumed.append(result)
        return result

    async def _drive(self, row: DetachedRow, token: str) -> int:
        RESUME_CLAIM.set(token)  # this task's context only; ADK's agent tasks copy it
        session = await self.session_service.get_session(
            app_name=row.app_name, user_id=row.user_id, session_id=row.session_id
        )
        if session is None:
            raise LookupError(f"ADK session {row.session_id!r} of app {row.app_name!r} is gone")
        confirmation = _open_confirmation(session, row.target_id)
        if confirmation is not None:
            # ADK's resumable confirmation: answer its call; the runner finds the invocation from the id.
            answer = types.FunctionResponse(name=_CONFIRMATION, id=confirmation, response={"confirmed": True})
            stream = self.runner.run_async(
                user_id=row.user_id,
                session_id=row.session_id,
                new_message=types.Content(role="user", parts=[types.Part(function_response=answer)]),
            )
        else:
            # The process died before ADK stored the confirmation call: replay the unanswered call.
            stream = self.runner.run_async(
                user_id=row.user_id, session_id=row.session_id, invocation_id=row.invocation_id
            )
        count = 0
        async with contextlib.aclosing(stream) as events:
            async for _event in events:
                count += 1
        return count

    # -- running -------------------------------------------------------------------------------
    async def run(self) -> None:
        """Resume decided invocations until cancelled (look at start-up, then on every store change or poll)."""
        while True:
            try:
                await self.resume_ready()
            except StoreError as exc:
                logger.warning("store %s unavailable to the resumer; retrying: %s", self.store.url, exc)
            await asyncio.to_thread(self.store.wait_inbox, self.poll_interval_s)

    def start(self) -> asyncio.Task[None]:
        """Run :meth:`run` in a task on the running loop (once)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"goldfive-resumer-{self.app.name}")
        return self._task

    async def aclose(self) -> None:
        """Stop watching (a resume in progress is cancelled; its lease lapses and another process takes it)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: object) -> AsyncIterator[None]:
        """A FastAPI lifespan (``get_fast_api_app(..., lifespan=resumer.lifespan)``)."""
        self.start()
        try:
            yield
        finally:
            await self.aclose()


class Unresumable(GoldfiveError):
    """ADK cannot resume this invocation any more (the resumer stops trying)."""


def _open_confirmation(session: AdkSession, target_id: str) -> str | None:
    """The id of the newest ``adk_request_confirmation`` call for ``target_id``.

    A client may have answered it before anyone decided; goldfive refused that answer without a response
    for the call, so ADK still accepts a new answer. Raises :class:`Unresumable` when the call did get a
    response after the first answer (ADK then treats the confirmation as consumed and would not run it).
    """
    events = session.events
    for index in range(len(events) - 1, -1, -1):
        for call in events[index].get_function_calls():
            if call.name != _CONFIRMATION or not call.id:
                continue
            original = (call.args or {}).get("originalFunctionCall")
            if not isinstance(original, dict) or original.get("id") != target_id:
                continue
            answers = [j for j in range(index + 1, len(events)) if _answers(events[j], call.id, by_user=True)]
            if answers and any(_answers(e, target_id, by_user=False) for e in events[answers[0] + 1 :]):
                raise Unresumable(f"ADK's confirmation {call.id} of {target_id} was already consumed")
            return call.id
    return None


def _answers(event: Event, call_id: str, *, by_user: bool) -> bool:
    """Whether ``event`` (authored by the user, or by an agent) carries a response to ``call_id``."""
    if (event.author == "user") is not by_user:
        return False
    return any(r.id == call_id for r in event.get_function_responses())
