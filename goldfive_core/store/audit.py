"""The audit hash chain: each row stores ``sha256(prev_hash + canonical bytes of the event)``.

Editing, deleting or reordering a row breaks the chain from that row on; the
chain head (last seq and hash) is kept in its own row so a truncated tail is
detected too. :func:`verify_chain` walks the rows and names every break, and checks the
approval records (what ``pending`` and ``show`` print) against the events they were made from.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from .._stored import NUL_MARK
from .._util import args_digest, canonical_json
from ..approvals import DECIDED_STATUSES, OPEN_STATUSES, ApprovalStatus, sources
from ..convert import timestamp_to_ms
from ..events import payload_name
from ..pb.v1 import events_pb2, types_pb2
from .base import AuditReport, AuditRow

if TYPE_CHECKING:
    from ..signing import TrustKey
    from .base import ApprovalRow

__all__ = [
    "GENESIS_HASH",
    "SERVER_CHANNELS",
    "Vouched",
    "canonical_event_bytes",
    "chain_hash",
    "result_digest",
    "signature_problems",
    "verify_chain",
    "verify_since",
]

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first row."""

_MAX_PROBLEMS = 20


def canonical_event_bytes(event: events_pb2.Event) -> bytes:
    """The bytes the chain hashes: deterministic protobuf serialization of the event."""
    return event.SerializeToString(deterministic=True)


def _ms(ts: Any) -> int:
    """Epoch milliseconds of a hashed event's timestamp; -1 when an edited body holds one out of range (it then
    differs from every column and time it is compared with: reported, never a crash)."""
    try:
        return timestamp_to_ms(ts)
    except (ValueError, OverflowError):
        return -1


def result_digest(result_json: str) -> str:
    """How a ledger event names a stored tool result ("" for none): its sha256, not the result itself."""
    if not result_json:
        return ""
    return "sha256:" + hashlib.sha256(result_json.encode("utf-8", "surrogateescape")).hexdigest()


def chain_hash(prev_hash: str, body: bytes) -> str:
    """The hash of one row given the previous row's hash (a garbled ``prev_hash`` hashes, it never raises)."""
    return hashlib.sha256(prev_hash.encode("utf-8", "surrogateescape") + body).hexdigest()


_STORE_NOTE = "recorded in the store while the run's process was not running"
"""What ``decide_in_store`` adds to the detail of the decision event it writes."""

_Key = tuple[str, str]
_Decision = tuple[bool, "events_pb2.ApprovalGranted | events_pb2.ApprovalRejected"]


