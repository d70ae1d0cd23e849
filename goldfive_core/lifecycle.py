"""How a run starts and ends, the same for every adapter: :class:`RunHandle`.

A :class:`RunHandle` is what every adapter (``Runner`` for callable agents, the
ADK plugin, the Claude adapter) holds for one run: it builds the run's
:class:`Session`, calls the set-up (steerer and detectors), opens the run,
decides how it ended (:meth:`RunHandle.close`, one order for every host) and
closes it. Beneath it:

``open_run`` attaches the session to its router (messages sent before the
run, such as a PAUSE, apply now), emits RunStarted and starts the root task.
``close_run`` settles the tasks, withdraws open approvals and emits the run's
last event (RunCompleted or RunAborted), then detaches the session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import warnings
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, cast

from ._util import new_id, shorten
from .errors import RunCancelledError, RunTerminatedError
from .pb.v1 import events_pb2, types_pb2
from .routing import ControlRouter
from .run_state import RunState
from .session import Session
from .tasks import TaskStatus

if TYPE_CHECKING:
    from .config import SteeringConfig
    from .control import ControlTransport
    from .events import EventSink
    from .policy import Policy
    from .protocols import Steerer

__all__ = [
    "RunHandle",
    "RunOwner",
    "RunResult",
    "RunStatus",
    "SessionSetup",
    "close_run",
    "open_run",
    "stopped_status",
]


class RunStatus(StrEnum):
    """How a run ended."""

    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    ABORTED = "ABORTED"
    DETACHED = "DETACHED"
    """The invocation ended to wait for a person; it resumes (as a new run) when decided."""


_PB_RUN_STATUS = {
    RunStatus.COMPLETED: types_pb2.RUN_STATUS_COMPLETED,
    RunStatus.FAILED: types_pb2.RUN_STATUS_FAILED,
    RunStatus.CANCELLED: types_pb2.RUN_STATUS_CANCELLED,
    RunStatus.ABORTED: types_pb2.RUN_STATUS_ABORTED,
    RunStatus.DETACHED: types_pb2.RUN_STATUS_DETACHED,
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunResult:
    """How a run ended (``await runner.run(input)`` returns it; ``ClaudeRun.result`` holds it)."""

    run_id: str
    status: RunStatus
    root_task_id: str
    output: Any = None
    reason: str = ""
    error: BaseException | None = None
    tasks: Mapping[str, TaskStatus] = dataclasses.field(default_factory=dict)


SessionSetup = Callable[[Session, "ControlTransport | None"], object]
"""Called with each new session and the control channel (e.g. :func:`~goldfive_core.steering.install_default_steering`).

It may give the session a steerer and detectors itself (``session.set_steerer``, ``session.add_detectors``);
a steerer it returns becomes the run's steerer. Every adapter takes it as ``session_setup``
(``Runner``, ``wrap()``, ``GoldfivePlugin``, ``GoldfiveClaude``); None installs nothing (drift is only emitted).
``goldfive_core.runner.SteererFactory`` and the ``steerer_factory`` attribute are its deprecated old names.
"""


class SteererFactoryAlias:
    """``steerer_factory``, the deprecated old name of an adapter's ``session_setup``: reads and writes go to
    ``session_setup``, with a DeprecationWarning."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._where = f"{owner.__name__}.{name}"

    def _warn(self) -> None:
        warnings.warn(
            f"{self._where} is deprecated; use session_setup (the same callable)", DeprecationWarning, stacklevel=3
        )

    def __get__(self, obj: object, objtype: type | None = None) -> SessionSetup | None:
        if obj is None:
            return self  # type: ignore[return-value]  # the class attribute: the alias itself
        self._warn()
        setup: SessionSetup | None = getattr(obj, "session_setup")  # noqa: B009 (the owner's attribute)
        return setup

    def __set__(self, obj: object, value: SessionSetup | None) -> None:
        self._warn()
        setattr(obj, "session_setup", value)  # noqa: B010


class RunOwner(Protocol):
    """What a run is built from: the adapter's channel, sinks, config, policy, labels and router."""

    @property
    def control(self) -> ControlTransport | None: ...
    @property
    def sinks(self) -> Iterable[EventSink]: ...
    @property
    def config(self) -> SteeringConfig: ...
    @property
    def policy(self) -> Policy | None: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def router(self) -> ControlRouter: ...


_CANCELLED = (asyncio.CancelledError, RunCancelledError, RunTerminatedError)


