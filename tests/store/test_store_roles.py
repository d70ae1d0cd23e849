"""The store by role: a run's liveness is a state with its reason beside it, a run's status an enum whose values
are the stored text, and an agent's RemoteStore is the roles it serves without being a Store."""

from __future__ import annotations

import dataclasses
import json

from store_support import Backend, make_event

from goldfive_core.pb.v1 import events_pb2, types_pb2
from goldfive_core.store import (
    DecisionSource,
    GrantReader,
    Liveness,
    RunLiveness,
    Store,
    StoredRunStatus,
    judge_liveness,
    run_liveness,
)
from goldfive_core.store.http import RemoteStore
from goldfive_core.store.liveness import DETACHED_LIVENESS


def test_liveness_is_a_state_and_the_words_people_read_are_beside_it(backend: Backend) -> None:
    store = backend.open()
    assert judge_liveness(None) == RunLiveness(
        state=Liveness.GONE, reason="no process ever reported this run (no heartbeat recorded)"
    )
    store.append_events([make_event("run-a", 0, events_pb2.RunStarted(adapter="callable"))], pid=1, host="h")
    run = store.run("run-a")
    assert run is not None and run.status is StoredRunStatus.RUNNING
    assert json.loads(json.dumps(dataclasses.asdict(run)))["status"] == "running"  # the stored text, as before
    live = store.liveness_of(run)
    assert live.state is Liveness.LIVE and live.live and live.waits and store.liveness(run) == live.reason == "live"

    store.append_events([make_event("run-a", 1, events_pb2.RunCompleted())], pid=1, host="h")
    ended = store.run("run-a")
    assert ended is not None and ended.status is StoredRunStatus.FINISHED
    assert store.liveness_of(ended) == RunLiveness(state=Liveness.FINISHED, reason="finished")
    assert run_liveness(ended) == "finished"

    store.append_events(
        [make_event("run-b", 0, events_pb2.RunStarted(adapter="callable"))], pid=999_999, host="elsewhere"
    )
    stale = store.run("run-b")
    assert stale is not None
    gone = judge_liveness(stale, stale_after_ms=1_000, now=stale.heartbeat_at_ms + 60_000)
    assert gone.state is Liveness.GONE and not gone.waits
    assert gone.reason == "no heartbeat from process 999999 on elsewhere for 60 s"


def test_a_detached_run_still_waits_and_an_unknown_stored_status_reads_as_finished(backend: Backend) -> None:
    store = backend.open()
    store.append_events([make_event("run-p", 0, events_pb2.RunStarted(adapter="adk"))], pid=1, host="h")
    store.record_detached("call-1", run_id="run-p", app_name="app", user_id="u", session_id="s", invocation_id="i")
    aborted = events_pb2.RunAborted(reason="parked", status=types_pb2.RUN_STATUS_DETACHED)
    store.append_events([make_event("run-p", 1, aborted)], pid=1, host="h")
    parked = store.run("run-p")
    assert parked is not None and parked.status is StoredRunStatus.DETACHED
    detached = store.liveness_of(parked)
    assert detached == RunLiveness(state=Liveness.DETACHED, reason=DETACHED_LIVENESS) and detached.waits
    assert not detached.live
    edited = dataclasses.replace(parked, status="edited by hand")  # type: ignore[arg-type]
    assert edited.status is StoredRunStatus.FINISHED and judge_liveness(edited).state is Liveness.FINISHED


def test_an_agents_remote_store_serves_its_roles_without_being_a_store() -> None:
    remote = RemoteStore(["http://127.0.0.1:9"], token="gf5_x")
    assert not isinstance(remote, Store)  # a channel over HTTP never takes it for a database (detach_after)
    assert isinstance(remote, GrantReader)
    reader: DecisionSource = remote  # typed on the role it serves (mypy checks what the line says)
    assert reader.approvals(run_id="") == []
