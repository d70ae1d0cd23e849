"""Notifications through the store's outbox: webhook, Slack and mail, retried, once per event, with follow-ups."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator
from email import message_from_bytes
from typing import Any

import pytest
from notify_support import Receiver, SmtpInbox, receiver
from store_support import PYTHON, Backend, make_event

from goldfive_core._util import args_digest, canonical_json
from goldfive_core.errors import ConfigError
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.policy import PolicyAuthority, parse_policy
from goldfive_core.server.notify import (
    EmailTarget,
    Notifier,
    NotifyConfig,
    RetryPolicy,
    SlackTarget,
    WebhookTarget,
    load_notify_config,
    verify_webhook,
)
from goldfive_core.store import Store
from goldfive_core.store.outbox import outbox_rows, outbox_summary

SECRET = "s3cret-for-tests"
HOSTILE_PROMPT = "pay <https://evil.example|the invoice> \x1b]0;owned\x07 now"


def requested(
    run: str, seq: int, target: str, *, tool: str = "transfer_funds", rule: str = "", approvers: str = ""
) -> events_pb2.Event:
    meta = {"tool_name": tool, "args_json": json.dumps({"to": "bob", "amount": 12000})}
    if rule:  # as a policy's ask rule writes it on the request
        meta["policy_rule"] = rule
    if approvers:
        meta["policy_approvers"] = approvers
    req = events_pb2.ApprovalRequested(target_id=target, kind="tool", prompt=HOSTILE_PROMPT, metadata=meta)
    req.expires_at.FromMilliseconds(1_700_000_600_000)
    return make_event(run, seq, req)


def granted(run: str, seq: int, target: str, by: str = "ana") -> events_pb2.Event:
    return make_event(run, seq, events_pb2.ApprovalGranted(target_id=target, decided_by=by, detail="ok"))


def append(store: Store, *events: events_pb2.Event) -> None:
    store.append_events(list(events), pid=1, host="agent-host")


def webhook(url: str, name: str = "ops", **kw: Any) -> WebhookTarget:
    return WebhookTarget(name=name, url=url + "/hook", secret=SECRET, **kw)


def config(*targets: Any, retry: RetryPolicy | None = None) -> NotifyConfig:
    return NotifyConfig(public_url="https://gf.example", targets=targets, retry=retry or RetryPolicy(base_s=0.0))


@pytest.fixture
def rec() -> Iterator[Receiver]:
    with receiver() as r:
        yield r


async def drain(notifier: Notifier, rounds: int = 3) -> int:
    sent = 0
    for _ in range(rounds):
        sent += await notifier.step()
    return sent


async def test_a_request_is_sent_signed_with_a_link_and_answered_when_decided(backend: Backend, rec: Receiver) -> None:
    store = backend.open()
    notifier = Notifier(store, config(webhook(rec.url)), start_at=0)
    append(store, make_event("run-1", 0, events_pb2.RunStarted(adapter="adk")), requested("run-1", 1, "call-1"))
    assert await drain(notifier) == 1
    first = rec.requests[0]
    assert verify_webhook(SECRET, first.body, first.headers)
    assert not verify_webhook("other-secret", first.body, first.headers)
    body = first.json()
    assert body["link"] == "https://gf.example/#/approvals/call-1?run=run-1"
    assert body["event"]["approval_requested"]["target_id"] == "call-1"
    assert body["notice"]["tool"] == "transfer_funds"
    assert "\x1b" not in body["notice"]["prompt"] and "\\x1b" in body["notice"]["prompt"]
    assert first.headers["Idempotency-Key"].endswith(":webhook:ops")
    assert first.headers["Goldfive-Event"] == "approval_requested"

    append(store, granted("run-1", 2, "call-1"))
    assert await drain(notifier) == 1
    follow = rec.requests[1].json()["notice"]
    assert follow["kind"] == "approval_granted" and follow["decided_by"] == "ana"
    assert follow["title"].startswith("transfer_funds: approved by ana at ")
    assert outbox_summary(store) == {"webhook:ops": {"pending": 0, "sent": 2, "failed": 0}}


async def test_a_tampered_or_replayed_webhook_does_not_verify(rec: Receiver, sqlite_backend: Backend) -> None:
    store = sqlite_backend.open()
    notifier = Notifier(store, config(webhook(rec.url)), start_at=0)
    append(store, requested("run-1", 0, "call-1"))
    await drain(notifier)
    got = rec.requests[0]
    assert not verify_webhook(SECRET, got.body.replace(b"12000", b"12"), got.headers)
    later = int(got.headers["Goldfive-Timestamp"]) + 3600
    assert not verify_webhook(SECRET, got.body, got.headers, now=later)
    assert not verify_webhook(SECRET, got.body, {"Goldfive-Signature": got.headers["Goldfive-Signature"]})


async def test_a_receiver_that_is_down_gets_the_notice_later_and_a_dead_one_is_marked_failed(
    backend: Backend, rec: Receiver
) -> None:
    store = backend.open()
    with receiver() as dead:
        dead.fail_next = [500] * 10
        notifier = Notifier(
            store,
            config(webhook(rec.url, "ops"), webhook(dead.url, "dead"), retry=RetryPolicy(max_attempts=3, base_s=0.0)),
            start_at=0,
        )
        rec.fail_next = [503, 502]
        append(store, requested("run-1", 0, "call-1"))
        assert await drain(notifier, rounds=5) == 1
    assert len(rec.requests) == 1  # delivered on the third try, once
    summary = outbox_summary(store)
    assert summary["webhook:ops"] == {"pending": 0, "sent": 1, "failed": 0}
    assert summary["webhook:dead"] == {"pending": 0, "sent": 0, "failed": 1}
    (failed,) = outbox_rows(store, status="failed")
    assert failed.attempts == 3 and failed.last_error == "webhook:dead: HTTP 500"
    assert dead.url not in failed.last_error


async def test_backoff_waits_between_tries(sqlite_backend: Backend, rec: Receiver) -> None:
    store = sqlite_backend.open()
    notifier = Notifier(store, config(webhook(rec.url), retry=RetryPolicy(base_s=60.0)), start_at=0, jitter=lambda: 0.5)
    rec.fail_next = [500]
    append(store, requested("run-1", 0, "call-1"))
    assert await drain(notifier) == 0  # failed once; the next try is a minute away
    (row,) = outbox_rows(store)
    assert row.status == "pending" and row.attempts == 1
    assert 55_000 < row.next_at_ms - int(time.time() * 1000) <= 60_000


async def test_a_restarted_notifier_sends_what_was_enqueued_and_never_twice(backend: Backend, rec: Receiver) -> None:
    store = backend.open()
    first = Notifier(store, config(webhook(rec.url)), start_at=0)
    append(store, requested("run-1", 0, "call-1"), requested("run-1", 1, "call-2"))
    await asyncio.to_thread(first.scan)  # enqueued, then the process died before delivering
    assert rec.requests == []
    restarted = Notifier(backend.open(), config(webhook(rec.url)))
    assert await drain(restarted) == 2
    assert await drain(Notifier(backend.open(), config(webhook(rec.url)))) == 0
    assert sorted(r.json()["notice"]["target_id"] for r in rec.requests) == ["call-1", "call-2"]


async def test_two_serve_processes_on_one_store_send_each_notice_once(backend: Backend, rec: Receiver) -> None:
    one = Notifier(backend.open(), config(webhook(rec.url)), start_at=0)
    two = Notifier(backend.open(), config(webhook(rec.url)), start_at=0)
    store = backend.open()
    append(store, *(requested("run-1", i, f"call-{i}") for i in range(20)))
    sent = await asyncio.gather(drain(one), drain(two))
    assert sum(sent) == 20
    keys = [r.headers["Idempotency-Key"] for r in rec.requests]
    assert len(keys) == len(set(keys)) == 20


async def test_filters_pick_channels_and_follow_ups_go_only_where_the_request_went(
    sqlite_backend: Backend, rec: Receiver
) -> None:
    store = sqlite_backend.open()
    targets = (
        webhook(rec.url, "money", tools=("transfer_*",)),
        webhook(rec.url, "big", rules=("large transfers",)),
        webhook(rec.url, "finance", roles=("finance",)),
    )
    notifier = Notifier(store, config(*targets), start_at=0)
    append(
        store,
        requested("run-1", 0, "call-1", rule="large transfers", approvers="role:finance,ana"),
        requested("run-1", 1, "call-2", tool="send_mail", approvers="role:it"),
        granted("run-1", 2, "call-2"),
    )
    await drain(notifier)
    seen = sorted((r.headers["Idempotency-Key"].split(":")[-1], r.json()["notice"]["target_id"]) for r in rec.requests)
    assert seen == [("big", "call-1"), ("finance", "call-1"), ("money", "call-1")]


async def test_an_escalation_is_sent_with_a_link_to_the_run(sqlite_backend: Backend, rec: Receiver) -> None:
    store = sqlite_backend.open()
    notifier = Notifier(store, config(webhook(rec.url)), start_at=0)
    loop = events_pb2.DriftDetected(drift_id="d1", kind=26, severity=3, detail="same call 5 times", ladder_level=4)
    human = events_pb2.DriftDetected(
        drift_id="d2", kind=37, severity=3, detail="escalated from LOOPING_TOOL_CALL: same call", ladder_level=4
    )
    append(store, make_event("run-9", 0, loop), make_event("run-9", 1, human))
    assert await drain(notifier) == 1
    notice = rec.requests[0].json()["notice"]
    assert notice["kind"] == "escalation" and notice["link"] == "https://gf.example/#/runs/run-9"


async def test_slack_incoming_webhook_has_a_link_button_and_no_approve_button(
    sqlite_backend: Backend, rec: Receiver
) -> None:
    store = sqlite_backend.open()
    notifier = Notifier(store, config(SlackTarget(name="fin", webhook_url=rec.url + "/slack")), start_at=0)
    append(store, requested("run-1", 0, "call-1", rule="large transfers"))
    await drain(notifier)
    message = rec.requests[0].json()
    (actions,) = [b for b in message["blocks"] if b["type"] == "actions"]
    (button,) = actions["elements"]
    assert button["url"] == "https://gf.example/#/approvals/call-1?run=run-1" and "action_id" not in button
    text = json.dumps(message["blocks"])
    assert "*Rule:* large transfers" in text and "transfer_funds" in text and "Expires" in text
    assert "<https://evil.example|" not in text and "&lt;https://evil.example|the invoice&gt;" in text


async def test_slack_bot_updates_the_request_message_and_replies_in_its_thread(
    sqlite_backend: Backend, rec: Receiver
) -> None:
    rec.slack_api = True
    store = sqlite_backend.open()
    slack = SlackTarget(name="fin", bot_token="xoxb-test", channel_id="C1", api_url=rec.url + "/api")
    notifier = Notifier(store, config(slack), start_at=0)
    append(store, requested("run-1", 0, "call-1"))
    await drain(notifier)
    append(store, granted("run-1", 1, "call-1"))
    await drain(notifier)
    paths = [r.path for r in rec.requests]
    assert paths == ["/api/chat.postMessage", "/api/chat.update", "/api/chat.postMessage"]
    assert all(r.headers["Authorization"] == "Bearer xoxb-test" for r in rec.requests)
    _posted, updated, reply = (r.json() for r in rec.requests)
    assert updated["ts"] == reply["thread_ts"] == "1700000000.000001" and updated["channel"] == "C1"
    assert "approved by ana" in updated["text"] and "actions" not in json.dumps(updated["blocks"])


async def test_email_is_sent_over_smtp_and_the_follow_up_answers_it(sqlite_backend: Backend) -> None:
    async with SmtpInbox() as smtp:
        mail = EmailTarget(
            name="approvers",
            smtp_host="127.0.0.1",
            smtp_port=smtp.port,
            starttls=False,
            sender="gf@example.com",
            to=("ana@example.com",),
        )
        store = sqlite_backend.open()
        notifier = Notifier(store, config(mail), start_at=0)
        append(store, requested("run-1", 0, "call-1"), granted("run-1", 1, "call-1", by="bo"))
        await drain(notifier, rounds=4)
    first, follow = (message_from_bytes(raw) for raw in smtp.messages)
    assert first["Subject"] == "[goldfive] Approval needed: transfer_funds"
    assert first["To"] == "ana@example.com"
    text = first.get_payload()
    assert isinstance(text, str)
    assert "https://gf.example/#/approvals/call-1?run=run-1" in text and "\x1b" not in text.replace("\\x1b", "")
    assert follow["In-Reply-To"] == first["Message-ID"]
    assert "approved by bo" in follow["Subject"]


def test_a_config_file_reads_secrets_from_the_environment_and_refuses_mistakes(tmp_path: Any) -> None:
    path = tmp_path / "notify.toml"
    path.write_text(
        'public_url = "https://gf.example"\n[[webhook]]\nname = "ops"\nurl = "https://h.example/x"\n'
        'secret_env = "HOOK_SECRET"\n[[slack]]\nname = "fin"\nwebhook_url_env = "SLACK_URL"\n'
    )
    cfg = load_notify_config(path, env={"HOOK_SECRET": "abc", "SLACK_URL": "https://hooks.slack.example/T/B/C"})
    assert [t.channel for t in cfg.targets] == ["webhook:ops", "slack:fin"]
    assert "abc" not in repr(cfg) and "hooks.slack.example" not in repr(cfg)
    with pytest.raises(ConfigError, match="HOOK_SECRET"):
        load_notify_config(path, env={"SLACK_URL": "https://x.example"})
    path.write_text('[[webhook]]\nname = "ops"\nurl = "https://h.example"\nsecret = "x"\nretries = 3\n')
    with pytest.raises(ConfigError, match=r"notify.toml: \[\[webhook\]\] 'ops': unknown key\(s\) retries"):
        load_notify_config(path, env={})
    path.write_text('[[slack]]\nname = "a"\nbot_token = "x"\n')
    with pytest.raises(ConfigError, match="needs the 'channel'"):
        load_notify_config(path, env={})


async def test_goldfive_notify_status_shows_counts_and_failures(sqlite_backend: Backend, rec: Receiver) -> None:
    store = sqlite_backend.open()
    rec.fail_next = [500, 500]
    notifier = Notifier(store, config(webhook(rec.url), retry=RetryPolicy(max_attempts=2, base_s=0.0)), start_at=0)
    append(store, requested("run-1", 0, "call-1"))
    await drain(notifier)  # two tries, both refused: failed for good
    append(store, requested("run-1", 1, "call-2"))
    await drain(notifier)
    result = await asyncio.to_thread(
        subprocess.run,
        [PYTHON, "-m", "goldfive_core.cli", "notify", "status", "--json"],
        env=sqlite_backend.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["channels"] == {"webhook:ops": {"pending": 0, "sent": 1, "failed": 1}}
    (failure,) = data["failures"]
    assert failure["attempts"] == 2 and failure["error"] == "webhook:ops: HTTP 500" and failure["target_id"] == "call-1"


SERVER_RULES = """
[[rule]]
name = "large transfers"
tool = "transfer_funds"
when = "args.amount > 10000"
action = "ask"
approvers = ["role:finance", "user:cfo"]