class _ApprovalHistory:
    """The latest request and its first decision per (run, target), as the chain tells them."""

    def __init__(self, trust: TrustKey | None = None, audit_after: int = 0, approvals_after: int = 0) -> None:
        self.trust = trust
        self.audit_after = audit_after
        """The last audit row and record written before migration 12 (numbered by the database, maybe with gaps)."""
        self.approvals_after = approvals_after
        """The key decisions are signed with (``audit verify --public-key``): each signature is then verified."""
        self.requests: dict[_Key, tuple[events_pb2.Event, events_pb2.ApprovalRequested]] = {}
        self.decisions: dict[_Key, _Decision] = {}
        self.closed: dict[_Key, tuple[ApprovalStatus, str]] = {}
        """Status and detail of an undecided record, by its timeout and cancel events (the store's guards)."""
        self.expired_by: dict[_Key, tuple[str, str, int]] = {}
        """Who expired a record by the deciding side's rule (``approval_timed_out.expired_by``), its channel, when."""
        self.first_seq: dict[_Key, int] = {}
        """The chain row of each call's first request: the store numbers records in this order (1, 2, 3, ...)."""
        self.decided_at: dict[_Key, dict[bool, set[int]]] = {}
        """When the decision events since the latest request were emitted, by verdict (the record's decided_at_ms)."""
        self.progress: dict[_Key, str] = {}
        """The tally of the latest vote since the latest request (the record's quorum_progress)."""

    def see(self, event: events_pb2.Event, seq: int) -> None:
        kind = payload_name(event)
        if kind == "approval_requested":
            key = (event.run_id, event.approval_requested.target_id)
            self.requests[key] = (event, event.approval_requested)
            self.first_seq.setdefault(key, seq)
            self.decisions.pop(key, None)  # asked again: a new record
            self.decided_at[key] = {}
            self.progress[key] = ""
            self.closed[key] = (ApprovalStatus.PENDING, "")
            self.expired_by.pop(key, None)
        elif kind == "approval_voted":
            self.progress[(event.run_id, event.approval_voted.target_id)] = event.approval_voted.progress
        elif kind == "approval_timed_out":
            out = event.approval_timed_out
            new = ApprovalStatus.TIMED_OUT if out.still_open else ApprovalStatus.EXPIRED
            key = (event.run_id, out.target_id)
            if out.expired_by and self._close(key, new, out.detail):
                self.expired_by[key] = (out.expired_by, out.channel, _ms(event.emitted_at))
            else:
                self._close(key, new, out.detail)
        elif kind == "approval_cancelled":
            cancelled = event.approval_cancelled
            self._close((event.run_id, cancelled.target_id), ApprovalStatus.CANCELLED, cancelled.reason)
        elif kind in ("approval_granted", "approval_rejected"):
            granted = kind == "approval_granted"
            msg = event.approval_granted if granted else event.approval_rejected
            key = (event.run_id, msg.target_id)
            self.decisions.setdefault(key, (granted, msg))  # the first one is final
            times = self.decided_at.setdefault(key, {}).setdefault(granted, set())
            times.add(_ms(event.emitted_at))

    def _close(self, key: _Key, new: ApprovalStatus, detail: str) -> bool:
        current = self.closed.get(key)
        if current is not None and key not in self.decisions and current[0] in sources(new):
            self.closed[key] = (new, detail)
            return True
        return False

    def check(self, records: Iterable[ApprovalRow | str]) -> list[str]:
        """``records``: every approval record, or the problem of one that could not be read."""
        problems: list[str] = []
        seen: set[_Key] = set()
        ordered = sorted(self.first_seq, key=self.first_seq.__getitem__)
        # Records of calls first asked after migration 12 are numbered on from the highest number before it.
        fresh = [key for key in ordered if self.first_seq[key] > self.audit_after]
        number = {key: self.approvals_after + n for n, key in enumerate(fresh, 1)}
        legacy: list[tuple[int, int, str]] = []
        for row in records:
            if isinstance(row, str):
                problems.append(row)
                continue
            key = (row.run_id, row.target_id)
            seen.add(key)
            name = f"approval #{row.id} ({row.target_id!r} of run {row.run_id})"
            found = self.requests.get(key)
            if found is None:
                problems.append(f"{name} has no request on the audit log (inserted or edited)")
                continue
            if key not in number:  # written before migration 12: its number must only keep the order
                if isinstance(row.id, int) and row.id <= self.approvals_after:
                    legacy.append((self.first_seq[key], row.id, name))
                else:
                    problems.append(f"{name}: id is above the numbers of records written before the upgrade (edited)")
            elif row.id != number[key]:
                # Records are numbered in the order their calls were first requested (under the chain's lock).
                problems.append(
                    f"{name}: id differs from its place on the audit log (the request numbered {number[key]}): "
                    "renumbered or swapped (edited)"
                )
            event, req = found
            edited = _request_edits(row, event, req, self.progress.get(key, ""))
            if edited:
                problems.append(f"{name}: {', '.join(edited)} differs from its request on the audit log (edited)")
            times = self.decided_at.get(key, {})
            if key not in number and row.decided_via == "run" and times.get(row.decision == "approve"):
                # Before migration 12 a run's decision kept its ack's time, a moment before its event's.
                logged_at = times[row.decision == "approve"]
                if row.requested_at_ms <= row.decided_at_ms <= max(logged_at):
                    times = {**times, row.decision == "approve": {*logged_at, row.decided_at_ms}}
            problems.extend(
                self._check_decision(
                    name, row, self.decisions.get(key), self.closed.get(key), times, self.expired_by.get(key)
                )
            )
            if self.trust is not None:
                problems.extend(
                    signature_problems(
                        name, row, self.trust, req.metadata.get("policy_grants", ""), _rule_of(req.metadata)
                    )
                )
        legacy.sort()
        for (_, before, _), (_, ident, name) in itertools.pairwise(legacy):
            if ident <= before:
                problems.append(f"{name}: id is out of the order its request has on the audit log (edited)")
        for run_id, target_id in self.requests.keys() - seen:
            problems.append(f"the request {target_id!r} of run {run_id} is on the audit log but its record is gone")
        return problems

    @staticmethod
    def _check_decision(
        name: str,
        row: ApprovalRow,
        logged: _Decision | None,
        closed: tuple[ApprovalStatus, str] | None,
        times: dict[bool, set[int]],
        expired: tuple[str, str, int] | None = None,
    ) -> list[str]:
        status = row.status.value
        if row.status not in DECIDED_STATUSES:
            if logged is not None and row.status in OPEN_STATUSES:
                return [f"{name} is {status} but the audit log has its decision (edited)"]
            want_status, want_detail = closed or (ApprovalStatus.PENDING, "")
            # Expired by the deciding side's rule (recorded in the store): who, how and when, and its signature.
            by, channel, at = expired or ("", "", 0)
            undecided = {
                "status": (status, want_status.value),
                "detail": (row.detail, want_detail),
                "decided_by": (row.decided_by, by),
                "decision": (row.decision, ""),
                "edited_args_json": (row.edited_args_json, ""),
                "decided_via": (row.decided_via, "store" if by else ""),
                "decided_channel": (row.decided_channel, channel),
                "decided_at_ms": (row.decided_at_ms, at),
                "decision_sig": (
                    row.decision_sig if not by else _signature_problem(row) is None,
                    "" if not by else True,
                ),
            }
            differs = [column for column, (stored, logged_value) in undecided.items() if stored != logged_value]
            if differs and logged is None:
                return [f"{name}: {', '.join(differs)} differs from what the audit log says of it (edited)"]
            return []
        if logged is None:
            return [
                f"{name} is {status} by {row.decided_by!r} but no decision for it is on the audit log "
                "(edited, or its run died before logging it)"
            ]
        granted, msg = logged
        edited_json = msg.edited_args_json if isinstance(msg, events_pb2.ApprovalGranted) else ""
        in_store = msg.detail == _STORE_NOTE or msg.detail.endswith(f" ({_STORE_NOTE})")
        details = {msg.detail, msg.detail.removesuffix(f" ({_STORE_NOTE})")}
        if msg.detail == _STORE_NOTE:
            details.add("")
        differs = [
            column
            for column, ok in (
                ("status", (row.status is ApprovalStatus.GRANTED) == granted),
                ("decision", row.decision == ("approve" if granted else "reject")),
                ("decided_via", row.decided_via == ("store" if in_store else "run")),
                ("decided_channel", row.decided_channel == msg.channel),
                ("decided_by", row.decided_by == msg.decided_by),
                ("edited_args_json", _same_json(row.edited_args_json, edited_json)),
                ("detail", row.detail in details),
                # The store writes the time of the decision's event (a store decision's, or the run's own).
                ("decided_at_ms", row.decided_at_ms in times.get(granted, ())),
                ("decision_sig", _signature_problem(row) is None),
                ("request_id", msg.request_id in ("", row.request_id)),
            )
            if not ok
        ]
        if differs:
            return [f"{name}: {', '.join(differs)} differs from its decision on the audit log (edited)"]
        return []


