"""Event construction (run id, gap-free sequence) and the sinks that receive events.

State is authoritative and sinks are best-effort: a sink that raises is logged
and skipped, never allowed to fail a decision or the run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from google.protobuf import json_format
from google.protobuf.message import Message

from ._util import new_id
from .pb.v1 import events_pb2

__all__ = [
    "EventEmitter",
    "EventSink",
    "InMemorySink",
    "JsonlSink",
    "LoggingSink",
    "RecordingSink",
    "event_to_dict",
    "format_event",
    "on_record",
    "payload_name",
]

logger = logging.getLogger(__name__)

Event = events_pb2.Event


@runtime_checkable
class EventSink(Protocol):
    """Receives every event of a run, in sequence order. Must be quick and must not block."""

    def emit(self, event: events_pb2.Event) -> None:
        """Handle one event."""


@runtime_checkable
class RecordingSink(Protocol):
    """A sink that writes in the background (:class:`~goldfive_core.store.StoreSink`): ``flush`` waits until
    what was emitted so far is written, False when ``timeout`` passed first."""

    def flush(self, timeout: float | None = ...) -> bool:
        """Wait for the writes of what was emitted so far."""


async def on_record(sinks: Iterable[object], timeout_s: float) -> bool:
    """Wait (off the loop) until every background-writing sink has written the events emitted so far.

    For a host about to tell someone outside the run "a person is asked: approval X" (an A2A status, a
    link): X is then on record, so the person can find and decide it even if this process dies next. False
    when a sink did not finish within ``timeout_s`` (a store outage); the sink keeps retrying.
    """
    waits = [s for s in sinks if isinstance(s, RecordingSink)]
    if not waits:
        return True
    try:  # bounded here too: a sink whose queue is full blocks its flush before the flush's own timeout starts
        done = await asyncio.wait_for(
            asyncio.gather(*(asyncio.to_thread(s.flush, timeout_s) for s in waits)), timeout_s + 1.0
        )
    except TimeoutError:
        return False
    return all(done)


class InMemorySink:
    """Keeps every event; ``.events`` is the list of ``Event`` protos; ``await wait_for(...)`` awaits one."""

    def __init__(self) -> None:
        self.events: list[events_pb2.Event] = []
        self._changed: asyncio.Event | None = None  # created by the first waiter, in its loop

    def emit(self, event: events_pb2.Event) -> None:
        """Append the event and wake whoever waits for one."""
        self.events.append(event)
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait_for(
        self,
        payload: str | None,
        *,
        count: int = 1,
        where: Callable[[events_pb2.Event], bool] | None = None,
        timeout: float | None = 30.0,  # noqa: ASYNC109 (a bound on waiting for an event, like send(timeout=))
    ) -> list[events_pb2.Event]:
        """Every event with ``payload`` (and matching ``where``) once there are at least ``count``.

        ``payload=None`` matches events of any payload. Raises TimeoutError after ``timeout`` seconds
        (``None`` waits as long as it takes).
        """
        async with asyncio.timeout(timeout):
            while True:
                candidates = self.events if payload is None else self.of(payload)
                found = [e for e in candidates if where is None or where(e)]
                if len(found) >= count:
                    return found
                if self._changed is None:
                    self._changed = asyncio.Event()
                await self._changed.wait()

    def of(self, payload: str) -> list[events_pb2.Event]:
        """The events whose payload is ``payload`` (e.g. ``"approval_requested"``)."""
        return [e for e in self.events if e.WhichOneof("payload") == payload]

    def kinds(self) -> list[str]:
        """Payload names of every event, in order."""
        return [payload_name(e) for e in self.events]


def event_to_dict(event: events_pb2.Event) -> dict[str, object]:
    """The protobuf JSON mapping of an event (field names as in the .proto)."""
    out: dict[str, object] = json_format.MessageToDict(event, preserving_proto_field_name=True)
    return out


class JsonlSink:
    """Appends each event as one JSON line (protobuf JSON mapping) to ``path``; flushes every line."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")

    def emit(self, event: events_pb2.Event) -> None:
        """Write one line."""
        line = json_format.MessageToJson(event, preserving_proto_field_name=True, indent=None)
        with self._lock:
            if self._file is None:
                raise ValueError(f"JsonlSink({str(self.path)!r}) is closed")
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        """Close the file; later events raise (and are logged by the emitter)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class LoggingSink:
    """Logs a one-line summary of each event."""

    def __init__(self, logger_: logging.Logger | None = None, level: int = logging.INFO) -> None:
        self._logger = logger_ or logging.getLogger("goldfive.events")
        self._level = level

    def emit(self, event: events_pb2.Event) -> None:
        """Log the event."""
        if self._logger.isEnabledFor(self._level):
            self._logger.log(self._level, "%s %s", event.run_id, format_event(event))


def format_event(event: events_pb2.Event) -> str:
    """One readable line: ``#3  approval_granted    target_id='buy' decided_by='ana'`` (enums by name)."""
    name = payload_name(event)
    fields = json_format.MessageToDict(getattr(event, name), preserving_proto_field_name=True) if name else {}
    fields.pop("expires_at", None)
    meta = fields.get("metadata")
    if isinstance(meta, dict):
        meta.pop("args_schema", None)  # the tool's whole parameter schema: for deciders' checks, not for reading
    for key in [k for k in fields if k.endswith("_ms")]:
        fields[key] = int(fields[key])  # int64 is a string in protobuf JSON; show a number
    parts = [f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}" for key, value in fields.items()]
    return f"#{event.sequence:<2} {name:<19} " + " ".join(parts)


