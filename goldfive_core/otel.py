"""OpenTelemetry for goldfive: spans for runs, approval waits and escalations, and approval metrics.

Needs ``pip install 'goldfive[otel]'`` (``opentelemetry-api``); nothing of it is
imported unless you use this module. Add the sink to a run::

    from goldfive_core.otel import OtelSink

    GoldfivePlugin(control=channel, sinks=[channel.sink, OtelSink()])

Events reach sinks synchronously in the agent's own context, so an approval
span starts as a child of whatever span is current when the agent asks (ADK's
tool-call span): the time a run waits for a person shows up inside the agent's
trace. Spans:

- ``goldfive.run`` — RunStarted to RunCompleted / RunAborted;
- ``goldfive.approval`` — ApprovalRequested to its decision, timeout or
  cancellation; attributes ``goldfive.tool``, ``goldfive.rule``,
  ``goldfive.decision``, ``goldfive.decided_by``, ``goldfive.outcome``,
  ``goldfive.wait_ms``;
- ``goldfive.escalation`` — a level-4 escalation to the run's next step (the
  person answered) or its end; attributes ``goldfive.run_id``, ``goldfive.drift_id``.

No attribute carries a tool call's arguments or other model text: a drift's detail
(``lookup({"account": ...})``) and a run abort's reason are left out of spans unless
``OtelSink(record_details=True)`` asks for them (``goldfive.detail`` on the escalation span,
the reason as the run span's error description), for a trace store trusted with them.

Metrics (meter ``goldfive``): ``goldfive.approvals.pending`` (up-down counter),
``goldfive.approval.decision_latency`` (histogram, ms), ``goldfive.approval.decisions``
(counter by ``goldfive.outcome``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .errors import MissingExtraError

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, trace
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingExtraError("goldfive_core.otel", "otel") from exc

from .approvals import DECIDED_STATUSES, ApprovalStatus
from .convert import timestamp_to_ms
from .events import payload_name
from .pb.v1 import events_pb2

__all__ = ["OtelSink"]

_ENDINGS = {
    "approval_granted": ApprovalStatus.GRANTED,
    "approval_rejected": ApprovalStatus.REJECTED,
    "approval_timed_out": ApprovalStatus.TIMED_OUT,
    "approval_cancelled": ApprovalStatus.CANCELLED,
}
_ESCALATION_LEVEL = 4
_HUMAN_INTERVENTION_REQUIRED = 37


@dataclasses.dataclass
class _Open:
    span: Any
    started_ms: int
    tool: str


class OtelSink:
    """An event sink that turns goldfive's events into OpenTelemetry spans and metrics."""

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        record_details: bool = False,
    ) -> None:
        self.record_details = record_details
        """Whether model text (a drift's detail, an abort's reason: they may quote tool arguments) goes on spans."""
        self._tracer = trace.get_tracer("goldfive", tracer_provider=tracer_provider)
        meter = metrics.get_meter("goldfive", meter_provider=meter_provider)
        self._pending = meter.create_up_down_counter(
            "goldfive.approvals.pending", unit="{approval}", description="approvals waiting for a person"
        )
        self._latency = meter.create_histogram(
            "goldfive.approval.decision_latency", unit="ms", description="time from request to decision"
        )
        self._decisions = meter.create_counter(
            "goldfive.approval.decisions", unit="{decision}", description="approval waits ended, by outcome"
        )
        self._runs: dict[str, Any] = {}
        self._approvals: dict[tuple[str, str], _Open] = {}
        self._escalations: dict[str, Any] = {}

    def emit(self, event: events_pb2.Event) -> None:
        """Start or end the spans this event opens or closes."""
        kind = payload_name(event)
        at_ms = timestamp_to_ms(event.emitted_at)
        run_id = event.run_id
        if kind != "drift_detected" and run_id in self._escalations:
            self._escalations.pop(run_id).end()  # the run moved on: the person answered
        if kind == "run_started":
            self._runs[run_id] = self._tracer.start_span(
                "goldfive.run",
                attributes={
                    "goldfive.run_id": run_id,
                    "goldfive.session_id": event.session_id,
                    "goldfive.adapter": event.run_started.adapter,
                },
            )
        elif kind in ("run_completed", "run_aborted"):
            for key in [k for k in self._approvals if k[0] == run_id]:
                self._end_approval(key, ApprovalStatus.CANCELLED.value, at_ms, {})
            span = self._runs.pop(run_id, None)
            if span is not None:
                status = event.run_completed.status if kind == "run_completed" else event.run_aborted.status
                span.set_attribute("goldfive.status", int(status))
                if kind == "run_aborted":
                    reason = event.run_aborted.reason[:200] if self.record_details else "run aborted"
                    span.set_status(trace.Status(trace.StatusCode.ERROR, reason))
                span.end()
        elif kind == "approval_requested":
            self._start_approval(event, at_ms)
        elif kind in _ENDINGS:
            body = getattr(event, kind)
            outcome = _ENDINGS[kind].value
            attrs = {"goldfive.decided_by": getattr(body, "decided_by", "")}
            self._end_approval((run_id, body.target_id), outcome, at_ms, attrs)
        elif kind == "drift_detected":
            drift = event.drift_detected
            escalation = drift.ladder_level == _ESCALATION_LEVEL and drift.kind == _HUMAN_INTERVENTION_REQUIRED
            if escalation and run_id not in self._escalations:
                attributes = {"goldfive.run_id": run_id, "goldfive.drift_id": drift.drift_id}
                if self.record_details:  # the detail quotes the call that escalated, arguments included
                    attributes["goldfive.detail"] = drift.detail[:500]
                self._escalations[run_id] = self._tracer.start_span(
                    "goldfive.escalation", context=self._parent(run_id), attributes=attributes
                )

    def _parent(self, run_id: str) -> otel_context.Context | None:
        # Under the agent's current span when there is one (ADK's), else under our run span.
        if trace.get_current_span().get_span_context().is_valid:
            return None
        run_span = self._runs.get(run_id)
        return trace.set_span_in_context(run_span) if run_span is not None else None

    def _start_approval(self, event: events_pb2.Event, at_ms: int) -> None:
        req = event.approval_requested
        key = (event.run_id, req.target_id)
        if key in self._approvals:  # a re-request of the same target: the earlier wait ended
            self._end_approval(key, "superseded", at_ms, {})
        tool = req.metadata.get("tool_name", "") or req.kind
        span = self._tracer.start_span(
            "goldfive.approval",
            context=self._parent(event.run_id),
            attributes={
                "goldfive.run_id": event.run_id,
                "goldfive.target_id": req.target_id,
                "goldfive.kind": req.kind,
                "goldfive.tool": tool,
                "goldfive.rule": req.metadata.get("policy_rule", ""),
            },
        )
        self._approvals[key] = _Open(span=span, started_ms=at_ms, tool=tool)
        self._pending.add(1, {"goldfive.tool": tool})

    def _end_approval(self, key: tuple[str, str], outcome: str, at_ms: int, attrs: dict[str, str]) -> None:
        opened = self._approvals.pop(key, None)
        if opened is None:
            return
        wait_ms = max(0, at_ms - opened.started_ms)
        span = opened.span
        span.set_attribute("goldfive.outcome", outcome)
        if outcome in DECIDED_STATUSES:
            span.set_attribute("goldfive.decision", "approve" if outcome == ApprovalStatus.GRANTED else "reject")
        for name, value in attrs.items():
            if value:
                span.set_attribute(name, value)
        span.set_attribute("goldfive.wait_ms", wait_ms)
        span.end()
        labels = {"goldfive.tool": opened.tool, "goldfive.outcome": outcome}
        self._pending.add(-1, {"goldfive.tool": opened.tool})
        self._decisions.add(1, labels)
        self._latency.record(wait_ms, labels)
