"""The history of ``goldfive serve``: every closed request as a record, newest first, searchable, exportable.

``GET /api/review/stats`` is the reviewer tier's part of that history (``goldfive review stats --url``).

``GET /api/history`` lists decided, expired and cancelled requests by the time they closed (decided, or asked
for one nobody decided), filtered by status, tool, agent, decider and a time range, a page at a time; with
``format=jsonl`` or ``format=csv`` it answers the same records as a download (at most :data:`MAX_EXPORT`).
``status=refused`` lists the decisions that were not applied (``decision_refused`` on the audit log: a bad
signature, a decider the rule does not allow, a request past its deadline): who claimed what, and why not.
What agents wrote stays inert: a CSV cell that a spreadsheet would read as a formula is prefixed with ``'``.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._util import shorten
from ..approvals import DECIDED_STATUSES, ApprovalStatus
from ..policy import PolicyAuthority
from ..review import selected_stats
from ..store.base import ApprovalRow, AuditRow, Store
from ..store.reviews import reviewed_calls
from ..store.views import approvals_json
from .auth import User
from .inputs import ApiError, int_param, text_field

__all__ = ["CSV_COLUMNS", "MAX_EXPORT", "HistoryApi"]

MAX_PAGE = 500
MAX_EXPORT = 10_000
"""Records one export answers at most (narrow the filters, or page with ``offset``, for more)."""

_STATUSES: Mapping[str, frozenset[ApprovalStatus]] = {
    "all": DECIDED_STATUSES | {ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED},
    "decided": DECIDED_STATUSES,
    "expired": frozenset({ApprovalStatus.EXPIRED}),
    "cancelled": frozenset({ApprovalStatus.CANCELLED}),
}

CSV_COLUMNS = (
    "closed_at",
    "status",
    "decision",
    "tool",
    "decided_by",
    "reason",
    "agent",
    "run_id",
    "target_id",
    "request_id",
    "args_json",
    "edited_args_json",
)
"""The columns of ``format=csv``, in order (``closed_at``: ISO 8601, UTC)."""

_FORMULA = ("=", "+", "-", "@", "\t", "\r")


class HistoryApi:
    """``GET /api/history`` over ``store``; ``rules`` show each record's rule as the server enforces it."""

    def __init__(self, store: Store, rules: PolicyAuthority) -> None:
        self.store = store
        self.rules = rules

    async def history(self, request: Request, user: User) -> Response:
        params = request.query_params
        status = params.get("status", "all")
        if status not in _STATUSES and status != REFUSED:
            known = ", ".join((*_STATUSES, REFUSED))
            raise ApiError(400, f"unknown status {shorten(status, 40)!r}: use one of {known}")
        form = params.get("format", "json")
        if form not in ("json", "jsonl", "csv"):
            raise ApiError(400, f"unknown format {shorten(form, 40)!r}: use json, jsonl or csv")
        if status == REFUSED:
            refused, matched = await asyncio.to_thread(self._refused, request)
            return _answer(form, refused, matched, request)
        exporting = form != "json"
        most = MAX_EXPORT if exporting else MAX_PAGE
        limit = int_param(request, "limit", most if exporting else 50, low=1, high=most)
        query = {k: text_field(dict(params), k, limit=200) or None for k in ("tool", "agent", "decider")}
        offset = int_param(request, "offset", 0, low=0, high=10**9)
        page = await asyncio.to_thread(
            self.store.approval_page,
            statuses=sorted(s.value for s in _STATUSES[status]),
            tool=query["tool"],
            agent=query["agent"],
            decided_by=query["decider"],
            since_ms=int_param(request, "since", 0, low=0, high=2**62),
            until_ms=int_param(request, "until", 0, low=0, high=2**62),
            newest_first=True,
            limit=limit,
            offset=offset,
        )
        items = await asyncio.to_thread(approvals_json, self.store, page.rows, rules=self.rules)
        return _answer(form, items, page.total, request)

    async def review_stats(self, request: Request, user: User) -> Response:
        """``GET /api/review/stats`` (``goldfive review stats --url``): the reviewers' verdicts against the people's
        decisions, each checked against this server's own ``--policy`` when it has one (``verified``)."""
        params = dict(request.query_params)
        query = {k: text_field(params, k, limit=200) for k in ("run", "rule", "reviewer")}
        policy = self.rules.policy

        def count() -> dict[str, Any]:
            calls = reviewed_calls(self.store, run_id=query["run"] or None)
            stats = selected_stats(calls, rule=query["rule"], reviewer=query["reviewer"], policy=policy)
            return stats.as_dict()

        return JSONResponse({**await asyncio.to_thread(count), "checked_against_server_policy": policy is not None})

    def _refused(self, request: Request) -> tuple[list[dict[str, Any]], int]:
        """The refused decisions the search matches, newest first: (this page, how many match)."""
        params = request.query_params
        exporting = params.get("format", "json") != "json"
        most = MAX_EXPORT if exporting else MAX_PAGE
        limit = int_param(request, "limit", most if exporting else 50, low=1, high=most)
        offset = int_param(request, "offset", 0, low=0, high=10**9)
        query = {k: text_field(dict(params), k, limit=200) for k in ("tool", "agent", "decider")}
        rows = self.store.audit_rows_of_kind(
            (REFUSED_KIND,),
            since_ms=int_param(request, "since", 0, low=0, high=2**62),
            until_ms=int_param(request, "until", 0, low=0, high=2**62),
            limit=MAX_EXPORT,
        )
        requests: dict[tuple[str, str], ApprovalRow | None] = {}
        matched = []
        for row in rows:
            item = refused_json(row, lambda target, run: _request_of(self.store, requests, target, run))
            if _matches(item, query):
                matched.append(item)
        return matched[offset : offset + limit], len(matched)


