"""The probes of issue #27 (holes 9 and 10), each a 4xx that says what is wrong, never a 500 or a traceback:
deep JSON, non-finite and huge numbers, lone surrogates, odd digits in seqs, oversize agent events,
non-ASCII cookies and CSRF tokens; over a real socket: the connection after a refusal, a client that
hangs up mid-body, clients that stall or trickle, and pooled PostgreSQL connections after a restart."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_support import LiveServer, http_head, live_server, read_answer, seed, send_raw
from server_support import Server
from store_support import PG_DSN, Backend

from goldfive_core.store.users import add_user

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "faults"))
from outage_proxy import OutageProxy

DEEP = "[" * 1000 + "]" * 1000


def _seed_request(srv: Server) -> str:
    """A pending request in a run nobody serves (answers come from the store at once)."""
    from store_support import make_event

    from goldfive_core.pb.v1 import events_pb2

    srv.store.append_events(
        [
            make_event("run-j", 0, events_pb2.RunStarted(adapter="callable")),
            make_event("run-j", 1, events_pb2.ApprovalRequested(target_id="pay-j", kind="task", prompt="pay?")),
        ],
        pid=1,
        host="h",
    )
    return "pay-j"


async def _post(srv: Server, path: str, raw: str | bytes, user: str | None = "ana") -> Any:
    headers = {"Content-Type": "application/json", **(srv.auth(user) if user else {})}
    resp = await srv.client.post(path, content=raw.encode() if isinstance(raw, str) else raw, headers=headers)
    return resp.status_code, resp.json().get("error", "")


async def test_json_nested_a_thousand_deep_is_a_400_on_every_body_route_even_before_login(server: Server) -> None:
    server.tokens["bot"] = add_user(server.store, "bot", "agent").token
    target = _seed_request(server)
    for path, user in (
        ("/api/login", None),
        (f"/api/approvals/{target}/approve", "ana"),
        ("/api/runs/run-j/steer", "root"),
        ("/api/agent/events", "bot"),
        ("/api/agent/heartbeat", "bot"),
    ):
        for body in (DEEP, '{"reason": ' + DEEP + "}", '{"a":' * 1000 + "1" + "}" * 1000):
            status, error = await _post(server, path, body, user)
            assert (status, "nests deeper than" in error) == (400, True), (path, status, error)


async def test_nan_infinity_1e999_and_huge_integers_in_edited_args_are_refused_and_nothing_is_decided(
    server: Server,
) -> None:
    target = _seed_request(server)
    head = server.store.audit_head()
    for value, words in (
        ("NaN", "finite"),
        ("Infinity", "finite"),
        ("-Infinity", "finite"),
        ("1e999", "out of range"),
        ("-1e999", "out of range"),
        ("9" * 5000, "5000 digits"),
    ):
        status, error = await _post(server, f"/api/approvals/{target}/approve", '{"edited_args": {"n": ' + value + "}}")
        assert status == 400 and words in error, (value[:20], status, error)
    assert server.store.audit_head() == head
    assert (await server.get(f"/api/approvals/{target}")).json()["state"] == "pending"


async def test_lone_surrogates_are_refused_naming_the_field(server: Server) -> None:
    server.tokens["bot"] = add_user(server.store, "bot", "agent").token
    target = _seed_request(server)
    head = server.store.audit_head()
    for path, body, user, field in (
        (f"/api/approvals/{target}/reject", '{"reason": "no\\ud800"}', "ana", "'reason'"),
        ("/api/runs/run-j/steer", '{"text": "\\udfff left"}', "root", "'text'"),
        ("/api/agent/heartbeat", '{"run_ids": ["\\ud83d"]}', "bot", "'run_ids[0]'"),
        ("/api/login", '{"name": "\\ud800", "token": "x"}', None, "'name'"),
        ("/api/runs/run-j/pause", '{"\\udc00": 1}', "root", "a key"),
    ):
        status, error = await _post(server, path, body, user)
        assert status == 400 and field in error and "not text" in error, (path, status, error)
    assert server.store.audit_head() == head


@pytest.mark.parametrize(
    "junk", [b"p1.\xb2\xb2.ab", "p1.١٢.ab".encode(), b"p1." + b"9" * 5000 + b".ab", b"p1..", b"\xff"]
)
async def test_a_junk_agent_pass_is_ignored_and_the_token_is_checked_as_usual(
    sqlite_server: Server, junk: bytes
) -> None:
    """An agent's pass (X-Goldfive-Pass) that is not one is never a 500: the token's secret decides, as without it."""
    from goldfive_core.store.agents import PASS_HEADER

    token = add_user(sqlite_server.store, f"ann-{uuid.uuid4().hex[:6]}", "approver").token  # not checked yet here
    for credential, status in ((token[:-2] + "xx", 401), (token, 200)):
        resp = await sqlite_server.client.get(
            "/api/me", headers={"Authorization": f"Bearer {credential}", PASS_HEADER: junk}
        )
        assert resp.status_code == status, (junk[:40], resp.status_code, resp.text[:200])


@pytest.mark.parametrize(
    ("where", "value"),
    [("after", "²"), ("after", "١٢"), ("after", "9" * 5000), ("header", "\xb2"), ("header", "9" * 5000)],
)
async def test_odd_digits_and_huge_seqs_in_after_and_last_event_id_are_400(
    sqlite_server: Server, where: str, value: str
) -> None:
    srv = sqlite_server
    _seed_request(srv)
    if where == "header":
        resp = await srv.client.get(
            "/api/events", headers={**srv.auth("ana"), "Last-Event-ID": value.encode("latin-1")}
        )
        assert resp.status_code == 400 and "Last-Event-ID" in resp.json()["error"], resp.text
        return
    for path in ("/api/events", "/api/audit/events", "/api/runs/run-j/events"):
        resp = await srv.get(f"{path}?after={value}")
        assert resp.status_code == 400 and "'after'" in resp.json()["error"], (path, resp.text)


async def test_agent_written_events_get_the_agents_size_limits(server: Server) -> None:
    server.tokens["bot"] = add_user(server.store, "bot", "agent").token
    limits = server.store.limits

    def request(**payload: Any) -> dict[str, Any]:
        event = {"event_id": "ev-big", "run_id": "run-big", "sequence": 0, "approval_requested": payload}
        return {"events": [event], "pid": 1, "host": "h"}

    head = server.store.audit_head()
    for payload, words in (
        ({"target_id": "t", "prompt": "p" * 3_000_000}, "approval_requested.prompt is 3000000 characters"),
        ({"target_id": "t", "metadata": {"tool_name": "n" * 100_000}}, "'tool_name'] is 100000 characters"),
        ({"target_id": "t" * (limits.max_id_chars + 1)}, "GOLDFIVE_LIMIT_MAX_ID_CHARS"),
        ({"target_id": "t", "metadata": {"args_json": "1" * (limits.max_args_chars + 1)}}, "MAX_ARGS_CHARS"),
    ):
        resp = await server.post("/api/agent/events", request(**payload), user="bot")
        assert resp.status_code == 400 and words in resp.json()["error"], resp.text[:300]
    assert server.store.audit_head() == head  # nothing was stored
    resp = await server.post("/api/agent/events", {**request(target_id="t", prompt="ok?"), "pid": 2**64}, user="bot")
    assert resp.status_code == 400 and "'pid'" in resp.json()["error"]
    fits = request(target_id="t", prompt="p" * limits.max_prompt_chars, metadata={"tool_name": "lookup"})
    assert (await server.post("/api/agent/events", fits, user="bot")).status_code == 200


async def test_non_ascii_bytes_in_a_session_cookie_or_a_csrf_token_are_refused_not_crashed(
    sqlite_server: Server,
) -> None:
    srv = sqlite_server
    resp = await srv.client.get("/api/me", headers={"Cookie": "gf_session=\xe9\xe9.\xe9\xe9".encode("latin-1")})
    assert resp.status_code == 401, resp.text
    login = await srv.client.post("/api/login", json={"name": "ana", "token": srv.tokens["ana"]})
    assert login.status_code == 200
    resp = await srv.client.post("/api/logout", headers={"X-CSRF-Token": "\xe9\xe9".encode("latin-1")})
    assert resp.status_code == 403 and "CSRF" in resp.json()["error"], resp.text


# -- over a real socket -------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _live(tmp_path: Path, **config: Any) -> Iterator[LiveServer]:
    with live_server(Backend("sqlite", str(tmp_path / "goldfive.db")).open(), tmp_path, **config) as live:
        seed(live)
        yield live


@contextlib.asynccontextmanager
async def _connection(port: int) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def _keepalive_head(method: str, path: str, headers: list[tuple[str, bytes]], length: int | None) -> bytes:
    return http_head(method, path, headers, length=length).replace(b"Connection: close", b"Connection: keep-alive")


async def test_after_deep_json_at_login_the_same_connection_serves_the_next_request(tmp_path: Path) -> None:
    with _live(tmp_path) as live:
        async with _connection(live.port) as (reader, writer):
            body = DEEP.encode()
            writer.write(_keepalive_head("POST", "/api/login", [("Content-Type", b"application/json")], len(body)))
            writer.write(body)
            first = await asyncio.wait_for(read_answer(reader), 10)
            assert first.status == 400 and "nests deeper than" in first.json()["error"]
            auth = [("Authorization", f"Bearer {live.tokens['ana']}".encode())]
            writer.write(_keepalive_head("GET", "/api/me", auth, None))
            second = await asyncio.wait_for(read_answer(reader), 10)
            assert second.status == 200 and second.json()["name"] == "ana"
        assert live.log.tracebacks() == []


async def test_a_client_that_hangs_up_mid_body_leaves_no_traceback(tmp_path: Path) -> None:
    with _live(tmp_path) as live:
        auth = [("Authorization", f"Bearer {live.tokens['ana']}".encode()), ("Content-Type", b"application/json")]
        for path in ("/api/login", "/api/approvals/fz-0-0/approve", "/api/runs/fz-run-0/steer"):
            await send_raw(live.port, http_head("POST", path, auth, length=1000), b'{"reason": "', abandon_after=12)

        def handled() -> int:
            return sum("disconnected before" in r.getMessage() for r in live.log.records) + len(live.log.tracebacks())

        for _ in range(500):  # the server notices each hang-up on its own time: wait for its word on all three
            if handled() >= 3:
                break
            await asyncio.sleep(0.02)
        assert live.log.tracebacks() == []
        assert handled() == 3
        me = await send_raw(live.port, http_head("GET", "/api/me", auth, length=None))
        assert me.status == 200


async def _closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (bounded: a server that never lets go fails)."""
    return await asyncio.wait_for(reader.read(), 15)


