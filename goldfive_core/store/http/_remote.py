"""The store operations an agent needs, carried over HTTP to ``goldfive serve`` (``/api/agent/...``).

:class:`RemoteStore` is the roles (:mod:`goldfive_core.store.roles`) that the agent side of a channel, its
sink and its ledger use, and no others: a :class:`~goldfive_core.store.roles.RunWriter` (events, heartbeats),
a :class:`~goldfive_core.store.roles.LedgerStore` (the execution ledger, decisions recorded in the store) and
a :class:`~goldfive_core.store.roles.GrantReader` (the standing grants of the agent's runs), so
:class:`~goldfive_core.store.StoreSink` and :class:`~goldfive_core.store.execution.StoreLedger` run over HTTP
unchanged: the same retries, the same at-most-once rules. Failures are translated at this boundary: a server
that cannot be reached (or answers 5xx/429) raises :class:`~goldfive_core.store.base.StoreUnavailableError`,
a refusal (4xx) :class:`~goldfive_core.store.base.StoreError`.
Synchronous and thread-safe (one httpx client per thread), as store methods are.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import urllib.parse
from collections.abc import Sequence
from typing import Any

import httpx
from google.protobuf import json_format

from ..._util import now_ms, shorten
from ...approvals import ApprovalStatus
from ...control import ControlMessage
from ...errors import AgentRefused
from ...pb.v1 import events_pb2
from ..agents import PASS_HEADER
from ..base import (
    DEFAULT_STALE_AFTER_MS,
    HOST,
    ApprovalRow,
    ExecutionRow,
    ExecutionState,
    StoredDecision,
    StoreError,
    StoreUnavailableError,
)
from ..grants import GrantRow

__all__ = ["AgentRefused", "RemoteStore"]

logger = logging.getLogger(__name__)


def _event_json(event: events_pb2.Event) -> dict[str, Any]:
    out: dict[str, Any] = json_format.MessageToDict(event, preserving_proto_field_name=True)
    return out


class RemoteStore:
    """The agent's side of ``/api/agent``: one or more server URLs (tried in turn) and an agent token."""

    stale_after_ms = DEFAULT_STALE_AFTER_MS
    retry_budget_s = 0.0
    """The HttpChannel retries by its own ``unreachable_after_s``; each request here is tried once."""

    def __init__(self, urls: Sequence[str], *, token: str, timeout_s: float = 10.0) -> None:
        if not urls:
            raise ValueError("HttpChannel needs at least one server URL")
        cleaned = []
        for url in urls:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ValueError(f"a goldfive serve URL must start with http:// or https://, got {url!r}")
            cleaned.append(url.rstrip("/"))
        if not isinstance(token, str) or not token.strip():
            raise ValueError("HttpChannel needs an agent token (goldfive users add NAME --role agent)")
        self.urls = tuple(cleaned)
        self._index = 0
        self._token = token.strip()
        self.timeout_s = timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self.proof = ""
        """The last pass a server gave for this token (PASS_HEADER), sent with every request: a server sharing the
        key file takes the token on it without a scrypt check (an agent failing over is served at once)."""
        self.streamed: frozenset[str] = frozenset()
        """The runs whose liveness the channel's open stream carries (the server said so): not heartbeated here."""
        self.beats = 0
        """How many heartbeat requests were sent (observability and tests)."""

    # -- plumbing -------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The server tried now (for messages; never carries the token)."""
        return self.urls[self._index % len(self.urls)]

    def rotate(self, failed: str) -> None:
        """``failed`` did not answer: try the next URL (a no-op with one, or when another thread moved on)."""
        with self._lock:
            if self.url == failed:
                self._index = (self._index + 1) % len(self.urls)

    @property
    def headers(self) -> dict[str, str]:
        """The Authorization header."""
        return {"Authorization": f"Bearer {self._token}"}

    def pass_headers(self) -> dict[str, str]:
        """The pass header to send with a request ({} until a server gave one)."""
        proof = self.proof
        return {PASS_HEADER: proof} if proof else {}

    def _client(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            client = httpx.Client(timeout=self.timeout_s, headers=self.headers)
            self._local.client = client
        return client

    def close(self) -> None:
        """Close this thread's connection."""
        client = getattr(self._local, "client", None)
        self._local.client = None
        if client is not None:
            client.close()

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One request to the current server; its JSON answer, or StoreUnavailableError / AgentRefused."""
        base = self.url
        try:
            response = self._client().request(method, base + path, json=body, headers=self.pass_headers())
        except httpx.HTTPError as exc:
            self.rotate(base)
            raise StoreUnavailableError(f"goldfive serve at {base} unreachable: {type(exc).__name__}: {exc}") from None
        return answer(base, response, self.rotate)

    # -- events (what StoreSink calls) ---------------------------------------------------------------------------
    def append_events(self, events: Sequence[events_pb2.Event], *, pid: int, host: str) -> None:
        """Write events; returns once the server committed them."""
        self.request(
            "POST", "/api/agent/events", {"pid": pid, "host": host, "events": [_event_json(e) for e in events]}
        )

    def acks_with_events(
        self, base: str, endpoint: str, acks: list[dict[str, Any]], events: Sequence[events_pb2.Event], pid: int
    ) -> Any:
        """``POST /api/agent/acks`` to ``base`` (a server that said it takes events with acks) carrying ``events``:
        committed before the acks are recorded; the server's answer (its JSON), or StoreUnavailableError /
        AgentRefused."""
        body = {
            "endpoint": endpoint,
            "acks": acks,
            "pid": pid,
            "host": HOST,
            "events": [_event_json(e) for e in events],
        }
        try:
            response = self._client().post(base + "/api/agent/acks", json=body, headers=self.pass_headers())
        except httpx.HTTPError as exc:
            raise StoreUnavailableError(f"goldfive serve at {base} unreachable: {type(exc).__name__}: {exc}") from None
        return answer(base, response)

    def heartbeat(self, run_ids: Sequence[str]) -> None:
        """The runs are alive (those an open stream keeps alive need no request)."""
        streamed = self.streamed
        runs = [run for run in run_ids if run not in streamed]
        if runs:
            self.beats += 1
            self.request("POST", "/api/agent/heartbeat", {"run_ids": runs})

    def reap_crashed(self) -> list[str]:
        """Nothing: the servers close runs whose process stopped heartbeating (not every agent's sink)."""
        return []

    # -- decisions recorded in the store (the channel's sweep) ----------------------------------------------------
    def approvals(self, *, open_only: bool = True, run_id: str | None = None, **_: Any) -> list[ApprovalRow]:
        """The run's decided records (only what the channel's sweep reads is filled in)."""
        if not run_id:
            return []
        found = self.request("GET", f"/api/agent/runs/{_path(run_id)}/decisions").get("decisions", [])
        rows = []
        for index, item in enumerate(found if isinstance(found, list) else []):
            approved = item.get("decision") == "approve"
            rows.append(
                ApprovalRow(
                    id=index,
                    run_id=str(item.get("run_id", "")),
                    session_id="",
                    target_id=str(item.get("target_id", "")),
                    kind="",
                    prompt="",
                    task_id="",
                    tool_name="",
                    args_json="",
                    args_digest=str(item.get("args_digest", "")),
                    metadata={},
                    status=ApprovalStatus.GRANTED if approved else ApprovalStatus.REJECTED,
                    requested_at_ms=0,
                    expires_at_ms=0,
                    timeout_ms=0,
                    decided_at_ms=int(item.get("decided_at_ms", 0)),
                    decided_by=str(item.get("decided_by", "")),
                    decision=str(item.get("decision", "")),
                    detail=str(item.get("detail", "")),
                    edited_args_json=str(item.get("edited_args_json", "")),
                    decided_via=str(item.get("decided_via", "")),
                    decided_channel=str(item.get("decided_channel", "")),
                    decision_sig=str(item.get("decision_sig", "")),
                )
            )
        return rows

    # -- standing grants (what StoreSink.standing_grants reads through grants.grant_rows) -----------------------
    def grant_rows(
        self,
        *,
        active_only: bool = False,
        rule: str | None = None,
        tool: str | None = None,
        at_ms: int | None = None,
        limit: int = 1000,
    ) -> list[GrantRow]:
        """The grants made in this agent's runs (revoked ones too), as the server keeps them; newest first."""
        query = {k: v for k, v in (("rule", rule), ("tool", tool)) if v is not None}
        suffix = f"?{urllib.parse.urlencode(query)}" if query else ""
        found = self.request("GET", f"/api/agent/grants{suffix}").get("grants", [])
        rows: list[GrantRow] = []
        for item in found if isinstance(found, list) else []:
            values: dict[str, Any] = {}
            for f in dataclasses.fields(GrantRow):
                value = item.get(f.name, "" if f.name == "run_status" else None) if isinstance(item, dict) else None
                if type(value) is not (int if f.name.endswith("_ms") else str):
                    raise StoreError(f"goldfive serve at {self.url} answered a grant without a valid {f.name!r}")
                values[f.name] = value
            row = GrantRow(**values)
            if active_only and row.state(at_ms if at_ms is not None else now_ms()) != "active":
                continue
            rows.append(row)
        return rows[:limit]

    # -- the execution ledger (what StoreLedger calls) -------------------------------------------------------------
    def _ledger(self, call_id: str, run_id: str | None) -> dict[str, Any]:
        if not run_id:
            raise StoreError("an agent's ledger look-up must name its run")
        found = self.request("GET", f"/api/agent/ledger/{_path(call_id)}?{urllib.parse.urlencode({'run': run_id})}")
        return found if isinstance(found, dict) else {}

    def execution(self, target_id: str, *, run_id: str | None = None) -> ExecutionRow | None:
        """This agent's ledger entry for ``target_id`` (``run_id``: the asking run, one of this agent's)."""
        item = self._ledger(target_id, run_id).get("execution")
        if not isinstance(item, dict):
            return None
        return ExecutionRow(
            target_id=str(item["target_id"]),
            run_id=str(item["run_id"]),
            state=ExecutionState(item["state"]),
            started_at_ms=int(item["started_at_ms"]),
            finished_at_ms=int(item["finished_at_ms"]),
            result_json=str(item["result_json"]),
            pid=int(item["pid"]),
            host=str(item["host"]),
            args_digest=str(item.get("args_digest", "")),
            owner=str(item.get("owner", "")),
        )

    def find_decision(self, target_id: str, *, run_id: str | None = None) -> StoredDecision | None:
        """A decision recorded for ``target_id`` while the agent was down (in one of this agent's runs)."""
        item = self._ledger(target_id, run_id).get("decision")
        if not isinstance(item, dict):
            return None
        edited = item.get("edited_args")
        return StoredDecision(
            approval_id=int(item["approval_id"]),
            run_id=str(item["run_id"]),
            target_id=str(item["target_id"]),
            approved=bool(item["approved"]),
            detail=str(item["detail"]),
            decided_by=str(item["decided_by"]),
            args_digest=str(item["args_digest"]),
            edited_args=edited if isinstance(edited, dict) else None,
            decided_at_ms=int(item["decided_at_ms"]),
            decided_via=str(item["decided_via"]),
            decided_channel=str(item.get("decided_channel", "")),
            signature=str(item.get("signature", "")),
            expired=item.get("expired") is True,  # a server before it: never an expiry (a rejection; nothing runs)
        )

    def mark_executing(self, target_id: str, *, run_id: str, pid: int, host: str, args_digest: str = "") -> bool:
        """Claim the right to run the body (False: claimed before)."""
        body = {"run_id": run_id, "pid": pid, "host": host, "args_digest": args_digest}
        return bool(self.request("POST", f"/api/agent/ledger/{_path(target_id)}/executing", body).get("claimed"))

    def mark_done(self, target_id: str, *, result_json: str, run_id: str | None = None) -> bool:
        """The body ``run_id`` claimed finished (a claim the server does not hold is refused: AgentRefused)."""
        if not run_id:
            raise StoreError(f"an agent's 'done' of {target_id!r} must name the run that claimed it")
        body = {"run_id": run_id, "result_json": result_json}
        return bool(self.request("POST", f"/api/agent/ledger/{_path(target_id)}/done", body).get("done"))

    def release_execution(self, target_id: str, *, run_id: str, args_digest: str = "") -> bool:
        """Give back ``run_id``'s claim whose body never started (False: the server holds no such claim)."""
        body = {"run_id": run_id, "args_digest": args_digest}
        return bool(self.request("POST", f"/api/agent/ledger/{_path(target_id)}/released", body).get("released"))

    # -- what an agent may not do ---------------------------------------------------------------------------------
    def post_control(self, msg: ControlMessage, *, run_id: str = "") -> int:
        """Refused: control messages come from people, through goldfive serve."""
        raise StoreError("an agent's HttpChannel cannot send control messages; people decide through goldfive serve")


def _path(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def answer(base: str, response: httpx.Response, rotate: Any = None) -> Any:
    """The JSON of a 2xx answer; StoreUnavailableError for 5xx/429, AgentRefused for another 4xx."""
    if response.status_code < 300:
        try:
            return response.json()
        except ValueError:
            raise StoreUnavailableError(f"goldfive serve at {base} answered something that is not JSON") from None
    try:
        error = response.json().get("error", "")
    except (ValueError, AttributeError):
        error = ""
    error = shorten(str(error) or response.reason_phrase, 300)
    if response.status_code >= 500 or response.status_code == 429:
        if rotate is not None:
            rotate(base)
        raise StoreUnavailableError(f"goldfive serve at {base} answered {response.status_code}: {error}")
    raise AgentRefused(response.status_code, f"goldfive serve at {base} refused ({response.status_code}): {error}")


def loads(text: str) -> Any:
    """JSON of an SSE data line (None when it is not JSON)."""
    try:
        return json.loads(text)
    except ValueError:
        return None
