"""Detached approvals through ADK's real HTTP server (``get_fast_api_app`` + uvicorn, subprocesses).

The client's POST /run_sse ends with ADK's confirmation request naming the goldfive approval; a person
decides from another process (the ``goldfive`` command); the server's Resumer resumes the invocation by
itself; the tool body runs once on approve, never on reject — also across a restart, with two servers on
one store, and when a client resumes the invocation itself at the same moment.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from adk_http_support import (
    Server,
    World,
    calls,
    confirmation_answer,
    responses,
    texts,
    user_text,
    wait_until,
)

from goldfive_core.store import DetachedStatus, open_store

pytestmark = pytest.mark.timeout(120)


def _detach(server: Server, session_id: str = "s1") -> tuple[str, str, str]:
    """Start a run that detaches; returns (approval id, invocation id, confirmation call id)."""
    server.create_session(session_id)
    events = server.run_sse(session_id, user_text("pay bob"))
    (call,) = calls(events, "transfer")
    (confirm,) = calls(events, "adk_request_confirmation")
    info = confirm["args"]["toolConfirmation"]["payload"]["goldfive"]
    assert info["approval_id"] == call["id"] and info["status"] == "waiting_for_person"
    assert info["inbox"] == f"http://inbox.example/approvals/{call['id']}"
    (placeholder,) = responses(events, "transfer")
    assert placeholder["reason"] == "awaiting_approval" and placeholder["goldfive"]["approval_id"] == call["id"]
    return call["id"], events[0]["invocationId"], confirm["id"]


def _finished(server: Server, session_id: str = "s1") -> list[dict[str, Any]]:
    def done() -> list[dict[str, Any]] | None:
        events = list(server.session(session_id)["events"])
        return events if any(t.startswith("tool said") for t in texts(events)) else None

    return wait_until(done, what="the resumed run's final answer in the ADK session")


def test_detach_then_approve_from_the_cli_resumes_and_runs_once(world: World, servers: Any) -> None:
    server = servers()
    approval, invocation, _ = _detach(server)
    store = open_store(str(world.db))
    (row,) = store.approvals()
    assert row.target_id == approval and row.status == "pending"
    detached = store.detached(approval)
    assert detached is not None and detached.status is DetachedStatus.WAITING
    assert detached.invocation_id == invocation and detached.session_id == "s1"
    assert f"{approval}  [detached]" in world.cli("pending").stdout
    assert world.runs_of_body() == []
    assert store.verify_audit().ok, store.verify_audit().problems  # the detached run's record matches its events

    decided = world.cli("approve", approval, "--by", "ann")
    assert decided.returncode == 0 and decided.stdout.startswith("recorded:"), decided.stderr

    events = _finished(server)
    assert 'tool said {"sent": 10, "to": "bob"}' in texts(events)
    assert {e["invocationId"] for e in events} == {invocation}  # ADK resumed the same invocation
    assert responses(events, "transfer")[-1] == {"sent": 10, "to": "bob"}
    assert world.runs_of_body() == [f"bob 10 pid {server.pid}"]
    wait_until(lambda: store.detached(approval).status is DetachedStatus.RESUMED, what="RESUMED")  # type: ignore[union-attr]
    assert store.execution(approval).state.value == "done"  # type: ignore[union-attr]
    kinds = wait_until(
        lambda: (k := [r.kind for r in store.audit_rows(limit=500)]) and "run_completed" in k and k,
        what="the resumed run's RunCompleted in the store",
    )
    assert kinds.count("run_started") == 2 and "approval_granted" in kinds and "run_aborted" in kinds
    assert "approval_cancelled" not in kinds and "approval_timed_out" not in kinds
    assert "detached" not in world.cli("runs").stdout  # the detached run is over once resumed
    report = store.verify_audit()  # resumed, ended: every record still matches the audit log
    assert report.ok, report.problems


def test_reject_resumes_and_the_body_never_runs(world: World, servers: Any) -> None:
    server = servers()
    approval, _, _ = _detach(server)
    assert world.cli("reject", approval, "--reason", "not today").returncode == 0
    events = _finished(server)
    final = responses(events, "transfer")[-1]
    assert final["reason"] == "user_rejected" and final["detail"] == "not today"
    assert world.runs_of_body() == []


def test_a_server_restarted_between_detach_and_decision_resumes_at_start_up(world: World, servers: Any) -> None:
    first = servers()
    approval, invocation, _ = _detach(first)
    first.stop()
    assert world.cli("approve", approval, "--by", "ann").returncode == 0  # nobody is running
    second = servers()
    events = _finished(second)
    assert {e["invocationId"] for e in events} == {invocation}
    assert world.runs_of_body() == [f"bob 10 pid {second.pid}"]


def _passes_while_held(world: World, pid: int) -> None:
    """Wait (a handshake, not a sleep) until server ``pid``'s Resumer has looked at the store twice more."""
    start = world.resumer_passes(pid)
    wait_until(lambda: world.resumer_passes(pid) >= start + 2, what=f"two more Resumer passes in {pid}")


