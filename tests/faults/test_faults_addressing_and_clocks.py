"""Several agents on one store, skewed clocks and crashed processes: messages reach exactly their runs,
liveness is judged on the store's clock, and a run whose process died is closed as crashed."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest
from store_support import HERE, PYTHON, Backend, await_until, make_event, wait_until

from goldfive_core import AgentTools, ControlKind, ControlMessage, Task, wrap
from goldfive_core.control import AckResult
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import StoreChannel
from goldfive_core.store import agents as owners

SKEWED = str(HERE.parent / "faults" / "skewed.py")
AGENT = str(HERE / "agent_proc.py")


def _asks(target: str, *, after: asyncio.Event | None = None) -> Any:
    async def agent(task: Task, tools: AgentTools) -> Any:
        if after is not None:
            await after.wait()
        await tools.report_task_started(target)
        return await tools.report_awaiting_approval("deploy?", task_id=target, timeout_ms=20_000)

    return agent


async def test_an_early_decision_waits_for_the_run_that_asks_for_it(backend: Backend) -> None:
    # Two agent "processes" (two channels, two stores objects) on one store.
    first = StoreChannel(backend.open())
    second = StoreChannel(backend.open())
    go = asyncio.Event()
    run_a = asyncio.create_task(wrap(_asks("a-1"), control=first, sinks=[first.sink]).run())
    run_b = asyncio.create_task(wrap(_asks("b-1", after=go), control=second, sinks=[second.sink]).run())
    store = backend.open()
    await await_until(lambda: store.approvals(), what="a-1 pending")
    await await_until(lambda: len(store.runs()) == 2, what="both runs recorded")
    # The decision for b-1 comes before b-1 is requested: the first agent must not take it.
    decider = StoreChannel(backend.open())
    early = asyncio.create_task(decider.send(ControlMessage(ControlKind.APPROVE, {"target_id": "b-1"}), timeout=20))
    await await_until(lambda: store.pending_controls(), what="the early decision in the inbox")
    await asyncio.sleep(0)  # the first agent looks at the inbox (its wait wakes on the commit) and leaves it
    assert not early.done()
    go.set()
    ack = await early
    assert ack.ok and ack.detail == "approved 'b-1'", ack.detail
    assert (await run_b).output["decision"] == "approve"
    assert not run_a.done()
    await await_until(lambda: [r.target_id for r in store.approvals()] == ["a-1"], what="only a-1 still open")
    assert (await decider.send(ControlMessage(ControlKind.APPROVE, {"target_id": "a-1"}), timeout=20)).ok
    assert (await run_a).output["decision"] == "approve"
    for channel in (first, second):
        await channel.aclose()


async def test_an_unaddressed_run_level_message_with_several_live_runs_is_refused(backend: Backend) -> None:
    first = StoreChannel(backend.open())
    second = StoreChannel(backend.open())
    run_a = asyncio.create_task(wrap(_asks("c-1"), control=first, sinks=[first.sink]).run())
    run_b = asyncio.create_task(wrap(_asks("c-2"), control=second, sinks=[second.sink]).run())
    store = backend.open()
    await await_until(lambda: len(store.approvals()) == 2, what="both requests pending")
    decider = StoreChannel(backend.open())
    refused = await decider.send(ControlMessage(ControlKind.CANCEL, {"reason": "stop all"}), timeout=5)
    assert refused.result is AckResult.FAILURE
    assert "names no run and 2 runs are live on this store" in refused.detail and "name one" in refused.detail
    assert store.pending_controls() == []  # nothing was posted: neither run was stopped at random
    for row in store.approvals():
        ack = await decider.send(ControlMessage(ControlKind.CANCEL, {"run_id": row.run_id}), timeout=20)
        assert ack.ok, ack.detail
    results = await asyncio.gather(run_a, run_b)
    assert {r.status.value for r in results} == {"CANCELLED"}
    for channel in (first, second):
        await channel.aclose()


def _cli_skewed(backend: Backend, offset_s: float, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, SKEWED, str(offset_s), "-m", "goldfive_core.cli", *argv],
        env=backend.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("offset_s", [3600.0, -3600.0])
def test_a_decider_with_a_skewed_clock_sees_a_live_run_as_live(backend: Backend, offset_s: float) -> None:
    agent = subprocess.Popen(
        [PYTHON, SKEWED, str(-offset_s), "-m", "agent_proc", "flow-a", "--call-id", "skew-1"],
        env={**backend.env(), "PYTHONPATH": f"{HERE}:{backend.env()['PYTHONPATH']}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        store = backend.open()
        wait_until(lambda: store.approvals(), what="skew-1 pending")
        pending = json.loads(_cli_skewed(backend, offset_s, "pending", "--json").stdout)["pending"]
        assert [(p["target_id"], p["status"]) for p in pending] == [("skew-1", "pending")]  # not "orphaned"
        runs = json.loads(_cli_skewed(backend, offset_s, "runs", "--json").stdout)["runs"]
        assert [r["liveness"] for r in runs] == ["live"]
        done = _cli_skewed(backend, offset_s, "approve", "skew-1", "--by", "ann")
        assert done.returncode == 0 and done.stdout.startswith("ok: approved"), done.stdout + done.stderr
        out, err = agent.communicate(timeout=30)
        assert json.loads(out.splitlines()[-1])["output"]["decision"] == "approve", err
        assert store.approvals_for("skew-1")[0].decided_via == "run"  # delivered live, not recorded for a replay
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate(timeout=10)


def test_a_crashed_run_is_closed_with_an_audit_event_and_its_approvals_orphaned(backend: Backend) -> None:
    store = backend.open()
    store.append_events(
        [
            make_event("run-dead", 0, events_pb2.RunStarted(adapter="callable")),
            make_event("run-dead", 1, events_pb2.ApprovalRequested(target_id="d-1", kind="task", prompt="p")),
        ],
        pid=999_999,
        host="another-host",
    )
    store.append_events([make_event("run-live", 0, events_pb2.RunStarted(adapter="callable"))], pid=1, host="h")
    assert store.reap_crashed() == []  # fresh heartbeats (the store's clock): nothing to close
    # The dead run's process stopped heartbeating a minute ago (by the store's own clock).
    store.db.execute(  # type: ignore[attr-defined]
        store.db.conn(),  # type: ignore[attr-defined]
        "UPDATE gf_runs SET heartbeat_at_ms = heartbeat_at_ms - 60000 WHERE run_id = 'run-dead'",
    )
    assert store.reap_crashed() == ["run-dead"]
    assert store.reap_crashed() == []  # closed once
    dead = store.run("run-dead")
    assert dead is not None and dead.status == "crashed"
    assert store.liveness(dead).startswith("crashed")
    closing = store.audit_rows(run_id="run-dead")[-1]
    assert (closing.kind, closing.sequence) == ("run_aborted", 2)
    assert closing.event().run_aborted.reason.startswith("crashed: no heartbeat from process 999999 on another-host")
    assert store.verify_audit().ok
    listed = subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", "pending", "--json"],
        env=backend.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (row,) = json.loads(listed.stdout)["pending"]
    assert row["status"] == "orphaned" and "crashed" in row["orphaned_reason"]
    live = store.run("run-live")
    assert live is not None and store.liveness(live) == "live"


def test_a_beat_that_lands_while_the_reaper_looks_keeps_its_run_open(backend: Backend) -> None:
    """The reaper reads the stale runs without a lock; a heartbeat that lands after that read and before the reaper
    closes the run must keep it running (no RunAborted, not "crashed"). On PostgreSQL the agent's own connection
    commits its beat in that window; SQLite's reaper holds the write lock from its first statement, so there the
    beat is written inside the reaper's transaction, which is what the reaper's write must then see."""
    store = backend.open()
    store.append_events([make_event("run-slow", 0, events_pb2.RunStarted(adapter="callable"))], pid=1, host="h")
    store.append_events([make_event("run-gone", 0, events_pb2.RunStarted(adapter="callable"))], pid=2, host="h")
    db: Any = store.db  # type: ignore[attr-defined]
    db.execute(db.conn(), "UPDATE gf_runs SET heartbeat_at_ms = heartbeat_at_ms - 60000")
    other = backend.open()  # the agent's own store
    looked = store._stale_runs  # type: ignore[attr-defined]

    def look_then_beat(conn: Any, limit: int) -> Any:
        found = looked(conn, limit)
        if limit > 1:  # the reaper's look inside its transaction: both runs were stale then
            assert sorted(row[0] for row in found[1]) == ["run-gone", "run-slow"]
            if backend.name == "postgres":
                other.heartbeat(["run-slow"])
            else:
                db.execute(conn, f"UPDATE gf_runs SET heartbeat_at_ms = {db.now_expr} WHERE run_id = 'run-slow'")
        return found

    store._stale_runs = look_then_beat  # type: ignore[attr-defined]
    assert store.reap_crashed() == ["run-gone"]
    slow = store.run("run-slow")
    assert slow is not None and slow.status == "running" and store.liveness(slow) == "live"
    assert [row.kind for row in store.audit_rows(run_id="run-slow")] == ["run_started"]
    assert [row.kind for row in store.audit_rows(run_id="run-gone")] == ["run_started", "run_aborted"]
    assert store.verify_audit().ok


@pytest.mark.parametrize("offset_s", [3600.0, -3600.0])
def test_a_server_with_a_skewed_clock_sees_a_live_run_as_live(
    backend: Backend, offset_s: float, tmp_path: Path
) -> None:
    """`goldfive serve` on a host whose clock is an hour off: the inbox still lists the waiting call as pending
    (not orphaned), the run as live, and a decision through the API reaches the agent."""
    httpx = pytest.importorskip("httpx")
    made = subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", "users", "add", "ana", "--role", "approver"],
        env=backend.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    token = made.stdout.strip().splitlines()[-1]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = subprocess.Popen(
        [PYTHON, "-m", "agent_proc", "flow-a", "--call-id", "skew-s"],
        env={**backend.env(), "PYTHONPATH": f"{HERE}:{backend.env()['PYTHONPATH']}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = subprocess.Popen(
        [
            PYTHON,
            SKEWED,
            str(offset_s),
            "-m",
            "goldfive_core.cli",
            "serve",
            "--port",
            str(port),
            "--key",
            str(tmp_path / "k.pem"),
        ],
        env=backend.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        store = backend.open()
        wait_until(lambda: store.approvals(), what="skew-s pending")
        url, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}

        def up() -> bool:
            try:
                return httpx.get(url + "/api/me", headers=auth, timeout=2).status_code == 200
            except httpx.TransportError:
                return server.poll() is not None  # exited: fail below with its stderr

        wait_until(up, timeout=30, what="goldfive serve up")
        assert server.poll() is None, server.stderr.read() if server.stderr else ""
        pending = httpx.get(url + "/api/approvals?status=pending", headers=auth, timeout=10).json()["approvals"]
        assert [(p["target_id"], p["state"]) for p in pending] == [("skew-s", "pending")]  # not orphaned
        runs = httpx.get(url + "/api/runs", headers=auth, timeout=10).json()["runs"]
        assert [r["liveness"] for r in runs] == ["live"]
        shown = httpx.get(url + "/api/approvals/skew-s", headers=auth, timeout=10).json()
        assert shown["state"] == "pending" and shown["run"]["liveness"] == "live"
        done = httpx.post(url + "/api/approvals/skew-s/approve", headers=auth, json={}, timeout=30)
        assert done.status_code == 200 and done.json()["result"] == "SUCCESS", done.text
        out, err = agent.communicate(timeout=30)
        assert json.loads(out.splitlines()[-1])["output"]["decision"] == "approve", err
    finally:
        for proc in (agent, server):
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)


def test_the_liveness_checks_of_waiting_decisions_read_runs_and_clock_in_one_statement(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``goldfive serve`` checks the runs of every decision waiting for an ack four times a second: one statement per
    check (were two: the runs, then the store's clock), judged on the store's clock as before."""
    store = backend.open()
    for run, pid, host in (("run-dead", 999_999, "another-host"), ("run-far", 999_998, "another-host")):
        store.append_events([make_event(run, 0, events_pb2.RunStarted(adapter="callable"))], pid=pid, host=host)
    store.append_events([make_event("run-done", 0, events_pb2.RunStarted(adapter="callable"))], pid=1, host="h")
    store.append_events([make_event("run-done", 1, events_pb2.RunCompleted())], pid=1, host="h")
    store.db.execute(  # type: ignore[attr-defined]
        store.db.conn(),  # type: ignore[attr-defined]
        "UPDATE gf_runs SET heartbeat_at_ms = heartbeat_at_ms - 60000 WHERE run_id = 'run-dead'",
    )
    statements: list[str] = []
    real = type(store.db).execute  # type: ignore[attr-defined]

    def counted(db: Any, conn: Any, sql: str, params: Any = ()) -> Any:
        statements.append(sql)
        return real(db, conn, sql, params)

    monkeypatch.setattr(type(store.db), "execute", counted)  # type: ignore[attr-defined]
    gone = owners.gone_runs(store, ["run-dead", "run-far", "run-done", "run-never"])
    assert len(statements) == 1, statements
    assert sorted(gone) == ["run-dead", "run-done", "run-never"]  # the fresh one on another host is live
    assert gone["run-dead"].reason.startswith("no heartbeat from process 999999")
