"""``make mutation``: break one safety line at a time and check that a fast test subset notices.

Each mutation is (files, exact original snippet, replacement, description, tests). The harness
copies the working tree to a scratch directory once, then for each mutation writes the mutated
file there, runs ``pytest -x`` on the mutation's tests (SQLite only: PostgreSQL is unset so the
run stays fast), and restores the file. A mutation is

- **killed** when the tests fail (or time out),
- **survived** when they pass — a line whose breakage no test notices,
- **not applied** when its snippet is not found exactly once in any of its files (the code moved:
  re-target the snippet). Never counted as killed.

The score is killed / applied, leaving out mutants marked ``equivalent=`` (each with the reason no
test can tell it from the original). The run ends with a table of the score per module (the file of
the mutated line), the survivors with the tests that missed them, and the exit status: non-zero when
the overall score is under 90 % (``--fail-under``) or a mutation no longer applies. Not part of CI (it
is slow: about a quarter of an hour on two cores); run it before changing the modules it covers and
after they move. Why not mutmut or cosmic-ray: both mutate every operator of a
module blindly (hundreds of mutants, most of them in logging and messages) and need a full test
run per mutant; here the point is a reviewed list of the *meaningful* breakages of safety-critical
lines, each with the tests that are meant to catch it, fast enough to run in a few minutes.

Usage: ``python scripts/mutation.py [--only TEXT] [--list] [--locate [ROOT]] [--timeout S] [--fail-under PCT]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Test subsets, smallest first. A mutation names the ones meant to catch it.
APPROVALS = (
    "tests/core/test_core_decision_guards.py",
    "tests/core/test_core_approvals.py",
    "tests/core/test_core_reliability.py",
    "tests/core/test_core_flow_a.py",
)
REPLAY = ("tests/store/test_store_replay.py",)
DECISIONS = ("tests/store/test_store_decisions.py", "tests/store/test_store_decide.py")
BACKEND = ("tests/store/test_store_backend.py",)
ADK_B = ("tests/adk/test_adk_flow_b.py",)
CLAUDE = (
    "tests/claude/test_claude_approvals.py",
    "tests/claude/test_claude_gate.py",
    "tests/claude/test_claude_reporting.py",
)
CHANNEL = ("tests/store/test_store_channel.py",)
CROSS = ("tests/store/test_store_cross_process.py",)
LEDGER = ("tests/store/test_store_ledger.py",)
DETACH_EXPIRY = ("tests/detach/test_detach_expiry.py",)
EXPIRY_REPLAY = ("tests/store/test_store_expiry_replay.py",)
CROSS_SERVE_SESSIONS = (
    "tests/server/test_server_sessions.py::test_a_disable_or_rotate_on_one_serve_closes_the_streams_another_serve_holds_at_once",
    "tests/server/test_server_sessions.py::test_a_disable_or_rotate_by_another_process_closes_a_serve_processs_streams",
)
AGENT_ID = ("tests/store/test_store_agent_identity.py",)
APP_LEDGER = ("tests/store/test_store_app_ledger.py",)
HOST_LEDGERS = ("tests/store/test_store_host_ledgers.py",)
CLAUDE_LEDGERS = ("tests/store/test_store_claude_ledgers.py",)
RELEASE = ("tests/store/test_store_release.py",)
HTTP_RELEASE = ("tests/http/test_http_release.py",)
HTTP_LEDGER = ("tests/http/test_http_ledger.py",)
RUN_NAMESPACE = (
    "tests/http/test_http_ledger.py::test_an_agent_cannot_take_another_agents_run_id_and_the_victim_runs",
    "tests/http/test_http_ledger.py::test_an_agent_uses_its_own_namespace_and_ids_without_one_as_before",
)
OUTAGES = ("tests/faults/test_faults_done_kept.py",)
AUTHZ = ("tests/server/test_server_authz_matrix.py", "tests/server/test_server_auth.py")
SESSIONS = ("tests/server/test_server_sessions.py",)
POLICY_GATE = ("tests/policy/test_policy_fail_closed.py",)
SERVER_POLICY = ("tests/server/test_server_authority.py",)
SERVER_POLICY_JUDGES = ("tests/policy/test_policy_server_judges.py", *SERVER_POLICY)
NOTIFY = ("tests/store/test_notify.py",)
BROWSER_DENIES = (
    "tests/browser/test_browser_policy.py::test_a_card_the_servers_rule_denies_offers_no_approve_and_says_why",
)
SERVER_GRANTS = ("tests/policy/test_policy_server_judges.py", "tests/server/test_server_authority_grants.py")
"""A grant only as the server's rule offers it (the table first, then the served cases)."""
"""The server's own judgment of a call (fast table first, then the served cases)."""
_JUNK = "tests/server/test_server_junk.py::"
OTEL = ("tests/adk/test_adk_otel.py::test_no_span_carries_a_tool_calls_arguments_unless_asked",)
NUL_STORE = ("tests/store/test_store_nul.py",)
NUL_SERVER = ("tests/server/test_server_nul.py",)
NUL_HTTP = ("tests/http/test_http_nul.py",)
CHECKPOINTS = ("tests/faults/test_faults_checkpoint_relabel.py", "tests/faults/test_faults_checkpoints.py")
KILLED_SERVE = (
    "tests/faults/test_faults_checkpoint_relabel.py::test_a_serve_killed_before_its_next_checkpoint_still_holds_what_it_signed",
)
AUDIT = ("tests/faults/test_faults_audit.py", "tests/faults/test_faults_audit_tables.py")
GATE_T = ("tests/core/test_core_toolcall.py",)
PATHS = ("tests/core/test_core_decision_paths.py",)
QUORUM = ("tests/policy/test_policy_quorum_run.py", "tests/policy/test_policy_decisions.py")
SIGNED = ("tests/server/test_server_signing.py", "tests/store/test_store_trust.py")
TRUSTED = ("tests/store/test_store_trust.py",)
RUN_APPROVED = ("tests/store/test_store_run_approved.py",)
REQUEST = ("tests/server/test_server_request_binding.py",)
REVIEWER = ("tests/policy/test_policy_reviewer.py",)
REVIEWER_STORE = ("tests/store/test_store_review.py",)
NOT_TEXT = ("tests/core/test_core_not_text.py",)
_RELABEL = "tests/faults/test_faults_checkpoint_relabel.py::"
SERVER_ROWS = tuple(
    _RELABEL + name
    for name in (
        "test_a_revocation_the_server_made_erased_after_the_newest_checkpoint_is_never_signed",
        "test_a_revocation_the_server_made_relabelled_after_the_newest_checkpoint_is_never_signed",
        "test_a_finished_call_the_server_recorded_put_back_in_doubt_is_never_signed",
        "test_a_ledger_record_the_server_wrote_rewritten_is_never_signed_even_after_a_restart",
        "test_rows_the_server_wrote_are_signed_when_they_read_as_written_and_then_forgotten",
        "test_a_refusal_the_server_put_on_the_audit_log_erased_is_never_signed",
    )
)
GRANT_BOOK = ("tests/policy/test_policy_decisions.py",)
GRANTS_KEPT = ("tests/store/test_store_grants.py",)
GRANT_ASKED = (
    "tests/adk/test_adk_policy.py",
    "tests/store/test_store_grants.py",
    "tests/policy/test_policy_fail_closed.py",
)

