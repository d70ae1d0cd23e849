"""Checkpoints never launder: the server verifies what was written since its last checkpoint before it signs.

The attack (issue #27, hole 4): a database writer without the key rewrites a decision the server signed a moment
ago into "approved by cfo@example.com" on channel ``cli`` with the signature removed, and recomputes the chain and
its head. The whole store is consistent again (a local CLI decision is unsigned, and says so), so only the server
can tell: it knows which decisions it signed since its last checkpoint. It refuses to sign, and says so on its
log, on the audit log (which ``goldfive audit verify --public-key`` then reports) and at ``/api/audit/verify``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from store_support import Backend, await_until

from goldfive_core.approvals import Principal
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.server import ServerConfig, create_app
from goldfive_core.signing import DecisionSigner, load_or_create_signing_key
from goldfive_core.store import Store, decide
from goldfive_core.store.audit import canonical_event_bytes, chain_hash
from goldfive_core.store.checkpoint import CheckpointWriter, load_public_key, verify_chain
from goldfive_core.store.users import add_user
from tests.server.server_support import ORIGIN, Agent, goldfive, start_task_agent

CFO = "cfo@example.com"


class _Served:
    def __init__(self, store: Store, signer: DecisionSigner, writer: CheckpointWriter, client: httpx.AsyncClient):
        self.store, self.signer, self.writer, self.client = store, signer, writer, client
        self.token = add_user(store, "ana", "approver").token

    async def approve(self, target: str) -> None:
        await await_until(lambda: any(r.target_id == target and r.open for r in self.store.approvals()), what=target)
        answer = await self.client.post(
            f"/api/approvals/{target}/approve", headers={"Authorization": f"Bearer {self.token}"}, json={}
        )
        assert answer.status_code == 200, answer.text

    async def verify(self) -> dict[str, object]:
        answer = await self.client.get("/api/audit/verify", headers={"Authorization": f"Bearer {self.token}"})
        assert answer.status_code == 200, answer.text
        body: dict[str, object] = answer.json()
        return body

    @property
    def public(self) -> str:
        return self.signer.trust_key.text()


@pytest.fixture
async def served(backend: Backend, tmp_path: Path) -> AsyncIterator[_Served]:
    """goldfive serve's app over ``backend`` with its checkpoint writer (written by the test, not on a timer)."""
    store = backend.open()
    signer, _ = load_or_create_signing_key(tmp_path / "key.pem")
    writer = CheckpointWriter(store, signer, tmp_path / "audit-checkpoint.txt")
    writer.settle_s = 0.0  # no decision is half-written when the test looks: refuse at the first look
    app = create_app(store, ServerConfig(signer=signer, checkpoints=writer))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=ORIGIN) as client:
        yield _Served(store, signer, writer, client)
    await app.state.api.events.aclose()


async def _asked_and_approved(srv: _Served, backend: Backend, target: str) -> None:
    agent = start_task_agent(backend, target)
    try:
        await srv.approve(target)
        assert (await agent.result()).output["decision"] == "approve"
    finally:
        await agent.close()


def _relabel(store: Store, target: str, edit: Callable[[events_pb2.Event], None]) -> None:
    """What the attacker does: edit the decision's event, recompute every later hash and the head."""
    rows = store.audit_rows(limit=100_000)
    at = next(r.seq for r in rows if r.kind == "approval_granted" and r.event().approval_granted.target_id == target)
    prev = next((r.hash for r in rows if r.seq == at - 1), "0" * 64)
    for row in rows:
        if row.seq < at:
            continue
        event = row.event()
        if row.seq == at:
            edit(event)
        body = canonical_event_bytes(event)
        digest = chain_hash(prev, body)
        _sql(
            store, "UPDATE gf_audit SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?", (body, prev, digest, row.seq)
        )
        prev = digest
    _sql(store, "UPDATE gf_chain_head SET hash = ? WHERE id = 1", (prev,))


