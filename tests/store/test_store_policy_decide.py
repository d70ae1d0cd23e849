"""Who may decide is enforced in decide() for every channel: a request's policy rule names its approvers,
its barred principals and its expiry; a refused decision changes nothing and the request stays pending."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from store_support import Backend, make_event

from goldfive_core import cli
from goldfive_core._util import args_digest, canonical_json
from goldfive_core.approvals import ApprovalStatus, Principal
from goldfive_core.control import ControlAck, ControlKind, ControlMessage
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.policy import Ask, Escalation, Policy, PolicyAuthority, PolicyCall, Rule, parse_duration
from goldfive_core.store import DecideVerdict, Store, decide
from goldfive_core.store.grants import DECIDERS_STREAM

PAYMENTS = Policy(
    [
        Rule(
            name="large transfers",
            tool="transfer_funds",
            when="args.amount > 10000",
            action=Ask(
                approvers=("user:ana", "user:cy", "role:finance"),
                barred=("starter", "agent"),
                escalate=Escalation(after_ms=parse_duration("30m"), to=("user:dee",)),
                expires_ms=parse_duration("4h"),
            ),
        )
    ]
)
POLICY_TOML = """
[[rule]]
name = "large transfers"
tool = "transfer_funds"
when = "args.amount > 10000"
action = "ask"
approvers = ["user:cy"]
"""


DIGEST = args_digest("transfer_funds", {"amount": 20_000})
"""The digest of the call every request here holds (a deciding side with a policy checks it against the call)."""


def _ask(store: Store, target: str, *, requested_at_ms: int = 0, **extra: str) -> None:
    args = {"amount": 20_000}
    verdict = PAYMENTS.evaluate(PolicyCall(tool="transfer_funds", args=args))
    call = {"tool_name": "transfer_funds", "args_json": canonical_json(args)}
    metadata = {**call, "agent_name": "pay-agent", "started_by": "bo", **verdict.metadata()}
    metadata.update(extra)
    request = events_pb2.ApprovalRequested(
        target_id=target, kind="tool", prompt="pay?", args_digest=DIGEST, timeout_ms=60_000, metadata=metadata
    )
    event = make_event("run-a", 0, request)
    event.emitted_at.FromMilliseconds(requested_at_ms or time.time_ns() // 1_000_000)
    # No RunStarted: the run is not live, so an allowed decision is recorded in the store.
    store.append_events([event], pid=1, host="h")


def _status(store: Store, target: str) -> ApprovalStatus:
    return ApprovalStatus(store.approvals_for(target)[0].status)


def _refusals(store: Store) -> list[tuple[str, str, str, str, str]]:
    """The audited refusals: (request's run, target, who tried, approve/reject, why)."""
    out = []
    for row in store.audit_rows(run_id=DECIDERS_STREAM):
        refused = row.event().decision_refused
        assert row.kind == "decision_refused"
        out.append((refused.request_run_id, refused.target_id, refused.decided_by, refused.decision, refused.reason))
    return out


REFUSED = [
    ("bo", "'bo' started this run and may not approve it"),
    ("pay-agent", "'pay-agent' is the agent that asks; it may not approve itself"),
    ("mallory", "'mallory' is not among the approvers (user:ana, user:cy, role:finance)"),
    ("dee", "'dee' is not among the approvers"),  # the escalation group only after 30 minutes
]


@pytest.mark.parametrize(("who", "reason"), REFUSED)
@pytest.mark.parametrize("approve", [True, False])
def test_a_decider_the_rule_does_not_allow_is_refused_and_nothing_changes(
    backend: Backend, who: str, reason: str, approve: bool
) -> None:
    store = backend.open()
    _ask(store, "pay-1")
    result = decide(store, "pay-1", approve=approve, principal=Principal(name=who, channel="api"), reason="x")
    assert result.verdict is DecideVerdict.REFUSED and not result.ok
    assert reason in result.detail and "the request stays pending" in result.detail
    assert result.refusal == "forbidden"
    assert _status(store, "pay-1") is ApprovalStatus.PENDING
    # On the audit log: who tried, what, and why it was refused; the chain still verifies.
    [(run, target, by, what, why)] = _refusals(store)
    assert (run, target, by, what) == ("run-a", "pay-1", who, "approve" if approve else "reject")
    assert reason in why
    assert store.verify_audit().ok
    allowed = decide(store, "pay-1", approve=approve, principal=Principal(name="ana", channel="api"), reason="x")
    assert allowed.verdict is DecideVerdict.RECORDED
    assert _status(store, "pay-1") is (ApprovalStatus.GRANTED if approve else ApprovalStatus.REJECTED)


def test_a_decision_after_the_rules_deadline_is_refused(backend: Backend) -> None:
    store = backend.open()
    _ask(store, "pay-1", requested_at_ms=1_000)  # asked long ago; the rule's requests expire after 4h
    result = decide(store, "pay-1", approve=True, principal=Principal(name="ana", channel="cli"))
    assert result.verdict is DecideVerdict.REFUSED
    assert "'pay-1' expired 4h after it was asked" in result.detail
    assert result.refusal == "expired"
    assert _status(store, "pay-1") is ApprovalStatus.PENDING
    [(_, target, by, _, why)] = _refusals(store)
    assert (target, by) == ("pay-1", "ana") and "expired 4h after it was asked" in why


def test_a_decision_on_a_request_that_expired_with_its_wait_is_refused_and_audited(backend: Backend) -> None:
    store = backend.open()
    _ask(store, "pay-1")
    timed_out = events_pb2.ApprovalTimedOut(target_id="pay-1", timeout_ms=60_000, still_open=False, detail="timeout")
    store.append_events([make_event("run-a", 1, timed_out)], pid=1, host="h")
    result = decide(store, "pay-1", approve=True, principal=Principal(name="ana", channel="web"))
    assert result.verdict is DecideVerdict.REFUSED and result.refusal == "expired"
    assert "'pay-1' is expired" in result.detail
    assert [(t, by) for _, t, by, _, _ in _refusals(store)] == [("pay-1", "ana")]
    assert _status(store, "pay-1") is ApprovalStatus.EXPIRED


def test_an_allowed_decision_and_an_already_decided_one_are_not_refusals(backend: Backend) -> None:
    store = backend.open()
    _ask(store, "pay-1")
    assert decide(store, "pay-1", approve=True, principal=Principal(name="ana", channel="cli")).ok
    again = decide(store, "pay-1", approve=True, principal=Principal(name="cy", channel="cli"))
    assert again.verdict is DecideVerdict.REFUSED and again.refusal == ""
    assert _refusals(store) == []


def test_the_escalation_group_may_answer_once_the_time_has_come(backend: Backend) -> None:
    store = backend.open()
    _ask(store, "pay-1", requested_at_ms=1_000)
    clock_45m_later = 1_000 + parse_duration("45m")
    authority = PolicyAuthority(roles={"ana": ["finance"]}, clock=lambda: clock_45m_later)
    dee = Principal(name="dee", channel="web")
    assert decide(store, "pay-1", approve=True, principal=dee, authority=authority).verdict is DecideVerdict.RECORDED


def test_the_cli_enforces_the_rule_and_shows_it(
    backend: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in backend.env().items():
        if key.startswith("GOLDFIVE_"):
            monkeypatch.setenv(key, value)
    store_args = ["--db", backend.location] if backend.name == "sqlite" else []
    store = backend.open()
    _ask(store, "pay-1")

    assert cli.main([*store_args, "show", "pay-1"]) == 0
    shown = capsys.readouterr().out
    assert "policy     rule 'large transfers' (ask) · approvers user:ana,user:cy,role:finance" in shown
    assert "barred starter,agent · escalates after 30m to user:dee · expires 4h after asked" in shown

    with pytest.raises(SystemExit) as refused:
        cli.main([*store_args, "approve", "pay-1", "--by", "bo"])
    assert refused.value.code == cli.EXIT_FAILURE
    assert "'bo' started this run and may not approve it" in capsys.readouterr().err

    # The deciding side's own policy wins over what the agent wrote: here only cy may decide.
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY_TOML)
    with pytest.raises(SystemExit):
        cli.main([*store_args, "approve", "pay-1", "--by", "ana", "--policy", str(policy)])
    assert "'ana' is not among the approvers (user:cy)" in capsys.readouterr().err
    monkeypatch.setenv("GOLDFIVE_POLICY", str(policy))
    assert cli.main([*store_args, "approve", "pay-1", "--by", "cy"]) == 0
    assert _status(store, "pay-1") is ApprovalStatus.GRANTED

    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\nname = "x"\naction = "allow"\nquorum = 2\n')
    _ask(store, "pay-2")
    with pytest.raises(SystemExit) as usage:
        cli.main([*store_args, "reject", "pay-2", "--reason", "no", "--by", "cy", "--policy", str(bad)])
    assert usage.value.code == cli.EXIT_USAGE
    assert f"bad policy: {bad}:4: rule 'x': 'quorum' applies to ask rules only" in capsys.readouterr().err
    assert _status(store, "pay-2") is ApprovalStatus.PENDING


def test_a_quorum_is_never_decided_by_one_recorded_decision(backend: Backend) -> None:
    store = backend.open()
    _ask(store, "pay-1", policy_quorum="2")
    result = decide(store, "pay-1", approve=True, principal=Principal(name="ana", channel="cli"))
    assert result.verdict is DecideVerdict.REFUSED
    assert "'pay-1' needs 2 distinct approvers and its run is not running" in result.detail
    assert _status(store, "pay-1") is ApprovalStatus.PENDING


def _vote(store: Store, target: str, by: str, data: dict[str, object]) -> None:
    """A live run's ack of one quorum vote, as the store's inbox records it."""
    msg = ControlMessage(ControlKind.APPROVE, {"target_id": target, "run_id": "run-a", "decided_by": by})
    ident = store.post_control(msg, run_id="run-a")
    assert store.claim_controls([ident], endpoint="agent") == [ident]
    store.ack_controls([(ident, ControlAck.success(msg.id, "counted", data=data))])


def test_an_edit_that_restarts_a_quorum_puts_its_arguments_on_the_record(
    backend: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in backend.env().items():
        if key.startswith("GOLDFIVE_"):
            monkeypatch.setenv(key, value)
    store_args = ["--db", backend.location] if backend.name == "sqlite" else []
    store = backend.open()
    _ask(store, "pay-1", policy_quorum="2", args_json='{"amount":20000}')
    [before] = store.approvals_for("pay-1")
    assert before.args_json == '{"amount":20000}'
    assert (before.original_args_json, before.original_args_digest) == ("", "")

    edited = {"amount": 15_000}
    _vote(store, "pay-1", "ana", {"decision": "counted", "quorum_progress": "1 of 2: ana"})
    assert store.approvals_for("pay-1")[0].args_digest == DIGEST  # a plain vote changes no arguments
    restart = {"decision": "counted", "quorum_progress": "1 of 2: ana", "args_digest": "sha256:new", "args": edited}
    _vote(store, "pay-1", "ana", restart)
    [row] = store.approvals_for("pay-1")
    assert (row.args_json, row.args_digest) == ('{"amount":15000}', "sha256:new")
    assert (row.original_args_json, row.original_args_digest) == (before.args_json, DIGEST)
    assert row.quorum_progress == "1 of 2: ana" and row.status is ApprovalStatus.PENDING

    # A second edit keeps the call's own arguments as the original; a vote from outside now defaults to the
    # edited digest, and one on the call's own digest is refused as stale by the run (tests/server).
    _vote(store, "pay-1", "bo", {**restart, "args_digest": "sha256:newer", "args": {"amount": 12_000}})
    [row] = store.approvals_for("pay-1")
    assert (row.args_digest, row.original_args_digest) == ("sha256:newer", DIGEST)
    assert cli.main([*store_args, "show", "pay-1"]) == 0
    shown = capsys.readouterr().out
    assert 'args       {"amount":12000}' in shown and "digest     sha256:newer" in shown
    assert f"originally requested  {before.args_json}  (digest {DIGEST};" in shown

    # The call is asked again (a replay): a new request, with its own arguments and no original.
    _ask(store, "pay-1", policy_quorum="2", args_json='{"amount":20000}')
    [again] = store.approvals_for("pay-1")
    assert (again.args_digest, again.original_args_json, again.original_args_digest) == (DIGEST, "", "")