[[rule]]
name = "no crypto"
tool = "buy_crypto"
action = "deny"
reason = "never"
"""


def asked_by_agent(run: str, seq: int, target: str, tool: str, args: dict[str, Any], **meta: str) -> events_pb2.Event:
    """A tool call's request as an agent's gate writes it (digest and all), with what its own rule wrote."""
    req = events_pb2.ApprovalRequested(
        target_id=target,
        kind="tool",
        prompt="pay?",
        metadata={"tool_name": tool, "args_json": canonical_json(args), **meta},
        args_digest=args_digest(tool, args),
        request_id=f"req-{target}",
    )
    return make_event(run, seq, req)


async def test_with_the_servers_policy_a_notice_names_its_rule_and_goes_to_who_may_decide_under_it(
    sqlite_backend: Backend, rec: Receiver
) -> None:
    """The agent's request names "quick ones" and lets role:it answer; the server's own rule for the call is "large
    transfers" (role:finance, cfo). The notice says the server's rule and its approvers (and that the agent named
    another), goes to the channels of finance and of "large transfers", never to those of it or "quick ones"; the
    follow-up goes where the request went. A call the server's rule denies names that rule and nobody who may
    approve. Without the server's policy the agent's word routes, as before."""
    targets = (
        webhook(rec.url, "finance", roles=("finance",)),
        webhook(rec.url, "it", roles=("it",)),
        webhook(rec.url, "big", rules=("large transfers",)),
        webhook(rec.url, "quick", rules=("quick ones",)),
        webhook(rec.url, "all"),
    )
    agents_word = {"policy_rule": "quick ones", "policy_action": "ask", "policy_approvers": "role:it"}
    events = (
        asked_by_agent("run-1", 0, "call-1", "transfer_funds", {"amount": 20_000, "to": "bolt"}, **agents_word),
        granted("run-1", 1, "call-1", by="cfo"),
        asked_by_agent("run-1", 2, "call-2", "buy_crypto", {"coin": "x"}, **{**agents_word, "policy_rule": "coins"}),
    )
    rules = PolicyAuthority(parse_policy(SERVER_RULES, source="server.toml"))
    store = sqlite_backend.open()
    append(store, *events)
    await drain(Notifier(store, config(*targets), start_at=0, rules=rules))
    sent = {
        (
            r.headers["Idempotency-Key"].split(":")[-1],
            r.json()["notice"]["target_id"],
            r.json()["notice"]["kind"],
        ): r.json()["notice"]
        for r in rec.requests
    }
    assert sorted(sent) == [
        ("all", "call-1", "approval_granted"),
        ("all", "call-1", "approval_requested"),
        ("all", "call-2", "approval_requested"),
        ("big", "call-1", "approval_granted"),
        ("big", "call-1", "approval_requested"),
        ("finance", "call-1", "approval_granted"),
        ("finance", "call-1", "approval_requested"),
    ], sorted(sent)
    asked = sent[("finance", "call-1", "approval_requested")]
    assert (asked["rule"], asked["approvers"]) == ("large transfers", "role:finance,user:cfo"), asked
    assert "'quick ones'" in asked["rule_note"] and "'large transfers' governs" in asked["rule_note"], asked
    follow_up = sent[("big", "call-1", "approval_granted")]
    assert (follow_up["rule"], follow_up["approvers"]) == ("large transfers", "role:finance,user:cfo"), follow_up
    denied = sent[("all", "call-2", "approval_requested")]
    assert (denied["rule"], denied["approvers"]) == ("no crypto", "") and "can only be rejected" in denied["rule_note"]
    assert not any("role:it" in json.dumps(n) or n["rule"] == "quick ones" for n in sent.values())


async def test_without_the_servers_policy_the_agents_rule_routes_a_notice_as_before(
    sqlite_backend: Backend, rec: Receiver
) -> None:
    targets = (webhook(rec.url, "it", roles=("it",)), webhook(rec.url, "quick", rules=("quick ones",)))
    agents_word = {"policy_rule": "quick ones", "policy_action": "ask", "policy_approvers": "role:it"}
    store = sqlite_backend.open()
    append(store, asked_by_agent("run-1", 0, "call-1", "transfer_funds", {"amount": 20_000}, **agents_word))
    await drain(Notifier(store, config(*targets), start_at=0, rules=PolicyAuthority()))
    notices = [r.json()["notice"] for r in rec.requests]
    assert sorted(r.headers["Idempotency-Key"].split(":")[-1] for r in rec.requests) == ["it", "quick"]
    assert {(n["rule"], n["approvers"], n["rule_note"]) for n in notices} == {("quick ones", "role:it", "")}
