"""Events: per-run gap-free sequence from 0, a run id on each, and sinks that never fail a run."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path

import pytest
from google.protobuf import json_format
from loop_support import wait_all_tasks_blocked

from goldfive_core import ControlKind, ControlMessage, EventEmitter, InMemorySink, JsonlSink, LoggingSink
from goldfive_core.events import on_record
from goldfive_core.pb.v1 import events_pb2


async def _approving_agent(task, tools):
    await tools.report_task_progress("looking at prices", fraction=0.5)
    decision = await tools.report_awaiting_approval(prompt="buy it?", timeout_ms=60_000)
    await tools.report_task_completed(result=decision["decision"])
    return decision


async def test_sequences_are_gap_free_from_zero_per_run(harness) -> None:
    h = harness(_approving_agent)
    runs = []
    for _ in range(2):
        h.start()
        requested = await h.sink.nth("approval_requested", len(runs) + 1)
        ack = await h.channel.send(
            ControlMessage(ControlKind.APPROVE, {"target_id": requested.approval_requested.target_id})
        )
        assert ack.ok
        runs.append(await h.result())
    assert runs[0].run_id != runs[1].run_id
    for result in runs:
        events = [e for e in h.sink.events if e.run_id == result.run_id]
        assert [e.sequence for e in events] == list(range(len(events)))
        assert events[0].WhichOneof("payload") == "run_started"
        assert events[-1].WhichOneof("payload") == "run_completed"
        assert all(e.event_id and e.emitted_at.seconds > 0 for e in events)
    assert len({e.event_id for e in h.sink.events}) == len(h.sink.events)
    assert all(e.run_id for e in h.sink.events)


def test_an_emitter_ids_its_events_by_its_own_random_id_and_their_sequence(monkeypatch: pytest.MonkeyPatch) -> None:
    """No system call per event (one per emitter), and ids stay unique: two emitters of one run id never share one."""
    import os

    from goldfive_core import _util

    calls: list[int] = []
    urandom = os.urandom

    def counted(n: int) -> bytes:
        calls.append(n)
        return urandom(n)

    monkeypatch.setattr(_util.os, "urandom", counted)
    first, again = EventEmitter("run-1"), EventEmitter("run-1")  # e.g. a run resumed in another process
    made = [emitter.emit(events_pb2.TaskStarted(task_id=f"t{i}")) for i in range(5) for emitter in (first, again)]
    assert len(calls) == 2  # one per emitter, none per event
    ids = [event.event_id for event in made]
    assert len(set(ids)) == len(ids)
    assert [e.event_id.rsplit("-", 1)[1] for e in made[::2]] == [str(n) for n in range(5)]
    assert all(e.emitted_at.nanos % 1_000_000 == 0 and e.emitted_at.seconds > 0 for e in made)  # whole milliseconds


def test_emitter_needs_a_run_id() -> None:
    with pytest.raises(ValueError, match="run_id"):
        EventEmitter("")


def test_in_memory_sink_helpers() -> None:
    sink = InMemorySink()
    emitter = EventEmitter("run-x", [sink], session_id="s-1")
    emitter.emit(events_pb2.TaskStarted(task_id="a"))
    emitter.emit(events_pb2.ApprovalRequested(target_id="a", kind="task"))
    assert sink.kinds() == ["task_started", "approval_requested"]
    assert [e.approval_requested.target_id for e in sink.of("approval_requested")] == ["a"]
    assert all(isinstance(e, events_pb2.Event) and e.session_id == "s-1" for e in sink.events)
    assert emitter.next_sequence == 2


async def test_jsonl_sink_lines_parse_back_into_the_same_events(tmp_path: Path, harness) -> None:
    path = tmp_path / "events.jsonl"
    jsonl = JsonlSink(path)
    h = harness(_approving_agent)
    h.runner.sinks = (*h.runner.sinks, jsonl)
    h.start()
    requested = await h.sink.first("approval_requested")
    await h.channel.send(
        ControlMessage(ControlKind.REJECT, {"target_id": requested.approval_requested.target_id, "detail": "no"})
    )
    await h.result()
    jsonl.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(h.sink.events)
    parsed = [json_format.Parse(line, events_pb2.Event()) for line in lines]
    assert parsed == h.sink.events
    assert json.loads(lines[0])["run_started"]["adapter"] == "callable"
    with pytest.raises(ValueError, match="closed"):
        jsonl.emit(h.sink.events[0])


def test_logging_sink_logs_one_line_per_event(caplog: pytest.LogCaptureFixture) -> None:
    emitter = EventEmitter("run-log", [LoggingSink()])
    with caplog.at_level(logging.INFO, logger="goldfive.events"):
        emitter.emit(events_pb2.ApprovalGranted(target_id="t-9", decided_by="ana"))
    (record,) = caplog.records
    message = record.getMessage()
    assert "run-log #0" in message and "approval_granted" in message and "t-9" in message and "ana" in message
    quiet = logging.getLogger("quiet-test")
    quiet.setLevel(logging.WARNING)
    caplog.clear()
    EventEmitter("run-q", [LoggingSink(quiet, logging.DEBUG)]).emit(events_pb2.TaskStarted(task_id="a"))
    assert caplog.records == []


class _Exploding:
    def __init__(self) -> None:
        self.calls = 0

    def emit(self, event: events_pb2.Event) -> None:
        self.calls += 1
        raise OSError("disk full")


async def test_a_raising_sink_never_fails_the_run_or_a_decision(harness, caplog: pytest.LogCaptureFixture) -> None:
    broken = _Exploding()
    h = harness(_approving_agent)
    h.runner.sinks = (broken, *h.runner.sinks)
    with caplog.at_level(logging.ERROR, logger="goldfive_core.events"):
        h.start()
        requested = await h.sink.first("approval_requested")
        ack = await h.channel.send(
            ControlMessage(ControlKind.APPROVE, {"target_id": requested.approval_requested.target_id})
        )
        result = await h.result()
    assert ack.ok
    assert result.status == "COMPLETED"
    assert result.output["decision"] == "approve"
    assert broken.calls == len(h.sink.events)  # every event still reached the sinks after it
    assert "disk full" in caplog.text
    assert [e.sequence for e in h.sink.events] == list(range(len(h.sink.events)))


async def test_in_memory_sink_wait_for_wakes_on_emit_and_is_bounded() -> None:
    sink = InMemorySink()
    emitter = EventEmitter("run-wait", [sink])
    waiting = asyncio.create_task(sink.wait_for("approval_requested", count=2, where=lambda e: e.run_id == "run-wait"))
    await asyncio.sleep(0)
    emitter.emit(events_pb2.ApprovalRequested(target_id="a", kind="task"))
    emitter.emit(events_pb2.TaskStarted(task_id="t"))
    await wait_all_tasks_blocked()
    assert not waiting.done()  # one of two so far
    emitter.emit(events_pb2.ApprovalRequested(target_id="b", kind="task"))
    found = await waiting
    assert [e.approval_requested.target_id for e in found] == ["a", "b"]
    assert [e.task_started.task_id for e in await sink.wait_for("task_started")] == ["t"]  # already there
    with pytest.raises(TimeoutError):
        await sink.wait_for("run_completed", timeout=0.001)


def test_every_payload_kind_even_an_empty_one_is_the_events_payload() -> None:
    from goldfive_core.events import EventEmitter
    from goldfive_core.pb.v1 import events_pb2 as pb

    emitter = EventEmitter("run-1", session_id="s-1")
    fields = pb.Event.DESCRIPTOR.oneofs_by_name["payload"].fields
    for number, field in enumerate(fields):
        payload = getattr(pb, field.message_type.name)()
        event = emitter.emit(payload)
        assert event.WhichOneof("payload") == field.name
        assert getattr(event, field.name) == payload
        assert (event.run_id, event.session_id, event.sequence) == ("run-1", "s-1", number)
        assert event.HasField("emitted_at") and event.emitted_at.nanos % 1_000_000 == 0  # whole milliseconds


class _StuckSink:
    """A background-writing sink whose flush cannot even start (its queue is full): it blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def emit(self, event: events_pb2.Event) -> None:
        """Take nothing."""

    def flush(self, timeout: float | None = 5.0) -> bool:
        self.release.wait()
        return True


class _QuickSink(_StuckSink):
    def flush(self, timeout: float | None = 5.0) -> bool:
        return True


async def test_on_record_waits_for_written_sinks_and_is_bounded_when_one_is_stuck() -> None:
    quick, stuck = _QuickSink(), _StuckSink()
    assert await on_record([InMemorySink(), quick], 0.05) is True  # nothing to wait for, or written
    try:
        assert await on_record([quick, stuck], 0.05) is False  # the caller is told anyway, never held for good
    finally:
        stuck.release.set()
