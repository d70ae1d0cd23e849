"""A paused run is visible from its events: RunPaused (who, why, the escalated drift) and RunResumed."""

from __future__ import annotations

from goldfive_core import (
    ControlChannel,
    ControlKind,
    ControlMessage,
    DefaultSteerer,
    Drift,
    DriftKind,
    DriftSeverity,
    InMemorySink,
    Session,
    SteeringConfig,
)


def _session() -> tuple[Session, InMemorySink]:
    sink = InMemorySink()
    return Session(config=SteeringConfig(), sinks=[sink]), sink


def test_a_person_pausing_and_resuming_emits_run_paused_then_run_resumed_naming_them() -> None:
    session, sink = _session()
    ack = session.dispatch(
        ControlMessage(ControlKind.PAUSE, {"reason": "checking the ledger", "decided_by": "ana", "channel": "web"})
    )
    assert ack.ok and session.paused
    [paused] = sink.of("run_paused")
    assert (paused.run_paused.reason, paused.run_paused.paused_by, paused.run_paused.channel) == (
        "checking the ledger",
        "ana",
        "web",
    )
    assert not paused.run_paused.escalated and not paused.run_paused.HasField("deadline_at")
    # A second PAUSE changes nothing and says nothing new.
    assert session.dispatch(ControlMessage(ControlKind.PAUSE, {})).detail == "already paused"
    assert len(sink.of("run_paused")) == 1
    assert session.dispatch(ControlMessage(ControlKind.RESUME, {"decided_by": "bo", "channel": "api"})).ok
    [resumed] = sink.of("run_resumed")
    assert (resumed.run_resumed.how, resumed.run_resumed.resumed_by, resumed.run_resumed.channel) == (
        "resume",
        "bo",
        "api",
    )
    assert sink.kinds()[-2:] == ["run_paused", "run_resumed"]
    # RESUME of a running run: nothing to announce.
    session.dispatch(ControlMessage(ControlKind.RESUME, {}))
    assert len(sink.of("run_resumed")) == 1


def test_a_steer_resumes_a_paused_run_and_says_so_a_steer_of_a_running_run_does_not() -> None:
    session, sink = _session()
    session.dispatch(ControlMessage(ControlKind.STEER, {"text": "use the cheaper supplier"}))
    assert not sink.of("run_resumed")
    session.dispatch(ControlMessage(ControlKind.PAUSE, {}))
    session.dispatch(ControlMessage(ControlKind.STEER, {"text": "stop after the quote", "decided_by": "ana"}))
    [resumed] = sink.of("run_resumed")
    assert (resumed.run_resumed.how, resumed.run_resumed.resumed_by) == ("steer", "ana")


async def test_an_escalation_emits_run_paused_naming_the_drift_and_its_deadline() -> None:
    sink = InMemorySink()
    session = Session(config=SteeringConfig(pause_escalate_deadline_s=600), sinks=[sink], has_channel=True)
    channel = ControlChannel()
    channel.bind(session.dispatch)
    session.steerer = DefaultSteerer(session, channel)
    drift = Drift(DriftKind.INTENT_DIVERGENCE, DriftSeverity.CRITICAL, "buying a yacht", task_id="t")
    await session.handle_drift(drift)
    await sink.wait_for("run_paused")
    [paused] = sink.of("run_paused")
    event = paused.run_paused
    assert event.escalated and event.drift_kind == "INTENT_DIVERGENCE" and event.ladder_level == 4
    assert event.drift_id == sink.of("drift_detected")[0].drift_detected.drift_id
    assert "buying a yacht" in event.reason and event.paused_by == ""
    assert event.deadline_at.ToMilliseconds() - paused.emitted_at.ToMilliseconds() in range(599_000, 601_000)
    assert session.dispatch(ControlMessage(ControlKind.CANCEL, {})).ok
    assert not sink.of("run_resumed")  # a cancelled run does not go on


def test_an_escalation_of_a_run_a_person_paused_is_announced_again_as_escalated() -> None:
    session, sink = _session()
    session.dispatch(ControlMessage(ControlKind.PAUSE, {"decided_by": "ana"}))
    payload = {"reason": "LOOPING_TOOL_CALL", "drift_id": "d1", "drift_kind": "LOOPING_TOOL_CALL", "ladder_level": 4}
    assert session.dispatch(ControlMessage(ControlKind.GOLDFIVE_PAUSE_ESCALATE, payload)).ok
    first, second = sink.of("run_paused")
    assert not first.run_paused.escalated
    assert second.run_paused.escalated and second.run_paused.drift_id == "d1"
    # The same escalation again: already announced.
    session.dispatch(ControlMessage(ControlKind.GOLDFIVE_PAUSE_ESCALATE, payload))
    assert len(sink.of("run_paused")) == 2