def _request_edits(
    row: ApprovalRow, event: events_pb2.Event, req: events_pb2.ApprovalRequested, progress: str
) -> list[str]:
    """The shown columns of an approval record that differ from its request event (and the latest vote's tally)."""
    meta = dict(req.metadata)
    expires = _ms(req.expires_at) if req.HasField("expires_at") else 0
    shown = {
        "session_id": (row.session_id, event.session_id),
        "kind": (row.kind, req.kind),
        "prompt": (row.prompt, req.prompt),
        "task_id": (row.task_id, req.task_id),
        "tool_name": (row.tool_name, meta.get("tool_name", "")),
        # An edit in a quorum put other arguments on the table; the call's own are kept as the original.
        "args_json": (
            row.original_args_json if row.original_args_digest else row.args_json,
            meta.get("args_json", ""),
        ),
        "args_digest": (row.original_args_digest or row.args_digest, req.args_digest),
        # Set together, only by an edit in a quorum (then args_* hold the edited arguments).
        "original_args_json": (bool(row.original_args_json), bool(row.original_args_digest)),
        "metadata": (dict(row.metadata), meta),
        "requested_at_ms": (row.requested_at_ms, _ms(event.emitted_at)),
        "expires_at_ms": (row.expires_at_ms, expires),
        "timeout_ms": (row.timeout_ms, req.timeout_ms),
        "quorum_progress": (row.quorum_progress, progress),
        # The request's own identity: what its decision (and a server's signature of it) is bound to.
        "request_id": (row.request_id, req.request_id),
    }
    edited = [column for column, (stored, logged) in shown.items() if stored != logged]
    if row.original_args_digest and (
        # An edit in a quorum: no event carries the arguments on the table; they must at least be the
        # ones their digest names, and, once approved, the ones the decision ran with.
        not _digest_of(row.tool_name, row.args_json, row.args_digest)
        or (row.decision == "approve" and not _same_json(row.args_json, row.edited_args_json))
    ):
        edited.append("args_json (edited in the quorum)")
    return edited


def _signature_problem(row: ApprovalRow) -> str | None:
    """None when ``decision_sig`` is empty or a well-formed signature block of this decision's channel.

    The block is not in any event: what readers are shown of it is whether the decision is signed. The
    signature itself is checked by the agent that applies the decision (``GOLDFIVE_TRUST_KEY``), which
    refuses one that does not verify; here its form is checked, so a block pasted onto a decision (or
    edited) is reported.
    """
    if row.decision_sig == "":
        return None
    try:
        block = json.loads(row.decision_sig)
    except (ValueError, TypeError, RecursionError):
        return "not JSON"
    if not isinstance(block, dict) or set(block) != {"alg", "key_id", "signed_at_ms", "channel", "sig"}:
        return "not a signature block"
    sig, key_id, at = block["sig"], block["key_id"], block["signed_at_ms"]
    if block["alg"] != "ed25519" or not isinstance(key_id, str) or len(key_id) != 16:
        return "not an ed25519 block"
    if not isinstance(at, int) or isinstance(at, bool) or block["channel"] != row.decided_channel:
        return "its time or channel"
    if not isinstance(sig, str) or len(sig) != 88:
        return "its signature's length"
    try:
        raw = base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        return "its signature is not base64"
    if len(raw) != 64 or base64.b64encode(raw).decode() != sig or row.decision_sig != canonical_json(block):
        return "its encoding"
    return None


