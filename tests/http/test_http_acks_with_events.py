"""An HTTP agent's decision event and its ack travel in one request, the event committed first.

A server that says so (``X-Goldfive-Acks: events`` on the stream's answer) takes the agent's events with its acks in
``POST /api/agent/acks``: it admits and commits the events to the audit chain, then records the acks, in one thread
hop. ``HttpChannel`` lets its acks ride on the sink's next write, carrying the events queued before them (the
decision's ``ApprovalGranted``, emitted as the message was dispatched): one request where there were two, and the
person's answer (after the ack) comes after the event is on the record. A server that does not say so gets the events
and the acks as before; events the server refuses refuse the whole request, acks included.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from google.protobuf import json_format
from http_support import eventually, site, tool_agent
from server_support import live
from starlette.datastructures import MutableHeaders
from store_support import Backend

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.server import ServerConfig, create_app
from goldfive_core.signing import load_or_create_signing_key
from goldfive_core.store import StoreSink
from goldfive_core.store.base import StoreUnavailableError
from goldfive_core.store.http import HttpChannel
from goldfive_core.store.users import add_user


def _posted_kinds(channel: HttpChannel) -> list[tuple[str, list[str]]]:
    """Each request the sink and ledger make through ``remote.request``: its path and its events' kinds."""
    made: list[tuple[str, list[str]]] = []
    request = channel.remote.request

    def counted(method: str, path: str, body: Any = None) -> Any:
        kinds = []
        for item in (body or {}).get("events", []) if isinstance(body, dict) else []:
            event = events_pb2.Event()
            json_format.ParseDict(item, event)
            kinds.append(str(event.WhichOneof("payload")))
        made.append((path.split("?", 1)[0], kinds))
        return request(method, path, body)

    channel.remote.request = counted  # type: ignore[method-assign]
    return made


def _kinds_of(backend: Backend, target: str) -> list[str]:
    rows = backend.open().audit_rows(limit=100_000)
    return [r.kind for r in rows if target.encode() in r.body]