# Where code lives now, and where the tool-call gate moves it (a mutation applies in the first file
# that holds its snippet exactly once).
EXECUTION = ("goldfive_core/store/execution.py", "goldfive_core/toolcall.py", "goldfive_core/store/ledger.py")
ADK = ("goldfive_adk/plugin.py", "goldfive_core/toolcall.py")
CLAUDE_ADAPTER = ("goldfive_core/adapters/claude.py", "goldfive_core/toolcall.py")
SQL = tuple(
    f"goldfive_core/store/sql/{name}.py"
    for name in ("approvals", "apply", "audit", "chain", "db", "decisions", "inbox", "ledger", "parking", "runs")
)
DECIDE = ("goldfive_core/store/decide.py",)
CHECKPOINT = ("goldfive_core/store/checkpoint.py",)
AUDIT_LOG = ("goldfive_core/store/audit.py",)
SERVER_APP = ("goldfive_core/server/app.py",)
BOOK = ("goldfive_core/approvals.py",)
AUTH = ("goldfive_core/server/auth.py",)
APP = ("goldfive_core/server/app.py",)
SESSION = ("goldfive_core/session.py",)
DISPATCH = ("goldfive_core/dispatch.py",)
GATE = ("goldfive_core/toolcall.py",)
TALLY = ("goldfive_core/policy/_quorum.py",)
SIGNING = ("goldfive_core/signing.py",)
TRUST = ("goldfive_core/store/trust.py",)
AUTHORITY = ("goldfive_core/policy/_authority.py",)
CHANNEL_FILE = ("goldfive_core/store/serving.py",)
REPLAY_FILE = ("goldfive_core/store/execution.py",)
INFLIGHT = "goldfive_core/inflight.py"
RUNNER = ("goldfive_core/runner.py",)
CALLABLE = ("goldfive_core/adapters/callable.py",)
A2A = ("goldfive_adk/a2a.py",)
A2A_IN_BAND = ("tests/a2a/test_a2a_in_band.py",)
A2A_SERVER = ("tests/a2a/test_a2a_server.py",)
REVIEW_RUN = ("goldfive_core/review/_run.py",)
REVIEW_GATE = ("goldfive_core/review/_gate.py",)
ELICIT = ("goldfive_core/elicitation.py",)
ELICIT_TESTS = ("tests/core/test_core_elicitation.py",)
MCP_ELICIT = ("goldfive_core/adapters/mcp_gateway/elicit.py",)
MCP_ELICIT_CLIENT = "tests/mcp/test_mcp_elicit_client.py::"
MCP_INPUT_REQUIRED = ("goldfive_core/adapters/mcp_gateway/input_required.py",)
MCP_UPSTREAMS = ("goldfive_core/adapters/mcp_gateway/upstreams.py",)
MCP_FORWARD = ("goldfive_core/adapters/mcp_gateway/forward.py",)
MCP_LINK = ("goldfive_core/adapters/mcp_gateway/link.py",)
MCP_FAULTS = "tests/mcp/test_mcp_faults.py::"
DIED_FOR_GOOD = "test_a_call_approved_after_its_upstream_died_for_good_is_not_sent_and_its_claim_is_given_back"
_ACKS_EVENTS = "tests/http/test_http_acks_with_events.py::"


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One deliberate breakage of one line."""

    files: tuple[str, ...]
    original: str
    replacement: str
    description: str
    tests: tuple[str, ...]
    equivalent: str = ""
    """Why no test can tell this mutant from the original (reported apart, left out of the score)."""
    alt: tuple[tuple[str, str], ...] = ()
    """The same breakage where the code has moved to: (original, replacement) pairs tried in order."""

    def variants(self) -> tuple[tuple[str, str], ...]:
        return ((self.original, self.replacement), *self.alt)


M = Mutation
MUTATIONS: tuple[Mutation, ...] = (
    # -- the approval record state machine -------------------------------------------------------------------
    M(
        BOOK,
        "if decision.args_digest and request.args_digest and decision.args_digest != request.args_digest:",
        "if False:",
        "a live decision for other arguments is applied (digest check skipped)",
        APPROVALS,
    ),
    M(
        BOOK,
        'if not decision.approved:\n                return DecisionResult(DecisionVerdict.EDIT_REFUSED, "refused',
        'if False:\n                return DecisionResult(DecisionVerdict.EDIT_REFUSED, "refused',
        "a rejection carrying edited arguments is accepted",
        APPROVALS,
    ),
    M(
        BOOK,
        "error = request.validate_edit(decision.edited_args)\n            if error is not None:",
        "error = request.validate_edit(decision.edited_args)\n            if False:",
        "edited arguments that do not fit the tool are accepted",
        APPROVALS + ADK_B,
    ),
    M(
        BOOK,
        "record.status, ApprovalStatus.GRANTED if decision.approved else ApprovalStatus.REJECTED",
        "record.status, ApprovalStatus.GRANTED",
        "a rejection is recorded as granted",
        APPROVALS,
    ),
    M(
        BOOK,
        'decision="approve" if decision.approved else "reject",\n            detail=decision.detail,',
        'decision="approve",\n            detail=decision.detail,',
        "the waiting agent is told 'approve' for a rejection",
        APPROVALS,
    ),
    M(
        BOOK,
        "if decided is not None and decided.decision is not None:\n                return DecisionResult(",
        "if False:\n                return DecisionResult(",
        "a second decision is not told 'already decided'",
        APPROVALS,
    ),
    M(
        BOOK,
        "if existing.status is ApprovalStatus.PENDING:\n                raise ApprovalError",
        "if False:\n                raise ApprovalError",
        "a second request for a pending target replaces it",
        APPROVALS,
    ),
    M(
        BOOK,
        "elif self._check(record, early) is None:",
        "else:",
        "an early decision for other arguments is applied when the request opens",
        APPROVALS,
    ),
    M(
        BOOK,
        "            if timer is not None:\n                timer.cancel()",
        "            if timer is not None:\n                pass",
        "the timeout timer stays alive after a decided or cancelled wait",
        APPROVALS,
    ),
    M(
        BOOK,
        "if record.decision is not None:  # decided after the timer fired but before this task resumed",
        "if False:",
        "a decision landing between the timer and the waiter's resumption is lost",
        APPROVALS,
    ),
    M(
        BOOK,
        "        if keep_open:\n",
        "        if True:\n",
        "a tool (Flow B) timeout leaves the record open (timed_out instead of expired)",
        APPROVALS + ADK_B,
    ),
    M(
        BOOK,
        "            if self._live.get(record.target_id) is record:\n                del self._live[record.target_id]\n"
        "                _move(record, ApprovalStatus.CANCELLED)\n            raise",
        "            raise",
        "a cancelled wait leaves its record behind",
        APPROVALS,
    ),
    M(
        BOOK,
        'record.waiter.set_result(ApprovalOutcome(target_id=target_id, decision="cancelled", detail=reason))',
        "pass",
        "closing a run leaves its waiters waiting",
        APPROVALS,
    ),
    M(
        BOOK,
        'waiter.set_result(ApprovalOutcome(target_id=target_id, decision="timeout"))',
        'waiter.set_result(ApprovalOutcome(target_id=target_id, decision="approve"))',
        "a timeout is reported as an approval",
        APPROVALS,
    ),
    # -- replay and the at-most-once ledger (callable agent: run_approved) ----------------------------------------
    M(
        EXECUTION,
        "approved, detail, decided_by, edited = stored.approved, stored.detail",
        "approved, detail, decided_by, edited = True, stored.detail",
        "run_approved treats a recorded rejection as an approval",
        REPLAY,
        alt=(
            (
                "decision = Decision(\n        approved=stored.approved,",
                "decision = Decision(\n        approved=True,",
            ),
        ),
    ),
    M(
        EXECUTION,
        "if stored.args_digest and digest and stored.args_digest != digest:",
        "if False:",
        "replay applies a decision recorded for other arguments",
        REPLAY,
    ),
    M(
        (*EXECUTION, INFLIGHT),
        "        await finish_execution(store, call_id=call_id, error=exc)\n",
        "        pass\n",
        "a body that raised stays 'in doubt' instead of done-with-error",
        REPLAY,
        alt=(
            ("        await outcome.finish(error=exc)\n", "        pass\n"),
            ("            await self.finished(outcome.call_id, error=exc)\n", "            pass\n"),
        ),
    ),
    M(
        (INFLIGHT,),
        "failure = _HostFailure(error) if isinstance(error, str) else error",
        "failure = None",
        "a failed body is recorded as done with no error (the in-flight record drops it)",
        ("tests/core/test_core_inflight.py",),
    ),
    M(
        EXECUTION,
        "if row.state is ExecutionState.DONE:",
        "if False:",
        "a finished body is reported in doubt (or run again) on replay",
        REPLAY,
    ),
    M(
        EXECUTION,
        "    if claimed:\n        return None",
        "    if True:\n        return None",
        "the body runs although another process claimed it",
        REPLAY,
    ),
    M(
        EXECUTION,
        '    if not approved:\n        return GuardedResult(status="reject"',
        '    if False:\n        return GuardedResult(status="reject"',
        "run_approved runs the body after a live rejection",
        REPLAY + CROSS,
        alt=(
            (
                '    if outcome.decision == "approve":\n        args: Mapping[str, Any] = call.args',
                '    if outcome.decision in ("approve", "reject"):\n        args: Mapping[str, Any] = call.args',
            ),
        ),
    ),
    M(
        EXECUTION,
        "call_args = dict(edited) if edited is not None else dict(args)",
        "call_args = dict(args)",
        "an approved edit is ignored: the body runs with the original arguments",
        REPLAY,
        alt=(("            args = dict(outcome.edited_args)\n", "            args = call.args\n"),),
    ),
    M(
        EXECUTION,
        "    if stored.approved:\n        edited = stored.edited_args",
        "    if True:\n        edited = stored.edited_args",
        "replaying a recorded rejection announces ApprovalGranted",
        REPLAY,
        alt=(("    if stored.approved:\n        session.events.emit(", "    if True:\n        session.events.emit("),),
    ),
    # -- the SQL store: decisions and the ledger ----------------------------------------------------------------
    M(
        SQL,
        "approved=rec.status is ApprovalStatus.GRANTED,",
        "approved=True,",
        "find_decision reads every recorded decision as an approval",
        REPLAY,
    ),
    M(
        SQL,
        "WHERE {where} AND status IN ({marks(new)})",
        "WHERE {where} AND (1 = 1 OR status IN ({marks(new)}))",
        "a later event, ack or store decision overwrites a recorded decision",
        DECISIONS + BACKEND,
    ),
    M(
        SQL,
        "\"id = ? AND (? = '' OR args_digest = '' OR args_digest = ?) AND (? = '' OR request_id = ?)\"",
        "\"id = ? AND (? = ? OR 1 = 1) AND (? = '' OR request_id = ?)\"",
        "the store records a decision bound to a stale digest",
        DECISIONS,
    ),
    M(
        SQL,
        "new = ApprovalStatus.TIMED_OUT if out.still_open else ApprovalStatus.EXPIRED",
        "new = ApprovalStatus.TIMED_OUT",
        "the store keeps a Flow B timeout open (timed_out instead of expired)",
        REPLAY + BACKEND,
    ),
    M(
        SQL,
        '"ON CONFLICT (target_id) DO NOTHING",\n                    (target_id, run_id, now_ms(), pid, host),\n'
        "                )\n                return bool(cur.rowcount == 1)",
        '"ON CONFLICT (target_id) DO NOTHING",\n                    (target_id, run_id, now_ms(), pid, host),\n'
        "                )\n                return True",
        "mark_executing claims a body twice",
        BACKEND + REPLAY,
        alt=(
            (
                "                if cur.rowcount == 1:\n                    self._record_execution(",
                "                if True:\n                    self._record_execution(",
            ),
            (
                "                    (target_id, run_id, now_ms(), pid, host, args_digest),\n"
                "                )\n"
                "                return bool(cur.rowcount == 1)",
                "                    (target_id, run_id, now_ms(), pid, host, args_digest),\n"
                "                )\n"
                "                return True",
            ),
        ),
    ),
    M(
        SQL,
        "\"UPDATE gf_executions SET state = 'done', finished_at_ms = ?, result_json = ? WHERE target_id = ?\"",
        "\"UPDATE gf_executions SET state = 'executing', finished_at_ms = ?, result_json = ? WHERE target_id = ?\"",
        "a finished body is never recorded done",
        REPLAY,
        alt=(
            (
                "f\"UPDATE gf_executions SET state = 'done', finished_at_ms = ?, result_json = ? WHERE {where} \"",
                "f\"UPDATE gf_executions SET state = 'executing', finished_at_ms = ?, result_json = ? WHERE {where} \"",
            ),
        ),
    ),
    M(
        SQL,
        "\"DELETE FROM gf_executions WHERE target_id = ? AND state = 'executing'\"",
        '"DELETE FROM gf_executions WHERE target_id = ?"',
        "'resolve --did-not-run' forgets a body that finished (it may run again)",
        REPLAY,
        alt=(
            (
                "f\"DELETE FROM gf_executions WHERE {where} AND state = 'executing' RETURNING run_id, owner\"",
                'f"DELETE FROM gf_executions WHERE {where} RETURNING run_id, owner"',
            ),
        ),
    ),
    M(
        SQL,
        'approved = row[0] == "APPROVE"',
        "approved = True",
        "an applied REJECT is recorded on its approval as granted",
        BACKEND + CHANNEL + DECISIONS,
    ),
    M(
        SQL,
        "    if approved:\n        event.approval_granted.CopyFrom(",
        "    if True:\n        event.approval_granted.CopyFrom(",
        "a rejection recorded in the store is audited as ApprovalGranted",
        REPLAY + DECISIONS,
    ),
    # -- decide(): the one way in from outside the agent ------------------------------------------------------
    M(
        DECIDE,
        "if len(open_rows) > 1:",
        "if len(open_rows) > 2:",
        "the first of two runs silently takes a decision for a target open in both",
        DECISIONS,
    ),
    M(
        DECIDE,
        "        stale = _stale(now, self.digest) or _reasked(now, self.row)\n",
        "        stale = _reasked(now, self.row)\n",
        "decide() records offline without checking the digest itself (the store's guard remains)",
        DECISIONS,
        equivalent="decide_in_store refuses the same stale digest inside its UPDATE, and record() then "
        "re-reads the row and returns the same refusal words: defence in depth, one layer removed",
    ),
    M(
        DECIDE,
        '        if self.digest:\n            payload["args_digest"] = self.digest',
        "        if False:\n            pass",
        "a live decision travels without the digest the decider saw",
        CROSS,
    ),
    M(
        DECIDE,
        "            detached = isinstance(exc.liveness, RunLiveness) and exc.liveness.state is Liveness.DETACHED\n"
        "            return self.attempt.record(str(exc), detached=detached)",
        "            return _refused(row, str(exc))",
        "a decision whose run died during the wait is lost instead of recorded",
        DECISIONS,
    ),
    M(
        ("goldfive_core/cli.py",),
        "args_digest=args.digest,",
        "args_digest=None,",
        "the command line ignores --digest",
        DECISIONS,
    ),
    # -- the ADK plugin's translation ----------------------------------------------------------------------------
    M(
        ADK,
        'decision="approve" if stored.approved else "reject",',
        'decision="approve",',
        "ADK replay turns a recorded rejection into an approval (the rejected transfer runs)",
        REPLAY,
        alt=(
            (
                "outcome = ApprovalOutcome.of(call.call_id, replay.decision)",
                "outcome = ApprovalOutcome.of(call.call_id, dataclasses.replace(replay.decision, approved=True))",
            ),
        ),
    ),
    M(
        ADK,
        '                if problem is not None:\n                    return skip(name, "approval_error", '
        'f"the recorded edited',
        '                if False:\n                    return skip(name, "approval_error", f"the recorded edited',
        "ADK replay lets a recorded edit that does not fit reach the tool",
        REPLAY,
        alt=(
            (
                '            if problem is not None:\n                return _error(call, f"the recorded edited',
                '            if False:\n                return _error(call, f"the recorded edited',
            ),
        ),
    ),
    M(
        ADK,
        "                tool_args.update(outcome.edited_args)",
        "                pass",
        "ADK runs the tool with the original arguments after an approved edit",
        ADK_B + REPLAY,
        alt=(("                tool_args.update(outcome.args)", "                pass"),),
    ),
    M(
        ADK,
        "                if refused is not None:\n                    return _replayed(name, refused)",
        "                if False:\n                    return _replayed(name, refused)",
        "ADK runs an approved body the ledger says another process claimed",
        REPLAY,
        alt=(
            (
                '            if refused is not None:\n                if refused.kind == "unavailable"',
                '            if False:\n                if refused.kind == "unavailable"',
            ),
        ),
    ),
    M(
        ADK,
        "        await self._record_execution(tool_context.function_call_id, error=error)",
        "        pass",
        "ADK reports a tool that raised as in doubt forever",
        REPLAY,
        alt=(
            (
                "        if approved is not None:\n            await approved.finish(error=error)",
                "        if approved is not None:\n            pass",
            ),
            ('await self._in_flight.finished(tool_context.function_call_id or "", error=error)', "pass"),
        ),
    ),
    M(
        ("goldfive_adk/_confirm.py",),
        "check=edit_check(schema, tool=tool.name, words=_adk_words(schema))",
        "check=edit_check(None, tool=tool.name, words=_adk_words(schema))",
        "ADK takes any edited arguments (its check ignores the declared schema the inbox checks)",
        ("tests/adk/test_adk_edit_agrees.py", *ADK_B),
    ),
    M(
        ADK,
        "starts its own flow.\n            tool_context.tool_confirmation = CONFIRMED",
        "starts its own flow.\n            pass",
        "ADK approves but leaves ADK's own confirmation flow to block the tool",
        ADK_B,
    ),
    M(
        ("goldfive_adk/_confirm.py",),
        "    model_config = ConfigDict(frozen=True)",
        "    model_config = ConfigDict()",
        "the one confirmation every approved call carries can be changed by a body (ADK then refuses later approvals)",
        ADK_B,
    ),
    M(
        ADK,
        'if outcome.decision == "reject":\n            return skip(name, "user_rejected"',
        'if outcome.decision == "rejected":\n            return skip(name, "user_rejected"',
        "ADK tells the model something other than user_rejected for a rejection",
        ADK_B + REPLAY,
        alt=(
            (
                '            reason="user_rejected",\n            detail=outcome.detail or "a person',
                '            reason="run_cancelled",\n            detail=outcome.detail or "a person',
            ),
        ),
    ),
    M(
        ADK,
        'if replay.kind in ("done", "in_doubt"):',
        'if replay.kind in ("done",):',
        "ADK asks again (and may re-run) a call the ledger says is in doubt",
        ("tests/store/test_store_adk_restart.py",),
        alt=(('if replay.kind in ("done", "in_doubt", "unavailable"):', 'if replay.kind in ("done", "unavailable"):'),),
    ),
    # -- the Claude adapter's translation -------------------------------------------------------------------------
    M(
        CLAUDE_ADAPTER,
        'logger.exception("gate_tools predicate raised on %s; asking a person to be safe", tool_name)\n'
        "            return True",
        'logger.exception("gate_tools predicate raised on %s; asking a person to be safe", tool_name)\n'
        "            return False",
        "the Claude gate predicate fails open when it raises",
        (*CLAUDE, "tests/claude/test_claude_fail_closed.py"),
    ),
    M(
        CLAUDE_ADAPTER,
        "return PermissionResultAllow(updated_input=edited)",
        "return PermissionResultAllow()",
        "Claude runs the tool with the original input after an approved edit",
        CLAUDE,
        alt=(
            (
                "return PermissionResultAllow(updated_input=dict(outcome.args) if outcome.edited else None)",
                "return PermissionResultAllow()",
            ),
        ),
    ),
    M(
        CLAUDE_ADAPTER,
        "        if not session.has_channel:\n            return PermissionResultDeny(",
        "        if False:\n            return PermissionResultDeny(",
        "Claude waits for a person although no channel can answer",
        CLAUDE,
        alt=(("    if outcome is None and not session.has_channel:", "    if False:"),),
    ),
    M(
        CLAUDE_ADAPTER,
        '        if outcome.decision == "reject":\n            by = ',
        '        if outcome.decision == "rejected":\n            by = ',
        "Claude stops the run instead of telling the model the rejection reason",
        CLAUDE,
        alt=(('    if reason == "user_rejected":\n        by = ', '    if reason == "rejected":\n        by = '),),
    ),
    # -- agents own their calls; a finished body's end is kept through an outage ---------------------------------
    M(
        EXECUTION,
        "    return settled if settled is not None else "
        'Replay(kind="in_doubt", detail=f"{call_id!r} could not be claimed")',
        "    return settled",
        "a lost ledger claim goes ahead (the claim answered False and nothing is on record: the body runs)",
        LEDGER,
    ),
    M(
        EXECUTION,
        '            return _unavailable(self.store, call.tool_name, "could not record that it starts", exc)',
        "            return None",
        "a claim the store could not record goes ahead",
        LEDGER,
    ),
    M(
        SQL,
        "\"WHERE gf_executions.state = 'done' AND gf_executions.args_digest <> '' \"",
        "\"WHERE gf_executions.args_digest <> '' \"",
        "a reused call id with other arguments takes over an in-doubt row",
        LEDGER,
    ),
    M(
        SQL,
        "                owner = owner_of(self.db, conn, run_id)\n                if reads_shared(owner)",
        '                owner = ""\n                if reads_shared(owner)',
        "a claim lands in one ledger for all agents (one agent's claim skips another's call)",
        LEDGER + HTTP_LEDGER,
    ),
    M(
        EXECUTION,
        "        await self._own(session)\n        return await check_replay(",
        "        return await check_replay(",
        "a store agent's look-up reads the shared ledger (a restart asks again; another agent's call reads done)",
        AGENT_ID,
    ),
    M(
        EXECUTION,
        "        if not owner or run_id in self._owned:",
        "        if True:",
        "store agents of every identity share one ledger (the second agent reusing a call id never runs its body)",
        AGENT_ID,
    ),
    M(
        EXECUTION,
        '        return self.owner or (app_owner(session.app_name) if self._by_app else "")',
        "        return self.owner",
        "store agents with no identity share one ledger whatever their app (a second app's 'pay-1' never runs)",
        APP_LEDGER,
    ),
    M(
        ADK,
        "            app_name=app_name,  # the App's name",
        '            app_name="",  # the App\'s name',
        "the ADK plugin gives its runs no app name (every App's calls in the shared ledger)",
        APP_LEDGER,
    ),
    M(
        CALLABLE,
        "        self.app_name = _stable_name(fn)",
        '        self.app_name = ""',
        "a wrapped callable's runs name no app (all callables in the shared ledger: a second's 'pay-1' skipped)",
        HOST_LEDGERS,
    ),
    M(
        CALLABLE,
        '    return f"{module}.{qualname}"',
        "    return qualname",
        "a callable's ledger is named by its qualname alone (two modules' `agent` share one ledger)",
        HOST_LEDGERS,
    ),
    M(
        CALLABLE,
        "    if not isinstance(module, str) or not isinstance(qualname, str) or not module or not qualname:",
        "    if False:",
        "a callable with no qualname is keyed by a made-up name ('functools.None') instead of the shared ledger",
        HOST_LEDGERS,
    ),
    M(
        ("goldfive_core/store/execution.py",),
        "    if not app_name or len(app_name) > _APP_NAME_MAX or not app_name.isprintable():",
        "    if not app_name:",
        "an app name of any length or with control characters keys a ledger (unbounded owners, escapes in the record)",
        HOST_LEDGERS,
    ),
    M(
        RUNNER,
        "        self.app_name = adapter.app_name if app_name is None else app_name",
        "        self.app_name = adapter.app_name",
        "wrap(..., app_name=) is ignored (a renamed callable loses its calls: asked and run again)",
        HOST_LEDGERS,
    ),
    M(
        RUNNER,
        "input=input, app_name=self.app_name",
        "input=input",
        "the runner gives its runs no app name (every wrapped callable's calls in the shared ledger)",
        HOST_LEDGERS,
    ),
    M(
        CLAUDE_ADAPTER,
        "            records_steps=True,\n            app_name=owner.app_name,",
        "            records_steps=True,",
        "GoldfiveClaude(app_name=) is ignored (two Claude hosts' 'toolu_A' in one ledger: the second skipped)",
        CLAUDE_LEDGERS,
    ),
    M(
        SQL,
        "                if row is None and reads_shared(owner):",
        "                if False:",
        "an app's look-up misses a call done or in doubt in the shared ledger of before the upgrade (it runs again)",
        APP_LEDGER,
    ),
    M(
        SQL,
        "                if reads_shared(owner) and self._shared_holds(conn, target_id, args_digest):",
        "                if False:",
        "an app's claim wins over a call an unnamed process holds in the shared ledger (claimed after the look)",
        APP_LEDGER,
    ),
    M(
        SQL,
        "            \"OR args_digest = '' OR ? = '' OR args_digest = ?)\",",
        "            \"OR ? = '' OR args_digest = ?)\",",
        "a call done before the upgrade with no recorded digest is claimed again by the app",
        APP_LEDGER,
    ),
    M(
        SQL,
        "                    self._note_late_finish(conn, target_id, run_id, result_json, at)\n",
        "",
        "a 'done' that comes after a person resolved the call as not run is lost (only logged)",
        LEDGER,
    ),
    M(
        SQL,
        '        if last != "resolved_not_run":\n            return',
        "        if False:\n            return",
        "any refused 'done' (of a run that never claimed the call) is recorded as a late finish",
        LEDGER,
    ),
    M(
        SQL,
        "        if found != storable(owner):\n            raise StoreError(",
        "        if False:\n            raise StoreError(",
        "a store agent takes over a run another agent's ledger holds",
        AGENT_ID,
    ),
    M(
        SQL,
        "owned = f\"AND {RUN_OWNER.format(run='a.run_id')} IN (?, ?) \"",
        'owned = "AND ? IS NOT NULL AND ? IS NOT NULL "',
        "a decision recorded for another owner's request is applied to a run reusing its call id",
        LEDGER,
    ),
    M(
        SQL,
        '"owner = ? AND target_id = ? AND run_id = ?", [owner_of(self.db, conn, run_id), target_id, run_id]',
        '"owner = ? AND target_id = ?", [owner_of(self.db, conn, run_id), target_id]',
        "a run finishes (or a person settles) a call another run claimed",
        LEDGER + HTTP_LEDGER,
    ),
    M(
        EXECUTION,
        "            except _STOPPED as exc:\n                if ledger is not None:\n"
        "                    await _release(",
        "            except _STOPPED as exc:\n                if False:\n                    await _release(",
        "a run stopped after the APPROVE's ack claimed its call leaves it 'executing' (in doubt, never re-run)",
        RELEASE,
    ),
    M(
        EXECUTION,
        "        _release_later(ledger, session, call)\n        raise",
        "        raise",
        "a call cancelled (its task) after the APPROVE's ack claimed it leaves it 'executing' (in doubt, never re-run)",
        RELEASE,
    ),
    M(
        EXECUTION,
        "            if state is RunState.PAUSED and ledger is not None:\n                await _release(",
        "            if False:\n                await _release(",
        "a paused call holds the claim its approval's ack won while it waits (in doubt if the process stops)",
        RELEASE,
    ),
    M(
        EXECUTION,
        "    if won is not True:\n        return  # not folded, or not won",
        "    if won is False:\n        return  # not folded, or not won",
        "a release gives back a claim nobody said this run won (another run's claim of the call)",
        RELEASE,
        equivalent="the store's release is keyed by the releasing run's own unstarted claim (another run's is never "
        "touched), and a run whose claim was not folded has made none before begin: there is nothing to give back",
    ),
    M(
        SQL,
        "f\"DELETE FROM gf_executions WHERE {where} AND state = 'executing' AND args_digest = ? \"",
        'f"DELETE FROM gf_executions WHERE {where} AND args_digest = ? "',
        "a release gives back a call whose body finished (its 'done' is lost; a replay runs it again)",
        RELEASE,
    ),
    M(
        SQL,
        "                where, params = self._claim_filter(conn, target_id, run_id)\n"
        "                row = self.db.execute(\n                    conn,\n"
        "                    f\"DELETE FROM gf_executions WHERE {where} AND state = 'executing' AND",
        '                where, params = "target_id = ?", [target_id]\n'
        "                row = self.db.execute(\n                    conn,\n"
        "                    f\"DELETE FROM gf_executions WHERE {where} AND state = 'executing' AND",
        "a run gives back a claim another run holds (its body may be running: it could run twice)",
        RELEASE,
    ),
    M(
        ("goldfive_core/server/agents.py",),
        '        run_id = await self._ledger_run(user, body.get("run_id"))  # another agent\'s run: 403',
        '        run_id = str(body.get("run_id"))  # another agent\'s run: 403',
        "an agent gives back another agent's claim over HTTP (the victim's call left unclaimed while it runs)",
        HTTP_RELEASE,
    ),
    M(
        SQL,
        'params = [owner, "" if reads_shared(owner) else owner]',
        "params = [owner, owner]",
        "a decision recorded while down for a run of before the upgrade is not found by the app (asked again)",
        REPLAY,
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "    if colon and name != agent:",
        "    if colon and not agent:",
        "an agent takes a run id in another agent's namespace (the victim's run is refused)",
        RUN_NAMESPACE,
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "    if (refusal := run_namespace_refusal(run_id, agent)) is not None:\n        raise",
        "    if (refusal := run_namespace_refusal(run_id, agent)) is None:\n        raise",
        "run ids are first come, first owned whatever their namespace (squatting)",
        RUN_NAMESPACE,
    ),
    M(
        ("goldfive_core/store/agents.py",),
        "    now = max(clock) if running else None",
        "    now = 0 if running else None",
        "the waiting decisions' liveness checks judge runs on a clock of their own (a crashed run is taken as live)",
        (
            "tests/faults/test_faults_addressing_and_clocks.py::"
            "test_the_liveness_checks_of_waiting_decisions_read_runs_and_clock_in_one_statement",
        ),
    ),
    M(
        ("goldfive_core/store/sql/runs.py",),
        "            \"WHERE run_id = ? AND status = 'running' AND heartbeat_at_ms < ?\",",
        "            \"WHERE run_id = ? AND status = 'running' AND ? IS NOT NULL\",",
        "the reaper closes a run whose heartbeat came after it looked (a live run judged crashed)",
        (
            "tests/faults/test_faults_addressing_and_clocks.py::"
            "test_a_beat_that_lands_while_the_reaper_looks_keeps_its_run_open",
        ),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "            if not owners.decision_delivered(store, event.run_id, target, approved=granted):",
        "            if False:",
        "an agent writes a decision nobody made (its ApprovalGranted event is taken without a delivered decision)",
        ("tests/http/test_http_agent_role.py::test_an_agent_cannot_write_a_decision_nobody_made",),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "    for run_id in sorted({e.run_id for e in events}):\n        _claim_own(store, run_id, agent)",
        "    for run_id in []:\n        _claim_own(store, run_id, agent)",
        "an agent writes events into another agent's run",
        ("tests/http/test_http_agent_role.py::test_an_agent_writes_only_its_own_runs",),
    ),
    M(
        ("goldfive_core/store/agents.py",),
        "        if mine is not None and str(mine[0]) == agent:",
        "        if mine is not None:",
        "a run another agent owns is taken as this agent's (its events, stream and ledger)",
        ("tests/store/test_store_ledger.py", *HTTP_LEDGER),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "        if claim.run_id not in owned:\n            raise AgentError(\n                403,",
        "        if False:\n            raise AgentError(\n                403,",
        "an APPROVE's ack claims the body of a call in a run of another agent",
        HTTP_LEDGER,
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "    won = store.ack_controls(mine, claims=folded)",
        "    won = store.ack_controls(acks, claims=folded)",
        "an agent acks (and claims with) inbox rows its endpoint never claimed",
        (
            *HTTP_LEDGER,
            "tests/http/test_http_folded_claim.py",
            "tests/http/test_http_agent_role.py::test_an_agent_cannot_ack_a_message_another_agents_stream_holds",
        ),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        'a string of 1-200 characters")\n        await self._own(user, run_id)',
        'a string of 1-200 characters")',
        "an agent token reaches the ledger of a run it does not own",
        HTTP_LEDGER,
    ),
    M(
        EXECUTION,
        '            keeper_for(self.store).keep(f"\'done\' of {shorten(call_id, 80)!r}", run_id or "", write)',
        "            pass",
        "a finished body's 'done' that met an outage is dropped (the call reads in doubt; a replay may run it again)",
        OUTAGES,
    ),
    M(
        ("goldfive_core/store/sink.py",),
        "        self._after_kept_writes(batch)  # before _track",
        "        pass  # before _track",
        "a run's closing event is written while its 'done' is still kept (the finished call reads in doubt)",
        OUTAGES,
    ),
    M(
        ("goldfive_core/store/keeper.py",),
        "        self._wait(lambda: not self._pending, timeout)\n        lost = self.pending()",
        "        lost = self.pending()",
        "closing does not wait for kept 'done' records (they die with the process)",
        OUTAGES,
    ),
    # -- goldfive serve: who is asking, CSRF, fetch metadata, attempt limits, sessions ---------------------------
    M(
        AUTH,
        "        if not await self._secret_matches(digest, secret, user.token_hash, token_id=token_id, key=key):",
        "        if False:",
        "auth: a bearer token's secret is never verified (only its id)",
        AUTHZ,
    ),
    M(
        AUTH,
        "        user = await self.threads.run(AUTH, self.store.user, session.user_name)\n"
        "        if user is None or user.disabled:",
        "        user = await self.threads.run(AUTH, self.store.user, session.user_name)\n        if user is None:",
        "auth: a disabled user's web session cookie still works",
        AUTHZ,
    ),
    M(
        AUTH,
        "if not sent or not hmac.compare_digest(sent.encode(), user.csrf.encode()):",
        "if not sent:",
        "auth: CSRF: any non-empty X-CSRF-Token is accepted",
        AUTHZ,
    ),
    M(
        AUTH,
        'if site not in ("same-origin", "none"):',
        'if site not in ("same-origin", "same-site", "none"):',
        "auth: fetch metadata: Sec-Fetch-Site: same-site is accepted",
        AUTHZ,
    ),
    M(
        APP,
        'self.auth.check_csrf(request, user, write=request.method not in ("GET", "HEAD"))',
        'if request.method not in ("GET", "HEAD"):\n                self.auth.check_csrf(request, user, write=True)',
        "auth: fetch metadata: a cross-site cookie read (GET) is served",
        AUTHZ,
    ),
    M(
        APP,
        'MutableHeaders(scope=message).setdefault("X-Content-Type-Options", "nosniff")',
        "pass",
        "auth: headers: responses lack X-Content-Type-Options: nosniff",
        AUTHZ,
    ),
    M(
        AUTH,
        "    if wait:\n        raise AuthError(\n            429,",
        "    if False:\n        raise AuthError(\n            429,",
        "lockout: wrong secrets for a real token id are never limited (each costs a scrypt)",
        AUTHZ,
    ),
    M(
        AUTH,
        "_refuse_if_limited(token_id, self.wrong_secrets.take(key))",
        "self.wrong_secrets.take(key)",
        "lockout: concurrent wrong secrets all reach scrypt (no place taken before the check)",
        AUTHZ,
    ),
    M(
        AUTH,
        "        check = self._checks.get(digest)",
        "        check = None",
        "lockout: concurrent first requests with the right token each take a place (some refused)",
        AUTHZ,
    ),
    M(
        AUTH,
        "        if key is not None and digest not in self._verified:",
        "        if key is not None:",
        "lockout: a limit blocks a token this process already verified (the right token locked out)",
        AUTHZ,
    ),
    M(
        AUTH,
        '        key = f"{token_id} {addr}" if addr is not None else None',
        "        key = token_id if addr is not None else None",
        "lockout: the wrong-secret limit is per token id only (the right token from another address refused)",
        AUTHZ,
    ),
    M(
        AUTH,
        "        user = await self.threads.run(AUTH, self.store.user, name) if name else None\n",
        "        if self.failed_logins.take(client_key(addr)):\n"
        '            raise AuthError(429, "too many failed logins from this address")\n'
        "        self.failed_logins.give_back(client_key(addr))\n"
        "        user = await self.threads.run(AUTH, self.store.user, name) if name else None\n",
        "lockout: the failed-login limit of a noisy address is applied before the token is looked at",
        AUTHZ,
    ),
    M(
        ("goldfive_core/store/users.py",),
        "store.update_user(name, token_id=token_id, token_hash=hash_token(secret))",
        "store.update_user(name, token_id=token_id, token_hash=hash_token(secret), disabled=False)",
        "disable/rotate: a rotate re-enables a disabled user",
        SESSIONS,
    ),
    M(
        ("goldfive_core/server/users_api.py",),
        "            row = await asyncio.to_thread(users_mod.disable_user, self.store, name)\n"
        "            self.sessions.end_user(name)",
        "            row = await asyncio.to_thread(users_mod.disable_user, self.store, name)",
        "disable/rotate: disabling a user here leaves their open event streams running",
        SESSIONS,
    ),
    M(
        ("goldfive_core/server/users_api.py",),
        "            made = await asyncio.to_thread(users_mod.rotate_user, self.store, name)\n"
        "            self.sessions.end_user(name)",
        "            made = await asyncio.to_thread(users_mod.rotate_user, self.store, name)",
        "disable/rotate: rotating a user's token here leaves streams opened with the old one running",
        SESSIONS,
    ),
    M(
        APP,
        "        self.sessions.end_session(user.session_hash)",
        "        pass",
        "disable/rotate: logging out leaves the session's open event stream running",
        SESSIONS,
    ),
    M(
        ("goldfive_core/server/sessions.py",),
        "            if not await self._still_valid(leases[0].user, leases[0].permission):",
        "            if False:",
        "disable/rotate: a disable or rotate by another process never closes this process's streams "
        "(the one-at-a-time re-check)",
        SESSIONS,
        equivalent="goldfive serve re-checks with still_valid_all; this path serves a SessionWatch made without one",
    ),
    M(
        ("goldfive_core/server/sessions.py",),
        "                if not ok:\n                    ended += self._end(leases)",
        "                if False:\n                    ended += self._end(leases)",
        "disable/rotate: a disable or rotate by another process never closes this process's streams",
        SESSIONS,
    ),
    M(
        AUTH,
        "ok = row is not None and not row.disabled and row.name == user.name and role_allows(row.role, permission)",
        "ok = row is not None and row.name == user.name and role_allows(row.role, permission)",
        "disable: the batched re-check keeps a disabled agent's stream open",
        SESSIONS,
    ),
    M(
        ("goldfive_core/server/agents.py",),
        'if set(runs) - mine:\n            raise AgentError(403, "heartbeat for runs this agent does not own")',
        'if False:\n            raise AgentError(403, "heartbeat for runs this agent does not own")',
        "an agent keeps another agent's run alive",
        ("tests/http/test_http_agent_role.py", "tests/server/test_server_heartbeats.py"),
    ),
    M(
        ("goldfive_core/server/heartbeats.py",),
        "from .threads import LIVENESS, ServerThreads",
        "from .threads import AGENTS as LIVENESS, ServerThreads",
        "agents' beats wait behind the agent routes' event writes (a fleet registering at once: runs judged crashed)",
        ("tests/server/test_server_heartbeats.py",),
    ),
    M(
        ("goldfive_core/server/heartbeats.py",),
        "            mine = {run for run, owner in zip(unknown, found_owners, strict=True) if owner == agent}",
        "            mine = {run for run, owner in zip(unknown, found_owners, strict=True) if owner is not None}",
        "an agent keeps another agent's run alive (the owners of many beats' runs looked up together)",
        ("tests/http/test_http_agent_role.py", "tests/server/test_server_heartbeats.py"),
    ),
    M(
        ("goldfive_core/store/agents.py",),
        "    return {r: owner[storable(r)] for r in run_ids if storable(r) in owner}",
        "    return {r: next(iter(owner.values())) for r in run_ids if owner}",
        "every run looked up together is taken as owned by one of their owners (an agent beats for another's run)",
        ("tests/http/test_http_agent_role.py", "tests/server/test_server_heartbeats.py"),
    ),
    M(
        ("goldfive_core/server/sessions.py",),
        "        for lease in self._leases if bearer else self._web:",
        "        for lease in self._web:",
        "a re-check of the bearer tokens skips the agents' streams (a disable or rotate elsewhere leaves them open)",
        SESSIONS,
    ),
    M(
        ("goldfive_core/server/sessions.py",),
        '        if user.channel != "api":\n            self._web.add(lease)',
        "        if False:\n            self._web.add(lease)",
        "the re-check each second skips the web sessions (one logged out by another process keeps its stream)",
        SESSIONS,
    ),
    M(
        ("goldfive_core/server/sessions.py",),
        "            bearer = changed or not heard or loop.time() >= bearer_due",
        "            bearer = not heard or loop.time() >= bearer_due",
        "a disable or rotate by another process leaves agents' open streams open until the slow safety net",
        SESSIONS,
    ),
    M(
        ("goldfive_core/server/auth.py",),
        'message = f"goldfive-agent-pass\\n{digest}\\n{stored}\\n{expires_ms}".encode()',
        'message = f"goldfive-agent-pass\\n{stored}\\n{expires_ms}".encode()',
        "an agent's pass is not bound to its token: another secret under the same token id gets in on it",
        ("tests/http/test_http_failover_pass.py",),
    ),
    M(
        ("goldfive_core/server/auth.py",),
        'message = f"goldfive-agent-pass\\n{digest}\\n{stored}\\n{expires_ms}".encode()',
        'message = f"goldfive-agent-pass\\n{digest}\\n{expires_ms}".encode()',
        "an agent's pass outlives a rotation of its token (the old token gets in on it)",
        ("tests/http/test_http_failover_pass.py",),
        equivalent="a rotation mints a new token id too, so the old token finds no user before its pass is looked "
        "at; the stored hash in the pass is defence in depth for a hash changed under the same id",
    ),
    M(
        ("goldfive_core/server/auth.py",),
        "        if presented and digest not in self._verified"
        " and self._pass_fits(presented, digest, user.token_hash):",
        "        if False:",
        "a server checks every failing-over agent's token by scrypt again (its runs age behind the queue)",
        ("tests/http/test_http_failover_pass.py",),
    ),
    M(
        ("goldfive_core/store/agents.py",),
        "        if not liveness.live:\n            gone[run_id] = liveness",
        "        if False:\n            gone[run_id] = liveness",
        "a decision waiting for a run that ended is never withdrawn (the batched liveness check says live)",
        ("tests/server/test_server_waits.py",),
    ),
    M(
        ("goldfive_core/server/batching.py",),
        "        while self._asked:\n            asked, self._asked = self._asked, {}",
        "        while any(not f.done() for f in self._asked.values()):\n            asked = self._asked",
        "disable: a request is answered by a token look-up made before it arrived (a disabled agent gets in)",
        ("tests/server/test_server_heartbeats.py",),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "    won = owners.claim_for_streams(store, [(row.id, endpoints[row.run_id]) for row in rows])",
        "    won = owners.claim_for_streams(store, [(row.id, endpoints[rows[0].run_id]) for row in rows])",
        "a burst's messages are claimed for another agent's stream",
        ("tests/http/test_http_hub.py",),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "    return [row for row in rows if row.id in won]\n\n\ndef _claim_runs(",
        "    return list(rows)\n\n\ndef _claim_runs(",
        "a message claimed by another server's stream is sent on this one too (delivered twice)",
        ("tests/http/test_http_hub.py", "tests/http/test_http_faults.py"),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "            self.liveness.start()",
        "            pass",
        "an open stream's runs are not kept alive (its agent sends no heartbeats: the run is judged crashed)",
        ("tests/server/test_server_stream_liveness.py",),
    ),
    M(
        ("goldfive_core/store/http/_inbox.py",),
        "                if response.headers.get(LIVENESS_HEADER) == LIVENESS_ON_STREAM:",
        "                if True:",
        "an agent stops heartbeating on a server that does not keep its runs alive (an older server)",
        ("tests/http/test_http_liveness.py",),
    ),
    M(
        ("goldfive_core/store/http/_inbox.py",),
        "                self.remote.streamed = frozenset()  # the sink heartbeats them again from its next beat",
        "                pass",
        "an agent whose stream ended never heartbeats again (its run is judged crashed)",
        ("tests/http/test_http_liveness.py",),
    ),
    M(
        ("goldfive_core/server/sessions.py",),
        "                if lease.ended.is_set():  # even when a chunk is ready too",
        "                if False:  # even when a chunk is ready too",
        "disable/rotate: an ended stream keeps sending",
        SESSIONS,
    ),
    # -- policy in the gate, grants and the server's authority (fail closed) ------------------------------------------
    M(
        ("goldfive_core/toolcall.py",),
        "if verdict.rule is None and not verdict.error:\n        return None",
        "if verdict.rule is None:\n        return None",
        "a policy evaluation error falls back to the adapter's own config (an unmarked tool runs)",
        POLICY_GATE,
    ),
    M(
        ("goldfive_core/toolcall.py",),
        "if verdict.rule is not None and not verdict.error and verdict.ask is not None and verdict.ask.grants:",
        "if verdict.rule is not None and verdict.ask is not None and verdict.ask.grants:",
        "a grant applies to a call its rule could not evaluate",
        POLICY_GATE,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        "    if kept is None:\n        return None",
        "    if kept is None:\n        return book.find(call, rule=rule, run_id=run_id, session_id=session_id)",
        "grants are read from this process when the store is unreadable (fail open)",
        ("tests/store/test_store_grants.py",),
    ),
    M(
        ("goldfive_core/dispatch.py",),
        '    if needed > 1:\n        return f"rule',
        '    if False:\n        return f"rule',
        "one approver of a quorum rule creates a standing grant",
        POLICY_GATE,
    ),
    M(
        ("goldfive_core/dispatch.py",),
        "needed = max(ask.quorum, decision.quorum)",
        "needed = ask.quorum",
        "one vote of the server's quorum creates a standing grant (the run's own rule asks one approver)",
        POLICY_GATE,
    ),
    M(
        BOOK,
        "    if decision.quorum > 1 and request is not None:",
        "    if False:",
        "the run ignores the quorum the server states: its own rule of one approver decides",
        POLICY_GATE + SERVER_POLICY,
    ),
    M(
        BOOK,
        "if (decision.quorum > 1 or record.quorum is not None) and _count_votes(record, decision):",
        "if record.quorum is not None and _count_votes(record, decision):",
        "the approve path skips the vote count for a quorum the server states (the run's own rule asks one approver)",
        POLICY_GATE + SERVER_POLICY,
    ),
    M(
        DECIDE,
        "    if grant is not None and (why := judged.grant_refusal(grant)):",
        "    if False:",
        "the server lets an approval carry a grant its rule does not offer (the agent's file picks the scopes)",
        SERVER_POLICY + SERVER_GRANTS,
    ),
    M(
        DECIDE,
        '            grant_rule=self.grant_rule if self.grant else "",',
        '            grant_rule="",',
        "the server signs a grant without the rule it allowed it under (a trusting agent may keep it under any)",
        SERVER_GRANTS,
    ),
    M(
        AUTHORITY,
        "        if wanted not in self.ask.grants:  # a duration is offered as written",
        "        if False:  # a duration is offered as written",
        "the server allows a grant scope (or a longer duration) its rule does not offer",
        SERVER_GRANTS,
    ),
    M(
        AUTHORITY,
        '        if self.ask.quorum > 1:\n            return f"{self._whose()} needs',
        '        if False:\n            return f"{self._whose()} needs',
        "the server lets one approver of its quorum rule ask for a standing grant",
        SERVER_POLICY + SERVER_GRANTS,
    ),
    M(
        AUTHORITY,
        '        if self.source == "server" and self.action != "ask":',
        "        if False:",
        "a call the server's rule allows (or denies) gets a grant from the request's own fields",
        SERVER_GRANTS,
    ),
    M(
        AUTHORITY,
        '        if self.source != "server" or (not self.disagrees and self.requested_rule == self.rule):',
        "        if True:",
        "the server allows a grant of its rule for a request naming another rule (the run keeps it under that one)",
        SERVER_GRANTS,
    ),
    M(
        TRUST,
        '    if problem is None and trust is not None and grant and not payload.get("grant_rule"):',
        "    if False:",
        "a trusting agent makes a grant whose signature names no rule it was allowed under",
        TRUSTED,
    ),
    M(
        TRUST,
        '            grant_rule=rule if isinstance(rule := payload.get("grant_rule"), str) else "",',
        '            grant_rule="",',
        "the rule a grant was allowed under is not checked against the signature",
        TRUSTED,
    ),
    # -- with serve --policy the inbox offers no decision the server's rule refuses ---------------------------------
    M(
        AUTHORITY,
        'self.refusal.kind == "denied":\n            return ("reject",)',
        'self.refusal.kind == "denied":\n            return ("approve", "reject")',
        "the API tells the inbox a call the server's rule denies may be approved",
        ("tests/policy/test_policy_server_judges.py",),
    ),
    M(
        AUTHORITY,
        '            return ("reject",)\n        return ()',
        '            return ("reject",)\n        return ("reject",)',
        "the API tells the inbox a call the server could not judge may be rejected",
        ("tests/policy/test_policy_server_judges.py",),
    ),
    M(
        ("goldfive_core/server/static/inbox.js",),
        '    if (card.dataset.noApprove) for (const b of [".act-approve", ".act-edit"]) q(b).hidden = true;',
        "",
        "the inbox offers Approve on a card the server's rule denies",
        BROWSER_DENIES,
    ),
    M(
        ("goldfive_core/server/static/inbox.js",),
        '    const barred = entries.filter((e) => e.node.dataset[verb === "approve" ? "noApprove" : "noReject"]);',
        "    const barred = [];",
        "Approve selected takes a card the server's rule denies",
        BROWSER_DENIES,
    ),
    M(
        ("goldfive_core/server/static/inbox.js",),
        '    if (!decisions.includes("approve")) card.dataset.noApprove = "1";',
        "",
        "the key a (and every Approve) stays on a card the server's rule denies",
        BROWSER_DENIES,
    ),
    # -- with serve --policy notifications go to who may decide under the server's rule, and say that rule ----------
    M(
        APP,
        "            notifying = Notifier(store, config.notify, rules=api.policy_authority)",
        "            notifying = Notifier(store, config.notify)",
        "serve --policy routes notifications by the rule and approvers the agent wrote",
        ("tests/server/test_server_notify.py::test_serve_policy_notifies_who_may_decide_under_the_servers_rule",),
    ),
    M(
        ("goldfive_core/server/notify/_service.py",),
        '        elif notice.kind == "approval_requested" and (rules := self._judging()) is not None:',
        "        elif False:",
        "a request's notice names the agent's rule and goes to the approvers it wrote, not the server's",
        NOTIFY,
    ),
    M(
        ("goldfive_core/server/notify/_service.py",),
        "                if (rules := self._judging()) is not None:",
        "                if False:",
        "a follow-up notice names the agent's rule and approvers, not the server's",
        NOTIFY,
    ),
    M(
        ("goldfive_core/server/notify/_notice.py",),
        '        approvers=inert(",".join(ask.approvers) if ask is not None else "", 300),',
        "        approvers=notice.approvers,",
        "a notice under the server's rule still says (and routes by) the approvers the agent wrote",
        NOTIFY,
    ),
    M(
        DISPATCH,
        "    if payload_rule is not None and payload_rule != rule:",
        "    if False:",
        "a run keeps a grant allowed under another rule under its own request's rule",
        TRUSTED,
    ),
    M(
        DECIDE,
        "        if self._stated_quorum():  # the deciding side's rule",
        "        if False:  # the deciding side's rule",
        "the server does not tell the run how many approvers its rule requires",
        SERVER_POLICY,
    ),
    M(
        ("goldfive_core/signing.py",),
        "    for name in _OMITTED_WHEN_EMPTY:",
        '    body.pop("quorum", None)\n    for name in _OMITTED_WHEN_EMPTY:',
        "a decision's signature does not cover the quorum it states (a writer can strip it)",
        SERVER_POLICY,
    ),
    M(
        ("goldfive_core/signing.py",),
        "    for name in _OMITTED_WHEN_EMPTY:",
        '    body.pop("quorum_reject", None)\n    for name in _OMITTED_WHEN_EMPTY:',
        "a vote's signature does not cover the reject mode it states (a writer can add or strip 'counts')",
        SERVER_POLICY,
    ),
    M(
        DECIDE,
        "        if self._stated_reject():  # and its reject mode",
        "        if False:  # and its reject mode",
        "the server does not tell the run that its rule's rejections count as votes",
        SERVER_POLICY,
    ),
    M(
        BOOK,
        'ends = decision.quorum_reject != "counts"  # the server\'s reject mode too',
        "ends = (own := policy_ask(request.metadata)) is None or own.reject_ends  # the server's reject mode too",
        "the run counts the server's quorum by its own file's reject mode, not the server's",
        SERVER_POLICY,
    ),
    M(
        TRUST,
        'quorum_reject=mode if isinstance(mode := payload.get("quorum_reject"), str) else "",',
        'quorum_reject="",',
        "the agent checks a vote's signature without the reject mode it states",
        SERVER_POLICY,
    ),
    M(
        ("goldfive_core/payloads.py",),
        '    if value != "counts" or not quorum:',
        "    if False:",
        "a vote's reject mode is taken whatever it says, or without a quorum",
        POLICY_GATE,
    ),
    M(
        ("goldfive_core/store/views.py",),
        "    judged = (rules if rules is not None else PolicyAuthority()).judge(row)",
        "    judged = PolicyAuthority().judge(row)",
        "with serve --policy the API and goldfive show list the agent's rule, not the server's",
        SERVER_POLICY,
    ),
    M(
        ("goldfive_core/toolcall.py",),
        "    timeout = _until_expiry(policy_metadata, timeout)\n",
        "",
        "a rule's expires does not shorten the run's wait for a person",
        POLICY_GATE,
    ),
    M(
        ("goldfive_core/server/expiry.py",),
        "        if now < row.requested_at_ms + ask.expires_ms:",
        "        if True:",
        "the server never ends a request at its rule's expires",
        SERVER_POLICY,
    ),
    M(
        ("goldfive_core/server/expiry.py",),
        "            elif self.store.detached(row.target_id) is not None:",
        "            elif False:",
        "a call parked by detach_after never hears the server's expiry (waits to its own, longer timeout)",
        DETACH_EXPIRY,
    ),
    # -- another serve's disable / rotate ends this serve's open streams at once (the store's access news) ---------
    M(
        ("goldfive_core/server/app.py",),
        "            news=self._access_news,\n",
        "            news=None,\n",
        "open streams hear of another process's disable or rotate only at the periodic re-check",
        CROSS_SERVE_SESSIONS,
    ),
    M(
        ("goldfive_core/store/sql/users.py",),
        '                    self.db.execute(conn, "DELETE FROM gf_web_sessions WHERE user_name = ?", (name,))\n'
        "                self._access_changed(conn)\n",
        '                    self.db.execute(conn, "DELETE FROM gf_web_sessions WHERE user_name = ?", (name,))\n',
        "a user's disable or rotate is no news to the other serve processes (their streams stay open)",
        CROSS_SERVE_SESSIONS,
    ),
    M(
        ("goldfive_core/server/sessions.py",),
        "                    changed, seen, heard = version != seen, version, True",
        "                    changed, seen, heard = False, version, True",
        "the open streams' watcher takes access news and never re-checks on it",
        CROSS_SERVE_SESSIONS,
    ),
    M(
        ("goldfive_core/store/decide.py",),
        "    attempt = _expiry(store, row, why, signer, recorded=True)",
        "    attempt = _expiry(store, row, why, None, recorded=True)",
        "the expiry recorded for a parked call is unsigned (a trusting agent never takes it: it waits on)",
        DETACH_EXPIRY,
    ),
    M(
        ("goldfive_core/store/decide.py",),
        'expiry=EXPIRY_KIND if self.recorded_expiry else "",',
        'expiry="",',
        "the server signs a parked call's expiry as a plain rejection (it could pass for one, and back)",
        EXPIRY_REPLAY,
    ),
    M(
        EXECUTION,
        '"expiry": EXPIRY_KIND if stored.expired else "",',
        '"expiry": "",',
        "the agent checks an expiry's signature as a rejection's (a relabelled rejection passes as a timeout)",
        EXPIRY_REPLAY,
    ),
    M(
        EXECUTION,
        "    if stored.expired:\n        session.events.emit(",
        "    if False:\n        session.events.emit(",
        "a parked call's expiry is replayed as a rejection by 'policy', not as a timeout",
        EXPIRY_REPLAY,
    ),
    M(
        ("goldfive_core/toolcall.py",),
        '        if replay.kind == "expired":  # the server',
        "        if False:  # the server",
        "the gate ignores an expired replay and asks a person again for a request the server's rule ended",
        EXPIRY_REPLAY,
    ),
    M(
        ("goldfive_core/store/sql/approvals.py",),
        "(status IN (?, ?) OR (status = ? AND decided_by <> ''))",
        "(status IN (?, ?) OR (status = ? AND decided_by = 'nobody'))",
        "a parked call whose request the server's rule expired is never found (never resumed, or asked again)",
        EXPIRY_REPLAY + DETACH_EXPIRY,
    ),
    M(
        ("goldfive_core/store/audit.py",),
        'expiry=EXPIRY_KIND if row.status is ApprovalStatus.EXPIRED else "",',
        'expiry="",',
        "audit verify --public-key checks an expired record's signature as a decision's (the server's expiry fails)",
        EXPIRY_REPLAY,
    ),
    M(
        ("goldfive_core/store/audit.py",),
        "    if row.status not in DECIDED_STATUSES and not (row.status is ApprovalStatus.EXPIRED and row.decided_by):",
        "    if row.status not in DECIDED_STATUSES:",
        "audit verify --public-key never checks the signature of a record the server's rule expired",
        EXPIRY_REPLAY,
    ),
    M(
        ("goldfive_core/store/audit.py",),
        '"decided_by": (row.decided_by, by),',
        '"decided_by": (row.decided_by, row.decided_by),',
        "audit verify takes any decider written on an expired record (a person's name pasted on the server's expiry)",
        EXPIRY_REPLAY,
    ),
    # -- text the store cannot hold: NUL is stored as ␀ on both backends, a person's NUL is refused -------------------
    M(
        SQL,
        "return conn.execute(self.sql(sql), storable_params(params))",
        "return conn.execute(self.sql(sql), tuple(params))",
        "text with NUL is written and looked up raw (PostgreSQL refuses it: a request or an ack is lost there)",
        NUL_STORE,
    ),
    M(
        SQL,
        "event, body = storable_event(event)",
        "body = event.SerializeToString(deterministic=True)",
        "events are hashed with their NULs while the columns hold ␀ (audit verify reports every such record)",
        NUL_STORE,
    ),
    M(
        ("goldfive_core/store/_storable.py",),
        "changed = _escape_map(entry, value) or changed",
        "pass",
        "a NUL in a request's metadata (its tool name) is hashed raw: the chain and the record disagree",
        NUL_STORE,
    ),
    M(
        DECIDE,
        "    if nul is not None:  # refused, never altered",
        "    if False:  # refused, never altered",
        "decide() passes a reason with NUL on (signed as sent, recorded as ␀: verify --public-key fails)",
        NUL_STORE,
    ),
    M(
        ("goldfive_core/server/inputs.py",),
        '    at = value.find("\\x00")\n    if at >= 0:',
        '    at = value.find("\\x00")\n    if False:',
        "the server takes a person's text with NUL (reason, steer text, login name) instead of a 400 naming it",
        NUL_SERVER,
    ),
    M(
        ("goldfive_core/store/audit.py",),
        'names = {tool_name, tool_name.replace(NUL_MARK, "\\x00")}',
        "names = {tool_name}",
        "audit verify reports a quorum's edit of a tool whose name holds NUL as tampering (digest of the stored name)",
        NUL_STORE,
    ),
    M(
        BOOK,
        "**{key: storable(value) for key, value in text.items()}",
        "**text",
        "a request's digest is of the agent's raw text: a trusting agent refuses a signed decision on a NUL prompt",
        NUL_SERVER,
    ),
    M(
        ("goldfive_core/store/agents.py",),
        'if storable(named) == stored and (not grant or payload.get("grant")):',
        'if named == target_id and (not grant or payload.get("grant")):',
        "an HTTP agent's report of a decision on an id with NUL is refused as made up (its events are lost)",
        NUL_HTTP,
    ),
    M(
        BOOK,
        "if NUL_MARK not in target_id or target_id in self._live",
        "if True or target_id in self._live",
        "a decision naming a model's id as stored (NUL as ␀) is 'unknown target': nobody can decide it",
        NUL_SERVER,
    ),
    M(
        BOOK,
        "        if NUL_MARK in target_id:  # named as a store holds it",
        "        if False:  # named as a store holds it",
        "a decision naming a model's id as stored (NUL as ␀) is not looked up as asked: nobody can decide it",
        NUL_SERVER,
    ),
    # -- the store channel: decisions recorded while a live run was cut off -----------------------------------------
    M(
        CHANNEL_FILE,
        'kind = ControlKind.APPROVE if row.decision == "approve" else ControlKind.REJECT',
        "kind = ControlKind.APPROVE",
        "a rejection recorded while the run was cut off is applied as an approval",
        CHANNEL,
    ),
    M(
        ("goldfive_core/store/sender.py",),
        "        if not liveness.live:\n            raise RunNotLiveError",
        "        if False:\n            raise RunNotLiveError",
        "a run control for a run that is not running is posted anyway (and waits for nobody)",
        ("tests/store/test_store_send_control.py",),
    ),
    # -- goldfive serve at its boundary: junk is a 4xx, slow clients are let go, nothing leaks to spans --------------
    M(
        ("goldfive_core/limits.py",),
        "parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_short_int",
        "parse_constant=_refuse_constant, parse_int=_short_int",
        "1e999 parses to infinity and reaches a decision",
        (_JUNK + "test_nan_infinity_1e999_and_huge_integers_in_edited_args_are_refused_and_nothing_is_decided",),
    ),
    M(
        ("goldfive_core/limits.py",),
        "    check_json_text(value, what=what)\n    return value",
        "    return value",
        "a lone surrogate in a body reaches the store (500)",
        (_JUNK + "test_lone_surrogates_are_refused_naming_the_field",),
    ),
    M(
        ("goldfive_core/server/inputs.py",),
        "    if not _INTEGER.fullmatch(raw):",
        '    if not raw.lstrip("-").isdigit():',
        "'?after=²' passes the digit check and int() raises (500)",
        (_JUNK + "test_odd_digits_and_huge_seqs_in_after_and_last_event_id_are_400",),
    ),
    M(
        ("goldfive_core/server/inputs.py",),
        "async with asyncio.timeout(timeout_s):",
        "async with asyncio.timeout(None):",
        "a body that stalls holds its connection forever",
        (_JUNK + "test_a_body_that_stalls_gets_408_and_an_idle_keepalive_connection_is_closed",),
    ),
    M(
        ("goldfive_core/server/app.py",),
        "    ClientDisconnect: _client_gone,\n",
        "",
        "a client hanging up mid-body is a traceback in the server's log",
        (_JUNK + "test_a_client_that_hangs_up_mid_body_leaves_no_traceback",),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "if too_big := event_over_limits(event, limits):",
        'if too_big := "":',
        "an agent-written event of any size is stored whole",
        (_JUNK + "test_agent_written_events_get_the_agents_size_limits",),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31",
        "return isinstance(value, int)",
        "a pid beyond 64 bits reaches the store (500)",
        (_JUNK + "test_agent_written_events_get_the_agents_size_limits",),
    ),
    M(
        ("goldfive_core/server/connections.py",),
        "self.write_timeout_s))\n        self._arm()\n",
        "self.write_timeout_s))\n",
        "a client that connects and sends nothing is held open forever",
        (_JUNK + "test_a_client_that_sends_nothing_or_trickles_its_headers_is_let_go_with_408",),
    ),
    M(
        ("goldfive_core/server/connections.py",),
        "        super().data_received(data)\n        self._met()",
        "        super().data_received(data)\n        self._arm()",
        "every byte restarts the head deadline (uvicorn's keep-alive behaviour): a trickling client stays",
        (_JUNK + "test_a_client_that_sends_nothing_or_trickles_its_headers_is_let_go_with_408",),
    ),
    M(
        ("goldfive_core/server/connections.py",),
        "        if self._write_timer is None:\n            self._write_timer = self.loop.call_later(",
        "        if False:\n            self._write_timer = self.loop.call_later(",
        "a client that stops reading its answer holds the connection (and its buffers) forever",
        (_JUNK + "test_a_client_that_stops_reading_its_answer_is_dropped",),
    ),
    M(
        ("goldfive_core/server/auth.py",),
        "hmac.compare_digest(sent.encode(), user.csrf.encode())",
        "hmac.compare_digest(sent, user.csrf)",
        "a non-ASCII X-CSRF-Token header is a 500",
        (_JUNK + "test_non_ascii_bytes_in_a_session_cookie_or_a_csrf_token_are_refused_not_crashed",),
    ),
    M(
        ("goldfive_core/otel.py",),
        "                if self.record_details:  # the detail quotes the call that escalated, arguments included",
        "                if True:",
        "the escalation span carries the tool call's arguments by default",
        OTEL,
    ),
    # -- checkpoints: verified before they are signed, never laundering a rewrite -----------------------------------
    M(
        CHECKPOINT,
        "        self._vouched, self._vouched_rows = self._load_vouched()",
        "        self._vouched, self._vouched_rows = set(), self._load_vouched()[1]",
        "a serve killed -9 forgets the decisions it signed since its last checkpoint (a relabel is then signed)",
        KILLED_SERVE,
    ),
    M(
        CHECKPOINT,
        "                    out.write(lines)\n",
        "                    pass\n",
        "a signed decision is held in memory only (a kill -9 before the next checkpoint forgets it)",
        KILLED_SERVE,
    ),
    M(
        CHECKPOINT,
        "        for run_id, target_id in decisions:\n",
        "        for run_id, target_id in decisions[:1]:\n",
        "a burst's decisions vouched for together: only the first is held to its record (the others' relabel signed)",
        ("tests/faults/test_faults_checkpoint_relabel.py",),
    ),
    M(
        CHECKPOINT,
        "            self._vouched.update(decisions)\n",
        "            self._vouched.update(decisions[-1:])\n",
        "a burst's decisions vouched for together are kept on disk but only the last in memory (its relabel signed)",
        ("tests/faults/test_faults_checkpoint_relabel.py",),
    ),
    M(
        CHECKPOINT,
        "        if problems:\n            return self._refuse(head, problems, certain=certain)",
        "        if False:\n            return self._refuse(head, problems, certain=certain)",
        "the checkpoint writer signs a chain that does not verify (launders a rewrite)",
        CHECKPOINTS,
    ),
    M(
        CHECKPOINT,
        "        cut = self._extends_last(head)\n        if cut:",
        "        cut = self._extends_last(head)\n        if False:",
        "the checkpoint writer does not check that the chain still holds the head it signed last",
        CHECKPOINTS,
    ),
    M(
        CHECKPOINT,
        "lasting = [p for p in problems if certain or now - self._doubts[p] >= self.settle_s]",
        "lasting: list[str] = []",
        "a chain that does not verify is left unsigned but never alarmed (no log, audit event or API word)",
        CHECKPOINTS,
    ),
    M(
        CHECKPOINT,
        "lasting = [p for p in problems if certain or now - self._doubts[p] >= self.settle_s]",
        "lasting = [p for p in problems if now - self._doubts[p] >= self.settle_s]",
        "a rewrite of what a checkpoint already vouches for waits out the settling time before its alarm",
        CHECKPOINTS,
    ),
    M(
        CHECKPOINT,
        "        if problem != self._alarmed:\n            self._alarm(head, problem)",
        "        if False:\n            self._alarm(head, problem)",
        "a refused checkpoint is not put on the audit log (checkpoint_refused)",
        CHECKPOINTS,
    ),
    M(
        CHECKPOINT,
        "        head_seq = _head_or_none(store)",
        "        head_seq = store.audit_head()[0]",
        "audit verify --checkpoint fails as a store error (exit 3) on a deleted head row",
        CHECKPOINTS,
    ),
    M(
        AUDIT_LOG,
        "    if not row.decision_sig or row.decided_channel not in SERVER_CHANNELS:",
        "    if False:",
        "a decision the server signed, relabelled as an unsigned cli one, passes the check before signing",
        CHECKPOINTS,
    ),
    M(
        AUDIT_LOG,
        "problems.extend(_recent_record_problems(history, (run_id, target_id), row))",
        "pass",
        "the records requested or decided since the last checkpoint are not checked against their events",
        CHECKPOINTS,
    ),
    M(
        AUDIT_LOG,
        "        if row.decided_channel not in SERVER_CHANNELS:\n            return []",
        "        if True:\n            return []",
        "a server-channel decision stripped of its signature passes audit verify --public-key",
        CHECKPOINTS,
    ),
    M(
        AUDIT_LOG,
        'if alarms and event.WhichOneof("payload") == "checkpoint_refused":',
        "if False:",
        "audit verify does not report the server's refused checkpoints",
        CHECKPOINTS,
    ),
    M(
        AUDIT_LOG,
        "want = next_sequence.get(event.run_id, 0 if start is None else event.sequence)",
        "want = next_sequence.get(event.run_id, 0)",
        "the check since a checkpoint sees a gap in every run that began before it (false alarms)",
        CHECKPOINTS,
    ),
    M(
        AUDIT_LOG,
        'said = "" if row.detail == f"approved by {row.decided_by}" else row.detail',
        "said = row.detail",
        "a quorum's signed last vote without a reason does not verify (a false alarm on every such decision)",
        ("tests/server/test_server_policy.py",),
    ),
    M(
        SERVER_APP,
        "                await self.vouches.get((result.run_id, result.target_id))",
        "                pass",
        "goldfive serve does not note the decisions it signed, so a relabel to cli is checkpointed",
        CHECKPOINTS,
    ),
    M(
        SERVER_APP,
        '"ok": report.ok and not refused,',
        '"ok": report.ok,',
        "/api/audit/verify says ok while the server refuses to sign the chain",
        CHECKPOINTS,
    ),
    M(
        SERVER_APP,
        "report = await _run(self.store.verify_audit, trust_key=self.config.signer.trust_key)",
        "report = await _run(self.store.verify_audit)",
        "/api/audit/verify does not check decision signatures with the server's key",
        CHECKPOINTS,
    ),
    # -- the approval record state machine: more of its refusals (issue #27) -------------------------------------------
    M(
        BOOK,
        "if record.decision is not None:\n"
        "                return DecisionResult(DecisionVerdict.ALREADY_DECIDED, _already(record), record)",
        "if False:\n                return DecisionResult(DecisionVerdict.ALREADY_DECIDED, _already(record), record)",
        "a second early decision replaces the first one kept for a target not yet requested",
        APPROVALS + PATHS,
    ),
    M(
        BOOK,
        "        if (decision.quorum > 1 or record.quorum is not None) and _count_votes(record, decision):\n"
        "            return self._vote(record, decision)",
        "        if False:\n            return self._vote(record, decision)",
        "one approval resolves a request that needs a quorum",
        QUORUM,
    ),
    M(
        BOOK,
        "if decision.args_digest or decision.edited_args is not None or answers or decision.answer:",
        "if decision.args_digest or answers or decision.answer:",
        "an edit sent without a digest is applied unchecked",
        APPROVALS + ADK_B,
    ),
    M(
        BOOK,
        "            if request.validate_edit is None:\n                return DecisionResult(",
        "            if request.validate_edit is None:\n                return None\n"
        "                return DecisionResult(",
        "an edit of a call that takes none (a task approval, a tool without a validator) is applied",
        APPROVALS + PATHS,
    ),
    M(
        BOOK,
        '        problem = self._check(record, dataclasses.replace(decision, args_digest=""))\n'
        "        if problem is not None:\n            return problem\n        target = record.target_id",
        "        target = record.target_id",
        "a quorum vote's edit is never checked against the tool",
        QUORUM + PATHS,
    ),
    M(
        BOOK,
        "if not seen and tally.args_digest != request.args_digest:",
        "if False:",
        "a quorum vote that names no digest counts for edited arguments its voter never saw",
        QUORUM,
    ),
    M(
        BOOK,
        'if step.kind in ("restarted", "complete"):',
        'if step.kind == "complete":',
        "a quorum completes with the call's own arguments after an edit restarted the count",
        QUORUM,
    ),
    M(
        BOOK,
        "        if not step.final:\n            return DecisionResult(",
        "        if False:\n            return DecisionResult(",
        "the first vote of a quorum resolves the request",
        QUORUM,
    ),
    M(
        BOOK,
        "            if _count_votes(record, early):\n                self._vote(record, early)",
        "            if False:\n                self._vote(record, early)",
        "an early approval resolves a quorum request alone when it opens",
        QUORUM + PATHS,
    ),
    M(
        BOOK,
        "if new not in _TRANSITIONS.get(current, frozenset()):",
        "if False:",
        "the status machine allows any transition (a decided record moves again)",
        APPROVALS,
    ),
    # -- quorum votes: distinct deciders, stale votes ------------------------------------------------------------------
    M(
        TALLY,
        '        if user in self._approvers:\n            return self._step("duplicate"',
        '        if False:\n            return self._step("duplicate"',
        "the same person's second approval counts towards the quorum",
        QUORUM,
    ),
    M(
        TALLY,
        "        if args_digest and args_digest != self.args_digest:\n            return self._step(",
        "        if False:\n            return self._step(",
        "an approval of arguments no longer on the table counts",
        QUORUM,
    ),
    M(
        TALLY,
        "            self.args_digest = args_digest\n            self._approvers = [user]",
        "            self.args_digest = args_digest\n            self._approvers.append(user)",
        "approvals of the old arguments still count after an edit",
        QUORUM,
    ),
    M(
        TALLY,
        '        if not user:\n            return self._step("refused"',
        '        if False:\n            return self._step("refused"',
        "an anonymous approval counts towards a quorum",
        QUORUM,
    ),
    # -- the single decision write (an applied decision's ack records it once, at its event's time) -------------------
    M(
        ("goldfive_core/store/sql/apply.py",),
        "        f\"WHERE {where} AND decided_via = 'run' AND decision = ? AND decided_at_ms <> ?\",\n"
        '        (at, *params, "approve" if granted else "reject", at),\n',
        "        f\"WHERE {where} AND decided_via = 'run' AND decision = ? AND ? = ?\",\n"
        '        (at, *params, "approve" if granted else "reject", at, at),\n',
        "the run's decision event writes a record its ack already recorded",
        ("tests/store/test_store_trust.py::test_a_signed_approval_is_written_to_its_record_once_at_its_event_s_time",),
    ),
    # -- an HTTP agent's events riding with its acks (POST /api/agent/acks with events; HttpChannel; StoreSink.ride) --
    M(
        ("goldfive_core/server/agents.py",),
        "    _admit_events(store, agent, batch.events)\n    _claims_owned(",
        "    _claims_owned(",
        "events riding with acks are written without their checks (another agent's run, a decision nobody made)",
        (_ACKS_EVENTS + "test_events_refused_with_acks_refuse_the_acks_too_and_nothing_is_written",),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "    owned = owners.owned_runs(store, agent, sorted(named - admitted)) | (admitted & named)",
        "    owned = owners.owned_runs(store, agent, sorted(named - admitted)) | named",
        "a claim folded into an ack takes any run it names as the agent's (another agent's call claimed)",
        (_ACKS_EVENTS + "test_a_claim_on_another_agent_s_run_refuses_the_acks_and_the_events_with_them",),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "    if batch.events:\n        store.append_events(",
        "    _record_acks(store, endpoint, acks, claims)\n    if batch.events:\n        store.append_events(",
        "the acks are recorded before the events riding with them are committed (the person answered before the "
        "decision's event is on the record)",
        (
            "tests/server/test_server_hops.py::"
            "test_the_message_is_found_and_claimed_and_its_ack_checked_and_committed_in_one_thread_hop_each",
        ),
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "    _claims_owned(store, agent, claims, admitted=frozenset(event.run_id for event in batch.events))\n"
        "    if batch.events:",
        "    if batch.events:",
        "a claim on another agent's run is refused only after the events riding with it were written",
        (_ACKS_EVENTS + "test_a_claim_on_another_agent_s_run_refuses_the_acks_and_the_events_with_them",),
    ),
    M(
        ("goldfive_core/store/sink.py",),
        "            carried.future.set_exception(exc)\n            if batch:",
        "            carried.future.set_exception(exc)\n            if False:",
        "the events of a ride that failed are dropped (the sink does not write them itself)",
        (_ACKS_EVENTS + "test_a_ride_that_fails_or_was_given_up_leaves_its_events_to_the_sink",),
    ),
    M(
        ("goldfive_core/store/sink.py",),
        "its sender stopped waiting: the events go alone\n            if batch:",
        "its sender stopped waiting: the events go alone\n            if False:",
        "the events of a ride its sender gave up on are dropped",
        (_ACKS_EVENTS + "test_a_ride_that_fails_or_was_given_up_leaves_its_events_to_the_sink",),
    ),
    M(
        ("goldfive_core/store/http/_inbox.py",),
        "                    if ride is None or not await self._ridden(ride, owed):",
        "                    if ride is None or not await self._ridden(ride, owed) and False:",
        "an ack whose ride failed is never sent (the person's decision times out, the body never runs)",
        (_ACKS_EVENTS + "test_a_ride_that_fails_sends_the_ack_alone_and_the_sink_writes_the_event",),
    ),
    M(
        ("goldfive_core/store/http/_inbox.py",),
        "                    sink = self.sink_of() if self.with_events else None",
        "                    sink = self.sink_of()",
        "events ride with acks to a server that did not say it takes them (an older server drops them)",
        (_ACKS_EVENTS + "test_an_older_server_gets_the_event_and_the_ack_as_two_requests",),
    ),
    M(
        ("goldfive_core/server/acks.py",),
        "        return Watched(self, control_id, looked=before_post)",
        "        return Watched(self, control_id, looked=True)",
        "a delivery watched after its message was posted makes no look of its own (an ack stored before the watch "
        "began, its news spent, is not seen until the watcher's slice ends)",
        ("tests/server/test_server_ack_watch.py",),
    ),
    # -- the "executing" claim folded into an APPROVE's ack (an agent on HTTP; a StoreChannel) ------------------------
    M(
        ("goldfive_core/store/execution.py",),
        "            if won is True:\n",
        "            if won is not None:\n",
        "a StoreChannel's ledger runs the body on a claim the store refused in the APPROVE's ack",
        ("tests/store/test_store_folded_claim.py::test_a_claim_the_store_refuses_in_the_ack_never_runs_the_body",),
    ),
    M(
        ("goldfive_core/store/inbox.py",),
        "        won: dict[int, bool] = await io(self.store.ack_controls, acks, claims=owed or None)\n",
        "        won: dict[int, bool] = await io(self.store.ack_controls, acks, claims=None)\n",
        "a StoreChannel acks an APPROVE without the claim it owes (the ledger commits one more claim of its own)",
        (
            "tests/store/test_store_folded_claim.py::test_the_body_starts_with_the_decision_and_its_claim_committed_together",
        ),
    ),
    M(
        ("goldfive_core/store/inbox.py",),
        "                folded.answered(owed, {})  # and the acks are retried without the claims\n",
        "                pass\n",
        "an ack whose claim the store refused keeps the claim: the ledger waits out its bound instead of failing "
        "closed with the store's own words",
        ("tests/faults/test_faults_outages.py::test_a_full_disk_past_the_budget_fails_closed_for_every_adapter",),
    ),
    M(
        ("goldfive_core/store/http/_channel.py",),
        "        if won is True:\n",
        "        if won is not None:\n",
        "an agent on HTTP runs the body on a claim the server refused in its answer to the ack",
        ("tests/http/test_http_folded_claim.py::test_a_claim_the_server_refuses_never_runs_the_body",),
    ),
    M(
        ("goldfive_core/store/sql/inbox.py",),
        "                            won[ident] = self.claim_in(conn, claim)\n",
        "                            won[ident] = True\n",
        "the server answers an ack's claim as won without claiming the call in the ledger",
        ("tests/http/test_http_folded_claim.py::test_a_claim_the_server_refuses_never_runs_the_body",),
    ),
    M(
        ("goldfive_core/store/agents.py",),
        "    return set(_sql(store).claim_controls_for(claims, again=True))\n",
        "    return set(_sql(store).claim_controls_for(claims, again=False))\n",
        "a row a killed server claimed late for an agent's endpoint is never sent to that agent's new stream: the "
        "person's decision waits out its bound as 'taken but not acked'",
        (
            "tests/http/test_http_hub.py::"
            "test_a_message_a_killed_server_claimed_late_for_the_same_stream_is_still_sent_here",
        ),
    ),
    # -- the session: events and the end of a run ----------------------------------------------------------------------
    M(
        ("goldfive_core/run_state.py",),
        "OVER_STATES: frozenset[RunState] = frozenset({RunState.CANCELLED, RunState.TERMINATED, RunState.FINISHED})",
        "OVER_STATES: frozenset[RunState] = frozenset({RunState.CANCELLED})",
        "a run that terminated or finished still opens a request",
        APPROVALS,
    ),
    M(
        SESSION,
        "        if record.decision is not None:  # an early decision, applied at open\n"
        "            self._emit_decision(record)\n",
        "        if record.decision is not None:  # an early decision, applied at open\n",
        "an early decision applied at open is never announced (no ApprovalGranted/Rejected on the record)",
        APPROVALS + PATHS,
    ),
    M(
        SESSION,
        "        if result.verdict in (DecisionVerdict.APPLIED, DecisionVerdict.APPLIED_LATE):\n"
        "            assert result.record is not None\n            stamp = self._emit_decision(result.record)",
        "        if result.verdict in (DecisionVerdict.APPLIED,):\n"
        "            assert result.record is not None\n            stamp = self._emit_decision(result.record)",
        "a decision after the wait timed out resolves the record but is never announced",
        APPROVALS + PATHS,
    ),
    M(
        SESSION,
        "        decision = record.decision\n        assert decision is not None\n        if decision.approved:",
        "        decision = record.decision\n        assert decision is not None\n        if True:",
        "a rejection is announced as ApprovalGranted (the store then records it as granted)",
        APPROVALS + PATHS,
    ),
    M(
        ("goldfive_core/run_state.py",),
        '        self._withdraw(f"the run was {state}: {shorten(reason)}")\n',
        "",
        "a cancelled run leaves its open requests open (a later decision still lands)",
        (*APPROVALS, "tests/core/test_core_runner.py"),
    ),
    # -- the dispatch table: what an ack says --------------------------------------------------------------------------
    M(
        DISPATCH,
        "        return ControlAck.success(msg.id, result.detail)\n"
        "    return ControlAck.failure(msg.id, result.detail)",
        "        return ControlAck.success(msg.id, result.detail)\n"
        "    return ControlAck.success(msg.id, result.detail)",
        "a refused decision (stale digest, bad edit, already decided) is acked SUCCESS",
        APPROVALS,
    ),
    M(
        DISPATCH,
        "        return ControlAck.success(msg.id, result.detail, data=counted)",
        "        return ControlAck.success(msg.id, result.detail)",
        "one quorum vote's ack looks like the decision: the store records the request as decided",
        TRUSTED + QUORUM,
    ),
    # -- the tool-call gate: policy, replay, applying the answer -------------------------------------------------------
    M(
        GATE,
        '        if verdict.action == "deny":\n            _record_policy(session, call, verdict)',
        '        if verdict.action == "denied":\n            _record_policy(session, call, verdict)',
        "a policy deny is ignored: the call runs (or is asked) anyway",
        GATE_T,
    ),
    M(
        GATE,
        'needs_person = verdict.action == "ask"',
        'needs_person = needs_person and verdict.action == "ask"',
        "a policy ask on a call the adapter does not gate runs without a person",
        GATE_T + PATHS,
    ),
    M(
        GATE,
        '    if outcome.decision == "approve":\n        args: Mapping[str, Any] = call.args',
        '    if outcome.decision in ("approve", "timeout"):\n        args: Mapping[str, Any] = call.args',
        "a call nobody decided in time runs",
        GATE_T + PATHS + ADK_B,
    ),
    M(
        GATE,
        'problem = "edits are refused for this tool" if validate_edit is None else validate_edit(outcome.edited_args)',
        "problem = None if validate_edit is None else validate_edit(outcome.edited_args)",
        "a recorded edit of a tool that takes no edits reaches the body on replay",
        PATHS,
    ),
    M(
        GATE,
        "                await session.gate()\n            except _STOPPED as exc:",
        "                pass\n            except _STOPPED as exc:",
        "a PAUSE that arrived while the call waited does not hold the approved call",
        GATE_T,
    ),
    M(
        GATE,
        "        if state is not RunState.RUNNING:\n",
        "        if False:\n",
        "an approved call goes on although a PAUSE or CANCEL arrived while it waited (the step gate is never entered)",
        GATE_T,
    ),
    M(
        GATE,
        "            edited=outcome.edited_args is not None,\n",
        "            edited=False,\n",
        "the gate says an edited approval was not edited (Claude runs the original input)",
        CLAUDE + PATHS,
    ),
    M(
        GATE,
        'if replay.kind in ("done", "in_doubt", "unavailable"):',
        'if replay.kind in ("done", "in_doubt"):',
        "a ledger out of reach at the look-up lets the call be asked and run (fail open)",
        PATHS + REPLAY,
    ),
    M(
        GATE,
        "    if level >= InterventionLevel.CANCEL_REINVOKE:\n        return Skip(",
        "    if level > InterventionLevel.CANCEL_REINVOKE:\n        return Skip(",
        "a call the ladder cancelled for re-invocation runs",
        PATHS,
    ),
    # -- signatures: check_decision and verify_decision ----------------------------------------------------------------
    M(
        SIGNING,
        "    if not trust.verify(decision_bytes(facts, key_id=key_id, signed_at_ms=at), raw_sig):",
        "    if not trust.verify(decision_bytes(facts, key_id=key_id, signed_at_ms=at), raw_sig) and False:",
        "a signature block of the right shape is accepted without verifying it",
        SIGNED,
    ),
    M(
        SIGNING,
        '        decision="approve" if approved else "reject",\n        edited_args_json=edited,',
        '        decision="approve",\n        edited_args_json=edited,',
        "every decision is checked as an approval: a signed APPROVE's signature passes on a REJECT and a signed REJECT "
        "is refused",
        SIGNED,
    ),
    M(
        SIGNING,
        '    if edited is None or edited == "":\n        return ""',
        '    if not edited:\n        return ""',
        "an empty edit ({}) passes on the signature of a decision without edits (the body runs with no arguments)",
        SIGNED,
    ),
    M(
        TRUST,
        "            run_id=run_id,\n            approved=approved,\n"
        '            edited_args=payload.get("edited_args"),',
        "            run_id=run_id,\n            approved=approved,\n            edited_args=None,",
        "edited arguments added to a signed plain approval are applied (the signature is checked without them)",
        TRUSTED,
    ),
    M(
        TRUST,
        "            run_id=run_id,\n            approved=approved,\n",
        "            run_id=run_id,\n            approved=True,\n",
        "a REJECT is verified as an APPROVE (a signed approval's signature passes on a forged rejection)",
        TRUSTED,
    ),
    M(
        TRUST,
        '            grant=grant if isinstance(grant, str) else "",',
        '            grant="",',
        "a standing grant added to a signed one-off approval is honoured",
        TRUSTED,
    ),
    M(
        TRUST,
        "            )\n        )\n    return problem",
        "            )\n        )\n    return None",
        "a refused decision is logged and audited, then applied anyway",
        TRUSTED,
    ),
    # -- the store channel: which decisions are checked, against which run ---------------------------------------------
    M(
        CHANNEL_FILE,
        "if trust_key is None or msg.kind not in (ControlKind.APPROVE, ControlKind.REJECT):",
        "if trust_key is None or msg.kind is not ControlKind.APPROVE:",
        "only APPROVE messages are signature-checked: REJECTs are applied unsigned",
        TRUSTED,
    ),
    M(
        CHANNEL_FILE,
        "    if session is not None:\n        run_id = session.run_id",
        "    if False:\n        run_id = session.run_id",
        "the signature is checked against the run id the payload claims, not the session's",
        TRUSTED,
    ),
    M(
        CHANNEL_FILE,
        "    if session is not None:\n        run_id = session.run_id\n        record",
        "    if session is not None:\n        record",
        "the signature is checked against the run the payload names (the request is still the session's own)",
        TRUSTED,
    ),
    M(
        CHANNEL_FILE,
        "        refused = _unverified(self.trust_key, self._owner, msg)\n"
        "        if refused is not None:\n            return refused",
        "        refused = _unverified(self.trust_key, self._owner, msg)",
        "an unsigned decision's refusal is computed and dropped: it is dispatched",
        TRUSTED,
    ),
    M(
        CHANNEL_FILE,
        "        if row.problem:\n            # Quarantined",
        "        if False:\n            # Quarantined",
        "a malformed inbox row is dispatched instead of quarantined",
        CHANNEL,
    ),
    M(
        CHANNEL_FILE,
        '    if row.edited_args_json:\n        payload["edited_args"] = json.loads(row.edited_args_json)\n',
        "",
        "an edit recorded in the store while the run was cut off is applied as a plain approval (original arguments)",
        TRUSTED,
    ),
    # -- decide(): who may decide, what the decider is told ------------------------------------------------------------
    M(
        DECIDE,
        "    if refusal is not None:\n        kind = refusal.kind",
        "    if False:\n        kind = refusal.kind",
        "a decider the authority refuses decides anyway",
        DECISIONS,
    ),
    M(
        ("goldfive_core/steps.py",),
        "                    text=clipped_json(step.value, limit),",
        "                    text=clipped_json(step.value, 10**9),",
        "a run's step keeps a whole tool result on the record and on the approver's card",
        ("tests/server/test_server_context.py",),
    ),
    M(
        DECIDE,
        "    if request_id is not None:\n        reasked = _reasked_since(row, request_id)",
        "    if False:\n        reasked = _reasked_since(row, request_id)",
        "a click on the card of an earlier ask decides the target's new ask",
        ("tests/server/test_server_request_binding.py",),
    ),
    M(
        SERVER_APP,
        "            request_id=asked,\n",
        "            request_id=None,\n",
        "the API drops the request id the page showed: a click lands on a re-ask it never drew",
        ("tests/server/test_server_request_binding.py",),
    ),
    M(
        DECIDE,
        "        verdict = DecideVerdict.APPLIED if ack.ok else DecideVerdict.REFUSED\n"
        "        return DecideResult(verdict=verdict, detail=ack.detail, target_id=row.target_id, "
        "run_id=row.run_id, ack=ack)",
        "        verdict = DecideVerdict.APPLIED\n"
        "        return DecideResult(verdict=verdict, detail=ack.detail, target_id=row.target_id, "
        "run_id=row.run_id, ack=ack)",
        "a decision the run refused is reported to the decider as applied",
        DECISIONS + CROSS,
    ),
    M(
        DECIDE,
        "        needed = max(self.quorum, own.quorum if own is not None else 1)\n        if needed > 1:",
        "        needed = max(self.quorum, own.quorum if own is not None else 1)\n        if needed > 2:",
        "one decision recorded offline stands for a quorum of two",
        ("tests/store/test_store_policy_decide.py",),
    ),
    M(
        DECIDE,
        "        problem = edit_problem(row.kind, row.metadata, edited_args, tool=row.tool_name)\n"
        "        if problem is not None:",
        "        problem = edit_problem(row.kind, row.metadata, edited_args, tool=row.tool_name)\n        if False:",
        "an edit that does not fit the tool's schema is recorded or sent",
        (*DECISIONS, "tests/server/test_server_edit_schema.py"),
    ),
    M(
        DECIDE,
        "        if not recorded:  # someone decided",
        "        if False:  # someone decided",
        "a decision the store's guard refused is reported as recorded",
        DECISIONS,
    ),
    # -- replay: a decision recorded in the store, and run_approved ----------------------------------------------------
    M(
        REPLAY_FILE,
        '            return Replay(kind="none")  # not signed by the trusted key: ask a person (refusal audited)',
        "            pass",
        "a decision in the store the trusted key did not sign is refused on the record, then replayed anyway",
        TRUSTED,
    ),
    M(
        REPLAY_FILE,
        '            "edited_args": stored.edited_args,\n',
        '            "edited_args": None,\n',
        "an edit forged into a signed approval's store row is replayed (checked without the edit)",
        TRUSTED,
    ),
    M(
        REPLAY_FILE,
        "validate_edit=_accept_object if args_schema is None else _fits(args_schema, tool_name),",
        "validate_edit=_accept_object,",
        "run_approved(args_schema=) is never applied to an edit",
        RUN_APPROVED + REPLAY,
        alt=(("validate_edit=edit_validator(args_schema, tool=tool_name),", "validate_edit=edit_validator(None),"),),
    ),
    M(
        REPLAY_FILE,
        "    call_args = dict(outcome.args)\n",
        "    call_args = dict(args)\n",
        "run_approved runs the body with the original arguments after an approved edit",
        RUN_APPROVED + REPLAY,
    ),
    # -- the adapters' tails -------------------------------------------------------------------------------------------
    M(
        ("goldfive_adk/plugin.py",),
        "            return _skipped(name, outcome)",
        "            return None",
        "ADK runs the tool body for a call the gate skipped (a rejection, a timeout, a policy deny)",
        ADK_B,
    ),
    M(
        ("goldfive_adk/plugin.py",),
        "and (flag is True or await tool.check_require_confirmation(tool_args, tool_context) is True)",
        "and flag is True",
        "ADK never asks for a tool whose require_confirmation is a predicate",
        ADK_B,
    ),
    M(
        ("goldfive_core/adapters/claude.py",),
        "        if isinstance(outcome, Skip):\n            return PermissionResultDeny(",
        "        if isinstance(outcome, Skip) and outcome.stop_run:\n            return PermissionResultDeny(",
        "Claude allows a tool use the gate skipped unless the run stopped",
        CLAUDE,
    ),
    M(
        AUTHORITY,
        "        if self.policy is None:\n            return Judgment(",
        "        if self.policy is None or not named:\n            return Judgment(",
        "a call whose request names no rule is decided by its own fields, not the server's policy",
        SERVER_POLICY,
    ),
    # -- with serve --policy the server judges the call itself: the rule a request names never picks its rule ----
    M(
        AUTHORITY,
        "        if self.policy is None:\n            return Judgment(",
        "        if self.policy is None or named:\n            return Judgment(",
        "a request that names a rule is decided by its own fields (the agent picks: quorum 1, its own approvers)",
        SERVER_POLICY_JUDGES,
    ),
    M(
        AUTHORITY,
        "        if verdict is None or (verdict.rule is None and not verdict.error):",
        "        if verdict is None or verdict.rule is None:",
        "a call the server's policy could not read (arguments, digest) is decided by the request's own fields",
        SERVER_POLICY_JUDGES,
    ),
    M(
        AUTHORITY,
        '        if verdict.kind == "deny":  # first',
        "        if False:  # first",
        "a call the server's rule denies may be approved (by anyone: no ask governs it)",
        SERVER_POLICY_JUDGES,
    ),
    M(
        AUTHORITY,
        "                base,\n                ask=own,",
        "                base,\n                ask=None,",
        "a call the server's rule allows is decided by anyone, not the approvers the request asked for",
        SERVER_POLICY_JUDGES,
    ),
    M(
        AUTHORITY,
        "            if not named:\n                return Judgment(",
        "            if True:\n                return Judgment(",
        "a task's (non-tool) request naming a server rule is decided by the approvers it wrote",
        SERVER_POLICY_JUDGES,
    ),
    M(
        AUTHORITY,
        "        if not _digest_of(tool, args, digest):",
        "        if False:",
        "the server judges arguments its request's digest does not cover (a writer downgrades the rule)",
        SERVER_POLICY_JUDGES,
    ),
    M(
        AUTHORITY,
        "    if not digest:\n        return False",
        "    if not digest:\n        return True",
        "the server judges the arguments of a request with no digest (nothing binds them to the call)",
        SERVER_POLICY_JUDGES,
    ),
    M(
        AUTHORITY,
        "        disagrees = bool(named) and _terms(meta) != _terms(verdict.metadata())",
        "        disagrees = False",
        "the API hides that the request named another rule than the server's",
        SERVER_POLICY_JUDGES,
    ),
    M(
        AUTHORITY,
        "        if unseen:  # it might have decided first",
        "        if False:  # it might have decided first",
        "a server rule on run labels (a deny) is skipped: the call falls to the weaker rule after it",
        SERVER_POLICY_JUDGES,
    ),
    M(
        AUTHORITY,
        "        if verdict.error:  # fail closed: what the rule would have said is unknown",
        "        if False:  # fail closed: what the rule would have said is unknown",
        "a call the server's policy could not judge is decided by the request's own fields (fail open)",
        ("tests/policy/test_policy_fail_closed.py",),
    ),
    M(
        ("goldfive_core/store/keeper.py",),
        "        self.url = store.url\n",
        "        self.url = store.url\n        self.store = store\n",
        "the keeper registry keeps every store alive (and its database connections)",
        OUTAGES,
    ),
    M(
        ("goldfive_core/dispatch.py",),
        "    if named and named != asked:  # a late notice for an earlier ask never ends the one asked since",
        "    if False:  # a late notice for an earlier ask never ends the one asked since",
        "a late expiry notice for an earlier ask ends the request asked since",
        ("tests/core/test_core_approvals.py",),
    ),
    # -- every decision bound to one request (request_id, request_digest) ------------------------------------
    M(
        ("goldfive_core/signing.py",),
        "        if not body[name]:\n            del body[name]",
        "        if True:\n            del body[name]",
        "a signature covers no request: a signed approval moves onto a later ask of the target",
        REQUEST,
    ),
    M(
        ("goldfive_core/signing.py",),
        "    for name in _OMITTED_WHEN_EMPTY:  # a decision without them",
        '    if facts.quorum:  # a vote\n        body["request_id"] = body["request_digest"] = ""\n'
        "    for name in _OMITTED_WHEN_EMPTY:  # a decision without them",
        "a quorum vote's signature covers no request: a vote signed for one request counts on another",
        REQUEST,
    ),
    M(
        BOOK,
        "if not decision.request_id or request is None or decision.request_id == request.request_id:",
        "if True:",
        "a decision naming an earlier request of the target applies to the re-ask",
        REQUEST,
    ),
    M(
        BOOK,
        "if early is not None and early.request_id and early.request_id != request.request_id:",
        "if False:",
        "a decision kept early for another request applies when the call is asked",
        REQUEST,
    ),
    M(
        BOOK,
        "wrong = _wrong_request(record, decision) if decision.request_id else None",
        "wrong = None",
        "the approve path never checks the request a decision names (one for an earlier ask applies to the re-ask)",
        REQUEST,
    ),
    M(
        SQL,
        '    if request_id:\n        return "run_id = ? AND target_id = ? AND request_id = ?"',
        '    if False:\n        return "run_id = ? AND target_id = ? AND request_id = ?"',
        "a late ack (or decision event) of an earlier request lands on the re-ask",
        REQUEST,
    ),
    M(
        SQL,
        "AND (? = '' OR request_id = ?)\",",
        "AND (? = '' OR ? = ?)\",",
        "a decision recorded in the store for an earlier ask lands on the re-ask",
        REQUEST,
    ),
    M(
        CHANNEL_FILE,
        'request_digest=request.digest if request is not None else "",',
        'request_digest=str(msg.payload.get("request_digest") or ""),',
        "the trust check takes the request digest the payload claims, not the run's own request",
        REQUEST,
    ),
    M(
        CHANNEL_FILE,
        'request_id=request.request_id if request is not None else "",',
        'request_id=str(msg.payload.get("request_id") or ""),',
        "the trust check takes the request id the payload claims, not the run's own request",
        REQUEST,
    ),
    M(
        ("goldfive_core/store/audit.py",),
        '"request_id": (row.request_id, req.request_id),',
        '"request_id": (row.request_id, row.request_id),',
        "audit verify does not check a record's request id against its request on the log",
        ("tests/faults/test_faults_audit_tables.py",),
    ),
    M(
        ("goldfive_core/store/audit.py",),
        'request_digest=row.request_digest if row.request_id else "",',
        'request_digest="" if row.request_id else "",',
        "audit verify checks a signature without the record's request digest",
        REQUEST,
    ),
    # -- ADK agents over A2A (goldfive_adk/a2a.py) ----------------------------------------------------------
    M(
        A2A,
        "if link is not None and not link.ended and (link.task_id == task_id or _answers(context, link)):",
        "if False:",
        "a message from the A2A caller to a task waiting for a person reaches the agent",
        A2A_IN_BAND,
    ),
    M(
        A2A,
        "if self.trust_key is None:\n            why =",
        "if False:\n            why =",
        "an agent with no trusted key applies an unsigned in-band decision",
        A2A_IN_BAND,
    ),
    M(
        A2A,
        'if problem is not None:\n            return f"refused: {problem}; the request stays pending"',
        'if False:\n            return f"refused: {problem}; the request stays pending"',
        "an in-band decision whose signature does not verify is applied",
        A2A_IN_BAND,
    ),
    M(
        A2A,
        'request_digest=request.digest if request is not None else "",\n            session=session,',
        'request_digest=str(payload.get("request_digest") or ""),\n            session=session,',
        "the in-band trust check takes the request digest the payload claims, not the run's own",
        A2A_IN_BAND,
    ),
    M(
        A2A,
        "        if show_args:\n",
        "        if True:\n",
        "the call's arguments are shown to the A2A caller though the operator did not allow it",
        A2A_SERVER,
    ),
    M(
        A2A,
        "        if not self._link.owner.show_args:\n",
        "        if False:\n",
        "a gated call's arguments reach the A2A caller in ADK's function-call part of the task history",
        A2A_SERVER,
    ),
    M(
        A2A,
        "            if link.run is not None:\n                link.run.cancel()",
        "            if link.run is not None:\n                pass",
        "tasks/cancel ends the A2A task but the invocation keeps waiting (the request stays pending)",
        ("tests/a2a/test_a2a_cancel.py",),
    ),
    M(
        A2A,
        "if recorded and not await on_record(self.owner.plugin.sinks, RECORD_WAIT_S):",
        "if False:",
        "the A2A caller hears 'approval X waits' before X is on record (a kill -9 then loses the request)",
        ("tests/a2a/test_a2a_kill.py::test_the_caller_hears_of_a_wait_only_once_the_request_is_on_record",),
    ),
    M(
        ("goldfive_core/server/history.py",),
        "        policy = self.rules.policy\n",
        "        policy = None\n",
        "review stats through serve no longer checks the verdicts against the server's own --policy",
        ("tests/server/test_server_review_stats.py",),
    ),
    # -- the MCP gateway ---------------------------------------------------------------------------------------
    M(
        MCP_UPSTREAMS,
        "        if link is None or self.links.get(name) is not link:\n            return",
        "        if link is None:\n            return",
        "mcp gateway: a stale call's lost link ends the upstream's new, healthy connection (a restart for nothing)",
        (MCP_FAULTS + "test_a_stale_rounds_fault_never_ends_the_upstreams_new_connection",),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/stdio.py",),
        "                if task is not None:\n                    task.cancel()",
        "                if task is not None:\n                    pass",
        "mcp gateway: notifications/cancelled does not withdraw a waiting call's approval request",
        ("tests/mcp/test_mcp_gateway.py::test_a_cancelled_request_withdraws_the_approval",),
    ),
    M(
        MCP_UPSTREAMS,
        "            if restarted >= self.restarts:",
        "            if True:",
        "mcp gateway: an upstream that died is never restarted (its tools stay unavailable)",
        (
            "tests/mcp/test_mcp_gateway.py::test_an_upstream_that_died_is_restarted_and_an_approved_call_lost_in_flight_stays_in_doubt",
        ),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/http.py",),
        '        elif not hmac.compare_digest(given.strip().encode("utf-8"), self._token):',
        "        elif False:",
        "mcp gateway --http: any bearer token is taken (the token is not checked)",
        ("tests/mcp/test_mcp_http.py::test_without_the_token_or_with_another_the_answer_is_401",),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/http.py",),
        "        session = self._sessions.get(session_id)\n",
        "        session = next(iter(self._sessions.values()), None)\n",
        "mcp gateway --http: a request goes to the first session's run, whatever its Mcp-Session-Id says",
        ("tests/mcp/test_mcp_http.py::test_two_sessions_are_two_runs",),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/tasks.py",),
        "        if task.runner is not None:\n            task.runner.cancel()",
        "        if task.runner is not None:\n            pass",
        "mcp gateway: tasks/cancel reports the task cancelled but its approval request stays open (the call may run)",
        ("tests/mcp/test_mcp_tasks.py::test_tasks_cancel_withdraws_the_request_and_the_call_never_runs",),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/tasks.py",),
        "        if task.forwarding:\n            raise MCPError(",
        "        if False:\n            raise MCPError(",
        "mcp gateway: tasks/cancel of a call already running upstream says it was not made",
        ("tests/mcp/test_mcp_tasks.py::test_a_task_whose_call_was_let_through_cannot_be_cancelled",),
    ),
    # -- MCP upstream faults: never written, lost in flight, no answer in time ------------------------------------
    M(
        (INFLIGHT,),
        "        if isinstance(failure, NotStarted):\n            await record.proceed.release()",
        "        if isinstance(failure, NotStarted):\n            await record.proceed.finish(error=failure)",
        "a body that never began is recorded 'done' (its claim is not given back: 'released, not run')",
        ("tests/core/test_core_inflight.py", MCP_FAULTS + DIED_FOR_GOOD),
    ),
    M(
        (INFLIGHT,),
        "            record.proceed.in_doubt(str(failure))",
        "            await record.proceed.finish(error=failure)",
        "a body lost mid-way is recorded 'done' instead of staying in doubt (nobody is told to check it)",
        (
            "tests/core/test_core_inflight.py",
            "tests/mcp/test_mcp_gateway.py::test_an_upstream_that_died_is_restarted_and_an_approved_call_lost_in_"
            "flight_stays_in_doubt",
        ),
    ),
    M(
        REPLAY_FILE,
        "        if self._claims.get((call.call_id, digest)) != session.run_id:\n            return False",
        "        if True:\n            return False",
        "a claim begin made for a body that never began is not given back (left 'executing', in doubt)",
        ("tests/core/test_core_inflight.py", MCP_FAULTS + DIED_FOR_GOOD),
    ),
    M(
        ("goldfive_core/store/http/_channel.py",),
        "        if await self.records.give_back(session, call, digest, write=write):\n            return\n",
        "        if False:\n            return\n",
        "over HTTP, a claim begin made for a body that never began is not given back (left in doubt on the server)",
        (
            "tests/mcp/test_mcp_serve.py::test_a_call_approved_through_the_server_after_its_upstream_died_is_not_sent_and_"
            "given_back",
        ),
    ),
    M(
        MCP_FORWARD,
        "            if sending.written:",
        "            if False:",
        "mcp gateway: a call whose first round reached the upstream is sent again on its restarted connection",
        (MCP_FAULTS + "test_a_stale_rounds_fault_never_ends_the_upstreams_new_connection",),
    ),
    M(
        MCP_FORWARD,
        '            raise InDoubt(f"its MCP server {upstream!r} did not answer within',
        '            raise NotStarted(f"its MCP server {upstream!r} did not answer within',
        "mcp gateway: a call its upstream never answered in time is said not to have run (its claim given back)",
        (MCP_FAULTS + "test_a_hung_upstream_is_answered_in_time_and_the_call_stays_in_doubt",),
    ),
    M(
        MCP_FORWARD,
        'result = await self.link.request("tools/call", params, timeout_s=self.timeout_s, on_written=self._wrote)',
        'result = await self.link.request("tools/call", params, timeout_s=None, on_written=self._wrote)',
        "mcp gateway: a call to a hung upstream waits for ever (no upstream timeout)",
        (MCP_FAULTS + "test_the_upstream_timeout_option_bounds_a_call_no_person_was_asked_for",),
    ),
    M(
        MCP_FORWARD,
        "        if sending is not None and sending.written:",
        "        if False:",
        "mcp gateway: a call the client cancelled after it reached the upstream is said not to have run (claim given "
        "back)",
        (MCP_FAULTS + "test_a_call_the_client_cancels_while_its_upstream_runs_it_stays_in_doubt",),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/__init__.py",),
        "        except ClientGaveUp:  # recorded (in doubt, or given back): the request ends as the client asked\n"
        "            raise asyncio.CancelledError from None\n",
        "",
        "mcp gateway: a call the client cancelled mid-forward is answered as an error result (not ended as cancelled)",
        (MCP_FAULTS + "test_a_call_the_client_cancelled_mid_forward_gets_no_answer",),
    ),
    M(
        MCP_LINK,
        "            if timer is not None:\n                timer.cancel()\n",
        "            if False:\n                timer.cancel()\n",
        "mcp gateway: the upstream's clock runs while a person answers its question (the call times out)",
        (MCP_FAULTS + "test_the_clock_stops_while_a_person_answers_the_upstreams_question",),
    ),
    M(
        MCP_LINK,
        '            raise UpstreamGone(self._gone or "it is not connected", written=False)',
        '            raise UpstreamGone(self._gone or "it is not connected", written=True)',
        "mcp gateway: a request on an ended link counts as written (in doubt, where nothing ran)",
        ("tests/mcp/test_mcp_link.py::test_a_request_on_an_ended_link_was_never_written",),
    ),
    M(
        MCP_LINK,
        "                raise UpstreamGone(str(exc), written=True) from None",
        "                raise UpstreamGone(str(exc), written=False) from None",
        "mcp gateway: a call lost in flight counts as never written (sent again on the restarted upstream)",
        (
            "tests/mcp/test_mcp_link.py::test_a_request_whose_link_ends_after_it_was_written_is_lost_in_flight",
            "tests/mcp/test_mcp_gateway.py::test_an_upstream_that_died_is_restarted_and_an_approved_call_lost_in_"
            "flight_stays_in_doubt",
        ),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/__init__.py",),
        "            missing = upstream.missing_env()\n            if missing:",
        "            missing = upstream.missing_env()\n            if False:",
        "mcp gateway: a headers_from_env variable that is not set is found only when a call fails",
        (
            "tests/mcp/test_mcp_upstream_auth.py::test_a_header_variable_that_is_not_set_stops_the_gateway_at_start_"
            "naming_it",
        ),
    ),
    M(
        MCP_UPSTREAMS,
        "            if uri in self.subscribed.get(name, ()):",
        "            if True:",
        "mcp gateway: an upstream's resource updates reach the client for resources it never subscribed to",
        (
            "tests/mcp/test_mcp_passthrough.py::test_a_subscription_is_made_upstream_and_only_its_updates_reach_the_"
            "client",
        ),
    ),
    # -- MCP progress while a call waits for a person ------------------------------------------------------------
    M(
        ("goldfive_core/adapters/mcp_gateway/__init__.py",),
        '            return f"waiting for a person to approve {call.tool_name} (goldfive approve {call.call_id})"',
        '            return f"waiting for a person to approve {call.tool_name}({call.args}) "'
        '(goldfive approve {call.call_id})"',
        "mcp progress: a waiting call's progress message carries its arguments",
        ("tests/mcp/test_mcp_progress.py::test_progress_names_the_tool_never_the_arguments_and_stops_with_the_result",),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/__init__.py",),
        "            count += 1\n            try:\n                await progress(count, message)",
        "            count += 1\n            await asyncio.sleep(self.gateway.progress_every_s)\n"
        "            try:\n                await progress(count, message)",
        "mcp progress: a held call's first progress comes one interval late, not when it starts waiting",
        ("tests/mcp/test_mcp_progress.py::test_a_held_call_sends_progress_as_soon_as_it_waits",),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/__init__.py",),
        "                lambda task: self._call(params, client, progress, task, self.elicit.client_asker(",
        "                lambda task: self._call(params, client, None, task, self.elicit.client_asker(",
        "mcp progress: a task-augmented call's progress token is dropped (no progress while the task waits)",
        ("tests/mcp/test_mcp_progress.py::test_a_task_gets_progress_on_its_token_while_it_waits_and_none_once_done",),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/__init__.py",),
        "        progress = self._progress_on_session(token) if isinstance(token, str | int) else None\n",
        "        progress = None\n",
        "mcp progress --http: a task's progress is never sent on the session's stream",
        ("tests/mcp/test_mcp_progress.py::test_over_http_a_task_gets_progress_on_the_session_stream_until_it_is_done",),
    ),
    # -- MCP Tasks' input_required: a task's upstream asks the client, through tasks/result --------------------
    M(
        ("goldfive_core/adapters/mcp_gateway/tasks.py",),
        '        status: Status = "input_required" if self.questions else "working"',
        '        status: Status = "working"',
        "mcp tasks: a task whose upstream asks the client stays 'working' (never told to call tasks/result)",
        (
            "tests/mcp/test_mcp_tasks_input.py::test_a_task_whose_upstream_asks_goes_input_required_and_tasks_result_carries_the_question",
        ),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/tasks.py",),
        '{**wire, "_meta": {RELATED_TASK: {"taskId": task_id}}}',
        "wire",
        "mcp tasks: a task's question is sent without naming its task (related-task)",
        (
            "tests/mcp/test_mcp_tasks_input.py::test_a_task_whose_upstream_asks_goes_input_required_and_tasks_result_carries_the_question",
        ),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/tasks.py",),
        "        sending.cancel()\n        question.taken = False\n",
        "        sending.cancel()\n",
        "mcp tasks: a question whose tasks/result was given up is never carried again (the call waits it out)",
        ("tests/mcp/test_mcp_tasks_input.py::test_a_tasks_result_given_up_hands_its_question_to_the_next",),
    ),
    # -- requests for input (elicitation): the answer's check and its binding --------------------------------
    M(
        ELICIT,
        "    if isinstance(high, int | float) and value > high:",
        "    if False:",
        "an answer above a number field's maximum is taken",
        ELICIT_TESTS,
    ),
    M(
        ELICIT,
        '    for name in schema.get("required", []):\n        if name not in content:',
        '    for name in schema.get("required", []):\n        if False:',
        "an answer that leaves out a required field is taken",
        ELICIT_TESTS,
    ),
    M(
        ELICIT,
        "        found = answer_problem(schema, content)\n        return found.message if found is not None else None",
        "        return None",
        "the asking run takes any content as the person's answer (only the deciding side checks it)",
        ELICIT_TESTS,
    ),
    M(
        BOOK,
        "            decision = dataclasses.replace(decision, edited_args={})  # an accept with no content",
        "            pass  # an accept with no content",
        "an accept with no content is applied to a form with required fields",
        ELICIT_TESTS,
    ),
    M(
        BOOK,
        '        if decision.answer and (decision.approved or request.kind != "input"):',
        "        if False:",
        "a 'cancel' answer is applied to a tool call's rejection",
        ELICIT_TESTS,
    ),
    M(
        ELICIT,
        '    return args_digest(_DIGEST_TOOL, {"message": message, "requested_schema": dict(schema)})',
        '    return args_digest(_DIGEST_TOOL, {"message": message})',
        "an answer given for one form is applied to a question with another form (the digest leaves the schema out)",
        ELICIT_TESTS,
    ),
    M(
        ("goldfive_core/signing.py",),
        "    for name in _OMITTED_WHEN_EMPTY:",
        '    body.pop("answer", None)\n    for name in _OMITTED_WHEN_EMPTY:',
        "a signature does not cover whether the person declined or cancelled (a writer can flip it)",
        ELICIT_TESTS,
    ),
    M(
        TRUST,
        'answer=answer if isinstance(answer := payload.get("answer"), str) else "",',
        'answer="",',
        "the trusting agent checks a signed cancel without its answer (and refuses it, or takes a flipped one)",
        ("tests/mcp/test_mcp_elicit_serve.py",),
    ),
    M(
        DECIDE,
        '        if row.kind == "input":\n            problem = request_answer_problem(row.metadata, edited_args)',
        "        if False:\n            problem = request_answer_problem(row.metadata, edited_args)",
        "goldfive serve and the goldfive command send an answer that does not fit the form (no 422 naming the field)",
        ("tests/mcp/test_mcp_elicit_serve.py::test_a_signed_answer_from_goldfive_answer_url_reaches_the_upstream",),
    ),
    # -- an upstream's question passed on to the calling MCP client (goldfive mcp --elicit client) -----------------
    M(
        MCP_ELICIT,
        '        if self.mode != "person":  # the operator chose who answers',
        "        if True:  # the operator chose who answers",
        "mcp elicit: with --elicit person (the default) the client answers the upstream's question, not a person",
        (MCP_ELICIT_CLIENT + "test_by_default_a_person_answers_even_a_client_that_could",),
    ),
    M(
        MCP_ELICIT,
        "        if ask is None or not can_elicit_form(client):",
        "        if ask is None:",
        "mcp elicit: a client that declared no elicitation is sent the question (no fallback, no decline)",
        (MCP_ELICIT_CLIENT + "test_a_client_without_the_capability_is_declined_with_client_or_decline",),
    ),
    M(
        MCP_ELICIT,
        "        found = answer_problem(schema, content)\n        if found is not None:  # fail closed: content that",
        "        found = None\n        if found is not None:  # fail closed: content that",
        "mcp elicit: a client's answer that does not fit the requested form is passed upstream as its content",
        (MCP_ELICIT_CLIENT + "test_a_clients_answer_that_does_not_fit_the_form_is_a_cancel",),
    ),
    M(
        MCP_ELICIT,
        '        problem = form_problem(schema)\n        if problem is not None:\n            logger.info("cancelled',
        '        problem = form_problem(schema)\n        if False:\n            logger.info("cancelled',
        "mcp elicit: an upstream's form over the limits (500 fields) is passed on to the client",
        (MCP_ELICIT_CLIENT + "test_hostile_sizes_from_the_upstream_are_bounded",),
    ),
    M(
        MCP_ELICIT,
        "            message=shorten(params.message, MAX_MESSAGE_CHARS), requested_schema=schema",
        "            message=params.message, requested_schema=schema",
        "mcp elicit: an upstream's message of any size is passed on to the client unbounded",
        (MCP_ELICIT_CLIENT + "test_hostile_sizes_from_the_upstream_are_bounded",),
    ),
    M(
        MCP_ELICIT,
        "            answer = await asyncio.wait_for(ask(question), timeout_ms / 1000)",
        "            answer = await ask(question)",
        "mcp elicit: a client that never answers holds the upstream's call for ever (no timeout, no cancel)",
        (MCP_ELICIT_CLIENT + "test_a_client_that_never_answers_is_a_cancel_within_the_timeout",),
    ),
    M(
        MCP_INPUT_REQUIRED,
        "    if is_input_required(result):\n        raise Unanswerable(",
        "    if False:\n        raise Unanswerable(",
        "mcp input_required: an upstream that asks for ever gets its 11th round handed to the client as a result",
        (MCP_ELICIT_CLIENT + "test_an_input_required_result_the_gateway_cannot_answer_is_a_clear_error",),
    ),
    M(
        MCP_INPUT_REQUIRED,
        '        if method != "elicitation/create":',
        "        if False:",
        "mcp input_required: a request for sampling or roots is taken as a form question",
        (MCP_ELICIT_CLIENT + "test_an_input_required_result_the_gateway_cannot_answer_is_a_clear_error",),
    ),
    M(
        MCP_INPUT_REQUIRED,
        "    if state is not None and (not isinstance(state, str) or len(state) > MAX_STATE_CHARS):",
        "    if state is not None and not isinstance(state, str):",
        "mcp input_required: a requestState of any size is echoed back to the upstream",
        (MCP_ELICIT_CLIENT + "test_a_request_state_over_the_bound_is_never_echoed",),
    ),
    M(
        MCP_INPUT_REQUIRED,
        '            retry["requestState"] = state',
        "            pass",
        "mcp input_required: the retry leaves out the upstream's requestState (it cannot continue its call)",
        (MCP_ELICIT_CLIENT + "test_an_input_required_result_is_answered_by_the_client_and_the_call_continues",),
    ),
    M(
        MCP_ELICIT,
        '            return types.ElicitResult(action="accept", content=dict(answer.content or {}))\n'
        "        return types.ElicitResult(action=answer.action)",
        '            return types.ElicitResult(action="decline")\n'
        "        return types.ElicitResult(action=answer.action)",
        "mcp elicit: a person's submitted form (the inbox's approve) reaches the upstream as a decline",
        (
            "tests/mcp/test_mcp_adk.py::test_an_adk_agents_elicitation_is_answered_from_the_inbox_and_the_model_reads_the_result",
            "tests/mcp/test_mcp_http_serve.py::test_an_http_gateways_elicitation_is_answered_through_the_servers_inbox",
        ),
    ),
    M(
        MCP_ELICIT,
        '            return types.ElicitResult(action="accept", content=dict(answer.content or {}))\n'
        "        return types.ElicitResult(action=answer.action)",
        '            return types.ElicitResult(action="accept", content=dict(answer.content or {}))\n'
        '        return types.ElicitResult(action="cancel")',
        "mcp elicit: a person's decline reaches the upstream as a cancel (the two answers not told apart)",
        (
            "tests/mcp/test_mcp_http.py::test_an_elicitation_over_http_is_answered_by_a_person_accept_decline_and_cancel",
        ),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/names.py",),
        "            if any(tool_pattern_matches(pattern, exposed) for exposed in tools):",
        "            if True:",
        "mcp gateway: a policy naming bare tools behind several upstreams (it never applies) is not said at start-up",
        ("tests/mcp/test_mcp_names.py::test_bare_names_behind_several_upstreams_are_named_with_the_prefix_to_write",),
    ),
    M(
        ("goldfive_core/adapters/mcp_gateway/stdio.py",),
        "stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))",
        "stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)",
        "mcp gateway: a gateway whose stdin is /dev/null waits for ever (the loop cannot watch the device)",
        ("tests/mcp/test_mcp_gateway.py::test_a_gateway_whose_stdin_is_the_null_device_ends_at_once",),
    ),
    # -- the reviewer tier: fails closed, never a vote, never a grant, shadow never acts ------------------------
    M(
        REVIEW_RUN,
        'return _failed(reviewer, f"it raised {type(exc).__name__}: {shorten(str(exc), 300)}", started)',
        'return Judged(verdict=ReviewVerdict(action="allow"))',
        "a reviewer that raises is taken as an allow (fail open)",
        REVIEWER,
    ),
    M(
        REVIEW_RUN,
        'return _failed(reviewer, f"it did not answer within {reviewer.timeout_ms / 1000:g} s", started)',
        'return Judged(verdict=ReviewVerdict(action="allow"))',
        "a reviewer that times out is taken as an allow (fail open)",
        REVIEWER,
    ),
    M(
        REVIEW_RUN,
        "if not isinstance(verdict, ReviewVerdict):\n        return None",
        'if not isinstance(verdict, ReviewVerdict):\n        return ReviewVerdict(action="allow")',
        "a reviewer that returns junk is taken as an allow (fail open)",
        REVIEWER,
    ),
    M(
        REVIEW_GATE,
        'if verdict.action == "allow" and ask.quorum > 1:',
        "if False:",
        "a reviewer's allow stands in for the people a quorum rule needs (counted as their votes)",
        REVIEWER,
    ),
    M(
        REVIEW_GATE,
        'if reviewer.mode == "shadow":',
        "if False:",
        "a shadow reviewer's verdict acts (its deny skips the call)",
        REVIEWER,
    ),
    M(
        REVIEW_GATE,
        "seen = dataclasses.replace(call, args=json.loads(args_json), metadata=dict(call.metadata))",
        "seen = call",
        "the reviewer is handed the call's own arguments: what it changes is what runs",
        REVIEWER,
    ),
    M(
        ("goldfive_core/payloads.py",),
        "if forged:  # a reviewer's verdict never arrives by a channel",
        "if False:  # a reviewer's verdict never arrives by a channel",
        "a decision from outside claiming a reviewer is applied (and may make a grant)",
        REVIEWER,
    ),
    M(
        ("goldfive_core/payloads.py",),
        'forged = reviewer_claim(decided_by, channel) if decided_by or channel else ""',
        'forged = ""',
        "a decision from outside claiming a reviewer is applied: its claim is never looked at",
        REVIEWER,
    ),
    M(
        ("goldfive_core/payloads.py",),
        "if type(payload) is dict and payload.keys().isdisjoint(_RARE_KEYS):",
        "if type(payload) is dict:",
        "a decision's edited arguments, stated quorum or 'cancel' answer are dropped (every payload parsed as plain)",
        APPROVALS + ADK_B + QUORUM + SERVER_POLICY,
    ),
    M(
        TRUST,
        'problem = reviewer_claim(decided_by, payload.get("channel")) or None',
        "problem = None",
        "a reviewer allow recorded in the store is replayed as a decision",
        REVIEWER_STORE,
    ),
    # -- grants: what one covers (scope, expiry, constraint), revocations from the store, what may ask for one ------
    M(
        ("goldfive_core/policy/_grants.py",),
        "        if not self.active(at_ms) or rule != self.rule or call.tool != self.tool:",
        "        if rule != self.rule or call.tool != self.tool:",
        "grants: an expired or revoked grant still lets calls through",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        "        if not self.active(at_ms) or rule != self.rule or call.tool != self.tool:",
        "        if not self.active(at_ms) or call.tool != self.tool:",
        "grants: a grant lets through a call that another rule asks about",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        "        if not self.active(at_ms) or rule != self.rule or call.tool != self.tool:",
        "        if not self.active(at_ms) or rule != self.rule:",
        "grants: a grant lets through a call of another tool its rule asks about",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        '        if self.scope == "run" and (not run_id or run_id != self.run_id):',
        '        if self.scope == "run" and not run_id:',
        "grants: a run grant lets calls of another run through",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        '        if self.scope == "run" and (not run_id or run_id != self.run_id):',
        '        if self.scope == "run" and run_id and run_id != self.run_id:',
        "grants: a run grant lets through a call that names no run",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        '        if self.scope == "session" and (not session_id or session_id != self.session_id):',
        '        if self.scope == "session" and not session_id:',
        "grants: a session grant lets calls of another session through",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        '        if self.scope == "session" and (not session_id or session_id != self.session_id):',
        '        if self.scope == "session" and session_id and session_id != self.session_id:',
        "grants: a session grant lets through a call of a run in no session",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        "            return self._constraint.test(call)",
        "            return True",
        "grants: a grant's argument constraint is not applied (any arguments pass)",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        "            return False  # cannot tell: the call asks a person as it would without the grant",
        "            return True  # cannot tell: the call asks a person as it would without the grant",
        "grants: a constraint that cannot be evaluated on a call lets it through (fail open)",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        "(self.expires_at_ms is None or at_ms < self.expires_at_ms)",
        "(self.expires_at_ms is None or at_ms <= self.expires_at_ms)",
        "grants: a timed grant still lets a call through at its expiry instant",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        "        return self.revoked_at_ms is None and (self.expires_at_ms is None",
        "        return (self.expires_at_ms is None",
        "grants: a revoked grant is still active",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        "            expires_at_ms=now + wanted.ttl_ms if wanted.ttl_ms is not None else None,",
        "            expires_at_ms=None,",
        "grants: a timed grant never expires",
        GRANT_BOOK + GRANTS_KEPT,
    ),
    M(
        ("goldfive_core/policy/_grants.py",),
        '            book.revoke(grant.grant_id, by=grant.revoked_by or "someone")',
        "            pass",
        "grants: a revocation read from the store does not end the grant this process made (it still applies)",
        GRANTS_KEPT,
    ),
    M(
        DISPATCH,
        '    if not decision.approved:\n        return "only an approval can allow matching calls"',
        '    if False:\n        return "only an approval can allow matching calls"',
        "grants: a rejection asking for a grant creates one",
        GRANT_ASKED,
    ),
    M(
        DISPATCH,
        '    if decision.edited_args is not None:\n        return "an edited approval never creates a grant',
        '    if False:\n        return "an edited approval never creates a grant',
        "grants: an edited approval creates a standing grant (for calls with other arguments than the edit)",
        GRANT_ASKED,
    ),
    M(
        DISPATCH,
        "    if wanted not in ask.grants:\n        offered",
        "    if False:\n        offered",
        "grants: an approval asking for a scope its rule does not offer is applied (the grant quietly not made)",
        GRANT_ASKED,
    ),
    # -- goldfive serve: which role may do what on which route ------------------------------------------------------
    M(
        APP,
        'Route("/api/approvals/{target_id}/approve", r(api.approve, "decide"), methods=["POST"]),',
        'Route("/api/approvals/{target_id}/approve", r(api.approve), methods=["POST"]),',
        "authz: the approve route needs only read (a viewer approves)",
        AUTHZ,
    ),
    M(
        APP,
        'Route("/api/approvals/{target_id}/reject", r(api.reject, "decide"), methods=["POST"]),',
        'Route("/api/approvals/{target_id}/reject", r(api.reject), methods=["POST"]),',
        "authz: the reject route needs only read (a viewer rejects)",
        AUTHZ,
    ),
    M(
        APP,
        'Route("/api/grants/{grant_id}/revoke", r(api.revoke_grant, "decide"), methods=["POST"]),',
        'Route("/api/grants/{grant_id}/revoke", r(api.revoke_grant), methods=["POST"]),',
        "authz: a viewer revokes a grant",
        AUTHZ,
    ),
    M(
        APP,
        'r(api.control(ControlKind.STEER), "control")',
        "r(api.control(ControlKind.STEER))",
        "authz: a viewer steers a run",
        AUTHZ,
    ),
    M(
        APP,
        'r(api.control(ControlKind.CANCEL), "control")',
        'r(api.control(ControlKind.CANCEL), "agent")',
        "authz: an agent token cancels a run (the cancel route asks the agent permission)",
        AUTHZ,
    ),
    M(
        APP,
        'Route("/api/users/{name}/{action}", r(api.users.act, "manage_users"), methods=["POST"]),',
        'Route("/api/users/{name}/{action}", r(api.users.act, "decide"), methods=["POST"]),',
        "authz: an approver rotates, disables and enables users",
        AUTHZ,
    ),
    M(
        APP,
        "            if not user.can(permission):",
        '            if user.channel == "api" and not user.can(permission):',
        "authz: a web session's role is never checked (a cookie may do anything)",
        AUTHZ,
    ),
    M(
        ("goldfive_core/store/users.py",),
        '    "viewer": frozenset({"read"}),',
        '    "viewer": frozenset({"read", "control"}),',
        "authz: the permission table lets a viewer control runs",
        AUTHZ,
    ),
    M(
        ("goldfive_core/store/users.py",),
        '    "agent": frozenset({"agent"}),',
        '    "agent": frozenset({"agent", "read"}),',
        "authz: the permission table lets an agent token read the inbox",
        AUTHZ,
    ),
    M(
        ("goldfive_core/store/users.py",),
        "    return permission in roles.get(role, frozenset())",
        '    return permission in roles.get(role, roles["viewer"])',
        "authz: a role the table does not know (a row by hand, a newer version's) may read (fail open)",
        AUTHZ,
    ),
    M(
        ("goldfive_core/store/sql/users.py",),
        '                "WHERE id_hash = ? AND expires_at_ms > ?",',
        '                "WHERE id_hash = ? AND (expires_at_ms > ? OR 1 = 1)",',
        "sessions: an expired web session still works",
        AUTHZ,
    ),
    M(
        AUTH,
        "expires_at_ms=now + SESSION_TTL_MS",
        "expires_at_ms=now + SESSION_TTL_MS * 1000",
        "sessions: a web session lasts a thousand times its TTL (seconds taken for milliseconds)",
        AUTHZ,
    ),
    M(
        ("goldfive_core/store/sql/users.py",),
        "                if disabled or token_hash is not None:",
        "                if disabled:",
        "sessions: web sessions opened before a rotate keep working (the old credential lives on)",
        AUTHZ,
    ),
    M(
        AUTH,
        "            if matched == stored:\n",
        "            if matched:\n",
        "sessions: a token verified before its user's hash changed is still taken from the cache",
        AUTHZ,
    ),
    # -- checkpoints hold the rows the server wrote itself (revocations, ledger records, refusals) -------------------
    M(
        CHECKPOINT,
        "        rewritten = self._written_problems(rows)",
        "        rewritten: list[str] = []",
        "server rows: the rows the server wrote are never checked before a checkpoint is signed",
        SERVER_ROWS,
    ),
    M(
        CHECKPOINT,
        "    return row is not None and row.event_id == a.event_id and hashlib.sha256(row.body).hexdigest() == "
        "a.body_sha256",
        "    return row is not None and row.event_id == a.event_id",
        "server rows: a row the server wrote, edited in place (chain recomputed), reads as written",
        SERVER_ROWS,
    ),
    M(
        CHECKPOINT,
        "            if row is None:\n"
        '                problems.append(f"{what} is gone (deleted): history was rewritten")',
        "            if row is None:\n                pass",
        "server rows: a row the server wrote, deleted (the head put back), is not missed",
        SERVER_ROWS,
    ),
    M(
        CHECKPOINT,
        "        with self._lock:\n            vouched = set(self._vouched)\n",
        "        with self._lock:\n            vouched = set(self._vouched)\n"
        "        rows = {a for a in rows if a.seq <= head[0]}\n",
        "server rows: only rows the head reaches are checked (one cut off the tail, the head put back, is skipped)",
        SERVER_ROWS,
    ),
    M(
        CHECKPOINT,
        "        kept = [a for a in appended if _reads_as_written(found.get(a.seq), a)]",
        "        kept = list(appended)",
        "server rows: a row of a write attempt that rolled back is held too (a false alarm at the next checkpoint)",
        SERVER_ROWS,
    ),
    M(
        CHECKPOINT,
        "                    rows.add(Appended(seq, event_id, kind, digest))",
        "                    pass",
        "server rows: the rows kept beside the checkpoint are forgotten by a restarted server",
        SERVER_ROWS,
    ),
    M(
        ("goldfive_core/store/sql/chain.py",),
        "        note_appended(self.seq, event.event_id, kind, body)\n",
        "",
        "server rows: the chain never notes what a call appended (the server vouches for nothing it wrote)",
        SERVER_ROWS,
    ),
    M(
        APP,
        "        revoked = await self._written(\n            grants_mod.revoke_grant,",
        "        revoked = await _run(\n            grants_mod.revoke_grant,",
        "server rows: a grant revocation through the API is not vouched for",
        SERVER_ROWS,
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "        if not await self._written(self.store.mark_done,",
        "        if not await self.threads.run(AGENTS, self.store.mark_done,",
        "server rows: an agent's 'done' written through the server is not vouched for",
        SERVER_ROWS,
    ),
    M(
        ("goldfive_core/server/agents.py",),
        "    if vouch_rows is not None:\n        await vouch_rows(rows)",
        "    if False:\n        await vouch_rows(rows)",
        "server rows: the server's refusal of an agent token is not vouched for",
        SERVER_ROWS,
    ),
    # -- nosniff on the answers serve writes without the app ---------------------------------------------------------
    M(
        ("goldfive_core/server/connections.py",),
        '        (b"x-content-type-options", b"nosniff"),\n',
        "",
        "nosniff: the 408 and h11's 400 that the connection writes itself carry no nosniff",
        (_JUNK + "test_every_answer_serve_writes_itself_carries_nosniff_too",),
    ),
    M(
        ("goldfive_core/server/connections.py",),
        "    def send_400_response(self, msg: str) -> None:",
        "    def _send_400_response_unused(self, msg: str) -> None:",
        "nosniff: uvicorn's own plain-text 400 answers a request h11 cannot parse (no nosniff)",
        (_JUNK + "test_every_answer_serve_writes_itself_carries_nosniff_too",),
    ),
    M(
        ("goldfive_core/server/run.py",),
        '        ws="none",\n',
        "",
        "nosniff: a WebSocket upgrade is answered by the WebSocket library (403 without nosniff)",
        (_JUNK + "test_every_answer_serve_writes_itself_carries_nosniff_too",),
    ),
    # -- text that is not text (a lone surrogate) refused in words, before anything is done with it --------------
    M(
        ("goldfive_core/reporting.py",),
        "        if not_text:  # a lone surrogate",
        "        if False:  # a lone surrogate",
        "not text: a reporting tool's argument holding a lone surrogate crashes the run instead of an error",
        NOT_TEXT,
    ),
    M(
        ("goldfive_core/control.py",),
        '    not_text = text_problem(msg.payload, what="payload")\n    if not_text:',
        '    not_text = text_problem(msg.payload, what="payload")\n    if False:',
        "not text: a control payload holding a lone surrogate reaches its handler (fails half-way)",
        NOT_TEXT,
    ),
    M(
        ("goldfive_core/limits.py",),
        "        elif type(item) is dict or isinstance(item, Mapping):\n            if id(item) in seen:",
        "        elif False:\n            if id(item) in seen:",
        "not text: a lone surrogate nested in a mapping (a payload's field, an edit) is not seen",
        NOT_TEXT,
    ),
    M(
        ("goldfive_core/limits.py",),
        "                if type(child) is not str or not child.isascii():",
        "                if type(child) is not str:",
        "not text: a lone surrogate in a mapping's string value (a payload's reason, a steer) is not seen",
        NOT_TEXT,
    ),
    M(
        ("goldfive_core/limits.py",),
        "            if type(key) is not str or type(child) is not str or not key.isascii() or not child.isascii():",
        "            if type(key) is not str or type(child) is not str:",
        "not text: a flat payload of strings is taken as text whatever its strings hold",
        NOT_TEXT,
    ),
    M(
        ("goldfive_core/limits.py",),
        "            if not item.isascii() and not _is_text(item):",
        "            if False:",
        "not text: a string holding a lone surrogate passes as text",
        NOT_TEXT,
    ),
    M(
        ("goldfive_core/control.py",),
        'not_text = "" if msg.id.isascii() else text_problem(msg.id, what="control message id")',
        'not_text = ""',
        "not text: a control message id holding a lone surrogate is taken (its ack cannot be written)",
        NOT_TEXT,
    ),
)


@dataclasses.dataclass
class Result:
    mutation: Mutation
    verdict: str  # killed | survived | not applied
    where: str = ""
    detail: str = ""
    seconds: float = 0.0


def _tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    )
    return [line for line in out.stdout.splitlines() if line]


def _scratch_copy() -> Path:
    root = Path(tempfile.mkdtemp(prefix="goldfive-mutation-"))
    for rel in _tracked_files():
        src = REPO / rel
        if src.is_file():
            dst = root / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return root


def _env() -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("GOLDFIVE_TEST_PG_DSN", "CI", "GOLDFIVE_DSN", "GOLDFIVE_DB")
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _pytest(root: Path, tests: Sequence[str], timeout: float) -> tuple[bool, str]:
    """(passed, tail of the output)."""
    present = [t for t in tests if (root / t.split("::")[0]).exists()]
    if not present:
        return True, "no tests found"
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header", *present]
    try:
        proc = subprocess.run(cmd, cwd=root, env=_env(), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:g}s"
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    # pytest's summary line names the test ("FAILED tests/x.py::t - ..."); a captured log line starts with "ERROR" too.
    failed = next((line for line in lines if line.startswith(("FAILED tests/", "ERROR tests/"))), "")
    return proc.returncode == 0, failed or (lines[-1] if lines else proc.stderr[-300:])


def _locate(root: Path, mutation: Mutation) -> tuple[Path | None, str, tuple[str, str]]:
    """The file holding one of the mutation's snippets exactly once, its name, and that (original, replacement)."""
    counts = []
    for original, replacement in mutation.variants():
        for rel in mutation.files:
            path = root / rel
            if not path.exists():
                continue
            n = path.read_text(encoding="utf-8").count(original)
            if n == 1:
                return path, rel, (original, replacement)
            if n > 1:
                counts.append(f"{rel}: {n} places")
    why = "; ".join(counts) if counts else "snippet not found in " + ", ".join(mutation.files)
    return None, why, ("", "")


