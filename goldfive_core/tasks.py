"""Tasks and the transitions their status may take."""

from __future__ import annotations

import dataclasses
from enum import StrEnum

from .errors import InvalidTransitionError

__all__ = ["ALLOWED_TRANSITIONS", "Task", "TaskBoard", "TaskStatus"]


class TaskStatus(StrEnum):
    """Lifecycle of a task. COMPLETED, FAILED, CANCELLED and NOT_NEEDED are terminal."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    BLOCKED = "BLOCKED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    NOT_NEEDED = "NOT_NEEDED"

    @property
    def terminal(self) -> bool:
        """True for states no transition leaves."""
        return not ALLOWED_TRANSITIONS[self]


ALLOWED_TRANSITIONS: dict[TaskStatus, frozenset[TaskStatus]] = {
    TaskStatus.PENDING: frozenset({TaskStatus.RUNNING, TaskStatus.CANCELLED, TaskStatus.NOT_NEEDED}),
    TaskStatus.RUNNING: frozenset({TaskStatus.BLOCKED, TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED}),
    TaskStatus.BLOCKED: frozenset({TaskStatus.RUNNING, TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED}),
    TaskStatus.COMPLETED: frozenset(),
    TaskStatus.FAILED: frozenset(),
    TaskStatus.CANCELLED: frozenset(),
    TaskStatus.NOT_NEEDED: frozenset(),
}
"""Which status may follow which. BLOCKED -> BLOCKED is allowed as a no-op re-block."""


@dataclasses.dataclass(slots=True)
class Task:
    """A unit of work the agent reports on. ``blocker``/``needed`` describe a BLOCKED task."""

    id: str
    title: str = ""
    parent_id: str | None = None
    input: object = None
    status: TaskStatus = TaskStatus.PENDING
    blocker: str = ""
    needed: str = ""


class TaskBoard:
    """The tasks of one run and which one is current (the latest started, unfinished one)."""

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}
        self._active: list[str] = []

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def __len__(self) -> int:
        return len(self._tasks)

    def get(self, task_id: str) -> Task | None:
        """The task with this id, or None."""
        return self._tasks.get(task_id)

    def all(self) -> list[Task]:
        """Every task, in creation order."""
        return list(self._tasks.values())

    @property
    def current(self) -> Task | None:
        """The task reports default to: the most recently started one that is not finished."""
        return self._tasks[self._active[-1]] if self._active else None

    def add(self, task_id: str, *, title: str = "", parent_id: str | None = None, input: object = None) -> Task:
        """Register a PENDING task; an existing id is returned unchanged."""
        task = self._tasks.get(task_id)
        if task is None:
            task = self._tasks[task_id] = Task(task_id, title, parent_id, input)
        return task

    def transition(self, task_id: str, to: TaskStatus) -> Task:
        """Move a task to ``to``; raises InvalidTransitionError naming both states."""
        task = self._tasks.get(task_id)
        if task is None:
            known = ", ".join(repr(t) for t in list(self._tasks)[:10]) or "none"
            raise InvalidTransitionError(f"unknown task_id {task_id!r} (known: {known})")
        if to is task.status and to is TaskStatus.BLOCKED:
            return task
        if to not in ALLOWED_TRANSITIONS[task.status]:
            allowed = ", ".join(sorted(s.value for s in ALLOWED_TRANSITIONS[task.status])) or "none (terminal)"
            raise InvalidTransitionError(
                f"task {task_id!r} cannot go from {task.status.value} to {to.value} (allowed: {allowed})"
            )
        task.status = to
        if to is TaskStatus.RUNNING and task_id not in self._active:
            self._active.append(task_id)
        elif to.terminal and task_id in self._active:
            self._active.remove(task_id)
        if to is not TaskStatus.BLOCKED:
            task.blocker = task.needed = ""
        return task
