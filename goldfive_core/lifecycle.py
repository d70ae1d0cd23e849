"""How a run starts and ends, the same for every adapter.

``open_run`` attaches the session to its router (messages sent before the
run, such as a PAUSE, apply now), emits RunStarted and starts the root task.
``close_run`` settles the tasks, withdraws open approvals and emits the run's
last event (RunCompleted or RunAborted), then detaches the session.
"""

from __future__ import annotations

from enum import StrEnum

from ._util import shorten
from .pb.v1 import events_pb2, types_pb2
from .routing import ControlRouter
from .session import Session
from .tasks import TaskStatus

__all__ = ["RunStatus", "close_run", "open_run", "stopped_status"]


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


def open_run(session: Session, router: ControlRouter, *, root_task_id: str, input: object, adapter: str) -> None:
    """Attach ``session`` to ``router``, emit RunStarted and start the root task (already added to the board)."""
    router.attach(session)
    session.events.emit(
        events_pb2.RunStarted(input=shorten(str(input), 4096), adapter=adapter, root_task_id=root_task_id)
    )
    session.start_task(root_task_id)


def stopped_status(session: Session) -> tuple[RunStatus, str] | None:
    """The status a person or the ladder imposed (CANCELLED / ABORTED, with the reason), or None.

    The session's state is authoritative: an agent that swallowed its
    cancellation still ran in a cancelled run.
    """
    if session.state == "terminated":
        return RunStatus.ABORTED, session.stop_reason or "terminated by goldfive"
    if session.state == "cancelled":
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