def run(mutations: Sequence[Mutation], timeout: float) -> list[Result]:
    root = _scratch_copy()
    try:
        suites = sorted({t for m in mutations for t in m.tests})
        ok, tail = _pytest(root, suites, timeout * 4)
        if not ok and tail.startswith(("FAILED ", "ERROR ")):
            # On a loaded machine one slow test can fail once: run it alone again before giving up (a test that
            # fails alone too is a real failure; the unmutated tree must pass for the kills to mean anything).
            flaky = tail.split()[1].split(" - ")[0]
            print(f"the unmutated subset failed at {flaky}; running it alone again", flush=True)
            alone, tail_alone = _pytest(root, [flaky], timeout * 2)
            ok, tail = _pytest(root, suites, timeout * 4) if alone else (False, tail_alone)
        if not ok:
            raise SystemExit(f"the unmutated test subset fails; fix that first: {tail}")
        results = []
        for i, mutation in enumerate(mutations, 1):
            path, where, (snippet, replacement) = _locate(root, mutation)
            if path is None:
                results.append(Result(mutation, "not applied", detail=where))
                print(f"[{i}/{len(mutations)}] NOT APPLIED  {mutation.description} ({where})", flush=True)
                continue
            original = path.read_text(encoding="utf-8")
            path.write_text(original.replace(snippet, replacement), encoding="utf-8")
            started = time.monotonic()
            try:
                passed, tail = _pytest(root, mutation.tests, timeout)
            finally:
                path.write_text(original, encoding="utf-8")
            verdict = "survived" if passed else "killed"
            seconds = time.monotonic() - started
            results.append(Result(mutation, verdict, where, tail, seconds))
            print(
                f"[{i}/{len(mutations)}] {verdict.upper():8}  {mutation.description}  ({where}, {seconds:.0f} s)",
                flush=True,
            )
        return results
    finally:
        shutil.rmtree(root, ignore_errors=True)