def test_two_servers_on_one_store_resume_exactly_once(world: World, servers: Any) -> None:
    world.hold_bodies()
    a, b = servers(), servers()
    approval, _, _ = _detach(a)
    assert world.cli("approve", approval, "--by", "ann").returncode == 0
    # One Resumer took the call and its body is running (held); the other keeps looking at the store.
    (line,) = wait_until(world.runs_of_body, what="the body to start in one server")
    winner = int(line.split()[-1])
    other = b.pid if winner == a.pid else a.pid
    _passes_while_held(world, other)
    world.release()
    _finished(a)
    store = open_store(str(world.db))
    wait_until(lambda: store.detached(approval).status is DetachedStatus.RESUMED, what="RESUMED")  # type: ignore[union-attr]
    assert world.runs_of_body() == [f"bob 10 pid {winner}"]
    row = store.detached(approval)
    assert row is not None and row.claimed_by.split(":")[1] == str(winner)  # the lease holder ran the body
    _one_resume_in_the_session(a, approval)


def test_a_client_answering_before_the_decision_is_refused_and_nothing_runs(world: World, servers: Any) -> None:
    server = servers()
    approval, invocation, confirm = _detach(server)
    # ADK's own resume message with confirmed=True: goldfive applies the store's decision, and there is none.
    events = server.run_sse("s1", confirmation_answer(confirm, True))
    assert calls(events, "transfer") == [] and responses(events, "transfer") == []  # nothing ran, nothing asked
    (error,) = [e for e in events if e.get("errorCode")]
    assert f"approval {approval} (transfer) is not decided yet; nothing ran" in error["errorMessage"]
    assert world.runs_of_body() == []
    store = open_store(str(world.db))
    assert store.detached(approval).status is DetachedStatus.WAITING  # type: ignore[union-attr]
    assert [r.target_id for r in store.approvals()] == [approval]  # still the one pending request
    # The confirmation was not consumed: the decision still resumes the same invocation, once.
    assert world.cli("approve", approval, "--by", "ann").returncode == 0
    events = _finished(server)
    assert {e["invocationId"] for e in events} == {invocation}
    assert world.runs_of_body() == [f"bob 10 pid {server.pid}"]


def test_a_client_resuming_at_the_same_moment_as_the_resumer_never_runs_the_body_twice(
    world: World, servers: Any
) -> None:
    server = servers()
    approval, _, confirm = _detach(server)
    got: list[Any] = []

    def client() -> None:
        try:
            got.append(server.run_sse("s1", confirmation_answer(confirm, True)))
        except AssertionError as exc:  # an HTTP error status is an answer too: what matters is what ran
            got.append(exc)

    thread = threading.Thread(target=client)
    decided = world.cli("approve", approval, "--by", "ann")
    thread.start()
    assert decided.returncode == 0
    thread.join(timeout=60)
    assert not thread.is_alive()
    _finished(server)
    assert len(world.runs_of_body()) == 1
    store = open_store(str(world.db))
    wait_until(lambda: store.detached(approval).status is DetachedStatus.RESUMED, what="RESUMED")  # type: ignore[union-attr]
    (answer,) = got
    assert isinstance(answer, list), answer
    # The client's own stream carries the one result (it resumed, or waited for the resumer's outcome), or
    # nothing when ADK saw its answer only after the resumer had consumed the confirmation (ADK's own dedup).
    assert responses(answer, "transfer") in ([{"sent": 10, "to": "bob"}], []), answer
    _one_resume_in_the_session(server, approval, client_answered=True)


