"""A call parked by ``detach_after`` is pending in the inbox's list (its run resumes by itself), not orphaned."""

from __future__ import annotations

from server_support import Server
from store_support import make_event

from goldfive_core.pb.v1 import events_pb2, types_pb2


def _ended_run(server: Server, run_id: str, target: str, *, parked: bool) -> None:
    store = server.store
    store.append_events(
        [
            make_event(run_id, 0, events_pb2.RunStarted(adapter="adk", root_task_id="e-1")),
            make_event(run_id, 1, events_pb2.ApprovalRequested(target_id=target, kind="tool", prompt="pay?")),
        ],
        pid=1,
        host="elsewhere",
    )
    if parked:
        store.record_detached(
            target, run_id=run_id, app_name="app", user_id="u", session_id="s", invocation_id="e-1", detail="waits"
        )
    aborted = events_pb2.RunAborted(status=types_pb2.RUN_STATUS_DETACHED, reason="waits for a person")
    store.append_events([make_event(run_id, 2, aborted)], pid=1, host="elsewhere")


async def test_a_parked_approval_is_listed_as_pending_and_an_abandoned_one_as_orphaned(server: Server) -> None:
    _ended_run(server, "run-parked", "adk-parked", parked=True)
    _ended_run(server, "run-gone", "adk-gone", parked=False)  # ADK's native confirmation: nobody resumes it
    pending = (await server.get("/api/approvals")).json()["approvals"]
    assert [(a["target_id"], a["state"]) for a in pending] == [("adk-parked", "pending")]
    orphaned = (await server.get("/api/approvals?status=orphaned")).json()["approvals"]
    assert [a["target_id"] for a in orphaned] == ["adk-gone"]
    one = (await server.get("/api/approvals/adk-parked")).json()
    assert one["state"] == "pending" and one["orphaned_reason"] == ""
