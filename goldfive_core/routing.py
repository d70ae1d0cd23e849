"""ControlRouter: one control channel serving every active run of a runner or plugin.

Approvals route by ``target_id`` to the run that holds the record. Run-level
controls (PAUSE, RESUME, STEER, CANCEL, STATUS_QUERY, ...) go to the run named
by ``payload["run_id"]``, ``payload["session_id"]`` or ``payload["target"]``,
and without a name to every active run. The router binds the channel while at
least one run is attached, so messages sent with no run active wait for one.
"""

from __future__ import annotations

from typing import Any

from ._util import safe_repr
from .control import AckResult, ControlAck, ControlKind, ControlMessage, ControlTransport, check_message
from .dispatch import dispatch_checked
from .payloads import decision_from_payload
from .run_state import is_over
from .session import Session

__all__ = ["ControlRouter"]

_RUN_KEYS = ("run_id", "session_id", "target")


class ControlRouter:
    """Routes control messages from one channel to the sessions attached to it."""

    def __init__(self, channel: ControlTransport | None) -> None:
        self.channel = channel
        self._sessions: dict[str, Session] = {}
        self._only: Session | None = None
        """The attached session when there is exactly one (the common case: a decision's route is one check)."""

    @property
    def sessions(self) -> list[Session]:
        """The attached sessions, oldest first."""
        return list(self._sessions.values())

    def attach(self, session: Session) -> None:
        """Start routing to ``session``; binds the channel (dispatching waiting messages) if first."""
        self._sessions[session.run_id] = session
        self._only = session if len(self._sessions) == 1 else None
        if self.channel is not None and len(self._sessions) == 1:
            self.channel.bind(self.dispatch, owner=self)

    def detach(self, session: Session) -> None:
        """Stop routing to ``session``; unbinds the channel when none is left.

        The channel learns that the run ended, so a later message for it (its run id, session id
        or one of its approvals) gets a FAILURE ack at once instead of waiting for a run.
        """
        self._sessions.pop(session.run_id, None)
        self._only = next(iter(self._sessions.values())) if len(self._sessions) == 1 else None
        if self.channel is None:
            return
        if is_over(session.state):
            names = [session.run_id, session.session_id, *session.approvals.asked_targets()]
            self.channel.run_ended(names, f"run {session.run_id} ended ({session.state}); nothing was changed")
        if not self._sessions:
            self.channel.unbind(self.dispatch)

    def find(self, name: str) -> Session | None:
        """The attached session whose run id or host session id is ``name``."""
        session = self._sessions.get(name)
        if session is not None:
            return session
        return next((s for s in self._sessions.values() if s.session_id == name), None)

    def dispatch(self, msg: ControlMessage) -> ControlAck:
        """Apply ``msg`` to the run(s) it addresses. Never raises."""
        problem = check_message(msg)
        if problem is not None:
            return problem
        # Checked once here: the run's dispatch table is called directly (a decision's path is kept short).
        payload = msg.payload
        named = None
        for key in _RUN_KEYS:  # each must be a string; the first one set names the run
            value = payload.get(key)
            if value is not None and not isinstance(value, str):
                return ControlAck.failure(msg.id, f"payload[{key!r}] must be a string, got {type(value).__name__}")
            if value and named is None:
                named = value
        if named is not None:
            session = self.find(named)
            if session is None:
                active = ", ".join(repr(s.run_id) for s in self.sessions[:5]) or "none"
                return ControlAck.failure(msg.id, f"no active run {safe_repr(named)} (active: {active})")
            return dispatch_checked(session, msg)
        if msg.kind in (ControlKind.APPROVE, ControlKind.REJECT):
            return self._dispatch_decision(msg)
        sessions = self.sessions
        if not sessions:
            return ControlAck.failure(msg.id, "no active run")
        if len(sessions) == 1:
            return dispatch_checked(sessions[0], msg)
        acks = [(s, dispatch_checked(s, msg)) for s in sessions]
        result = AckResult.SUCCESS if all(a.ok for _, a in acks) else AckResult.FAILURE
        detail = "; ".join(f"{s.run_id}: {a.detail}" for s, a in acks)
        data: dict[str, Any] | None = None
        if msg.kind is ControlKind.STATUS_QUERY:
            data = {"runs": [a.data for _, a in acks]}
        return ControlAck(msg.id, result, detail, data=data)

    def _dispatch_decision(self, msg: ControlMessage) -> ControlAck:
        target = msg.payload.get("target_id")
        if not isinstance(target, str) or not target:
            try:
                decision_from_payload(ControlKind(msg.kind), msg.payload)
            except ValueError as exc:
                return ControlAck.failure(msg.id, str(exc))
            return ControlAck.failure(msg.id, "missing target_id")  # unreachable: the parser requires it
        only = self._only
        if only is not None and target in only.approvals.live:  # the one run, waiting on it
            return dispatch_checked(only, msg)
        # A run still waiting on the target wins over runs that merely remember deciding it (task ids such
        # as "buy" can repeat across runs of one runner).
        holders = [s for s in self._sessions.values() if target in s.approvals.live]
        if not holders:
            holders = [s for s in self._sessions.values() if s.approvals.knows(target)]
        if len(holders) == 1:
            return dispatch_checked(holders[0], msg)
        if len(holders) > 1:
            runs = ", ".join(repr(s.run_id) for s in holders)
            return ControlAck.failure(
                msg.id,
                f"target_id {safe_repr(target)} is open in several runs ({runs}); name one with payload['run_id']",
            )
        pending = [t for s in self._sessions.values() for t in s.approvals.open_targets()]
        listed = ", ".join(repr(t) for t in pending[:5]) or "none"
        return ControlAck.failure(
            msg.id, f"unknown target_id {safe_repr(target)}: no pending approval (pending: {listed})"
        )