def _to_cfo_on_the_cli(store: Store, target: str) -> None:
    def edit(event: events_pb2.Event) -> None:
        event.approval_granted.decided_by = CFO
        event.approval_granted.channel = "cli"

    _relabel(store, target, edit)
    _sql(
        store,
        "UPDATE gf_approvals SET decided_by = ?, decided_channel = 'cli', decision_sig = '' WHERE target_id = ?",
        (CFO, target),
    )


def _sql(store: Store, sql: str, params: tuple[object, ...] = ()) -> None:
    store.db.execute(store.db.conn(), sql, params)  # type: ignore[attr-defined]  # the tampering under test


async def test_a_signed_decision_relabelled_after_the_newest_checkpoint_is_never_signed(
    served: _Served, backend: Backend, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    srv = served
    await _asked_and_approved(srv, backend, "coffee")
    assert srv.writer.write()  # the honest log is signed
    honest = srv.writer.path.read_text()
    await _asked_and_approved(srv, backend, "wire")  # signed by the server a moment ago ...
    _to_cfo_on_the_cli(srv.store, "wire")  # ... and made to read like a local CLI decision of the CFO's
    assert srv.store.verify_audit(trust_key=srv.signer.trust_key).ok  # the database alone is consistent again
    assert verify_chain(srv.store, honest, public_key=load_public_key(srv.public), origin="goldfive").ok

    with caplog.at_level(logging.ERROR, logger="goldfive_core.store.checkpoint"):
        assert not srv.writer.write()
    assert srv.writer.path.read_text() == honest  # the last honest checkpoint stays
    assert f"now reads approve by {CFO!r} on channel 'cli', unsigned: relabelled" in srv.writer.refused
    assert any("audit checkpoint NOT signed" in r.getMessage() and CFO in r.getMessage() for r in caplog.records)
    alarms = [r for r in srv.store.audit_rows(limit=100_000) if r.kind == "checkpoint_refused"]
    assert len(alarms) == 1 and "relabelled" in alarms[0].event().checkpoint_refused.reason
    assert alarms[0].event().checkpoint_refused.key_id == srv.signer.key_id
    assert (
        not srv.writer.write()
        and len([r for r in srv.store.audit_rows(limit=100_000) if r.kind == "checkpoint_refused"]) == 1
    )  # refused again, alarmed once

    report = await srv.verify()
    assert report["ok"] is False
    assert "goldfive serve refused to sign a checkpoint" in str(report["problems"]) and CFO in str(report["problems"])
    # With the public key alone (no checkpoint file), from the database: the server's refusal is on the log.
    alone = goldfive(backend, "audit", "verify", "--public-key", srv.public)
    assert alone.returncode == 1 and "refused to sign a checkpoint" in alone.stdout, alone.stdout + alone.stderr
    (tmp_path / "cp.txt").write_text(honest)
    pinned = goldfive(backend, "audit", "verify", "--checkpoint", str(tmp_path / "cp.txt"), "--public-key", srv.public)
    assert pinned.returncode == 1 and "relabelled" in pinned.stdout, pinned.stdout + pinned.stderr


async def test_every_decision_of_a_burst_is_held_to_its_record_even_after_a_restart(
    served: _Served, backend: Backend
) -> None:
    """Decisions answered together are noted together (one write of the kept file): each one is still held, in this
    writer and in the next one that starts from the kept file, so relabelling any of them is never signed."""
    srv = served
    targets = ["coffee", "tea", "wire", "rent"]
    agents = [start_task_agent(backend, t) for t in targets]
    try:
        await asyncio.gather(*(srv.approve(t) for t in targets))
        for agent in agents:
            assert (await agent.result()).output["decision"] == "approve"
    finally:
        for agent in agents:
            await agent.close()
    kept = srv.writer.vouched_path.read_text().splitlines()
    assert sorted(json.loads(line)["target_id"] for line in kept) == sorted(targets)
    restarted = CheckpointWriter(srv.store, srv.signer, srv.writer.path)
    restarted.settle_s = 0.0
    _to_cfo_on_the_cli(srv.store, "wire")
    assert not restarted.write() and "relabelled" in restarted.refused and "'wire'" in restarted.refused


async def test_decisions_vouched_for_together_are_each_held_to_their_records(served: _Served, backend: Backend) -> None:
    """The server's batch of notes (:meth:`CheckpointWriter.vouch_many`): a relabel of any member is refused, by this
    writer (in memory) and by one started from the kept file."""
    srv = served
    for target in ("coffee", "wire"):
        await _asked_and_approved(srv, backend, target)
    srv.writer.vouched_path.unlink()
    fresh = CheckpointWriter(srv.store, srv.signer, srv.writer.path)
    fresh.settle_s = 0.0
    wire = srv.store.approvals_for("wire")[0].run_id
    fresh.vouch_many([("nowhere", "gone"), (wire, "wire"), ("nowhere", "gone too")])  # the relabel is in the middle
    fresh.vouch_many([(srv.store.approvals_for("coffee")[0].run_id, "coffee")])
    restarted = CheckpointWriter(srv.store, srv.signer, srv.writer.path)
    restarted.settle_s = 0.0
    _to_cfo_on_the_cli(srv.store, "wire")
    for writer in (fresh, restarted):
        assert not writer.write() and "relabelled" in writer.refused and "'wire'" in writer.refused


async def test_an_honest_local_cli_decision_is_checkpointed_and_verifies(served: _Served, backend: Backend) -> None:
    """A decision recorded by the local command line without a key is unsigned and says so: nothing is wrong."""
    srv = served
    await _asked_and_approved(srv, backend, "coffee")
    agent: Agent = start_task_agent(backend, "tea")
    try:
        await await_until(lambda: any(r.target_id == "tea" and r.open for r in srv.store.approvals()), what="tea")
        assert srv.writer.write()  # signed mid-run: the run's next events continue its sequence after it
        result = await asyncio.to_thread(
            decide, srv.store, "tea", approve=True, principal=Principal(name="bo", channel="cli")
        )
        assert result.ok, result.detail
        assert (await agent.result()).output["decision"] == "approve"
    finally:
        await agent.close()
    tea = srv.store.approvals_for("tea")[0]
    assert tea.decided_channel == "cli" and not tea.decision_sig  # unsigned, and says so
    assert srv.writer.write() and not srv.writer.refused
    assert (await srv.verify())["ok"] is True
    ok = goldfive(backend, "audit", "verify", "--checkpoint", str(srv.writer.path), "--public-key", srv.public)
    assert ok.returncode == 0, ok.stdout + ok.stderr


async def test_a_rewrite_below_the_last_checkpoint_is_alarmed_on_the_audit_log(
    served: _Served, backend: Backend
) -> None:
    srv = served
    await _asked_and_approved(srv, backend, "coffee")
    assert srv.writer.write()
    _to_cfo_on_the_cli(srv.store, "coffee")  # already covered by a checkpoint
    assert not srv.writer.write() and "the chain up to it was rewritten" in srv.writer.refused
    alarms = [r for r in srv.store.audit_rows(limit=100_000) if r.kind == "checkpoint_refused"]
    assert len(alarms) == 1 and "rewritten" in alarms[0].event().checkpoint_refused.reason
    assert (await srv.verify())["ok"] is False


async def test_a_server_decision_stripped_of_its_signature_is_caught_with_the_public_key_alone(
    served: _Served, backend: Backend
) -> None:
    """Only the record edited (the event still says channel api): no checkpoint or server is needed to see it."""
    srv = served
    await _asked_and_approved(srv, backend, "coffee")
    assert goldfive(backend, "audit", "verify", "--public-key", srv.public).returncode == 0
    _sql(srv.store, "UPDATE gf_approvals SET decision_sig = '' WHERE target_id = 'coffee'")
    alone = goldfive(backend, "audit", "verify", "--public-key", srv.public)
    assert alone.returncode == 1, alone.stdout + alone.stderr
    assert "decided through goldfive serve (channel 'api') but not signed" in alone.stdout
    report = await srv.verify()  # the server checks every signature with its key too
    assert report["ok"] is False and "(channel 'api') but not signed" in str(report["problems"]), report
    assert not srv.writer.write() and "not signed" in srv.writer.refused  # nor does the server sign it


async def test_a_decision_made_through_the_server_is_checked_before_signing_when_the_event_is_edited(
    served: _Served, backend: Backend
) -> None:
    """The event relabelled but the record left alone: the record no longer matches its event."""
    srv = served
    await _asked_and_approved(srv, backend, "coffee")

    def edit(event: events_pb2.Event) -> None:
        event.approval_granted.decided_by = CFO

    _relabel(srv.store, "coffee", edit)
    assert not srv.writer.write() and "decided_by differs from its decision on the audit log" in srv.writer.refused


def test_audit_verify_checkpoint_exits_1_when_the_head_row_is_deleted(backend: Backend, tmp_path: Path) -> None:
    from tests.faults.test_faults_checkpoints import _fill

    store = backend.open()
    _fill(store, "run-a")
    signer, _ = load_or_create_signing_key(tmp_path / "key.pem")
    writer = CheckpointWriter(store, signer, tmp_path / "cp.txt")
    assert writer.write()
    _sql(store, "DELETE FROM gf_chain_head")
    argv = ["audit", "verify", "--checkpoint", str(writer.path), "--public-key", signer.trust_key.text()]
    cli = goldfive(backend, *argv)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    assert "the chain head row is missing (deleted)" in cli.stdout
    assert not writer.write() and "head row is missing" in writer.refused


async def test_goldfive_serve_refuses_to_checkpoint_a_relabel_and_says_so(backend: Backend, tmp_path: Path) -> None:
    """The hole as reproduced: a running ``goldfive serve`` (checkpoints every 0.1 s), a decision made through it,
    relabelled a moment later. Its next checkpoints refuse; its log, the audit log and the API say why."""
    from tests.server.server_support import serve_process

    checkpoint = tmp_path / "audit-checkpoint.txt"
    with serve_process(backend, tmp_path / "key.pem", "--checkpoint-every", "0.1") as proc:
        public = proc.trust_key.text()
        headers = {"Authorization": f"Bearer {proc.admin_token}"}
        store = backend.open()
        agent = start_task_agent(backend, "wire")
        async with httpx.AsyncClient(base_url=proc.url, headers=headers, timeout=30) as client:
            try:
                await await_until(lambda: any(r.target_id == "wire" and r.open for r in store.approvals()), what="ask")
                answer = await client.post("/api/approvals/wire/approve", json={})
                assert answer.status_code == 200, answer.text
                assert (await agent.result()).output["decision"] == "approve"
            finally:
                await agent.close()
            _to_cfo_on_the_cli(store, "wire")
            alarm = await await_until(
                lambda: [r for r in store.audit_rows(limit=100_000) if r.kind == "checkpoint_refused"],
                limit_s=30,
                what="the server's alarm on the audit log",
            )
            # Relabelled before the next tick (as in the report), or after it: a rewrite of what it signed.
            why = alarm[0].event().checkpoint_refused.reason
            assert "relabelled" in why or "the chain up to it was rewritten" in why, why
            report = (await client.get("/api/audit/verify")).json()
            # The API names the relabelled decision, or (relabelled after the tick) the signed chain it rewrote.
            said = str(report["problems"])
            assert report["ok"] is False and (CFO in said or "the chain up to it was rewritten" in said), report
            signed = checkpoint.read_text()
    assert proc.proc.stderr is not None
    log = proc.proc.stderr.read()
    assert f"audit checkpoint NOT signed: {why}" in log, log[-2000:]
    assert checkpoint.read_text() == signed  # not even on the way out
    alone = goldfive(backend, "audit", "verify", "--public-key", public)
    assert alone.returncode == 1 and "refused to sign a checkpoint" in alone.stdout, alone.stdout + alone.stderr


async def test_a_problem_among_the_newest_rows_is_never_signed_and_alarmed_once_it_lasts(
    served: _Served, backend: Backend
) -> None:
    """A decision half-written (its event in, its signature not yet) must not raise an alarm; nor be signed."""
    srv = served
    await _asked_and_approved(srv, backend, "coffee")
    assert srv.writer.write()
    signed = srv.writer.path.read_text()
    await _asked_and_approved(srv, backend, "wire")
    _to_cfo_on_the_cli(srv.store, "wire")
    srv.writer.settle_s = 3600.0
    assert not srv.writer.write() and not srv.writer.refused  # not signed, not (yet) an alarm
    assert srv.writer.path.read_text() == signed
    assert not [r for r in srv.store.audit_rows(limit=100_000) if r.kind == "checkpoint_refused"]
    srv.writer.settle_s = 0.0  # it lasted
    assert not srv.writer.write() and "relabelled" in srv.writer.refused
    assert [r for r in srv.store.audit_rows(limit=100_000) if r.kind == "checkpoint_refused"]


async def test_a_rewrite_of_what_was_signed_is_an_alarm_at_once(served: _Served, backend: Backend) -> None:
    srv = served
    await _asked_and_approved(srv, backend, "coffee")
    assert srv.writer.write()
    srv.writer.settle_s = 3600.0
    _to_cfo_on_the_cli(srv.store, "coffee")
    assert not srv.writer.write() and "the chain up to it was rewritten" in srv.writer.refused


async def test_the_server_still_says_so_when_its_alarm_is_deleted_from_the_audit_log(
    served: _Served, backend: Backend
) -> None:
    srv = served
    await _asked_and_approved(srv, backend, "coffee")
    assert srv.writer.write()
    await _asked_and_approved(srv, backend, "wire")
    _to_cfo_on_the_cli(srv.store, "wire")
    assert not srv.writer.write()
    # The writer also cuts the alarm (the last row) and puts the head back: the database is consistent again.
    alarm = next(r for r in srv.store.audit_rows(limit=100_000) if r.kind == "checkpoint_refused")
    _sql(srv.store, "DELETE FROM gf_audit WHERE seq = ?", (alarm.seq,))
    _sql(srv.store, "UPDATE gf_chain_head SET seq = ?, hash = ? WHERE id = 1", (alarm.seq - 1, alarm.prev_hash))
    assert srv.store.verify_audit(trust_key=srv.signer.trust_key).ok
    # The server remembers what it refused: its API says so although the log alone now reads clean.
    report = await srv.verify()
    assert report["ok"] is False and "relabelled" in str(report["problems"]), report
    assert not srv.writer.write()  # and it still refuses (the alarm goes on the log again)
    assert [r.kind for r in srv.store.audit_rows(limit=100_000)].count("checkpoint_refused") == 1


async def test_a_serve_killed_before_its_next_checkpoint_still_holds_what_it_signed(
    backend: Backend, tmp_path: Path
) -> None:
    """kill -9 of ``goldfive serve`` between a decision it signed and its next checkpoint, the decision relabelled
    while it is down: the restarted server still knows it signed it (kept beside the checkpoint) and refuses."""
    from tests.server.server_support import serve_process

    checkpoint = tmp_path / "audit-checkpoint.txt"
    store = backend.open()
    with serve_process(backend, tmp_path / "key.pem", "--checkpoint-every", "3600") as first:
        agent = start_task_agent(backend, "wire")
        headers = {"Authorization": f"Bearer {first.admin_token}"}
        async with httpx.AsyncClient(base_url=first.url, headers=headers, timeout=30) as client:
            try:
                await await_until(lambda: any(r.target_id == "wire" and r.open for r in store.approvals()), what="ask")
                assert (await client.post("/api/approvals/wire/approve", json={})).status_code == 200
                assert (await agent.result()).output["decision"] == "approve"
            finally:
                await agent.close()
        signed = checkpoint.read_text()  # written at the start, before the decision
        first.proc.kill()  # kill -9: no checkpoint on the way out
        first.proc.wait(10)
    _to_cfo_on_the_cli(store, "wire")
    with serve_process(backend, tmp_path / "key.pem", "--checkpoint-every", "0.1"):
        alarm = await await_until(
            lambda: [r for r in store.audit_rows(limit=100_000) if r.kind == "checkpoint_refused"],
            limit_s=30,
            what="the restarted server's alarm on the audit log",
        )
    assert "relabelled" in alarm[0].event().checkpoint_refused.reason, alarm[0].event()
    assert checkpoint.read_text() == signed  # the relabel was never signed


# -- rows the server wrote itself: grant revocations, ledger records, its refusals --------------------------------
def _rewrite_row(store: Store, seq: int, edit: Callable[[events_pb2.Event], None]) -> None:
    """The attacker edits row ``seq``'s event and recomputes every later hash and the head."""
    rows = store.audit_rows(after_seq=seq - 1, limit=100_000)
    prev = rows[0].prev_hash
    for row in rows:
        event = row.event()
        if row.seq == seq:
            edit(event)
        body = canonical_event_bytes(event)
        digest = chain_hash(prev, body)
        _sql(
            store, "UPDATE gf_audit SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?", (body, prev, digest, row.seq)
        )
        prev = digest
    _sql(store, "UPDATE gf_chain_head SET hash = ? WHERE id = 1", (prev,))


def _cut_last_row(store: Store, kind: str) -> int:
    """The attacker deletes the newest row (of ``kind``) and puts the head back on the row before: consistent."""
    [*_, last] = store.audit_rows(limit=100_000)
    assert last.kind == kind, last.kind
    _sql(store, "DELETE FROM gf_audit WHERE seq = ?", (last.seq,))
    _sql(store, "UPDATE gf_chain_head SET seq = ?, hash = ? WHERE id = 1", (last.seq - 1, last.prev_hash))
    return last.seq


def _a_standing_grant(store: Store) -> str:
    """A grant an agent's run made (its GrantCreated on the log, the gf_grants row from it)."""
    created = events_pb2.GrantCreated(
        grant_id="grant-pay",
        rule="payments to acme",
        tool="transfer",
        granted_by="ana",
        scope="time",
        created_at_ms=store.clock_ms(),
        expires_at_ms=store.clock_ms() + 3_600_000,
        description="allow transfer calls matching rule 'payments to acme' for 1h, granted by ana",
    )
    event = events_pb2.Event(event_id="ev-grant-pay", run_id="run-pay", sequence=0)
    event.grant_created.CopyFrom(created)
    store.append_events([event], pid=1, host="h")
    return created.grant_id


async def _refused_with_an_alarm(srv: _Served, backend: Backend, words: str, caplog: pytest.LogCaptureFixture) -> None:
    """The next checkpoint is refused, and the alarm is on the server's log, the audit log and /api/audit/verify."""
    signed = srv.writer.path.read_text()
    assert srv.store.verify_audit(trust_key=srv.signer.trust_key).ok  # the database alone is consistent again
    with caplog.at_level(logging.ERROR, logger="goldfive_core.store.checkpoint"):
        assert not srv.writer.write()
    assert words in srv.writer.refused, srv.writer.refused
    assert srv.writer.path.read_text() == signed  # the last honest checkpoint stays
    assert any("audit checkpoint NOT signed" in r.getMessage() and words in r.getMessage() for r in caplog.records)
    alarms = [r for r in srv.store.audit_rows(limit=100_000) if r.kind == "checkpoint_refused"]
    assert len(alarms) == 1 and words in alarms[0].event().checkpoint_refused.reason
    report = await srv.verify()
    assert report["ok"] is False and words in str(report["problems"]), report
    alone = goldfive(backend, "audit", "verify", "--public-key", srv.public)
    assert alone.returncode == 1 and "refused to sign a checkpoint" in alone.stdout, alone.stdout + alone.stderr


async def test_a_revocation_the_server_made_erased_after_the_newest_checkpoint_is_never_signed(
    served: _Served, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """ana revokes a leaked grant through the server; a database writer deletes the revocation's row, puts the head
    back and the grant's row back to standing: the database is consistent and the grant lets calls through again.
    The server wrote that revocation: its next checkpoint refuses."""
    from goldfive_core.store.grants import grant_rows

    srv = served
    grant = _a_standing_grant(srv.store)
    assert srv.writer.write()
    revoked = await srv.client.post(
        f"/api/grants/{grant}/revoke", headers={"Authorization": f"Bearer {srv.token}"}, json={"reason": "leaked"}
    )
    assert revoked.status_code == 200, revoked.text
    seq = _cut_last_row(srv.store, "grant_revoked")
    _sql(
        srv.store,
        "UPDATE gf_grants SET revoked_at_ms = 0, revoked_by = '', revoke_reason = '' WHERE grant_id = ?",
        (grant,),
    )
    assert [g.grant_id for g in grant_rows(srv.store, active_only=True)] == [grant]  # standing again
    await _refused_with_an_alarm(srv, backend, "the grant_revoked event", caplog)
    assert f"this server wrote at row {seq} is gone (deleted)" in srv.writer.refused


async def test_a_revocation_the_server_made_relabelled_after_the_newest_checkpoint_is_never_signed(
    served: _Served, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    srv = served
    grant = _a_standing_grant(srv.store)
    assert srv.writer.write()
    revoked = await srv.client.post(
        f"/api/grants/{grant}/revoke", headers={"Authorization": f"Bearer {srv.token}"}, json={}
    )
    assert revoked.status_code == 200, revoked.text
    [*_, row] = srv.store.audit_rows(limit=100_000)

    def edit(event: events_pb2.Event) -> None:
        event.grant_revoked.revoked_by = CFO
        event.grant_revoked.channel = "cli"

    _rewrite_row(srv.store, row.seq, edit)
    _sql(srv.store, "UPDATE gf_grants SET revoked_by = ? WHERE grant_id = ?", (CFO, grant))
    await _refused_with_an_alarm(srv, backend, "no longer reads as written (edited)", caplog)


async def _an_agents_call_done(srv: _Served) -> str:
    """An agent over HTTP claims its call and says it finished, through the server: two ledger rows it writes."""
    from google.protobuf import json_format
    from store_support import make_event

    bot = {"Authorization": f"Bearer {add_user(srv.store, 'bot', 'agent').token}"}
    started = make_event("run-bot", 0, events_pb2.RunStarted(adapter="callable"))
    body = {"pid": 1, "host": "h", "events": [json_format.MessageToDict(started, preserving_proto_field_name=True)]}
    assert (await srv.client.post("/api/agent/events", headers=bot, json=body)).status_code == 200
    assert srv.writer.write()  # the run's start is signed; what follows is after the newest checkpoint
    claim = {"run_id": "run-bot", "pid": 7, "host": "h", "args_digest": "sha256:pay"}
    claimed = await srv.client.post("/api/agent/ledger/call-pay/executing", headers=bot, json=claim)
    assert claimed.json() == {"claimed": True}
    done = {"run_id": "run-bot", "result_json": '{"paid":10}'}
    assert (await srv.client.post("/api/agent/ledger/call-pay/done", headers=bot, json=done)).status_code == 200
    return "call-pay"


async def test_a_finished_call_the_server_recorded_put_back_in_doubt_is_never_signed(
    served: _Served, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """The body ran and the agent said so through the server; a database writer deletes the 'done' row and puts the
    ledger back to 'executing': the call now reads in doubt (a person would answer --did-not-run and a replay would
    run it again). The server wrote that 'done': its next checkpoint refuses."""
    from goldfive_core.store import ExecutionState

    srv = served
    call = await _an_agents_call_done(srv)
    _cut_last_row(srv.store, "execution_recorded")
    _sql(
        srv.store,
        "UPDATE gf_executions SET state = 'executing', finished_at_ms = 0, result_json = '' WHERE target_id = ?",
        (call,),
    )
    row = srv.store.execution(call, run_id="run-bot")
    assert row is not None and row.state is ExecutionState.EXECUTING  # in doubt, to whoever looks
    await _refused_with_an_alarm(srv, backend, "the execution_recorded event", caplog)
    assert "is gone (deleted)" in srv.writer.refused


async def test_a_ledger_record_the_server_wrote_rewritten_is_never_signed_even_after_a_restart(
    served: _Served, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """The 'done' rewritten to another result (the event's digest and the row's result, consistently), after the
    server wrote it: a writer started from the kept file refuses as the running one does."""
    from goldfive_core.store.audit import result_digest

    srv = served
    call = await _an_agents_call_done(srv)
    [*_, row] = srv.store.audit_rows(limit=100_000)
    assert row.kind == "execution_recorded" and row.event().execution_recorded.state == "done"
    forged = '{"paid":0}'

    def edit(event: events_pb2.Event) -> None:
        event.execution_recorded.result_digest = result_digest(forged)

    _rewrite_row(srv.store, row.seq, edit)
    _sql(srv.store, "UPDATE gf_executions SET result_json = ? WHERE target_id = ?", (forged, call))
    kept = [json.loads(line) for line in srv.writer.vouched_path.read_text().splitlines()]
    assert {(k["seq"], k["kind"]) for k in kept if "seq" in k} >= {(row.seq, "execution_recorded")}
    await _refused_with_an_alarm(srv, backend, "no longer reads as written (edited)", caplog)
    restarted = CheckpointWriter(srv.store, srv.signer, srv.writer.path)
    assert not restarted.write() and f"row {row.seq} no longer reads as written (edited)" in restarted.refused


async def test_rows_the_server_wrote_are_signed_when_they_read_as_written_and_then_forgotten(
    served: _Served, backend: Backend
) -> None:
    """No false alarm: the honest revocation and ledger rows are signed, and the kept list empties; a row noted for
    an attempt that never committed (a retried write) is not held at all."""
    from goldfive_core.store.witness import Appended

    srv = served
    grant = _a_standing_grant(srv.store)
    await _an_agents_call_done(srv)
    answer = await srv.client.post(
        f"/api/grants/{grant}/revoke", headers={"Authorization": f"Bearer {srv.token}"}, json={}
    )
    assert answer.status_code == 200, answer.text
    kinds = [json.loads(line).get("kind") for line in srv.writer.vouched_path.read_text().splitlines()]
    assert kinds.count("execution_recorded") == 2 and kinds.count("grant_revoked") == 1, kinds
    head = srv.store.audit_head()[0]
    srv.writer.vouch_events([Appended(head + 1, "ev-rolled-back", "grant_revoked", "0" * 64)])  # never committed
    assert srv.writer.write() and not srv.writer.refused
    assert srv.writer.vouched_path.read_text() == ""
    assert (await srv.verify())["ok"] is True
    ok = goldfive(backend, "audit", "verify", "--checkpoint", str(srv.writer.path), "--public-key", srv.public)
    assert ok.returncode == 0, ok.stdout + ok.stderr


async def test_a_refusal_the_server_put_on_the_audit_log_erased_is_never_signed(
    served: _Served, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """An agent token reaching for the inbox is refused and the server puts that on the audit log; the row deleted
    (the head put back) is what the server's next checkpoint refuses to sign."""
    srv = served
    bot = {"Authorization": f"Bearer {add_user(srv.store, 'bot', 'agent').token}"}
    assert srv.writer.write()
    assert (await srv.client.get("/api/approvals", headers=bot)).status_code == 403
    _cut_last_row(srv.store, "decision_refused")
    await _refused_with_an_alarm(srv, backend, "the decision_refused event", caplog)
