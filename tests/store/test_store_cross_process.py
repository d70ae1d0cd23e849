"""An agent in one process, the goldfive command in others: decisions, acks, exit codes, restarts."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_support import HERE, PYTHON, Backend, make_event, wait_until

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import ExecutionState

AGENT = str(HERE / "agent_proc.py")


def cli(backend: Backend, *argv: str, timeout: float = 45) -> subprocess.CompletedProcess[str]:
    """Run the goldfive command (as a separate process) against the backend's store."""
    return subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", *argv],
        env=backend.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class Agent:
    """A running agent_proc.py."""

    def __init__(self, backend: Backend, *argv: str) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, AGENT, *argv], env=backend.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def result(self, timeout: float = 20) -> dict[str, Any]:
        out, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, err
        line: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return line

    def kill(self) -> None:
        self.proc.kill()
        self.proc.communicate(timeout=10)


@pytest.fixture
def agents() -> Iterator[list[Agent]]:
    started: list[Agent] = []
    yield started
    for agent in started:
        if agent.proc.poll() is None:
            agent.kill()


def start(agents: list[Agent], backend: Backend, *argv: str) -> Agent:
    agent = Agent(backend, *argv)
    agents.append(agent)
    return agent


def wait_pending(backend: Backend, target: str) -> None:
    store = backend.open()
    wait_until(lambda: any(r.target_id == target for r in store.approvals()), what=f"{target} pending in the store")


def test_approve_from_another_process_resumes_the_agent(backend: Backend, agents: list[Agent]) -> None:
    agent = start(agents, backend, "flow-a", "--call-id", "deploy-1")
    wait_pending(backend, "deploy-1")

    listed = cli(backend, "pending")
    assert listed.returncode == 0 and "deploy-1  [pending]  task: deploy v2?" in listed.stdout

    done = cli(backend, "approve", "deploy-1", "--by", "ann", "--reason", "ship it")
    assert (done.returncode, done.stdout.strip()) == (0, "ok: approved 'deploy-1'")
    assert agent.result()["output"] == {"decision": "approve", "detail": "ship it", "decided_by": "ann"}

    again = cli(backend, "approve", "deploy-1")
    assert again.returncode == 1
    assert "already decided: 'deploy-1' was approved by ann" in again.stderr
    shown = cli(backend, "show", "deploy-1", "--json")
    assert json.loads(shown.stdout)["status"] == "granted"
    assert cli(backend, "audit", "verify").returncode == 0


