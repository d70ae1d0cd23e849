"""What a notification says: one :class:`Notice` per event worth a ping, built once for every channel.

Requests (``approval_requested``), escalations (a ``drift_detected`` at ladder
level 4) and the follow-ups that close a request (granted, rejected, timed out,
cancelled). Everything that came from the agent or the model (prompt, tool
arguments, task id, drift detail) is made inert (control characters and bidi
marks escaped) and shortened before it reaches a message.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from typing import Any, Literal

from ..._text import inert
from ...convert import timestamp_to_ms
from ...events import payload_name
from ...pb.v1 import events_pb2
from ...policy import PolicyAuthority, RequestView
from ._config import NotifyConfig

__all__ = ["Notice", "NoticeKind", "as_judged", "asked_view", "notice_for"]

NoticeKind = Literal[
    "approval_requested",
    "escalation",
    "approval_granted",
    "approval_rejected",
    "approval_timed_out",
    "approval_cancelled",
]

FOLLOW_UPS: frozenset[str] = frozenset(
    {"approval_granted", "approval_rejected", "approval_timed_out", "approval_cancelled"}
)
ESCALATION_LEVEL = 4
HUMAN_INTERVENTION_REQUIRED = 37  # DriftKind on the wire
ARGS_SUMMARY_CHARS = 300


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%H:%M UTC") if ms else ""


def _args_summary(args_json: str) -> str:
    try:
        args = json.loads(args_json) if args_json else {}
    except ValueError:
        return inert(args_json, ARGS_SUMMARY_CHARS)
    if isinstance(args, dict):
        parts = [f"{inert(k, 40)}={inert(json.dumps(v, ensure_ascii=False), 80)}" for k, v in args.items()]
        return inert(", ".join(parts), ARGS_SUMMARY_CHARS)
    return inert(json.dumps(args, ensure_ascii=False), ARGS_SUMMARY_CHARS)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Notice:
    """One notification, channel-neutral; every text field is already inert and bounded."""

    kind: NoticeKind
    event_id: str
    run_id: str
    session_id: str
    target_id: str
    tool: str
    args_summary: str
    prompt: str
    rule: str
    approvers: str
    expires_at_ms: int
    decided_by: str
    detail: str
    at_ms: int
    link: str
    rule_note: str = ""
    """With ``serve --policy``: why the server's rule is the one shown (the agent named another, it denies the call,
    it allows it, or the call could not be judged); "" when plain."""

    @property
    def follow_up(self) -> bool:
        """True for the notices that close a request (answered in the request's thread or message)."""
        return self.kind in FOLLOW_UPS

    @property
    def title(self) -> str:
        """One line saying what happened, e.g. ``approved by ana at 12:03 UTC: transfer_funds``."""
        what = self.tool or "task"
        if self.kind == "approval_requested":
            return f"Approval needed: {what}"
        if self.kind == "escalation":
            return f"Run {inert(self.run_id, 60)} needs a person"
        by = f" by {self.decided_by}" if self.decided_by else ""
        at = f" at {_when(self.at_ms)}" if self.at_ms else ""
        verb = {
            "approval_granted": "approved",
            "approval_rejected": "rejected",
            "approval_timed_out": "timed out",
            "approval_cancelled": "cancelled",
        }[self.kind]
        return f"{what}: {verb}{by if self.kind in ('approval_granted', 'approval_rejected') else ''}{at}"

    def lines(self) -> list[tuple[str, str]]:
        """The labelled facts of the notice, in display order (empty ones left out)."""
        expiry = ""
        if self.expires_at_ms:
            expiry = dt.datetime.fromtimestamp(self.expires_at_ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        facts = [
            ("Tool", self.tool),
            ("Arguments", self.args_summary),
            ("Agent says", self.prompt),
            ("Rule", self.rule),
            ("Rule note", self.rule_note),
            ("Who may answer", self.approvers),
            ("Expires", expiry if self.kind == "approval_requested" else ""),
            ("Reason" if self.kind != "escalation" else "Drift", self.detail),
            ("Run", self.run_id),
            ("Request", self.target_id),
        ]
        return [(k, v) for k, v in facts if v]

    def as_text(self) -> str:
        """A plain-text rendering (mail bodies, logs)."""
        body = "\n".join(f"{k}: {v}" for k, v in self.lines())
        action = "Open the request" if self.kind != "escalation" else "Open the run"
        return f"{self.title}\n\n{body}\n\n{action}: {self.link}\n"

    def as_dict(self) -> dict[str, Any]:
        """The notice as JSON-ready data (the ``notice`` field of webhook bodies)."""
        data = dataclasses.asdict(self)
        data["title"] = self.title
        return data


def notice_for(event: events_pb2.Event, config: NotifyConfig) -> Notice | None:
    """The notice an event calls for, or None (most events call for none)."""
    kind = payload_name(event)
    common: dict[str, Any] = {
        "event_id": event.event_id,
        "run_id": inert(event.run_id, 120),
        "session_id": inert(event.session_id, 120),
        "at_ms": timestamp_to_ms(event.emitted_at),
    }
    empty: dict[str, Any] = {
        "tool": "",
        "args_summary": "",
        "prompt": "",
        "rule": "",
        "approvers": "",
        "expires_at_ms": 0,
        "decided_by": "",
        "detail": "",
    }
    if kind == "approval_requested":
        req = event.approval_requested
        meta = req.metadata
        return Notice(
            kind="approval_requested",
            target_id=inert(req.target_id, 120),
            link=config.link(req.target_id, event.run_id),
            **{
                **common,
                **empty,
                "tool": inert(meta.get("tool_name", ""), 80),
                "args_summary": _args_summary(meta.get("args_json", "")),
                "prompt": inert(req.prompt, 500),
                "rule": inert(meta.get("policy_rule", ""), 120),
                "approvers": inert(meta.get("policy_approvers", ""), 300),
                "expires_at_ms": timestamp_to_ms(req.expires_at) if req.HasField("expires_at") else 0,
            },
        )
    if kind == "drift_detected":
        drift = event.drift_detected
        # An escalation emits the original drift and the HUMAN_INTERVENTION_REQUIRED it became, both at
        # level 4: the second is the one that stops the run for a person.
        if drift.ladder_level != ESCALATION_LEVEL or drift.kind != HUMAN_INTERVENTION_REQUIRED:
            return None
        return Notice(
            kind="escalation",
            target_id=inert(drift.drift_id, 120),
            link=config.run_link(event.run_id),
            **{**common, **empty, "detail": inert(drift.detail, 500)},
        )
    if kind in FOLLOW_UPS:
        body = getattr(event, kind)
        decided_by = inert(getattr(body, "decided_by", ""), 80)
        detail = getattr(body, "detail", "") or getattr(body, "reason", "")
        return Notice(
            kind=kind,  # type: ignore[arg-type]  # narrowed by FOLLOW_UPS
            target_id=inert(body.target_id, 120),
            link=config.link(body.target_id, event.run_id),
            **{**common, **empty, "decided_by": decided_by, "detail": inert(detail, 500)},
        )
    return None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class _Asked:
    """A request as its ``approval_requested`` event holds it (what :class:`PolicyAuthority` reads of one)."""

    target_id: str
    kind: str
    metadata: Mapping[str, str]
    requested_at_ms: int
    args_digest: str
    original_args_digest: str = ""


def asked_view(event: events_pb2.Event) -> RequestView:
    """The request an ``approval_requested`` event asks, as the deciding side's rules read it."""
    req = event.approval_requested
    return _Asked(
        target_id=req.target_id,
        kind=req.kind,
        metadata=dict(req.metadata),
        requested_at_ms=timestamp_to_ms(event.emitted_at),
        args_digest=req.args_digest,
    )


def as_judged(notice: Notice, request: RequestView, rules: PolicyAuthority) -> Notice:
    """``notice`` saying the rule that governs ``request`` on the deciding side (``serve --policy``) and who may
    answer under it, never the rule and approvers the agent wrote; its channels are picked by those."""
    judged = rules.judge(request)
    ask = judged.ask
    return dataclasses.replace(
        notice,
        rule=inert(judged.rule, 120),
        approvers=inert(",".join(ask.approvers) if ask is not None else "", 300),
        rule_note=inert(_join(judged.note, judged.refusal), 500),
    )


def _join(*parts: str) -> str:
    return " — ".join(p for p in parts if p)
