"""Runner: run an agent under a Session, with the control channel routed to it.

``wrap()`` (which also takes a plain callable) lives with the callable adapter,
:mod:`goldfive_core.adapters.callable`, so the core never imports an adapter.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import warnings
from typing import TYPE_CHECKING, Any, Unpack

from .errors import ConfigError
from .lifecycle import RunResult, RunStatus, SessionSetup, SteererFactoryAlias
from .session import Session, Steerer
from .supervision import RunOptions, Supervised, Supervision
from .tasks import Task, TaskStatus

if TYPE_CHECKING:
    pass

__all__ = ["Adapter", "RunResult", "RunStatus", "Runner", "SessionSetup"]

logger = logging.getLogger(__name__)


class Adapter(abc.ABC):
    """Drives one kind of agent inside a goldfive Session."""

    name: str = "adapter"

    app_name: str = ""
    """The host's stable name for its app (:attr:`Session.app_name <goldfive_core.session.Session.app_name>`): a store
    process with no ``GOLDFIVE_AGENT_ID`` keeps its runs' approved calls in its ledger ("": the shared one)."""

    supports_reinvoke: bool = False
    """Whether the Runner may cancel :meth:`run` and call it again (ladder level 3, CANCEL_REINVOKE).

    Only for agents that pick up where they were from the session (its tasks
    and queued guidance); others get the corrective note but keep running.
    """

    @abc.abstractmethod
    async def run(self, session: Session, task: Task) -> Any:
        """Run the agent on ``task`` and return its output."""


def __getattr__(name: str) -> Any:
    if name == "SteererFactory":  # the old name of SessionSetup
        warnings.warn(
            "goldfive_core.runner.SteererFactory is deprecated; "
            "use goldfive_core.lifecycle.SessionSetup (the same type)",
            DeprecationWarning,
            stacklevel=2,
        )
        return SessionSetup
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Runner(Supervised):
    """Runs an adapter's agent, one Session per ``run()``; several runs may share the runner.

    ``session_setup`` sets up each run's session (see :data:`~goldfive_core.lifecycle.SessionSetup`). The
    channel, sinks, config, policy, labels and set-up are the runner's :class:`~goldfive_core.supervision.Supervision`.
    ``app_name`` names each run's app (default: the adapter's :attr:`Adapter.app_name`).
    """

    steerer_factory = SteererFactoryAlias()
    """Deprecated: the old name of :attr:`session_setup`."""

    def __init__(
        self,
        adapter: Adapter,
        *,
        app_name: str | None = None,
        **options: Unpack[RunOptions],
    ) -> None:
        self.adapter = adapter
        if app_name is not None and not isinstance(app_name, str):
            raise ConfigError(f"app_name must be a string, got {type(app_name).__name__}")
        self.app_name = adapter.app_name if app_name is None else app_name
        """Each run's :attr:`Session.app_name <goldfive_core.session.Session.app_name>` (its default ledger)."""
        self.supervision = Supervision(**options)
        self._last: Session | None = None

    @property
    def session(self) -> Session | None:
        """The session of the latest run (live while it runs)."""
        return self._last

    @property
    def steerer(self) -> Steerer | None:
        """The steerer of the latest run (``await runner.steerer.handle_drift(Drift(...))`` feeds it drift)."""
        return self._last.steerer if self._last is not None else None

    async def run(self, input: object = None, *, task_id: str | None = None, title: str = "") -> RunResult:
        """Run the agent once and return how it ended. Cancelling this call cancels the agent."""
        handle = self.supervision.new_run(
            adapter=self.adapter.name, root_task_id=task_id, title=title or "run", input=input, app_name=self.app_name
        )
        session = handle.session
        self._last = session
        root = handle.root
        handle.open()
        agent = asyncio.create_task(self._drive(session, root), name=f"goldfive-{session.run_id}")

        def stop_agent(_reason: str) -> None:
            agent.cancel()

        session.on_cancel(stop_agent)
        try:
            await asyncio.wait({agent})
        except asyncio.CancelledError:
            # Withdraw open approvals (announced once) and stop the agent, then tell observers how the
            # run ended before the caller's cancellation propagates.
            session.cancel("the caller cancelled the run")
            agent.cancel()
            try:
                await asyncio.wait({agent})
            finally:
                if agent.done() and not agent.cancelled():
                    agent.exception()  # retrieved on purpose: the caller's cancellation is what propagates
                handle.close()
            raise
        if agent.cancelled():
            return handle.close(cancelled="cancelled")
        error = agent.exception()
        if error is not None:
            result = handle.close(error=error)
            if result.error is not None:
                logger.error("agent of run %s raised", session.run_id, exc_info=error)
            return result
        failed = "the root task failed" if root.status is TaskStatus.FAILED else ""
        return handle.close(failed=failed, output=agent.result())

    async def _drive(self, session: Session, root: Task) -> Any:
        await session.gate()
        if not self.adapter.supports_reinvoke:
            return await self.adapter.run(session, root)
        reinvokes = 0
        while True:
            step = asyncio.create_task(self.adapter.run(session, root), name=f"goldfive-step-{session.run_id}")
            requested = False

            def reinvoke(reason: str, step: asyncio.Task[Any] = step) -> bool:
                nonlocal requested, reinvokes
                if requested:  # a second level-3 drift in the same step: already on its way
                    return True
                if step.done() or reinvokes >= self.config.max_reinvokes:
                    return False
                requested = True
                reinvokes += 1
                logger.info(
                    "run %s: cancelling the agent to re-invoke it (%d/%d): %s",
                    session.run_id,
                    reinvokes,
                    self.config.max_reinvokes,
                    reason,
                )
                step.cancel()
                return True

            session.set_reinvoke_handler(reinvoke)
            try:
                return await step
            except asyncio.CancelledError:
                this = asyncio.current_task()
                if not requested or (this is not None and this.cancelling()):
                    raise  # the run itself is being cancelled
            finally:
                session.set_reinvoke_handler(None)
            await session.gate()  # a re-invocation is a step boundary too