def test_reject_reason_reaches_the_agent(backend: Backend, agents: list[Agent]) -> None:
    agent = start(agents, backend, "flow-a", "--call-id", "deploy-2")
    wait_pending(backend, "deploy-2")
    done = cli(backend, "reject", "deploy-2", "--reason", "not on a friday", "--by", "bob", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["result"] == "SUCCESS"
    assert agent.result()["output"] == {"decision": "reject", "detail": "not on a friday", "decided_by": "bob"}


def test_usage_and_lookup_errors_have_distinct_exit_codes(backend: Backend, tmp_path: Path) -> None:
    backend.open()  # the store exists and is empty
    unknown = cli(backend, "approve", "nope")
    assert unknown.returncode == 1 and "unknown approval id 'nope'" in unknown.stderr
    assert cli(backend, "reject", "nope").returncode == 2  # --reason is required
    assert cli(backend, "approve", "x", "--edit", "[1,2]").returncode == 2
    assert cli(backend, "frobnicate").returncode == 2
    nobody = cli(backend, "pause")
    assert nobody.returncode == 1 and "no live run" in nobody.stderr


def test_missing_store_is_unreachable(tmp_path: Path) -> None:
    missing = Backend("sqlite", str(tmp_path / "missing.db"))
    result = cli(missing, "pending")
    assert result.returncode == 3 and "no goldfive store at" in result.stderr
    assert not (tmp_path / "missing.db").exists()


def test_unreachable_postgres_is_exit_3() -> None:
    backend = Backend("postgres", "postgresql://goldfive@127.0.0.1:1/none", "public")
    result = cli(backend, "pending")
    assert result.returncode == 3 and "store unreachable" in result.stderr


def test_no_agent_answering_is_exit_4_and_the_message_is_withdrawn(backend: Backend) -> None:
    store = backend.open()
    # A run that looks live (fresh heartbeat, this test's own pid) but whose process serves no channel.
    store.append_events(
        [
            make_event("run-z", 0, events_pb2.RunStarted(adapter="callable")),
            make_event("run-z", 1, events_pb2.ApprovalRequested(target_id="c9", kind="task", prompt="p")),
        ],
        pid=os.getpid(),
        host=socket.gethostname(),
    )
    store.heartbeat(["run-z"])
    result = cli(backend, "approve", "c9", "--timeout", "0.3")
    assert result.returncode == 4 and "it was withdrawn" in result.stderr
    assert store.pending_controls() == []


def test_stale_digest_is_refused(backend: Backend, agents: list[Agent], tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    agent = start(agents, backend, "tool", "--call-id", "pay-1", "--marker", str(marker))
    wait_pending(backend, "pay-1")
    stale = cli(backend, "approve", "pay-1", "--digest", "sha256:" + "0" * 64)
    assert stale.returncode == 1 and "does not match the call awaiting approval" in stale.stdout
    shown = json.loads(cli(backend, "show", "pay-1", "--json").stdout)
    assert shown["status"] == "pending" and shown["tool_name"] == "send_money"
    ok = cli(backend, "approve", "pay-1", "--digest", shown["args_digest"], "--edit", '{"to": "bob", "amount": 3}')
    assert ok.returncode == 0, ok.stderr
    out = agent.result()["output"]
    assert out["status"] == "ran" and out["result"] == {"sent": 3}
    assert marker.read_text().splitlines() == ['{"amount": 3, "to": "bob"}']


def test_two_approvers_at_once_exactly_one_wins(backend: Backend, agents: list[Agent]) -> None:
    agent = start(agents, backend, "flow-a", "--call-id", "race-1")
    wait_pending(backend, "race-1")
    env = backend.env()
    procs = [
        subprocess.Popen(
            [PYTHON, "-m", "goldfive_core.cli", verb, "race-1", "--by", who, *extra],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for verb, who, extra in (("approve", "ann", []), ("reject", "bob", ["--reason", "no"]))
    ]
    results = [(p.wait(timeout=20), p.stdout.read() + p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1], results
    loser = next(text for code, text in results if code == 1)
    assert "already decided" in loser
    winner = "ann" if results[0][0] == 0 else "bob"
    assert agent.result()["output"]["decided_by"] == winner
    decisions = [r for r in backend.open().audit_rows() if r.kind in ("approval_granted", "approval_rejected")]
    assert len(decisions) == 1


def test_killed_agent_leaves_orphan_then_replay_uses_the_recorded_decision(
    backend: Backend, agents: list[Agent], tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    first = start(agents, backend, "tool", "--call-id", "pay-7", "--marker", str(marker))
    wait_pending(backend, "pay-7")
    first.kill()

    listed = cli(backend, "pending")
    assert "pay-7  [orphaned]" in listed.stdout and "is gone (killed or crashed)" in listed.stdout
    recorded = cli(backend, "approve", "pay-7", "--by", "ann")
    assert recorded.returncode == 0 and recorded.stdout.startswith("recorded: approved 'pay-7' in the store")
    assert cli(backend, "approve", "pay-7").returncode == 1  # single use, already decided

    # The restarted agent replays the same call id: it must not ask again, and the body runs once.
    second = start(agents, backend, "tool", "--call-id", "pay-7", "--marker", str(marker))
    out = second.result()["output"]
    assert out["status"] == "ran" and out["result"] == {"sent": 10}
    assert len(marker.read_text().splitlines()) == 1
    store = backend.open()
    assert store.execution("pay-7").state is ExecutionState.DONE  # type: ignore[union-attr]
    assert not any(r.target_id == "pay-7" for r in store.approvals())

    third = start(agents, backend, "tool", "--call-id", "pay-7", "--marker", str(marker))
    assert third.result()["output"]["status"] == "already_done"
    assert len(marker.read_text().splitlines()) == 1
    assert cli(backend, "audit", "verify").returncode == 0


def test_crash_inside_the_body_is_reported_in_doubt_not_rerun(
    backend: Backend, agents: list[Agent], tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    first = start(agents, backend, "tool", "--call-id", "pay-9", "--marker", str(marker), "--die-in-body")
    wait_pending(backend, "pay-9")
    assert cli(backend, "approve", "pay-9").returncode == 0
    first.proc.wait(timeout=20)
    assert first.proc.returncode == 9 and len(marker.read_text().splitlines()) == 1

    listed = cli(backend, "pending")
    assert "IN DOUBT  pay-9" in listed.stdout
    second = start(agents, backend, "tool", "--call-id", "pay-9", "--marker", str(marker))
    out = second.result()["output"]
    assert out["status"] == "in_doubt" and "may or may not have run" in out["detail"]
    assert len(marker.read_text().splitlines()) == 1
    drift = [r.event().drift_detected for r in backend.open().audit_rows() if r.kind == "drift_detected"]
    assert any("in doubt: send_money for 'pay-9'" in d.detail for d in drift)

    # The person checks and says it did not go through: the recorded approval lets a replay run it once.
    assert cli(backend, "resolve", "nope", "--ran").returncode == 1
    settled = cli(backend, "resolve", "pay-9", "--did-not-run", "--by", "ann")
    assert settled.returncode == 0 and "a replay run it once" in settled.stdout
    third = start(agents, backend, "tool", "--call-id", "pay-9", "--marker", str(marker))
    assert third.result()["output"]["status"] == "ran"
    assert len(marker.read_text().splitlines()) == 2
    assert cli(backend, "resolve", "pay-9", "--ran").returncode == 1  # done now: nothing in doubt


def test_run_controls_from_the_command_line(backend: Backend, agents: list[Agent]) -> None:
    agent = start(agents, backend, "steps")
    store = backend.open()
    wait_until(lambda: store.runs(), what="the run to be recorded")
    runs = json.loads(cli(backend, "runs", "--json").stdout)["runs"]
    assert [(r["liveness"], r["pid"]) for r in runs] == [("live", agent.proc.pid)]
    paused = cli(backend, "pause", "--reason", "lunch")
    assert paused.returncode == 0, paused.stderr
    assert "paused" in paused.stdout
    steered = cli(backend, "steer", "stop")
    assert steered.returncode == 0 and "run resumed" in steered.stdout
    assert agent.result()["output"] == {"notes": ["stop"]}
    events = cli(backend, "events")
    assert "run_started" in events.stdout and "run_completed" in events.stdout


_ENVELOPE = {"event_id", "run_id", "sequence", "emitted_at", "session_id"}


def _kind(line: str) -> str:
    """The payload name of one ``events --json`` line."""
    assert line, "goldfive events --follow exited"
    return next(k for k in json.loads(line)["event"] if k not in _ENVELOPE)


def test_events_follow_prints_events_as_they_are_written(backend: Backend, agents: list[Agent]) -> None:
    backend.open()
    follow = subprocess.Popen(
        [PYTHON, "-m", "goldfive_core.cli", "events", "--follow", "--json"],
        env=backend.env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        agent = start(agents, backend, "flow-a", "--call-id", "f-1")
        assert follow.stdout is not None
        kinds = [_kind(follow.stdout.readline())]
        while kinds[-1] != "approval_requested":
            kinds.append(_kind(follow.stdout.readline()))
        assert kinds[0] == "run_started"
        assert cli(backend, "approve", "f-1").returncode == 0
        while kinds[-1] != "run_completed":
            kinds.append(_kind(follow.stdout.readline()))
        assert "approval_granted" in kinds
        agent.result()
    finally:
        follow.kill()
        follow.communicate(timeout=10)


def test_audit_verify_reports_a_corrupted_row(backend: Backend) -> None:
    store = backend.open()
    store.append_events(
        [make_event("run-v", i, events_pb2.TaskProgress(task_id="t", message=f"step {i}")) for i in range(5)],
        pid=1,
        host="h",
    )
    assert cli(backend, "audit", "verify").returncode == 0
    row = store.audit_rows()[2]
    forged = row.event()
    forged.task_progress.message = "nothing happened here"
    sql = "UPDATE gf_audit SET body = ? WHERE seq = ?"
    store.db.execute(store.db.conn(), sql, (forged.SerializeToString(), row.seq))  # type: ignore[attr-defined]
    result = cli(backend, "audit", "verify")
    assert result.returncode == 1
    assert "TAMPERED" in result.stdout and f"row {row.seq} (task_progress of run run-v)" in result.stdout
    as_json = json.loads(cli(backend, "audit", "verify", "--json").stdout)
    assert as_json["ok"] is False and as_json["first_bad_seq"] == row.seq