SERVER_CHANNELS = frozenset({"web", "api"})
"""The channels of decisions made through ``goldfive serve``, which signs every decision it makes."""


def signature_problems(name: str, row: ApprovalRow, trust: TrustKey, grants: str, rule: str = "") -> list[str]:
    """What is wrong with a decided record's signature, given the key ``goldfive serve`` signs with ([]: nothing).

    A decision on a server channel (``web``, ``api``) without a signature lost it: the server signs them all.
    An unsigned ``cli`` decision is what the local command line records without a key (see
    :class:`~goldfive_core.store.checkpoint.CheckpointWriter` for how a relabel to one is caught).
    """
    if row.status not in DECIDED_STATUSES and not (row.status is ApprovalStatus.EXPIRED and row.decided_by):
        return []
    if not row.decision_sig:
        if row.decided_channel not in SERVER_CHANNELS:
            return []
        return [
            f"{name}: decided through goldfive serve (channel {row.decided_channel!r}) but not signed: "
            "its signature was removed (edited)"
        ]
    try:
        wrong = _signature_check(row, trust, grants, rule)
    except (ValueError, TypeError, AttributeError, RecursionError):  # cells that are not text
        wrong = "its facts or block are garbled"
    if wrong:
        return [f"{name}: decision_sig does not verify with the given key: {wrong} (edited)"]
    return []


def _signature_check(row: ApprovalRow, trust: TrustKey, grants: str, rule: str = "") -> str | None:
    """None when ``decision_sig`` is ``trust``'s signature of this record's decision, else why not.

    The record keeps what was signed except the grant asked for (tried: none, and each its rule offers, with the
    rule ``rule`` it was allowed under or, signed before that was, none), the
    digest the decider saw (the call's own, or a quorum's edited one) and, for a quorum, the one signer among
    the approvers named.
    """
    from ..signing import EXPIRY_KIND, check_decision

    problem: str | None = "no matching decision"
    offered = [g for g in grants.split(",") if g]
    tries = itertools.product(
        (("", ""), *((g, under) for g in offered for under in ("", rule))),
        {row.args_digest, row.original_args_digest} - {""} or {""},
        _signers(row),
        _signed_quorums(row),
        ("", "cancel") if row.kind == "input" and row.decision == "reject" else ("",),  # a form dismissed
    )
    for (grant, grant_rule), digest, (decided_by, detail, edited), quorum, answer in tries:
        problem = check_decision(
            trust,
            target_id=row.target_id,
            run_id=row.run_id,
            approved=row.decision == "approve",
            edited_args=edited,
            args_digest=digest,
            decided_by=decided_by,
            detail=detail,
            signature=row.decision_sig,
            grant=grant,
            grant_rule=grant_rule,
            # The record's own request: a signature moved here from another request does not cover it.
            request_id=row.request_id,
            request_digest=row.request_digest if row.request_id else "",
            quorum=quorum,
            answer=answer,
            # An expired record holds the server's signature of its expiry, never a decision's.
            expiry=EXPIRY_KIND if row.status is ApprovalStatus.EXPIRED else "",
        )
        if problem is None:
            return None
    return problem


def _signed_quorums(row: ApprovalRow) -> tuple[int, ...]:
    """The quorum a vote's signature may state: none, or the count its record's tally names ("2 of 2: ana, bo")."""
    _, of, rest = row.quorum_progress.partition(" of ")
    count = rest.split(":", 1)[0].strip()
    return (0, int(count)) if of and count.isdigit() and len(count) < 6 else (0,)


def _signers(row: ApprovalRow) -> set[tuple[str, str, str]]:
    """Who signed a record's decision, with the reason and edit they signed: its decider, or a quorum's last voter.

    A quorum's record says all approvers and the quorum's words when the last vote gave no reason ("approved by
    ana, bo"), and the arguments on the table; the last voter signed their own name, reason and edit (maybe none).
    """
    signers = {(row.decided_by, row.detail, row.edited_args_json)}
    last = row.decided_by.rsplit(", ", 1)[-1]
    if last != row.decided_by:
        said = "" if row.detail == f"approved by {row.decided_by}" else row.detail
        signers |= {(last, said, row.edited_args_json), (last, said, "")}
    return signers


def _digest_of(tool_name: str, args_json: str, digest: str) -> bool:
    """Whether ``digest`` is the agent's digest of these arguments: of the tool name as stored, or as the agent
    had it when the store keeps its NULs as ␀ (the digest is the agent's, of the name it was given)."""
    try:
        args = json.loads(args_json)
        names = {tool_name, tool_name.replace(NUL_MARK, "\x00")}
        return any(args_digest(name, args) == digest for name in names)
    except (ValueError, TypeError, AttributeError, RecursionError):  # a garbled cell: reported, never a crash
        return False