def _one_resume_in_the_session(server: Server, approval: str, *, client_answered: bool = False) -> None:
    """The ADK session holds the parked placeholder and then the body's one result.

    A second resume by another Resumer would add a second answer (the ledger's "in doubt" or an already-done
    replay) even when the body itself ran once. A client that answered ADK itself may add the same result
    once more (it waited for the lease holder and was given the recorded result), never anything else.
    """
    answered = responses(server.session("s1")["events"], "transfer")
    assert answered[0]["reason"] == "awaiting_approval", answered
    assert answered[1:] in ([{"sent": 10, "to": "bob"}], [{"sent": 10, "to": "bob"}] * (2 if client_answered else 1))
    rows = open_store(str(server.world.db)).audit_rows(limit=500)
    applied = {r.run_id for r in rows if r.kind == "approval_granted"} - {rows[0].run_id}
    assert len(applied) == 1, "\n".join(f"{r.run_id} {r.kind}" for r in rows)  # one run applied the decision
    assert "drift_detected" not in [r.kind for r in rows]  # no in-doubt replay


def test_without_detach_after_the_request_is_held_until_the_person_decides(tmp_path: Any) -> None:
    world = World(tmp_path, detach_after="none")
    server = Server(world)
    try:
        server.create_session("s1")
        got: list[list[dict[str, Any]]] = []
        thread = threading.Thread(target=lambda: got.append(server.run_sse("s1", user_text("pay bob"))))
        thread.start()
        store = open_store(str(world.db))
        (row,) = wait_until(lambda: store.approvals(), what="the approval request in the store")
        assert thread.is_alive()  # the client's request is still open: the wait is in-process
        assert "[pending]" in world.cli("pending").stdout
        decided = world.cli("approve", row.target_id, "--by", "ann")
        assert decided.returncode == 0 and decided.stdout.startswith("ok: approved"), decided.stdout + decided.stderr
        thread.join(timeout=60)
        (events,) = got
        assert calls(events, "adk_request_confirmation") == []  # no ADK confirmation, no detaching
        assert 'tool said {"sent": 10, "to": "bob"}' in texts(events)  # the same request carried the answer
        assert world.runs_of_body() == [f"bob 10 pid {server.pid}"]
        assert store.detached_runs(status=None) == []
    finally:
        server.stop()


def test_a_client_resuming_while_the_resumer_runs_the_body_gets_its_result_without_a_second_run(
    world: World, servers: Any
) -> None:
    world.hold_bodies()
    server = servers()
    approval, _, confirm = _detach(server)
    assert world.cli("approve", approval, "--by", "ann").returncode == 0
    wait_until(world.runs_of_body, what="the Resumer's body to start")
    got: list[Any] = []
    thread = threading.Thread(target=lambda: got.append(server.run_sse("s1", confirmation_answer(confirm, True))))
    thread.start()
    # The client's answer is in the ADK session (its invocation is under way) while the body is still held.
    wait_until(
        lambda: len(responses(server.session("s1")["events"], "adk_request_confirmation")) == 2,
        what="the client's answer in the session",
    )
    world.release()
    thread.join(timeout=60)
    assert not thread.is_alive()
    _finished(server)
    assert world.runs_of_body() == [f"bob 10 pid {server.pid}"]
    (answer,) = got
    # The client waited for the lease holder and got the call's one result, or ADK dropped its repeated answer.
    assert responses(answer, "transfer") in ([{"sent": 10, "to": "bob"}], []), answer
    assert not [e for e in answer if e.get("errorCode")], answer
    _one_resume_in_the_session(server, approval, client_answered=True)


def test_a_parked_call_whose_approval_expires_undecided_resumes_with_the_timeout(world: World, servers: Any) -> None:
    world.extra_env["GOLDFIVE_STEER_TOOL_APPROVAL_TIMEOUT_MS"] = "1500"
    server = servers()
    _detach(server)
    events = _finished(server)  # nobody decides: the Resumer takes the call up when the request expires
    final = responses(events, "transfer")[-1]
    assert final["reason"] == "approval_timeout" and "Do not assume it was approved" in final["detail"], final
    assert world.runs_of_body() == []