REFUSED = "refused"
REFUSED_KIND = "decision_refused"


def _matches(item: Mapping[str, Any], query: Mapping[str, str]) -> bool:
    """The search's tool, agent and decider, each exact when given."""
    wanted = (("tool_name", query["tool"]), ("agent", query["agent"]), ("decided_by", query["decider"]))
    return all(not want or item[key] == want for key, want in wanted)


def refused_json(row: AuditRow, request_of: Callable[[str, str], ApprovalRow | None]) -> dict[str, Any]:
    """A ``decision_refused`` audit row as a history record: ``status`` ``refused``, who claimed which decision
    (``claimed``: approve or reject, unverified), when, and why it was not applied (``detail``).

    ``request_of(target_id, run_id)``: the request it was refused for, to name its tool and agent.
    """
    refused = row.event().decision_refused
    run_id = refused.request_run_id or row.run_id
    asked = request_of(refused.target_id, run_id)
    return {
        "status": REFUSED,
        "state": REFUSED,
        "decision": "",
        "claimed": refused.decision,
        "decided_by": refused.decided_by,
        "decided_channel": refused.channel,
        "decided_at_ms": row.emitted_at_ms,
        "detail": refused.reason,
        "target_id": refused.target_id,
        "run_id": run_id,
        "request_id": refused.request_id or (asked.request_id if asked is not None else ""),
        "tool_name": asked.tool_name if asked is not None else "",
        "agent": asked.metadata.get("agent_name", "") if asked is not None else "",
        "kind": asked.kind if asked is not None else "",
        "audit_seq": row.seq,
    }


def _request_of(
    store: Store, seen: dict[tuple[str, str], ApprovalRow | None], target_id: str, run_id: str
) -> ApprovalRow | None:
    key = (target_id, run_id)
    if key not in seen:
        seen[key] = next((r for r in store.approvals_for(target_id) if r.run_id == run_id), None)
    return seen[key]


def _answer(form: str, items: list[dict[str, Any]], total: int, request: Request) -> Response:
    if form == "jsonl":
        body = "".join(json.dumps(item, ensure_ascii=True, sort_keys=True) + "\n" for item in items)
        return _download(body, "application/x-ndjson", "goldfive-history.jsonl")
    if form == "csv":
        return _download(csv_text(items), "text/csv; charset=utf-8", "goldfive-history.csv")
    limit = int_param(request, "limit", 50, low=1, high=MAX_EXPORT)
    offset = int_param(request, "offset", 0, low=0, high=10**9)
    return JSONResponse({"approvals": items, "total": total, "limit": limit, "offset": offset})


def csv_text(items: Sequence[Mapping[str, Any]]) -> str:
    """The records as CSV with :data:`CSV_COLUMNS`; agents' text is never read as a formula."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    writer.writerows(_row(item) for item in items)
    return out.getvalue()


def _row(item: Mapping[str, Any]) -> Iterable[str]:
    closed = int(item.get("decided_at_ms") or 0) or int(item.get("requested_at_ms") or 0)
    values = {
        "closed_at": datetime.fromtimestamp(closed / 1000, UTC).isoformat(timespec="milliseconds") if closed else "",
        "status": item.get("status", ""),
        "decision": item.get("decision") or item.get("claimed", ""),
        "tool": item.get("tool_name", ""),
        "decided_by": item.get("decided_by", ""),
        "reason": item.get("detail", ""),
        "agent": item.get("agent", ""),
        "run_id": item.get("run_id", ""),
        "target_id": item.get("target_id", ""),
        "request_id": item.get("request_id", ""),
        "args_json": item.get("args_json", ""),
        "edited_args_json": item.get("edited_args_json", ""),
    }
    return (_inert(str(values[column] or "")) for column in CSV_COLUMNS)


def _inert(cell: str) -> str:
    return "'" + cell if cell.startswith(_FORMULA) else cell


def _download(body: str, media_type: str, name: str) -> Response:
    return Response(
        body,
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="{name}"', "Cache-Control": "no-store"},
    )
