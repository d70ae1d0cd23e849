"""The control inbox of a SQL store: messages posted, claimed, acked (an applied decision recorded with its ack)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..._util import canonical_json, now_ms, shorten
from ...control import AckVerdict, ControlAck, ControlMessage, check_message
from .._schema import (
    INBOX_COLS,
    inbox_row,
)
from ..base import (
    OPEN_STATUSES,
    ExecutionClaim,
    InboxRow,
    StoreError,
    ack_from_columns,
)
from .db import SqlRole
from .decisions import acked_request, decided_at, request_where, write_decision

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)


class SqlControlInbox(SqlRole):
    """Post, claim and ack control messages; waiting is the dialect's (``wait_inbox``, ``wait_ack``)."""

    # -- control inbox --------------------------------------------------------------------------
    def post_control(self, msg: ControlMessage, *, run_id: str = "") -> int:
        """Insert a message; raises StoreError when it could not be read back (not JSON, too big, bad ids)."""
        problem = check_message(msg)
        if problem is not None:
            raise StoreError(f"control message refused: {problem.detail}")
        try:
            payload_json = canonical_json(dict(msg.payload))
            payload_json.encode("utf-8")
        except (TypeError, ValueError, RecursionError) as exc:
            raise StoreError(f"control message {msg.id}: payload is not JSON: {shorten(str(exc), 200)}") from None
        if len(payload_json) > self.limits.max_payload_chars:
            raise StoreError(
                f"control message {msg.id}: payload is {len(payload_json)} characters; the limit is "
                f"{self.limits.max_payload_chars}"
            )
        for name, value in (("id", msg.id), ("run_id", run_id)):
            if not isinstance(value, str) or len(value) > self.limits.max_id_chars:
                raise StoreError(f"control message {name} must be a string of at most {self.limits.max_id_chars} chars")
        if not isinstance(msg.issued_at_ms, int) or not 0 <= msg.issued_at_ms < 2**62:
            raise StoreError(f"control message {msg.id}: issued_at_ms must be a non-negative 62-bit integer")
        with self.db.guard(f"posting control message {msg.id}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                row = self.db.execute(
                    conn,
                    "INSERT INTO gf_inbox (control_id, kind, payload_json, run_id, issued_at_ms, status, claimed_by, "
                    "claimed_at_ms, ack_result, ack_detail, ack_data_json, acked_at_ms) "
                    "VALUES (?, ?, ?, ?, ?, 'pending', '', 0, '', '', '', 0) RETURNING id",
                    (msg.id, str(msg.kind), payload_json, run_id, msg.issued_at_ms),
                ).fetchone()
                self.db.notify(conn, "inbox", "")
                return int(row[0])

    def pending_controls(self, *, limit: int = 100) -> list[InboxRow]:
        """Unclaimed messages, oldest first."""
        with self.db.guard("reading the control inbox"):
            cur = self.db.execute(
                self.db.conn(),
                f"SELECT {INBOX_COLS} FROM gf_inbox WHERE status = 'pending' ORDER BY id LIMIT ?",
                (limit,),
            )
            return self._inbox_rows(cur)

    def claimed_controls(self, *, endpoint: str) -> list[InboxRow]:
        """Messages ``endpoint`` claimed and has not acked, oldest first."""
        with self.db.guard("reading claimed control messages"):
            cur = self.db.execute(
                self.db.conn(),
                f"SELECT {INBOX_COLS} FROM gf_inbox WHERE status = 'claimed' AND claimed_by = ? ORDER BY id",
                (endpoint,),
            )
            return self._inbox_rows(cur)

    @staticmethod
    def _inbox_rows(cur: Any) -> list[InboxRow]:
        return [inbox_row(r) for r in cur.fetchall()]

    def claim_controls(self, ids: Sequence[int], *, endpoint: str) -> list[int]:
        """Claim unclaimed messages; returns the ids won."""
        return self.claim_controls_for([(ident, endpoint) for ident in ids])

    def claim_controls_for(self, claims: Sequence[tuple[int, str]], *, again: bool = False) -> list[int]:
        """Claim unclaimed messages, each ``(id, endpoint)`` for its own endpoint, in one transaction (``goldfive
        serve`` claims a burst's messages for many agents' streams at once); returns the ids won.

        ``again``: a message the same endpoint claimed and has not acked is won again (a stream's delivery, whose
        agent skips repeats: a claim another server committed late for this endpoint is still delivered here)."""
        if not claims:
            return []
        won = []
        mine = " OR (status = 'claimed' AND claimed_by = ?)" if again else ""
        with self.db.guard("claiming control messages"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                at = now_ms()
                for ident, endpoint in claims:
                    cur = self.db.execute(
                        conn,
                        "UPDATE gf_inbox SET status = 'claimed', claimed_by = ?, claimed_at_ms = ? "
                        f"WHERE id = ? AND (status = 'pending'{mine})",
                        (endpoint, at, ident, endpoint) if again else (endpoint, at, ident),
                    )
                    if cur.rowcount == 1:
                        won.append(ident)
        return won

    def ack_controls(
        self, acks: Sequence[tuple[int, ControlAck]], *, claims: Mapping[int, ExecutionClaim] | None = None
    ) -> dict[int, bool]:
        """Store acks and wake the senders (retried through an outage; writing an ack twice changes nothing).

        ``claims``: the "executing" claim an ack carries, made in the ack's transaction (a claim is idempotent for
        its claimer, so a retry says True again); returns whether each was won.
        """
        if not acks:
            return {}
        return self.retrying("storing control acks", lambda: self._ack_controls(acks, claims or {}))

    def claim_in(self, conn: Any, claim: ExecutionClaim) -> bool:
        """The ledger's claim of ``claim`` in the caller's transaction (the execution records provide it)."""
        raise NotImplementedError

    def _ack_controls(
        self, acks: Sequence[tuple[int, ControlAck]], claims: Mapping[int, ExecutionClaim]
    ) -> dict[int, bool]:
        won: dict[int, bool] = {}
        with self.db.guard("storing control acks"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                if claims:  # a claim appends to the audit chain: its head is locked first, as by every chain writer
                    self.db.execute(conn, f"SELECT seq FROM gf_chain_head WHERE id = 1{self.db.for_update}")
                for ident, ack in acks:
                    try:
                        data_json = canonical_json(dict(ack.data)) if ack.data is not None else ""
                    except (TypeError, ValueError):
                        data_json = canonical_json({"unserializable": repr(ack.data)[:500]})
                    self.db.execute(
                        conn,
                        "UPDATE gf_inbox SET status = 'acked', ack_result = ?, ack_detail = ?, ack_data_json = ?, "
                        "acked_at_ms = ? WHERE id = ?",
                        (ack.result.value, ack.detail, data_json, ack.acked_at_ms, ident),
                    )
                    if ack.ok:
                        self._record_applied_decision(conn, ident, ack)
                        claim = claims.get(ident)
                        if claim is not None:  # the decision and the right to run its body, in one commit
                            won[ident] = self.claim_in(conn, claim)
                    self.db.notify(conn, "ack", ack.control_id)
        return won

    def _record_applied_decision(self, conn: Any, ident: int, ack: ControlAck) -> None:
        """An applied APPROVE/REJECT updates its approval record with its ack, in the same transaction.

        The decision is then durable the moment the decider sees its ack, even if the agent's
        process dies before its sink writes ApprovalGranted/Rejected (which later says the same).
        """
        row = self.db.execute(conn, "SELECT kind, payload_json, run_id FROM gf_inbox WHERE id = ?", (ident,)).fetchone()
        if row is None or row[0] not in ("APPROVE", "REJECT"):
            return
        payload = json.loads(row[1])
        run_id = row[2] or payload.get("run_id") or ""
        target = payload.get("target_id")
        if not run_id or not isinstance(target, str):
            return  # unaddressed: the sink records it from the run's events
        if ack.verdict is AckVerdict.EXPIRED:
            return  # the server's expiry notice, not a decision: the run's approval_timed_out records it
        # Written to the request the agent resolved only: if the target was asked again since (a new request),
        # a late ack never lands on the new one (the run's event already recorded the old one's decision).
        where, params = request_where(run_id, target, acked_request(ack, payload))
        if ack.verdict is AckVerdict.COUNTED and isinstance(ack.data, Mapping):
            # One vote of a quorum: the request stays pending; only the tally changes ("1 of 2: ana").
            self.db.execute(
                conn,
                "UPDATE gf_approvals SET quorum_progress = ? "
                f"WHERE {where} AND status IN ({', '.join('?' for _ in OPEN_STATUSES)})",
                (str(ack.data.get("quorum_progress") or ""), *params, *(s.value for s in OPEN_STATUSES)),
            )
            self._put_quorum_args(conn, where, params, ack.data)
            return
        approved = row[0] == "APPROVE"
        edited = payload.get("edited_args")
        quorum = ack.verdict is AckVerdict.QUORUM
        decided_by = payload.get("decided_by")
        detail = payload.get("detail") or payload.get("reason") or ""
        if quorum:  # the last vote of a quorum: decided by all who approved, with the tally
            assert isinstance(ack.data, Mapping)
            decided_by = ack.data.get("decided_by") or decided_by
            detail = ack.data.get("detail") or detail  # what the run's decision event says
            edited = ack.data.get("edited_args") if approved else None
            self.db.execute(
                conn,
                f"UPDATE gf_approvals SET quorum_progress = ? WHERE {where}",
                (str(ack.data.get("quorum_progress") or ""), *params),
            )
        signature = payload.get("signature")
        sig_json = canonical_json(signature) if isinstance(signature, dict) else ""
        written = write_decision(
            self.db,
            conn,
            where,
            params,
            approved=approved,
            detail=str(detail),
            decided_by=str(decided_by or ""),
            at=decided_at(ack),
            edited_args_json=canonical_json(edited) if approved and isinstance(edited, dict) else "",
            via="run",
            channel=str(payload.get("channel") or ""),
            signature=sig_json,
        )
        if not written and sig_json:  # the run's event recorded it first: keep the server's signature beside it
            self.db.execute(
                conn,
                f"UPDATE gf_approvals SET decision_sig = ? WHERE {where} AND decision = ? AND decision_sig = ''",
                (sig_json, *params, "approve" if approved else "reject"),
            )

    def _put_quorum_args(self, conn: Any, where: str, params: Sequence[Any], data: Mapping[str, Any]) -> None:
        """An edit restarted a quorum: its arguments are on the table (what the next approver reads and votes on).

        The call's own arguments move to ``original_args_*`` once (a second edit keeps them), so the change
        stays reviewable; the digest the store hands out as the default for a vote is the edited one.
        """
        digest, args = data.get("args_digest"), data.get("args")
        if not isinstance(digest, str) or not digest or not isinstance(args, Mapping):
            return
        self.db.execute(
            conn,
            "UPDATE gf_approvals SET "
            "original_args_json = CASE WHEN original_args_digest = '' THEN args_json ELSE original_args_json END, "
            "original_args_digest = CASE WHEN original_args_digest = '' THEN args_digest "
            "ELSE original_args_digest END, args_json = ?, args_digest = ? "
            f"WHERE {where} AND args_digest <> ? "
            f"AND status IN ({', '.join('?' for _ in OPEN_STATUSES)})",
            (canonical_json(dict(args)), digest, *params, digest, *(s.value for s in OPEN_STATUSES)),
        )

    def get_ack(self, control_id: str) -> ControlAck | None:
        """The ack once the message was answered."""
        with self.db.guard(f"reading the ack of {control_id}"):
            row = self.db.execute(
                self.db.conn(),
                "SELECT status, ack_result, ack_detail, ack_data_json, acked_at_ms FROM gf_inbox WHERE control_id = ?",
                (control_id,),
            ).fetchone()
        if row is None or row[0] != "acked":
            return None
        data = json.loads(row[3]) if row[3] else None
        return ack_from_columns(control_id, row[1], row[2], data, row[4])

    def get_acks(self, control_ids: Sequence[str]) -> dict[str, ControlAck]:
        """The acks stored so far of ``control_ids`` (one query; an id not yet acked is absent)."""
        found: dict[str, ControlAck] = {}
        ids = list(dict.fromkeys(control_ids))
        with self.db.guard("reading control acks"):
            conn = self.db.conn()
            for start in range(0, len(ids), 500):
                page = ids[start : start + 500]
                rows = self.db.execute(
                    conn,
                    "SELECT control_id, ack_result, ack_detail, ack_data_json, acked_at_ms FROM gf_inbox "
                    f"WHERE status = 'acked' AND control_id IN ({', '.join('?' * len(page))})",
                    tuple(page),
                ).fetchall()
                for row in rows:
                    data = json.loads(row[3]) if row[3] else None
                    found[row[0]] = ack_from_columns(row[0], row[1], row[2], data, row[4])
        return found

    def withdraw_control(self, control_id: str) -> bool:
        """Withdraw an unclaimed message."""
        with self.db.guard(f"withdrawing {control_id}"):
            conn = self.db.conn()
            with self.db.transaction(conn):
                cur = self.db.execute(
                    conn,
                    "UPDATE gf_inbox SET status = 'withdrawn' WHERE control_id = ? AND status = 'pending'",
                    (control_id,),
                )
                return bool(cur.rowcount == 1)
