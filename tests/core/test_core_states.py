"""The closed sets that cross modules, each stated once: a run's state groupings and a decision ack's verdict."""

from __future__ import annotations

import pytest

from goldfive_core.control import AckVerdict, ControlAck
from goldfive_core.run_state import RunState, is_over, is_stopped
from goldfive_core.session import RunState as SessionRunState


@pytest.mark.parametrize(
    ("state", "over", "stopped"),
    [
        ("running", False, False),
        ("paused", False, False),
        ("cancelled", True, True),
        ("terminated", True, True),
        ("finished", True, False),
    ],
)
def test_a_run_is_over_once_it_neither_runs_nor_waits_and_stopped_when_ended_from_outside(
    state: RunState, over: bool, stopped: bool
) -> None:
    assert (is_over(state), is_stopped(state)) == (over, stopped)


def test_the_run_states_are_the_session_s_and_each_is_named_in_the_table_above() -> None:
    assert SessionRunState is RunState
    assert {s.value for s in RunState} == {"running", "paused", "cancelled", "terminated", "finished"}


def test_a_run_state_is_an_enum_that_still_equals_the_word_it_always_was() -> None:
    # A StrEnum: code (and JSON) that compared or printed the old strings keeps working.
    assert RunState.PAUSED == "paused" and f"{RunState.CANCELLED}" == "cancelled"
    assert RunState("finished") is RunState.FINISHED
    assert is_over(RunState.FINISHED) and not is_over(RunState.PAUSED)


@pytest.mark.parametrize(
    ("data", "verdict"),
    [
        (None, AckVerdict.APPLIED),
        ({"request_id": "req-1"}, AckVerdict.APPLIED),
        ({"decision": "counted", "quorum_progress": "1 of 2: ana"}, AckVerdict.COUNTED),
        ({"decision": "quorum", "decided_by": "ana, bo"}, AckVerdict.QUORUM),
        ({"decision": "expired"}, AckVerdict.EXPIRED),
        ({"decision": "approve"}, AckVerdict.APPLIED),  # not a verdict: read as applied, as before
        ({"decision": ["counted"]}, AckVerdict.APPLIED),
    ],
)
def test_an_ack_s_verdict_is_read_from_its_data(data: dict[str, object] | None, verdict: AckVerdict) -> None:
    assert ControlAck.success("ctl-1", "ok", data=data).verdict is verdict


def test_the_verdicts_keep_their_wire_values() -> None:
    assert [v.value for v in AckVerdict] == ["applied", "counted", "quorum", "expired"]