def payload_name(event: events_pb2.Event) -> str:
    """The name of the event's payload field, e.g. ``"approval_granted"``."""
    return event.WhichOneof("payload") or ""


class EventEmitter:
    """Builds the events of one run (``run_id``, gap-free ``sequence`` from 0) and fans them out."""

    def __init__(self, run_id: str, sinks: Iterable[EventSink] = (), *, session_id: str = "") -> None:
        if not run_id:
            raise ValueError("run_id must be non-empty")
        self.run_id = run_id
        self.session_id = session_id
        self.sinks: Sequence[EventSink] = tuple(sinks)
        self._sequence = 0
        self._ids = f"{new_id('ev')}-"
        """Event ids are this emitter's own 48 random bits and the event's sequence: unique as a random id per event
        was, without a system call for each."""

    @property
    def next_sequence(self) -> int:
        """The sequence number the next event will get (= events emitted so far)."""
        return self._sequence

    def emit(self, payload: Message | Mapping[str, Any], field: str = "") -> events_pb2.Event:
        """Wrap ``payload`` (e.g. ``ApprovalGranted(...)``) in an Event and deliver it to every sink.

        ``field`` names the Event's payload field for a payload given as its fields' values
        (``emit({"target_id": "t"}, "approval_granted")``): it is built in place in the event, not built and then
        copied into it (a decision's event is on the path from an APPROVE to the tool body).
        """
        if not field:
            field = _PAYLOAD_FIELD[type(payload).DESCRIPTOR.full_name]  # type: ignore[union-attr]
        # One constructor call (the payload is copied in), now_ms() and timestamp_from_ms() inline (whole
        # milliseconds, as they give), the time set in place: every event passes here, some while an agent (or a
        # tool body a person just approved) waits for them.
        ms = time.time_ns() // 1_000_000
        sequence = self._sequence
        body: dict[str, Any] = {field: payload}
        event = events_pb2.Event(
            event_id=f"{self._ids}{sequence}", run_id=self.run_id, sequence=sequence, session_id=self.session_id, **body
        )
        stamp = event.emitted_at
        stamp.seconds = ms // 1000
        stamp.nanos = ms % 1000 * 1_000_000
        self._sequence = sequence + 1
        for sink in self.sinks:
            try:
                sink.emit(event)
            except Exception:
                logger.exception("event sink %r failed on %s #%d; continuing", sink, field, event.sequence)
        return event


_PAYLOAD_FIELD: dict[str, str] = {
    f.message_type.full_name: f.name
    for f in events_pb2.Event.DESCRIPTOR.oneofs_by_name["payload"].fields
    if f.message_type is not None
}
