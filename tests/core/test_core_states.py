"""The closed sets that cross modules, each stated once: a run's state groupings and a decision ack's verdict."""

from __future__ import annotations

import pytest

from goldfive_core.control import AckVerdict, ControlAck


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