FAIL_UNDER = 90.0
"""The lowest overall score (killed / non-equivalent applied, in %) ``make mutation`` accepts."""


def _module(result: Result) -> str:
    """The file a result counts for: where its line was mutated (the first file it names, when not applied)."""
    return result.where or result.mutation.files[0]


def _score(killed: int, scored: int) -> str:
    return f"{100.0 * killed / scored:5.1f} %" if scored else "    -  "


def score_table(results: Sequence[Result]) -> list[str]:
    """One line per module: killed / applied (non-equivalent), equivalent, survived, not applied, score."""
    rows: dict[str, list[int]] = {}
    for r in results:
        row = rows.setdefault(_module(r), [0, 0, 0, 0, 0])  # killed, scored, equivalent, survived, not applied
        if r.verdict == "not applied":
            row[4] += 1
        elif r.mutation.equivalent and r.verdict == "survived":
            row[2] += 1
        else:
            row[1] += 1
            row[0 if r.verdict == "killed" else 3] += 1
    width = max([len("module"), *(len(m) for m in rows)])
    lines = [f"{'module':<{width}}  killed/applied  equivalent  survived  not applied   score"]
    totals = [0, 0, 0, 0, 0]
    for module in sorted(rows):
        row = rows[module]
        totals = [a + b for a, b in zip(totals, row, strict=True)]
        lines.append(_table_line(module, width, row))
    lines.append(_table_line("total", width, totals))
    return lines


