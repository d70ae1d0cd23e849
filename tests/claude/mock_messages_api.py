"""A local stand-in for the Anthropic Messages API, for running the SDK's bundled CLI offline.

The CLI is pointed at it with ``ANTHROPIC_BASE_URL``. Each ``POST /v1/messages``
body is recorded (so a test can see what the model was sent) and answered with
the content blocks a ``respond(body)`` function chooses, streamed as SSE when
the request asks for a stream.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Block = dict[str, Any]
Respond = Callable[[dict[str, Any]], list[Block]]


def text(value: str) -> Block:
    """A text content block."""
    return {"type": "text", "text": value}


def tool_use(tool_use_id: str, name: str, args: dict[str, Any]) -> Block:
    """A tool_use content block."""
    return {"type": "tool_use", "id": tool_use_id, "name": name, "input": args}


def offline_env(api_url: str, home: str) -> dict[str, str]:
    """The environment that keeps the bundled CLI offline: this stand-in as its API, a dummy key, its own home."""
    return {
        "ANTHROPIC_BASE_URL": api_url,
        "ANTHROPIC_API_KEY": "sk-ant-offline-test",
        "HOME": home,
        "CLAUDE_CONFIG_DIR": home,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class MockMessagesAPI:
    """``with MockMessagesAPI(respond) as api:`` serves on ``api.url`` until the block ends."""

    def __init__(self, respond: Respond, model: str = "claude-mock") -> None:
        self.respond = respond
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._count = 0

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def sent_text(self) -> str:
        """Every request body, as one string (to look for what reached the model)."""
        with self._lock:
            return "\n".join(json.dumps(body) for body in self.requests)

    def __enter__(self) -> MockMessagesAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if "count_tokens" in self.path:
                    return self._json({"input_tokens": 10})
                if not self.path.startswith("/v1/messages"):
                    return self._json({"type": "error", "error": {"type": "not_found_error", "message": "no"}}, 404)
                with api._lock:
                    api.requests.append(body)
                    api._count += 1
                    message_id = f"msg_mock_{api._count}"
                blocks = api.respond(body) if body.get("tools") else [text("ok")]
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                if body.get("stream"):
                    return self._stream(message_id, blocks, stop)
                return self._json(
                    {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": api.model,
                        "content": blocks,
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": {"input_tokens": 10, "output_tokens": 5},
                    }
                )

            def _json(self, payload: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, message_id: str, blocks: list[Block], stop: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                start = {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": api.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                }
                out = [_sse("message_start", {"type": "message_start", "message": start})]
                for index, block in enumerate(blocks):
                    if block["type"] == "text":
                        first, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
                    else:
                        first = {**block, "input": {}}
                        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                    out.append(
                        _sse(
                            "content_block_start",
                            {"type": "content_block_start", "index": index, "content_block": first},
                        )
                    )
                    out.append(
                        _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
                    )
                    out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
                out.append(
                    _sse(
                        "message_delta",
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 5},
                        },
                    )
                )
                out.append(_sse("message_stop", {"type": "message_stop"}))
                self.wfile.write(b"".join(out))
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="mock-messages-api", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