async def test_a_client_that_sends_nothing_or_trickles_its_headers_is_let_go_with_408(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOLDFIVE_SERVE_HEAD_TIMEOUT_S", "0.5")
    with _live(tmp_path) as live:
        async with _connection(live.port) as (reader, _):  # connects, never sends a byte
            silent = await _closed_by_server(reader)
        assert silent.startswith(b"HTTP/1.1 408 ") and b"did not arrive within 0.5 s" in silent

        async with _connection(live.port) as (reader, writer):  # a header byte at a time, never the end
            writer.write(b"GET /api/me HTTP/1.1\r\nHost: x\r\nX-Slow: ")

            async def trickle() -> None:
                with contextlib.suppress(ConnectionError):
                    while not reader.at_eof():
                        writer.write(b"a")
                        await writer.drain()
                        await asyncio.sleep(0.05)  # the stimulus: one byte every 50 ms, each well inside any timer

            dripping = asyncio.create_task(trickle())
            trickled = await _closed_by_server(reader)
            dripping.cancel()
        assert trickled.startswith(b"HTTP/1.1 408 ")
        assert live.log.tracebacks() == []


async def test_a_body_that_stalls_gets_408_and_an_idle_keepalive_connection_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOLDFIVE_SERVE_KEEPALIVE_S", "1")
    with _live(tmp_path, body_timeout_s=0.5) as live:

        def auth(user: str) -> list[tuple[str, bytes]]:
            return [("Authorization", f"Bearer {live.tokens[user]}".encode()), ("Content-Type", b"application/json")]

        for path, user in (
            ("/api/runs/fz-run-0/steer", "root"),
            ("/api/login", "root"),
            ("/api/agent/heartbeat", "bot"),
        ):
            async with _connection(live.port) as (reader, writer):
                writer.write(http_head("POST", path, auth(user), length=100) + b'{"text": ')  # then nothing
                answer = await asyncio.wait_for(read_answer(reader), 15)
            assert answer.status == 408 and "did not arrive within 0.5 s" in answer.json()["error"], (path, answer)

        async with _connection(live.port) as (reader, writer):
            writer.write(_keepalive_head("GET", "/api/me", auth("root")[:1], None))
            assert (await asyncio.wait_for(read_answer(reader), 10)).status == 200
            assert await _closed_by_server(reader) == b""  # idle after its answer: closed, nothing more sent
        assert live.log.tracebacks() == []


async def test_a_client_that_stops_reading_its_answer_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from store_support import make_event

    from goldfive_core.pb.v1 import events_pb2

    monkeypatch.setenv("GOLDFIVE_SERVE_WRITE_TIMEOUT_S", "0.5")
    with _live(tmp_path) as live:
        big = [make_event("run-big", 0, events_pb2.RunStarted(adapter="callable"))]
        big += [
            make_event("run-big", i, events_pb2.ApprovalRequested(target_id=f"b{i}", kind="task", prompt="p" * 50_000))
            for i in range(1, 401)
        ]
        live.store.append_events(big, pid=1, host="h")  # a page of 20 MB: more than the sockets' buffers hold
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", live.port))
        reader, writer = await asyncio.open_connection(sock=sock)  # reads 128 KiB into its buffer, then no more
        auth = [("Authorization", f"Bearer {live.tokens['ana']}".encode())]
        writer.write(http_head("GET", "/api/audit/events?limit=5000", auth, length=None))

        def dropped() -> bool:
            return any("read nothing for 0.5 s" in r.getMessage() for r in live.log.records)

        for _ in range(750):  # the client reads nothing until the server has had its say
            if dropped():
                break
            await asyncio.sleep(0.02)
        assert dropped()
        got = b""
        with contextlib.suppress(ConnectionError):
            while chunk := await asyncio.wait_for(reader.read(1 << 20), 15):
                got += chunk
        writer.close()
        head, _, body = got.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", head).group(1))  # type: ignore[union-attr]
        assert head.startswith(b"HTTP/1.1 200") and len(body) < length  # the answer was cut off, not sent forever
        assert live.log.tracebacks() == []


async def test_clients_closing_their_event_streams_leave_no_error_in_the_log(tmp_path: Path) -> None:
    with _live(tmp_path) as live:
        api = live.app.state.api
        for path, user in (
            ("/api/events", "ana"),
            ("/api/events?after=0", "ana"),
            ("/api/agent/stream?run=fz-agent-run-0&endpoint=e1", "bot"),
        ):
            auth = [("Authorization", f"Bearer {live.tokens[user]}".encode())]
            for _ in range(5):  # the head arrives, then the client closes: what a closed inbox tab does
                assert (await send_raw(live.port, http_head("GET", path, auth, length=None))).status == 200
        for _ in range(500):  # until the server has let every stream go
            if api.events.subscribers == 0 and api.agents.hub.subscribers == 0:
                break
            await asyncio.sleep(0.02)
        gc.collect()  # a task whose error nobody retrieved is reported when it is collected
        assert (api.events.subscribers, api.agents.hub.subscribers) == (0, 0)
        assert live.log.tracebacks() == []


_NOT_HTTP = (
    b"GARBAGE\r\n\r\n",  # no request line h11 can parse
    b"GET /api/me HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n",  # a header name with a space
    b"POST /api/login HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # a chunk size that is not one
)


async def test_every_answer_serve_writes_itself_carries_nosniff_too(sqlite_backend: Backend, tmp_path: Path) -> None:
    """The answers uvicorn and the connection deadlines write without the app (h11's 400 for a request it cannot
    parse, the 408 for a head that never came, a WebSocket upgrade) carry ``X-Content-Type-Options: nosniff`` like
    the app's own, and say in JSON what was wrong; read off raw sockets of a real ``goldfive serve``."""
    from server_support import serve_process

    env = {"GOLDFIVE_SERVE_HEAD_TIMEOUT_S": "0.5"}
    with serve_process(sqlite_backend, tmp_path / "k.pem", env=env) as served:
        port = int(served.url.rsplit(":", 1)[1])
        answers: list[tuple[bytes, Any]] = []
        for junk in _NOT_HTTP:
            async with _connection(port) as (reader, writer):
                writer.write(junk)
                answers.append((junk, await asyncio.wait_for(read_answer(reader), 15)))
        async with _connection(port) as (reader, writer):  # junk after a good request on a kept-alive connection
            writer.write(_keepalive_head("GET", "/api/nothing-here", [], None) + b"NOT HTTP AT ALL\r\n\r\n")
            first = await asyncio.wait_for(read_answer(reader), 15)
            assert first.status == 404 and first.headers["x-content-type-options"] == "nosniff"
            answers.append((b"after a kept-alive answer", await asyncio.wait_for(read_answer(reader), 15)))
        for junk, answer in answers:
            assert answer.status == 400, (junk, answer)
            assert answer.headers.get("x-content-type-options") == "nosniff", (junk, answer.headers)
            assert answer.headers["content-type"] == "application/json", (junk, answer.headers)
            assert "invalid HTTP request" in json.loads(answer.body)["error"], (junk, answer.body)

        async with _connection(port) as (reader, _):  # connects, never sends a byte: the head's deadline
            late = await asyncio.wait_for(read_answer(reader), 15)
        assert late.status == 408 and late.headers.get("x-content-type-options") == "nosniff", late.headers
        assert "did not arrive within 0.5 s" in json.loads(late.body)["error"]

        upgrade = [
            ("Upgrade", b"websocket"),
            ("Connection", b"Upgrade"),
            ("Sec-WebSocket-Key", b"dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", b"13"),
        ]
        head = http_head("GET", "/api/events", upgrade, length=None).replace(b"Connection: close\r\n", b"")
        ws = await send_raw(port, head)  # serve has no WebSocket route: a plain answer of the app's
        assert ws.status == 401 and ws.headers.get("x-content-type-options") == "nosniff", (ws.status, ws.headers)


@pytest.mark.skipif(not PG_DSN, reason="needs GOLDFIVE_TEST_PG_DSN")
async def test_after_a_postgresql_restart_the_first_requests_succeed(tmp_path: Path) -> None:
    """Every pooled connection is cut at once (what a restart does to them); the next requests must be served,
    not answered 503 by whichever worker thread still holds a dead connection."""
    import psycopg

    from goldfive_core.store import open_store

    proxy, dsn = OutageProxy.for_dsn(PG_DSN)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with live_server(open_store(dsn, schema=schema), tmp_path) as live:
            seed(live)
            auth = [("Authorization", f"Bearer {live.tokens['ana']}".encode())]

            async def get(path: str) -> int:
                return (await send_raw(live.port, http_head("GET", path, auth, length=None))).status

            assert await get("/api/me") == 200  # the token is verified once (scrypt), then remembered
            # Many at once, so many worker threads hold a pooled connection of their own.
            warm = await asyncio.gather(*(get(p) for p in ("/api/approvals", "/api/runs", "/api/me") * 6))
            assert set(warm) == {200}
            assert proxy.down() > 0
            proxy.up()
            after = [await get(path) for path in ("/api/approvals", "/api/runs", "/api/me", "/api/grants") * 8]
            assert after == [200] * len(after), after
            again = await asyncio.gather(*(get(p) for p in ("/api/approvals", "/api/runs") * 12))
            assert set(again) == {200}, again
    finally:
        proxy.close()
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_json_helpers_are_what_the_server_uses() -> None:
    """The fuzz's raw JSON writer writes what it says (a broken writer would make every fuzzed body junk)."""
    from fuzz_support import Raw, dump

    assert json.loads(dump({"a": [1, {"b": Raw("2")}]})) == {"a": [1, {"b": 2}]}