def _table_line(name: str, width: int, row: Sequence[int]) -> str:
    killed, scored, equivalent, survived, missing = row
    return (
        f"{name:<{width}}  {f'{killed}/{scored}':>14}  {equivalent:>10}  {survived:>8}  {missing:>11}  "
        f"{_score(killed, scored)}"
    )


def report(results: Sequence[Result], *, fail_under: float = FAIL_UNDER) -> int:
    """Print the score table, the survivors, the equivalents and what could not be applied; the exit status.

    Non-zero when the overall score is under ``fail_under`` or a mutation no longer applies (its snippet
    moved: a mutation that silently stops applying is coverage lost without a word).
    """
    applied = [r for r in results if r.verdict != "not applied"]
    equivalent = [r for r in applied if r.mutation.equivalent and r.verdict == "survived"]
    scored = [r for r in applied if r not in equivalent]
    killed = [r for r in scored if r.verdict == "killed"]
    survived = [r for r in scored if r.verdict == "survived"]
    missing = [r for r in results if r.verdict == "not applied"]
    score = 100.0 * len(killed) / len(scored) if scored else 0.0
    all_killed = len([r for r in applied if r.verdict == "killed"])
    print()
    for line in score_table(results):
        print(line)
    print()
    print(
        f"mutation score: {len(killed)}/{len(scored)} killed ({score:.1f} %) excluding {len(equivalent)} equivalent; "
        f"{all_killed}/{len(applied)} counting them; {len(missing)} not applied"
    )
    for r in survived:
        print(f"  SURVIVED     {r.where}: {r.mutation.description}  [{', '.join(r.mutation.tests)}]")
    for r in equivalent:
        print(f"  EQUIVALENT   {r.where}: {r.mutation.description} — {r.mutation.equivalent}")
    for r in missing:
        print(f"  NOT APPLIED  {r.mutation.description}: {r.detail}")
    failed = []
    if scored and score < fail_under:
        failed.append(f"the score {score:.1f} % is under {fail_under:g} %")
    if missing:
        failed.append(f"{len(missing)} mutations no longer apply (re-target their snippets)")
    if failed:
        print("FAILED: " + "; ".join(failed))
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", help="only mutations whose description or file contains this text")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutation's test run")
    parser.add_argument(
        "--fail-under", type=float, default=FAIL_UNDER, help="exit non-zero under this overall score (%%)"
    )
    parser.add_argument(
        "--locate", metavar="ROOT", nargs="?", const=str(REPO), help="only say where each snippet is (no tests)"
    )
    parser.add_argument(
        "--part",
        metavar="FIRST:LAST",
        help="only the chosen mutations FIRST to LAST (1-based, as --list numbers them; either may be left out), "
        "to split one run across worktrees or machines",
    )
    args = parser.parse_args(argv)
    chosen = [
        m for m in MUTATIONS if not args.only or args.only in m.description or any(args.only in f for f in m.files)
    ]
    if args.part:
        first, _, last = args.part.partition(":")
        chosen = chosen[max(int(first or 1) - 1, 0) : int(last) if last else None]
    if args.locate:
        for m in chosen:
            path, where, _ = _locate(Path(args.locate), m)
            print(f"{'ok         ' if path else 'NOT FOUND  '}{where}: {m.description}")
        return 0
    if args.list:
        for m in chosen:
            print(f"{' | '.join(m.files)}: {m.description}  [{', '.join(m.tests)}]")
        return 0
    return report(run(chosen, args.timeout), fail_under=args.fail_under)


if __name__ == "__main__":
    sys.exit(main())