class RunHandle:
    """One run of any adapter: its session, set-up, open/close and final status.

    ``owner``: the adapter object holding the channel, sinks, config, policy, labels and router.
    ``setup``: called with the new session (steerer and detectors); None installs nothing.
    ``root_task_id`` (default a new ``task-…`` id), ``title`` and ``input`` describe the root task;
    ``adapter`` names the host in RunStarted; ``on_behalf_of`` (whom the host says the run serves) and
    ``records_steps`` (the adapter records its host's steps, :mod:`goldfive_core.steps`) go there too;
    ``app_name``: the host's stable name for its app (the session's, see :attr:`Session.app_name`).
    """

    def __init__(
        self,
        owner: RunOwner,
        *,
        adapter: str,
        setup: SessionSetup | None,
        root_task_id: str | None = None,
        title: str = "run",
        input: object = None,
        session_id: str = "",
        on_behalf_of: str = "",
        records_steps: bool = False,
        app_name: str = "",
    ) -> None:
        self.router = owner.router
        self.adapter = adapter
        self.input = input
        self.on_behalf_of = on_behalf_of
        self.records_steps = records_steps
        self.session = Session(
            session_id=session_id,
            sinks=owner.sinks,
            config=owner.config,
            has_channel=owner.control is not None,
            policy=owner.policy,
            labels=owner.labels,
            app_name=app_name,
        )
        if setup is not None:
            steerer = setup(self.session, owner.control)
            if steerer is not None:
                self.session.set_steerer(cast("Steerer", steerer))
        self.root = self.session.tasks.add(root_task_id or new_id("task"), title=title, input=input)
        """The run's root task (the reporting tools default to it)."""
        self.result: RunResult | None = None
        """How the run ended, once :meth:`close` ran."""

    @property
    def root_task_id(self) -> str:
        """The root task's id."""
        return self.root.id

    def open(self) -> None:
        """Attach the session to the router (waiting messages apply now), emit RunStarted, start the root task."""
        open_run(
            self.session,
            self.router,
            root_task_id=self.root_task_id,
            input=self.input,
            adapter=self.adapter,
            on_behalf_of=self.on_behalf_of,
            records_steps=self.records_steps,
        )

    def close(
        self,
        *,
        error: BaseException | None = None,
        failed: str = "",
        cancelled: str = "",
        detached: str = "",
        output: Any = None,
        summary: str = "",
    ) -> RunResult:
        """Decide how the run ended, emit its last event and detach it; a second call returns the first result.

        One order for every host: a stop by a person or the ladder (the session's state) — then the
        host's ``error`` (a cancellation → CANCELLED, anything else → FAILED) — then ``failed`` (the host
        says the run failed, e.g. the root task failed) — then ``cancelled`` (the client aborted) — then
        ``detached`` (the run ended to wait for a person) — else COMPLETED.
        """
        if self.result is not None:
            return self.result
        status, reason = self.final_status(error=error, failed=failed, cancelled=cancelled, detached=detached)
        tasks = close_run(
            self.session, self.router, status, root_task_id=self.root_task_id, reason=reason, summary=summary
        )
        self.result = RunResult(
            run_id=self.session.run_id,
            status=status,
            root_task_id=self.root_task_id,
            output=output,
            reason=reason,
            error=error if status is RunStatus.FAILED else None,
            tasks=tasks,
        )
        return self.result

    def final_status(
        self, *, error: BaseException | None = None, failed: str = "", cancelled: str = "", detached: str = ""
    ) -> tuple[RunStatus, str]:
        """The status :meth:`close` would give, with its reason (see there for the order)."""
        stopped = stopped_status(self.session)
        if stopped is not None:
            return stopped
        if isinstance(error, _CANCELLED):
            return RunStatus.CANCELLED, "cancelled"
        if error is not None:
            return RunStatus.FAILED, f"the agent raised {error!r}"
        if failed:
            return RunStatus.FAILED, failed
        if cancelled:
            return RunStatus.CANCELLED, cancelled
        if detached:
            return RunStatus.DETACHED, detached
        return RunStatus.COMPLETED, ""


def open_run(
    session: Session,
    router: ControlRouter,
    *,
    root_task_id: str,
    input: object,
    adapter: str,
    on_behalf_of: str = "",
    records_steps: bool = False,
) -> None:
    """Attach ``session`` to ``router``, emit RunStarted and start the root task (already added to the board)."""
    router.attach(session)
    session.events.emit(
        events_pb2.RunStarted(
            input=shorten(str(input), 4096),
            adapter=adapter,
            root_task_id=root_task_id,
            started_by=shorten(session.started_by, 200),
            on_behalf_of=shorten(on_behalf_of, 200),
            records_steps=records_steps,
        )
    )
    session.start_task(root_task_id)


def stopped_status(session: Session) -> tuple[RunStatus, str] | None:
    """The status a person or the ladder imposed (CANCELLED / ABORTED, with the reason), or None.

    The session's state is authoritative: an agent that swallowed its
    cancellation still ran in a cancelled run.
    """
    if session.state is RunState.TERMINATED:
        return RunStatus.ABORTED, session.stop_reason or "terminated by goldfive"
    if session.state is RunState.CANCELLED:
        return RunStatus.CANCELLED, session.stop_reason or "cancelled"
    return None


def close_run(
    session: Session,
    router: ControlRouter,
    status: RunStatus,
    *,
    root_task_id: str,
    reason: str = "",
    summary: str = "",
) -> dict[str, TaskStatus]:
    """End the run: settle tasks, withdraw open approvals, emit the last event, detach; returns task statuses.

    On COMPLETED the root task completes (unless it never started); every
    other unfinished task is cancelled with ``reason``.
    """
    try:
        for task in session.tasks.all():
            if task.status.terminal:
                continue
            if status is RunStatus.COMPLETED and task.id == root_task_id and task.status is not TaskStatus.PENDING:
                session.tasks.transition(task.id, TaskStatus.COMPLETED)
                session.events.emit(events_pb2.TaskCompleted(task_id=task.id))
            else:
                session.tasks.transition(task.id, TaskStatus.CANCELLED)
                session.events.emit(events_pb2.TaskCancelled(task_id=task.id, reason=reason or "the run ended"))
        session.finish()  # withdraw what is still open (ApprovalCancelled) before the run's last event
        if status is RunStatus.COMPLETED:
            session.events.emit(events_pb2.RunCompleted(status=_PB_RUN_STATUS[status], summary=summary))
        else:
            session.events.emit(
                events_pb2.RunAborted(reason=reason, status=_PB_RUN_STATUS[status], drift_id=session.stop_drift_id)
            )
    finally:
        session.finish()
        router.detach(session)
    return {t.id: t.status for t in session.tasks.all()}
