"""OpenTelemetry: a real ADK run's approval wait is a span inside ADK's own trace, with decision metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlChannel, ControlKind, ControlMessage, SteeringConfig
from goldfive_core.otel import OtelSink
from goldfive_core.testing import AwaitableSink
from tests.adk.conftest import Bank
from tests.adk.scripted import Harness

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def provider() -> TracerProvider:
    """The process's tracer provider (ADK takes its tracer from the global one): set once, read per test."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        current.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        return current
    new = TracerProvider()
    new.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(new)
    return new


@pytest.fixture
def spans(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _metrics(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        m.name: list(m.data.data_points) for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }


async def test_an_approved_tool_call_is_a_span_under_adks_span_with_decision_metrics(
    bank: Bank, spans: InMemorySpanExporter, provider: TracerProvider
) -> None:
    reader = InMemoryMetricReader()
    otel = OtelSink(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader]))
    sink = AwaitableSink()
    channel = ControlChannel()
    plugin = GoldfivePlugin(
        control=channel, sinks=[sink, otel], config=SteeringConfig(approval_default_timeout_ms=10_000)
    )
    h = Harness(tools=bank.tools(), turns=[[("transfer_funds", {"amount": 5, "to": "bob"})], "sent"], plugin=plugin)
    sid = await h.new_session()

    async def approve() -> None:
        event = await sink.first("approval_requested")
        target = event.approval_requested.target_id
        assert _metrics(reader)["goldfive.approvals.pending"][0].value == 1
        ack = await channel.send(
            ControlMessage(ControlKind.APPROVE, {"target_id": target, "decided_by": "ana"}), timeout=5
        )
        assert ack.ok, ack.detail

    decider = asyncio.create_task(approve())
    await h.run(sid)
    await decider
    assert bank.transfers == [{"amount": 5, "to": "bob"}]

    finished: dict[str, ReadableSpan] = {}
    for span in spans.get_finished_spans():
        finished.setdefault(span.name, span)
    approval = finished["goldfive.approval"]
    attrs = dict(approval.attributes or {})
    assert attrs["goldfive.tool"] == "transfer_funds"
    assert attrs["goldfive.outcome"] == "granted" and attrs["goldfive.decision"] == "approve"
    assert attrs["goldfive.decided_by"] == "ana" and int(attrs["goldfive.wait_ms"]) >= 0
    # Nested in ADK's trace: its parent is a span ADK started for this invocation, not a root of ours.
    assert approval.parent is not None
    by_id = {s.context.span_id: s for s in spans.get_finished_spans() if s.context is not None}
    parent = by_id[approval.parent.span_id]
    assert not parent.name.startswith("goldfive."), parent.name
    assert approval.context is not None and parent.context is not None
    assert approval.context.trace_id == parent.context.trace_id
    assert "goldfive.run" in finished

    points = _metrics(reader)
    assert points["goldfive.approvals.pending"][0].value == 0
    (decisions,) = points["goldfive.approval.decisions"]
    assert decisions.value == 1 and dict(decisions.attributes)["goldfive.outcome"] == "granted"
    (latency,) = points["goldfive.approval.decision_latency"]
    assert latency.count == 1


async def test_a_rejected_call_and_a_run_end_close_every_span(
    spans: InMemorySpanExporter, provider: TracerProvider
) -> None:
    from goldfive_core.pb.v1 import events_pb2
    from tests.store.store_support import make_event

    reader = InMemoryMetricReader()
    otel = OtelSink(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader]))
    requested = events_pb2.ApprovalRequested(
        target_id="c1", kind="tool", metadata={"tool_name": "rm", "policy_rule": "r1"}
    )
    otel.emit(make_event("run-1", 0, events_pb2.RunStarted(adapter="callable")))
    otel.emit(make_event("run-1", 1, requested))
    otel.emit(make_event("run-1", 2, events_pb2.ApprovalRejected(target_id="c1", decided_by="bo", detail="no")))
    otel.emit(make_event("run-1", 3, events_pb2.ApprovalRequested(target_id="c2", kind="task")))
    human = events_pb2.DriftDetected(drift_id="d", kind=37, severity=3, detail="escalated", ladder_level=4)
    otel.emit(make_event("run-1", 4, human))
    otel.emit(make_event("run-1", 5, events_pb2.RunAborted(reason="cancelled by a person", status=3)))
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans.get_finished_spans():
        by_name.setdefault(span.name, []).append(span)
    rejected, cancelled = sorted(by_name["goldfive.approval"], key=lambda s: s.start_time or 0)
    assert dict(rejected.attributes or {})["goldfive.outcome"] == "rejected"
    assert dict(rejected.attributes or {})["goldfive.rule"] == "r1"
    assert dict(cancelled.attributes or {})["goldfive.outcome"] == "cancelled"
    assert len(by_name["goldfive.escalation"]) == 1 and len(by_name["goldfive.run"]) == 1
    (run,) = by_name["goldfive.run"]
    assert run.status.status_code is trace.StatusCode.ERROR
    assert _metrics(reader)["goldfive.approvals.pending"][0].value == 0


@pytest.mark.parametrize("record_details", [False, True])
async def test_no_span_carries_a_tool_calls_arguments_unless_asked(
    spans: InMemorySpanExporter, provider: TracerProvider, record_details: bool
) -> None:
    from goldfive_core.pb.v1 import events_pb2
    from tests.store.store_support import make_event

    secret = 'lookup({"account":"IBAN-DE89-3704-0044"})'
    otel = OtelSink(tracer_provider=provider, record_details=record_details)
    otel.emit(make_event("run-9", 0, events_pb2.RunStarted(adapter="callable")))
    human = events_pb2.DriftDetected(
        drift_id="d-9", kind=37, severity=3, detail=f"escalated from LOOPING_TOOL_CALL: {secret}", ladder_level=4
    )
    otel.emit(make_event("run-9", 1, human))
    otel.emit(make_event("run-9", 2, events_pb2.RunAborted(reason=f"terminated: {secret}", status=3)))
    finished = {span.name: span for span in spans.get_finished_spans()}
    escalation, run = finished["goldfive.escalation"], finished["goldfive.run"]
    assert dict(escalation.attributes or {})["goldfive.drift_id"] == "d-9"
    shown = [str(v) for s in (escalation, run) for v in (s.attributes or {}).values()]
    shown += [s.status.description or "" for s in (escalation, run)]
    assert any("IBAN-DE89" in text for text in shown) is record_details, shown
    assert ("goldfive.detail" in (escalation.attributes or {})) is record_details