def _same_json(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return bool(json.loads(a or "null") == json.loads(b or "null"))
    except ValueError:
        return False


Record = Mapping[str, Any]
"""A row of a table checked against the chain: its columns by name."""

_RUN_COLUMNS = ("session_id", "adapter", "status", "started_at_ms", "ended_at_ms")
"""What ``goldfive runs`` and the API show of a run and the chain says. Not checked: ``pid``, ``host`` and
``heartbeat_at_ms`` say which process serves the run now and whether it is alive (liveness, rewritten by a
restarted run and by every heartbeat); no event carries them."""


class _RunHistory:
    """What the run's lifecycle events say its ``gf_runs`` row holds (as the store writes it)."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}

    def see(self, event: events_pb2.Event) -> None:
        kind = payload_name(event)
        at = _ms(event.emitted_at)
        run = self.runs.get(event.run_id)
        if kind == "run_started":
            if run is None:  # a restart keeps the first start's session, adapter and time
                self.runs[event.run_id] = {
                    "session_id": event.session_id,
                    "adapter": event.run_started.adapter,
                    "started_at_ms": at,
                    "ended_at_ms": 0,
                    "status": {"running"},
                }
            else:
                run["status"] = {"running"}
        elif run is not None and kind in ("run_completed", "run_aborted"):
            run["ended_at_ms"] = at
            if kind == "run_completed":
                run["status"] = {"finished"}
            elif event.event_id == f"ev-crashed-{event.run_id}":  # the store closed it (reap_crashed)
                run["status"] = {"crashed"}
            elif event.run_aborted.status == types_pb2.RUN_STATUS_DETACHED:
                run["status"] = {"detached", "finished"}  # finished once its parked calls were resumed
            else:
                run["status"] = {"finished"}

    def check(self, records: Iterable[Record | str]) -> list[str]:
        problems: list[str] = []
        seen: set[str] = set()
        for row in records:
            if isinstance(row, str):
                problems.append(row)
                continue
            run_id = row["run_id"]
            want = self.runs.get(run_id) if isinstance(run_id, str) else None
            name = f"run {run_id!r}"
            if want is None:
                problems.append(f"{name} has no run_started on the audit log (inserted or edited)")
                continue
            seen.add(run_id)
            differs = [
                column
                for column in _RUN_COLUMNS
                if not (row[column] in want[column] if column == "status" else row[column] == want[column])
            ]
            if differs:
                problems.append(f"{name}: {', '.join(differs)} differs from its events on the audit log (edited)")
        for run_id in self.runs.keys() - seen:
            problems.append(f"run {run_id!r} started on the audit log but its record is gone")
        return problems


GRANT_COLUMNS = (
    "grant_id",
    "rule",
    "tool",
    "granted_by",
    "scope",
    "run_id",
    "session_id",
    "args_constraint",
    "created_at_ms",
    "expires_at_ms",
    "target_id",
    "description",
    "channel",
    "revoked_at_ms",
    "revoked_by",
    "revoke_reason",
    "made_in_run",
)
"""Every column of ``gf_grants``: each is checked against its GrantCreated and GrantRevoked events."""


class _GrantHistory:
    """What GrantCreated / GrantRevoked say each ``gf_grants`` row holds."""

    def __init__(self, audit_after: int = 0) -> None:
        self.grants: dict[str, dict[str, Any]] = {}
        self.audit_after = audit_after
        self.revoked_before: set[str] = set()
        """Grants revoked before migration 12: the record's time was taken a moment before its event's."""

    def see(self, event: events_pb2.Event, seq: int = 0) -> None:
        kind = payload_name(event)
        if kind == "grant_created":
            g = event.grant_created
            if g.grant_id in self.grants:
                return  # the store keeps the first
            self.grants[g.grant_id] = {
                "grant_id": g.grant_id,
                "rule": g.rule,
                "tool": g.tool,
                "granted_by": g.granted_by,
                "scope": g.scope,
                "run_id": event.run_id if g.scope == "run" else "",
                "session_id": g.session_id,
                "args_constraint": g.args_constraint,
                "created_at_ms": g.created_at_ms or _ms(event.emitted_at),
                "expires_at_ms": g.expires_at_ms,
                "target_id": g.target_id,
                "description": g.description,
                "channel": g.channel,
                "revoked_at_ms": 0,
                "revoked_by": "",
                "revoke_reason": "",
                "made_in_run": event.run_id,
            }
        elif kind == "grant_revoked":
            r = event.grant_revoked
            grant = self.grants.get(r.grant_id)
            if grant is not None and not grant["revoked_at_ms"]:  # revoked once
                grant.update(revoked_at_ms=_ms(event.emitted_at), revoked_by=r.revoked_by, revoke_reason=r.reason)
                if seq <= self.audit_after:
                    self.revoked_before.add(r.grant_id)

    def check(self, records: Iterable[Record | str]) -> list[str]:
        problems: list[str] = []
        seen: set[str] = set()
        for row in records:
            if isinstance(row, str):
                problems.append(row)
                continue
            grant_id = row["grant_id"]
            want = self.grants.get(grant_id) if isinstance(grant_id, str) else None
            name = f"grant {grant_id!r}"
            if want is None:
                problems.append(f"{name} has no grant_created on the audit log (inserted or edited)")
                continue
            seen.add(grant_id)
            expected = dict(want)
            revoked = row["revoked_at_ms"]
            late = want["revoked_at_ms"] - revoked if isinstance(revoked, int) else -1
            if grant_id in self.revoked_before and 0 <= late <= 60_000:
                expected["revoked_at_ms"] = revoked
            differs = [column for column in GRANT_COLUMNS if row[column] != expected[column]]
            if differs:
                problems.append(f"{name}: {', '.join(differs)} differs from its events on the audit log (edited)")
        for grant_id in self.grants.keys() - seen:
            problems.append(f"grant {grant_id!r} was created on the audit log but its record is gone")
        return problems


_EXEC_COLUMNS = ("run_id", "state", "started_at_ms", "finished_at_ms", "pid", "host", "args_digest")


class _ExecutionHistory:
    """What the ledger's events (``execution_recorded``) say each ``gf_executions`` row holds.

    Rows are keyed by (owner, call id); an event written before migration 15 (at or before
    ``owned_after_seq``) names no owner and holds the row of its call id whatever the row's owner.
    """

    def __init__(self, audited_after_ms: int, owned_after_seq: int = 0) -> None:
        self.audited_after_ms = audited_after_ms
        """Rows started at or before this (written before migration 13) have no events: not checked."""
        self.owned_after_seq = owned_after_seq
        self.rows: dict[tuple[str | None, str], dict[str, Any] | None] = {}
        """Per (owner, call id): the row as the events leave it, or None when a person settled it as not run."""

    def see(self, event: events_pb2.Event, seq: int) -> None:
        if payload_name(event) != "execution_recorded":
            return
        rec = event.execution_recorded
        at = _ms(event.emitted_at)
        key = (rec.owner if rec.owner or seq > self.owned_after_seq else None, rec.target_id)
        if rec.state == "executing":
            self.rows[key] = {
                "run_id": event.run_id,
                "state": "executing",
                "started_at_ms": at,
                "finished_at_ms": 0,
                "result": "",
                "pid": rec.pid,
                "host": rec.host,
                "args_digest": rec.args_digest,
            }
            return
        row = self.rows.get(key)
        if rec.state in ("resolved_not_run", "released_not_run"):  # a person's word, or a claim given back
            self.rows[key] = None
        elif row is not None and rec.state in ("done", "resolved_ran"):  # (a "done" of a claim made before
            row.update(state="done", finished_at_ms=at, result=rec.result_digest)  # migration 13 holds nothing)

    def _key(self, owner: Any, target: str) -> tuple[str | None, str] | None:
        """The history entry of a row: its own (owner, call id), else a pre-migration-14 event of its call id."""
        if not isinstance(owner, str):
            return None
        return next((k for k in ((owner, target), (None, target)) if k in self.rows), None)

    def check(self, records: Iterable[Record | str]) -> list[str]:
        problems: list[str] = []
        seen: set[tuple[str | None, str]] = set()
        for row in records:
            if isinstance(row, str):
                problems.append(row)
                continue
            target, owner = row["target_id"], row.get("owner", "")
            name = f"execution {target!r}" + (f" of {owner!r}" if owner else "")
            key = self._key(owner, target) if isinstance(target, str) else None
            if key is None:
                started = row["started_at_ms"]
                if isinstance(started, int) and not isinstance(started, bool) and started <= self.audited_after_ms:
                    continue  # claimed before the ledger was audited (migration 13): no event to hold it to
                problems.append(f"{name} has no execution_recorded on the audit log (inserted or edited)")
                continue
            seen.add(key)
            want = self.rows[key]
            if want is None:
                problems.append(f"{name} was settled as not run on the audit log but is in the ledger (edited)")
                continue
            differs = [column for column in _EXEC_COLUMNS if row[column] != want[column]]
            result = row["result_json"]
            if not isinstance(result, str) or result_digest(result) != want["result"]:
                differs.append("result_json")
            if differs:
                problems.append(f"{name}: {', '.join(differs)} differs from the ledger's events (edited)")
        for (owner, target), want in self.rows.items():
            if want is not None and (owner, target) not in seen:
                whose = f" of {owner!r}" if owner else ""
                problems.append(f"execution {target!r}{whose} is on the audit log but its ledger row is gone (deleted)")
        return problems


def verify_chain(
    rows: Iterable[AuditRow],
    *,
    head_seq: int | None,
    head_hash: str | None,
    approvals: Callable[[], Iterable[ApprovalRow | str]] | None = None,
    runs: Callable[[], Iterable[Record | str]] | None = None,
    grants: Callable[[], Iterable[Record | str]] | None = None,
    executions: Callable[[], Iterable[Record | str]] | None = None,
    executions_after_ms: int = 0,
    executions_owned_after: int = 0,
    trust: TrustKey | None = None,
    numbered_after: tuple[int, int] = (0, 0),
    start: tuple[int, str] | None = None,
    alarms: bool = True,
) -> AuditReport:
    """Check every row's link and hash, that its columns match its hashed event, per-run sequences, and the head.

    Readers list and filter by the columns beside the body (run, kind, sequence, time), so each is
    checked against the event the chain hashes. A per-run sequence that skips numbers means events
    are missing (deleted, or dropped by a writer). ``head_seq`` None means the head row is missing.
    ``approvals`` (called after the walk) gives every approval record, each checked against its
    request and decision events: a shown column that differs, a record without a request, a request
    whose record is gone, a decision the log does not have. ``runs`` and ``grants`` (rows of ``gf_runs`` and
    ``gf_grants`` by column, or the problem of one that could not be read) are checked against the run
    lifecycle and grant events the same way. With ``trust`` (the key ``goldfive serve`` signs decisions with),
    every decision signature on a record is verified too. ``numbered_after``: the last audit row and approval
    record a store numbered before migration 12 (checked for order only; every later one by its number).

    ``start`` (seq, hash): ``rows`` are the rows after that one (a walk from a signed checkpoint): they must link
    to it, and a run's sequence is checked from its first event among them on. ``alarms``: report every
    ``checkpoint_refused`` the server wrote (off for the server's own check before it signs).
    """
    problems: list[str] = []
    first_bad: int | None = None
    last_seq, prev = start or (0, GENESIS_HASH)
    start_seq = last_seq
    count = 0
    next_sequence: dict[str, int] = {}
    audit_after, approvals_after = numbered_after
    history = _ApprovalHistory(trust, audit_after, approvals_after)
    run_history = _RunHistory()
    grant_history = _GrantHistory(audit_after)
    execution_history = _ExecutionHistory(executions_after_ms, executions_owned_after)

    def problem(seq: int, text: str) -> None:
        nonlocal first_bad
        if first_bad is None:
            first_bad = seq
        if len(problems) < _MAX_PROBLEMS:
            problems.append(text)

    for row in rows:
        count += 1
        if row.prev_hash != prev:
            problem(row.seq, f"row {row.seq}: prev_hash {row.prev_hash[:12]}… does not match row before ({prev[:12]}…)")
        # Rows are numbered 1, 2, 3, ... under the chain's lock (before migration 12, by the database: order only).
        if row.seq != last_seq + 1 and not last_seq < row.seq <= audit_after:
            follows = f"row {row.seq}: its number does not follow row {last_seq}"
            problem(row.seq, f"{follows} (renumbered, or rows are missing)")
        last_seq = row.seq
        expected = chain_hash(row.prev_hash, row.body)
        if row.hash != expected:
            problem(row.seq, f"row {row.seq} ({row.kind} of run {row.run_id}): content does not match its hash")
        prev = row.hash
        event = events_pb2.Event()
        try:
            event.ParseFromString(row.body)
        except DecodeError:
            problem(row.seq, f"row {row.seq}: its body is not an event")
            continue
        shown = {
            "run_id": (row.run_id, event.run_id),
            "sequence": (row.sequence, event.sequence),
            "kind": (row.kind, payload_name(event)),
            "event_id": (row.event_id, event.event_id),
            "emitted_at_ms": (row.emitted_at_ms, _ms(event.emitted_at)),
        }
        edited = [name for name, (column, hashed) in shown.items() if column != hashed]
        if edited:
            problem(row.seq, f"row {row.seq}: column {', '.join(edited)} differs from the hashed event (edited)")
        execution_history.see(event, row.seq)
        if event.WhichOneof("payload") == "execution_recorded":  # the store's ledger events: outside the numbering
            continue
        if alarms and event.WhichOneof("payload") == "checkpoint_refused":
            reason = event.checkpoint_refused.reason[:300]
            problem(row.seq, f"row {row.seq}: goldfive serve refused to sign a checkpoint of this chain: {reason}")
        want = next_sequence.get(event.run_id, 0 if start is None else event.sequence)
        if event.sequence > want:
            missing = f"#{want}" if event.sequence == want + 1 else f"#{want}-#{event.sequence - 1}"
            problem(row.seq, f"run {event.run_id}: events {missing} are missing before row {row.seq} (a gap)")
        next_sequence[event.run_id] = max(want, event.sequence + 1)
        history.see(event, row.seq)
        run_history.see(event)
        grant_history.see(event, row.seq)
    if head_seq is None or head_hash is None:
        problem(last_seq, "the chain head row is missing (deleted): tampering; a truncated tail cannot be ruled out")
    elif count and (last_seq != head_seq or prev != head_hash):
        problem(last_seq, f"the chain ends at row {last_seq} but the recorded head is row {head_seq}: rows are missing")
    elif not count and head_seq != start_seq:
        empty = "the audit log is empty" if start is None else f"the audit log has no row after {start_seq}"
        problem(0, f"{empty} but the recorded head is row {head_seq}: rows are missing")
    tables: list[list[str]] = []
    if approvals is not None:
        tables.append(history.check(approvals()))
    if runs is not None:
        tables.append(run_history.check(runs()))
    if grants is not None:
        tables.append(grant_history.check(grants()))
    if executions is not None:
        tables.append(execution_history.check(executions()))
    for found in tables:
        for text in found:
            if len(problems) < _MAX_PROBLEMS:
                problems.append(text)
    return AuditReport(ok=not problems, rows=count, head_hash=prev, problems=tuple(problems), first_bad_seq=first_bad)


Vouched = tuple[str, str, int]
"""A decision ``goldfive serve`` signed: (run id, target id, its record's ``requested_at_ms``; -1 = the newest)."""


def verify_since(
    rows: Iterable[AuditRow],
    *,
    start: tuple[int, str],
    head: tuple[int, str],
    record: Callable[[str, str], ApprovalRow | None],
    trust: TrustKey,
    vouched: Iterable[Vouched] = (),
) -> list[str]:
    """What is wrong with the chain since a signed checkpoint (``start``) up to ``head`` ([]: nothing).

    The server's check before it signs the next checkpoint, as cheap as the rows since the last one: each row's
    link, hash, number and shown columns (:func:`verify_chain` from ``start``); each approval record requested
    or decided in them (``record(run_id, target_id)``) against those events, and its signature with ``trust``;
    and each decision the server signed since (``vouched``) still on its record, signed on a server channel
    — so a signed decision relabelled as an unsigned ``cli`` one is never signed into a checkpoint.
    """
    history = _ApprovalHistory(trust)

    def walked() -> Iterator[AuditRow]:
        for row in rows:
            event = events_pb2.Event()
            try:
                event.ParseFromString(row.body)
            except DecodeError:
                pass  # reported by the walk
            else:
                history.see(event, row.seq)
            yield row

    report = verify_chain(walked(), head_seq=head[0], head_hash=head[1], start=start, alarms=False)
    problems = list(report.problems)
    for run_id, target_id in sorted(history.requests.keys() | history.decisions.keys()):
        row = record(run_id, target_id)
        problems.extend(_recent_record_problems(history, (run_id, target_id), row))
    for run_id, target_id, requested_at in sorted(set(vouched)):
        problems.extend(_vouched_problems(record(run_id, target_id), run_id, target_id, requested_at, trust))
    return problems[:_MAX_PROBLEMS]


def _recent_record_problems(history: _ApprovalHistory, key: _Key, row: ApprovalRow | None) -> list[str]:
    """A record whose request or decision is among the rows since the last checkpoint, against those events."""
    run_id, target_id = key
    found = history.requests.get(key)
    if row is None:
        if found is None:
            return []  # a decision of no request: no record to hold it to (as in the whole walk)
        return [f"the request {target_id!r} of run {run_id} is on the audit log but its record is gone"]
    name = f"approval #{row.id} ({row.target_id!r} of run {row.run_id})"
    problems: list[str] = []
    times = history.decided_at.get(key, {})
    if found is not None:
        event, req = found
        edited = _request_edits(row, event, req, history.progress.get(key, ""))
        if edited:
            problems.append(f"{name}: {', '.join(edited)} differs from its request on the audit log (edited)")
        closed = history.closed.get(key)
    else:  # asked before the last checkpoint: only what the rows since say of it
        closed = None
        seen_at = {at for ats in times.values() for at in ats}
        if row.status in DECIDED_STATUSES and row.decided_at_ms not in seen_at:
            return []  # decided by an earlier event (already checked); a later one (the run's own) says it again
    problems.extend(_ApprovalHistory._check_decision(name, row, history.decisions.get(key), closed, times))
    if history.trust is not None:
        problems.extend(
            signature_problems(name, row, history.trust, row.metadata.get("policy_grants", ""), _rule_of(row.metadata))
        )
    return problems


def _vouched_problems(row: ApprovalRow | None, run_id: str, target_id: str, at: int, trust: TrustKey) -> list[str]:
    """A decision this server signed must still be on its record, signed, on a server channel."""
    name = f"the decision of {target_id!r} in run {run_id}, signed by this server,"
    if row is None:
        return [f"{name} has no record any more (deleted)"]
    if at >= 0 and row.requested_at_ms != at:
        return []  # asked again since: a new record (the old decision's event is checked with the chain)
    if row.status not in DECIDED_STATUSES:
        return [f"{name} is {row.status.value} on its record (edited)"]
    if not row.decision_sig or row.decided_channel not in SERVER_CHANNELS:
        channel = row.decided_channel or "none"
        return [
            f"{name} now reads {row.decision} by {row.decided_by!r} on channel {channel!r}, "
            f"{'unsigned' if not row.decision_sig else 'signed'}: relabelled (edited)"
        ]
    return signature_problems(
        f"approval #{row.id} ({target_id!r} of run {run_id})",
        row,
        trust,
        row.metadata.get("policy_grants", ""),
        _rule_of(row.metadata),
    )


def _rule_of(metadata: Mapping[str, str]) -> str:
    """The rule a request names: a grant made on it was signed with that rule (the one the run keeps it under)."""
    return metadata.get("policy_rule", "")