async def test_the_decision_s_event_rides_with_its_ack_and_is_on_the_record_before_the_person_s_answer(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    with site(sqlite_backend, tmp_path) as s:
        channel = HttpChannel(s.url, token=s.tokens["bot"])
        made = _posted_kinds(channel)
        ran: list[Any] = []
        run = tool_agent(channel, "call-r", ran)
        try:
            await s.pending("call-r")
            answer = await s.decide("call-r")
            assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
            # The person's answer came after the ack, which came after the event's commit: on the record now.
            assert "approval_granted" in _kinds_of(sqlite_backend, "call-r")
            result = await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
    assert result.output.status == "ran" and ran == [{"amount": 10}]
    assert channel.inbox.rides >= 1
    # The sink never posted the decision's event on its own: it went with the ack.
    assert not [kinds for path, kinds in made if "approval_granted" in kinds], made
    assert sqlite_backend.open().verify_audit().ok


async def test_a_ride_that_fails_sends_the_ack_alone_and_the_sink_writes_the_event(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    with site(sqlite_backend, tmp_path) as s:
        channel = HttpChannel(s.url, token=s.tokens["bot"])
        made = _posted_kinds(channel)

        def out_of_reach(*args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailableError("the connection broke")

        channel.remote.acks_with_events = out_of_reach  # type: ignore[method-assign]
        ran: list[Any] = []
        run = tool_agent(channel, "call-f", ran)
        try:
            await s.pending("call-f")
            answer = await s.decide("call-f")
            assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
            result = await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
    assert result.output.status == "ran" and ran == [{"amount": 10}]
    assert channel.inbox.rides == 0
    assert [path for path, kinds in made if "approval_granted" in kinds] == ["/api/agent/events"], made
    assert _kinds_of(sqlite_backend, "call-f").count("approval_granted") == 1
    assert sqlite_backend.open().verify_audit().ok


class _OlderServer:
    """The app as a server from before events rode with acks: it does not say it takes them."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def without(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if "x-goldfive-acks" in headers:
                    del headers["x-goldfive-acks"]
            await send(message)

        await self.app(scope, receive, without if scope["type"] == "http" else send)


async def test_an_older_server_gets_the_event_and_the_ack_as_two_requests(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    store = sqlite_backend.open()
    signer, _ = load_or_create_signing_key(tmp_path / "keys" / "decision-key.pem")
    tokens = {name: add_user(store, name, role).token for name, role in (("ana", "approver"), ("bot", "agent"))}
    app = create_app(store, ServerConfig(signer=signer))
    async with live(_OlderServer(app)) as url:
        channel = HttpChannel(url, token=tokens["bot"])
        made = _posted_kinds(channel)
        ran: list[Any] = []
        run = tool_agent(channel, "call-o", ran)
        try:
            await eventually(lambda: _open(store, "call-o"), "the request in the store")
            async with httpx.AsyncClient(base_url=url, timeout=60) as person:
                answer = await person.post(
                    "/api/approvals/call-o/approve", json={}, headers={"Authorization": f"Bearer {tokens['ana']}"}
                )
            assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
            result = await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
    assert result.output.status == "ran" and ran == [{"amount": 10}]
    assert channel.inbox.rides == 0
    assert [path for path, kinds in made if "approval_granted" in kinds] == ["/api/agent/events"], made
    assert store.verify_audit().ok


async def _open(store: Any, target: str) -> bool:
    return any(r.open for r in store.approvals_for(target))


def _event(run_id: str, sequence: int, payload: Any) -> dict[str, Any]:
    event = events_pb2.Event(event_id=f"ev-{run_id}-{sequence}", run_id=run_id, sequence=sequence)
    event.emitted_at.FromMilliseconds(int(time.time() * 1000))
    field = next(
        f.name
        for f in events_pb2.Event.DESCRIPTOR.oneofs_by_name["payload"].fields
        if f.message_type.full_name == type(payload).DESCRIPTOR.full_name
    )
    getattr(event, field).CopyFrom(payload)
    out: dict[str, Any] = json_format.MessageToDict(event, preserving_proto_field_name=True)
    return out


async def test_events_refused_with_acks_refuse_the_acks_too_and_nothing_is_written(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    run = "bot:r1"
    with site(sqlite_backend, tmp_path) as s:
        bot = {"Authorization": f"Bearer {s.tokens['bot']}"}
        async with httpx.AsyncClient(base_url=s.url, timeout=60) as client:
            asked = events_pb2.ApprovalRequested(target_id="call-x", kind="task", prompt="pay?", timeout_ms=600_000)
            started = _event(run, 0, events_pb2.RunStarted(adapter="callable"))
            registered = await client.post(
                "/api/agent/events",
                json={"pid": 1, "host": "h", "events": [started, _event(run, 1, asked)]},
                headers=bot,
            )
            assert registered.status_code == 200, registered.text
            params = {"run": run, "endpoint": "e1"}
            async with client.stream("GET", "/api/agent/stream", params=params, headers=bot) as stream:
                assert stream.headers.get("X-Goldfive-Acks") == "events"
                decided = asyncio.create_task(s.decide("call-x"))
                frame = await _control_frame(stream)
                ack = {"control_id": frame["message"]["id"], "result": "SUCCESS", "detail": "approved"}
                acks = {"endpoint": "e1", "acks": [{"inbox_id": frame["inbox_id"], "ack": ack}], "pid": 1, "host": "h"}
                # A grant no person made: the events are refused, and with them the ack.
                forged = _event(run, 2, events_pb2.GrantCreated(target_id="call-x", rule="r", scope="session"))
                refused = await client.post("/api/agent/acks", json={**acks, "events": [forged]}, headers=bot)
                assert refused.status_code == 403, refused.text
                assert sqlite_backend.open().get_acks([ack["control_id"]]) == {}  # no ack recorded
                assert "grant_created" not in _kinds_of(sqlite_backend, "call-x")
                decision = frame["message"]["approve"]
                applied = events_pb2.ApprovalGranted(
                    target_id="call-x", decided_by=decision["decided_by"], channel="api"
                )
                granted = _event(run, 2, applied)
                taken = await client.post("/api/agent/acks", json={**acks, "events": [granted]}, headers=bot)
                assert taken.status_code == 200, taken.text
                assert taken.json()["acked"] == [frame["inbox_id"]] and taken.json()["written"] == 1
                answer = await asyncio.wait_for(decided, 30)
        assert answer.status_code == 200 and answer.json()["verdict"] == "applied", answer.text
    assert _kinds_of(sqlite_backend, "call-x") == ["approval_requested", "approval_granted"]
    report = sqlite_backend.open().verify_audit()
    assert report.ok, report.problems


async def test_a_claim_on_another_agent_s_run_refuses_the_acks_and_the_events_with_them(
    sqlite_backend: Backend, tmp_path: Path
) -> None:
    with site(sqlite_backend, tmp_path) as s:
        eve = {"Authorization": f"Bearer {add_user(sqlite_backend.open(), 'eve', 'agent').token}"}
        bot = {"Authorization": f"Bearer {s.tokens['bot']}"}
        async with httpx.AsyncClient(base_url=s.url, timeout=60) as client:
            started = {"pid": 1, "host": "h", "events": [_event("eve:r9", 0, events_pb2.RunStarted(adapter="x"))]}
            assert (await client.post("/api/agent/events", json=started, headers=eve)).status_code == 200
            mine = _event("bot:r1", 0, events_pb2.RunStarted(adapter="callable"))
            ack = {"control_id": "ctl-1", "result": "SUCCESS", "detail": "approved"}
            claim = {"call_id": "call-e", "run_id": "eve:r9", "args_digest": "", "pid": 1, "host": "h"}
            body = {
                "endpoint": "e1",
                "acks": [{"inbox_id": 1, "ack": ack, "claim": claim}],
                "events": [mine],
                "pid": 1,
                "host": "h",
            }
            refused = await client.post("/api/agent/acks", json=body, headers=bot)
    assert refused.status_code == 403 and "eve:r9" in refused.json()["error"], refused.text
    assert [r.run_id for r in sqlite_backend.open().audit_rows(limit=100)] == ["eve:r9"]  # bot's event not written
    assert sqlite_backend.open().execution("call-e") is None


async def _control_frame(stream: httpx.Response) -> dict[str, Any]:
    import json

    async for line in stream.aiter_lines():
        if line.startswith("data: "):
            frame: dict[str, Any] = json.loads(line[6:])
            return frame
    raise AssertionError("the stream ended without a control frame")


def _started(run: str, sequence: int) -> events_pb2.Event:
    event = events_pb2.Event(event_id=f"ev-{run}-{sequence}", run_id=run, sequence=sequence)
    event.run_started.adapter = "callable"
    return event


async def test_a_ride_that_fails_or_was_given_up_leaves_its_events_to_the_sink(sqlite_backend: Backend) -> None:
    store = sqlite_backend.open()
    sink = StoreSink(sqlite_backend.open())
    release = threading.Event()
    try:

        def held(events: Sequence[events_pb2.Event], pid: int) -> int:
            release.wait(10)  # the writer is busy here while the next ride is given up
            return len(events)

        sink.emit(_started("r-held", 0))
        first = sink.ride(held)
        assert first is not None
        sink.emit(_started("r-given-up", 0))
        given_up = sink.ride(lambda events, pid: len(events))
        assert given_up is not None and given_up.cancel()
        release.set()
        assert first.result(10) == 1  # the ride carried the event queued before it, and wrote it (it says so)

        def unreachable(events: Sequence[events_pb2.Event], pid: int) -> int:
            raise StoreUnavailableError("the server is out of reach")

        sink.emit(_started("r-failed", 0))
        failed = sink.ride(unreachable)
        assert failed is not None and isinstance(failed.exception(10), StoreUnavailableError)
        assert sink.flush(10)
    finally:
        sink.close(5)
    runs = [r.run_id for r in store.audit_rows(limit=1000)]
    # The held ride's event was its to write (it did not); the other two were written by the sink, once each.
    assert runs == ["r-given-up", "r-failed"], runs
