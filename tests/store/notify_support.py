"""A local HTTP receiver for notification tests (webhooks, Slack), on 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclasses.dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """Records every POST; answers with the queued statuses first, then 200 (Slack-shaped when asked)."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.fail_next: list[int] = []
        self.slack_api = False
        self._lock = threading.Lock()
        self._ts = 0
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def answer(self, path: str, body: bytes) -> tuple[int, bytes]:
        with self._lock:
            if self.fail_next:
                return self.fail_next.pop(0), b"down"
            if not self.slack_api:
                return 200, b"ok"
            self._ts += 1
            payload = json.loads(body)
            ts = payload.get("ts") or f"1700000000.{self._ts:06d}"
            return 200, json.dumps({"ok": True, "channel": payload.get("channel", ""), "ts": ts}).encode()


@contextmanager
def receiver() -> Iterator[Receiver]:
    rec = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status, reply = rec.answer(self.path, body)
            if 200 <= status < 300:
                with rec._lock:
                    rec.requests.append(Received(self.path, {k: v for k, v in self.headers.items()}, body))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    rec.server = server
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class SmtpInbox:
    """A minimal SMTP server on 127.0.0.1 (EHLO/HELO, MAIL, RCPT, DATA, QUIT) keeping what it receives."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> SmtpInbox:
        self._server = await asyncio.start_server(self._session, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def say(line: str) -> None:
            writer.write(line.encode() + b"\r\n")
            await writer.drain()

        await say("220 test ESMTP")
        try:
            while line := await reader.readline():
                verb = line.decode(errors="replace").strip().split(" ", 1)[0].upper()
                if verb == "DATA":
                    await say("354 end with <CRLF>.<CRLF>")
                    data = b""
                    while (chunk := await reader.readline()) not in (b".\r\n", b""):
                        data += chunk[1:] if chunk.startswith(b"..") else chunk
                    self.messages.append(data)
                    await say("250 queued")
                elif verb == "QUIT":
                    await say("221 bye")
                    break
                else:  # EHLO, HELO, MAIL, RCPT, RSET, NOOP
                    await say("250 ok")
        finally:
            writer.close()
