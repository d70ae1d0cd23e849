"""The task state machine: every allowed transition works, every other one is refused by name."""

from __future__ import annotations

import itertools

import pytest

from goldfive_core import InvalidTransitionError, TaskStatus
from goldfive_core.tasks import ALLOWED_TRANSITIONS, TaskBoard

S = TaskStatus
EXPECTED = {
    S.PENDING: {S.RUNNING, S.CANCELLED, S.NOT_NEEDED},
    S.RUNNING: {S.BLOCKED, S.COMPLETED, S.FAILED, S.CANCELLED},
    S.BLOCKED: {S.RUNNING, S.COMPLETED, S.FAILED, S.CANCELLED},
    S.COMPLETED: set(),
    S.FAILED: set(),
    S.CANCELLED: set(),
    S.NOT_NEEDED: set(),
}

# A path from PENDING to each state, through allowed transitions only.
PATH = {
    S.PENDING: [],
    S.RUNNING: [S.RUNNING],
    S.BLOCKED: [S.RUNNING, S.BLOCKED],
    S.COMPLETED: [S.RUNNING, S.COMPLETED],
    S.FAILED: [S.RUNNING, S.FAILED],
    S.CANCELLED: [S.CANCELLED],
    S.NOT_NEEDED: [S.NOT_NEEDED],
}


def test_the_table_is_the_documented_one() -> None:
    assert {k: set(v) for k, v in ALLOWED_TRANSITIONS.items()} == EXPECTED
    assert {s for s in S if s.terminal} == {S.COMPLETED, S.FAILED, S.CANCELLED, S.NOT_NEEDED}


def _board_at(status: TaskStatus) -> TaskBoard:
    board = TaskBoard()
    board.add("t")
    for step in PATH[status]:
        board.transition("t", step)
    assert board.get("t") is not None and board.get("t").status is status  # type: ignore[union-attr]
    return board


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(S, S)))
def test_every_transition(src: TaskStatus, dst: TaskStatus) -> None:
    board = _board_at(src)
    if dst in EXPECTED[src] or (src is dst is S.BLOCKED):
        assert board.transition("t", dst).status is dst
    else:
        with pytest.raises(InvalidTransitionError) as info:
            board.transition("t", dst)
        assert f"from {src.value} to {dst.value}" in str(info.value)
        assert board.get("t").status is src  # type: ignore[union-attr]


def test_unknown_task_is_named() -> None:
    board = TaskBoard()
    board.add("known")
    with pytest.raises(InvalidTransitionError, match="unknown task_id 'ghost' \\(known: 'known'\\)"):
        board.transition("ghost", S.RUNNING)


def test_current_task_is_the_latest_started_unfinished_one() -> None:
    board = TaskBoard()
    assert board.current is None
    board.add("a")
    board.add("b")
    board.transition("a", S.RUNNING)
    board.transition("b", S.RUNNING)
    assert board.current is not None and board.current.id == "b"
    board.transition("b", S.BLOCKED)
    assert board.current.id == "b"  # blocked is still current
    board.transition("b", S.COMPLETED)
    assert board.current.id == "a"
    board.transition("a", S.FAILED)
    assert board.current is None


def test_leaving_blocked_clears_blocker_and_needed() -> None:
    board = _board_at(S.BLOCKED)
    task = board.get("t")
    assert task is not None
    task.blocker, task.needed = "awaiting_approval", "say yes"
    board.transition("t", S.BLOCKED)
    assert (task.blocker, task.needed) == ("awaiting_approval", "say yes")
    board.transition("t", S.RUNNING)
    assert (task.blocker, task.needed) == ("", "")
