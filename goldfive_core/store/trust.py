"""The agent's side of signed decisions: apply a decision from outside only if the trusted key signed it.

:func:`verify_decision` is the one check every path that applies a decision from the store calls
(the control inbox, the sweep of decisions recorded while the run looked gone, the replay of a
call after a restart). A refused decision changes nothing: the request stays pending, and a
``DecisionRefused`` event says so in the run's audit trail.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .._util import shorten
from ..approvals import reviewer_claim
from ..pb.v1 import events_pb2
from ..session import Session
from ..signing import TrustKey, check_decision

__all__ = ["verify_decision"]

logger = logging.getLogger(__name__)


def verify_decision(
    trust: TrustKey | None,
    payload: Mapping[str, Any],
    *,
    approved: bool,
    run_id: str,
    request_id: str,
    request_digest: str,
    session: Session | None = None,
) -> str | None:
    """None when the decision may be applied (no trusted key configured, or a valid signature), else why not.

    ``payload`` is an APPROVE/REJECT payload (``target_id``, ``detail``, ``decided_by``,
    ``args_digest``, ``edited_args``, ``signature``). ``run_id``, ``request_id`` and ``request_digest``
    are the agent's own — the run and the request the decision would be applied to, never what the
    payload claims — so a signature made for another run or request (another prompt, other
    arguments) does not verify. A refusal is logged and, when ``session`` is given, recorded as a
    ``DecisionRefused`` event of that run.
    """
    target = payload.get("target_id")
    decided_by = payload.get("decided_by")
    # A reviewer's verdict is only taken in the agent's own gate: one in the store was forged, signed or not.
    problem = reviewer_claim(decided_by, payload.get("channel")) or None
    grant = payload.get("grant")
    if problem is None and trust is not None and grant and not payload.get("grant_rule"):
        # A grant the signer allowed names the rule it allowed it under: one without cannot say which rule's calls
        # it may let through (a signature made before the field existed, or by a signer that never checked).
        problem = "the decision asks for a standing grant but names no rule it was allowed under; nothing was decided"
    if problem is None:
        if trust is None:
            return None
        problem = check_decision(
            trust,
            target_id=target if isinstance(target, str) else "",
            run_id=run_id,
            approved=approved,
            edited_args=payload.get("edited_args"),
            args_digest=str(payload.get("args_digest") or ""),
            decided_by=decided_by if isinstance(decided_by, str) else "",
            detail=str(payload.get("detail") or payload.get("reason") or ""),
            signature=payload.get("signature"),
            grant=grant if isinstance(grant, str) else "",
            grant_rule=rule if isinstance(rule := payload.get("grant_rule"), str) else "",
            request_id=request_id,
            request_digest=request_digest,
            quorum=quorum if isinstance(quorum := payload.get("quorum"), int) and not isinstance(quorum, bool) else 0,
            quorum_reject=mode if isinstance(mode := payload.get("quorum_reject"), str) else "",
            answer=answer if isinstance(answer := payload.get("answer"), str) else "",
            expiry=expiry if isinstance(expiry := payload.get("expiry"), str) else "",
        )
    if problem is None:
        return None
    claimed = decided_by if isinstance(decided_by, str) else ""
    channel = payload.get("channel")
    logger.warning(
        "refused a decision for %r in run %s (claimed decider %r): %s",
        shorten(str(target), 80),
        run_id,
        shorten(claimed, 80),
        problem,
    )
    if session is not None:
        session.events.emit(
            events_pb2.DecisionRefused(
                target_id=shorten(str(target or ""), 200),
                decision="approve" if approved else "reject",
                decided_by=shorten(claimed, 200),
                reason=problem,
                channel=shorten(channel, 40) if isinstance(channel, str) else "",
                request_id=shorten(request_id, 200),
            )
        )
    return problem
