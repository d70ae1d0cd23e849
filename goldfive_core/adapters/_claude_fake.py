"""FakeClaudeCLI: an in-memory ``claude_agent_sdk.Transport`` that plays the Claude Code CLI.

Like ``httpx.MockTransport``, it lets the real SDK (``ClaudeSDKClient`` or
``query()``) run with no process and no network: the SDK writes to it exactly
as to the CLI's stdin, and a test or an offline demo scripts the CLI's side:
wait for the prompt, show a tool use, ask the SDK's hooks and permission
callback, call SDK MCP tools after the MCP handshake, and end the turn.

Everything the model would read (tool results, denial messages, hook
``additionalContext``) is appended to :attr:`FakeClaudeCLI.model_context`, so a
test can assert that a person's words reached the model.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from claude_agent_sdk import Transport

__all__ = ["FakeClaudeCLI", "FakeToolUse"]

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
BuiltinTool = Callable[[Mapping[str, Any]], Awaitable[str]]


@dataclasses.dataclass(kw_only=True)
class FakeToolUse:
    """What happened to one tool use the fake CLI played."""

    tool_use_id: str
    name: str
    input: JSON
    permission: JSON | None = None
    """The SDK's answer to ``can_use_tool`` (``behavior``, ``updatedInput`` / ``message``, ``interrupt``);
    None when the request was cancelled or a PreToolUse hook decided."""
    ran: bool = False
    ran_with: JSON | None = None
    output: str = ""
    is_error: bool = False

    @property
    def allowed(self) -> bool:
        """True when the permission callback allowed the call."""
        return self.permission is not None and self.permission.get("behavior") == "allow"


class FakeClaudeCLI(Transport):
    """Plays the CLI side of the Agent SDK's stream-JSON control protocol, in memory.

    ``builtin_tools`` maps non-MCP tool names (``"Bash"``) to ``async fn(input) -> str``;
    ``mcp__<server>__<tool>`` calls go to the SDK's in-process MCP servers.
    ``auto_allow`` plays the CLI's allow rules (``allowed_tools``, settings): those
    tools skip ``can_use_tool`` unless a PreToolUse hook answers "ask".
    """

    def __init__(
        self,
        *,
        session_id: str = "fake-session-1",
        builtin_tools: Mapping[str, BuiltinTool] | None = None,
        auto_allow: Iterable[str] = (),
    ) -> None:
        self.session_id = session_id
        self.builtin_tools = dict(builtin_tools or {})
        self.auto_allow = frozenset(auto_allow)
        self.written: list[JSON] = []
        """Every frame the SDK wrote, in order."""
        self.model_context: list[str] = []
        """Everything the model would read: tool results, denial messages, hook additionalContext."""
        self.initialize_request: JSON | None = None
        self.interrupts = 0
        self.interrupted = anyio.Event()
        self._out_send: MemoryObjectSendStream[JSON]
        self._out_recv: MemoryObjectReceiveStream[JSON]
        self._out_send, self._out_recv = anyio.create_memory_object_stream[JSON](1000)
        self._prompt_send: MemoryObjectSendStream[JSON]
        self._prompt_recv: MemoryObjectReceiveStream[JSON]
        self._prompt_send, self._prompt_recv = anyio.create_memory_object_stream[JSON](1000)
        self._waiting: dict[str, anyio.Event] = {}
        self._answers: dict[str, JSON | None] = {}
        self._sent: dict[str, anyio.Event] = {}
        self._ids = itertools.count(1)
        self._mcp_ready: set[str] = set()
        self._ready = False
        self._closed = False

    # -- Transport (the SDK side) ---------------------------------------------------------------
    async def connect(self) -> None:
        """Nothing to start."""
        self._ready = True

    def is_ready(self) -> bool:
        """True between connect() and close()."""
        return self._ready

    async def write(self, data: str) -> None:
        """Receive one or more JSON lines from the SDK and react as the CLI would."""
        for line in data.splitlines():
            if not line.strip():
                continue
            frame: JSON = json.loads(line)
            self.written.append(frame)
            kind = frame.get("type")
            if kind == "control_response":
                response = frame["response"]
                self._answer(response["request_id"], response)
            elif kind == "control_request":
                await self._on_sdk_request(frame)
            elif kind == "user":
                await self._prompt_send.send(frame)

    async def read_messages(self) -> AsyncIterator[JSON]:
        """Frames the CLI writes to stdout, until the CLI exits."""
        async for frame in self._out_recv:
            yield frame

    async def end_input(self) -> None:
        """stdin closed: the CLI finishes and its stdout ends."""
        self._out_send.close()

    async def close(self) -> None:
        """Drop everything; waiting peer calls return as cancelled."""
        self._ready = False
        self._closed = True
        for stream in (self._out_send, self._prompt_send):
            stream.close()
        for request_id in list(self._waiting):
            self._answer(request_id, None)

    # -- peer API (the CLI side) -------------------------------------------------------------------
    async def send(self, frame: JSON) -> None:
        """Write a frame to the SDK (stdout of the CLI)."""
        await self._out_send.send(frame)

    async def next_prompt(self, limit_s: float = 5.0) -> str:
        """Wait for the next user message the SDK sends and return its text."""
        with anyio.fail_after(limit_s):
            frame = await self._prompt_recv.receive()
        content = frame["message"]["content"]
        if isinstance(content, str):
            return content
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))

    async def request(
        self, subtype: str, *, request_id: str | None = None, limit_s: float = 5.0, **payload: Any
    ) -> JSON | None:
        """Send a control request to the SDK and return its answer (None if cancelled first).

        Raises RuntimeError when the SDK answers with an error.
        """
        rid = request_id or f"cli-req-{next(self._ids)}"
        done = self._waiting[rid] = anyio.Event()
        await self.send({"type": "control_request", "request_id": rid, "request": {"subtype": subtype, **payload}})
        self._sent_event(rid).set()
        with anyio.fail_after(limit_s):
            await done.wait()
        answer = self._answers.pop(rid)
        if answer is None:
            return None
        if answer.get("subtype") == "error":
            raise RuntimeError(f"the SDK answered {subtype} with an error: {answer.get('error')}")
        body: JSON = answer.get("response") or {}
        return body

    async def cancel(self, request_id: str) -> None:
        """Withdraw a pending request (``control_cancel_request``), as the CLI does on an interrupt."""
        await self.send({"type": "control_cancel_request", "request_id": request_id})
        self._answer(request_id, None)

    async def wait_sent(self, request_id: str, limit_s: float = 5.0) -> None:
        """Wait until the request ``request_id`` (``perm-<tool_use_id>`` for permissions) was sent to the SDK."""
        with anyio.fail_after(limit_s):
            await self._sent_event(request_id).wait()

    def _sent_event(self, request_id: str) -> anyio.Event:
        return self._sent.setdefault(request_id, anyio.Event())

    def pending_requests(self) -> list[str]:
        """Ids of requests the SDK has not answered yet."""
        return list(self._waiting)

    async def mcp(self, server: str, method: str, params: JSON | None = None, *, notify: bool = False) -> JSON:
        """Send one JSON-RPC message to an SDK MCP server and return its JSON-RPC response."""
        message: JSON = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if not notify:
            message["id"] = next(self._ids)
        answer = await self.request("mcp_message", server_name=server, message=message, limit_s=600)
        if answer is None:
            raise RuntimeError(f"mcp {method} to {server!r} was cancelled")
        response: JSON = answer["mcp_response"]
        return response

    async def mcp_handshake(self, server: str) -> None:
        """``initialize`` + ``notifications/initialized`` (mcp 2.x refuses tools/* before it)."""
        if server in self._mcp_ready:
            return
        await self.mcp(
            server,
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fake-cli", "version": "0"}},
        )
        await self.mcp(server, "notifications/initialized", notify=True)
        self._mcp_ready.add(server)

    def hook_ids(self, event: str, tool_name: str | None = None) -> list[str]:
        """Callback ids the SDK registered for ``event`` whose matcher accepts ``tool_name``."""
        hooks = (self.initialize_request or {}).get("hooks") or {}
        ids: list[str] = []
        for matcher in hooks.get(event, []):
            pattern = matcher.get("matcher")
            if pattern and tool_name is not None and not re.fullmatch(pattern, tool_name):
                continue
            ids.extend(matcher.get("hookCallbackIds", []))
        return ids

    async def run_hooks(self, event: str, hook_input: JSON, *, tool_use_id: str | None = None) -> list[JSON]:
        """Call every SDK hook registered for ``event``; additionalContext goes to :attr:`model_context`."""
        base = {"session_id": self.session_id, "transcript_path": "", "cwd": "/", "hook_event_name": event}
        outputs = []
        for callback_id in self.hook_ids(event, hook_input.get("tool_name")):
            out = await self.request(
                "hook_callback", callback_id=callback_id, input={**base, **hook_input}, tool_use_id=tool_use_id
            )
            if out is None:
                continue
            outputs.append(out)
            context = (out.get("hookSpecificOutput") or {}).get("additionalContext")
            if context:
                self.model_context.append(context)
        return outputs

    # -- frames ---------------------------------------------------------------------------------------------
    async def system_init(self, tools: list[str] | None = None) -> None:
        """Send the ``system/init`` frame that opens a session."""
        await self.send(
            {
                "type": "system",
                "subtype": "init",
                "session_id": self.session_id,
                "tools": tools or [],
                "permissionMode": "default",
            }
        )

    async def say(self, text: str) -> None:
        """Send an assistant text block."""
        await self._assistant([{"type": "text", "text": text}])

    async def result(self, text: str = "", *, subtype: str = "success", is_error: bool = False) -> None:
        """End the turn with a result frame."""
        await self.send(
            {
                "type": "result",
                "subtype": subtype,
                "duration_ms": 1,
                "duration_api_ms": 1,
                "is_error": is_error,
                "num_turns": 1,
                "session_id": self.session_id,
                "result": text,
            }
        )

    async def stop(self) -> list[str]:
        """Run the Stop hooks (the model wants to end its turn); returns any additionalContext they gave."""
        before = len(self.model_context)
        await self.run_hooks("Stop", {"stop_hook_active": False})
        return self.model_context[before:]

    # -- one tool use, the way the CLI plays it ---------------------------------------------------------------
    async def use_tool(
        self, tool_use_id: str, name: str, tool_input: JSON, *, permission_limit_s: float = 30.0
    ) -> FakeToolUse:
        """Show a tool use, ask PreToolUse hooks and ``can_use_tool``, run the tool if allowed, report the result."""
        use = FakeToolUse(tool_use_id=tool_use_id, name=name, input=dict(tool_input))
        await self._assistant([{"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input}])
        hook_input = {"tool_name": name, "tool_input": tool_input, "tool_use_id": tool_use_id}
        decisions = [
            (o.get("hookSpecificOutput") or {}).get("permissionDecision")
            for o in await self.run_hooks("PreToolUse", hook_input, tool_use_id=tool_use_id)
        ]
        if "deny" in decisions:
            return await self._tool_result(use, f"PreToolUse:{name} hook denied the call", is_error=True)
        if "ask" not in decisions and ("allow" in decisions or name in self.auto_allow):
            use.permission = {"behavior": "allow", "updatedInput": tool_input}
        else:
            use.permission = await self.request(
                "can_use_tool",
                request_id=f"perm-{tool_use_id}",
                limit_s=permission_limit_s,
                tool_name=name,
                input=tool_input,
                permission_suggestions=[],
                tool_use_id=tool_use_id,
            )
        if use.permission is None:  # withdrawn (interrupt)
            return await self._tool_result(use, "[Request interrupted by user for tool use]", is_error=True)
        if use.permission.get("behavior") != "allow":
            return await self._tool_result(use, str(use.permission.get("message", "")), is_error=True)
        args: JSON = use.permission.get("updatedInput") or tool_input
        output, is_error = await self._run_tool(name, args)
        use.ran, use.ran_with = True, args
        await self._tool_result(use, output, is_error=is_error)
        if not is_error:
            await self.run_hooks(
                "PostToolUse", {**hook_input, "tool_input": args, "tool_response": output}, tool_use_id=tool_use_id
            )
        else:  # as the CLI does: a tool that failed ran all the same
            await self.run_hooks(
                "PostToolUseFailure", {**hook_input, "tool_input": args, "error": output}, tool_use_id=tool_use_id
            )
        return use

    # -- internals -------------------------------------------------------------------------------------------
    async def _assistant(self, content: list[JSON]) -> None:
        await self.send(
            {
                "type": "assistant",
                "message": {"role": "assistant", "model": "fake-model", "content": content, "id": "msg-fake"},
                "parent_tool_use_id": None,
                "session_id": self.session_id,
            }
        )

    async def _tool_result(self, use: FakeToolUse, output: str, *, is_error: bool) -> FakeToolUse:
        use.output, use.is_error = output, is_error
        self.model_context.append(output)
        await self.send(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": use.tool_use_id, "content": output, "is_error": is_error}
                    ],
                },
                "parent_tool_use_id": None,
                "session_id": self.session_id,
            }
        )
        return use

    async def _run_tool(self, name: str, args: JSON) -> tuple[str, bool]:
        match = re.fullmatch(r"mcp__([A-Za-z0-9_-]+?)__(.+)", name)
        if match is None:
            builtin = self.builtin_tools.get(name)
            if builtin is None:
                return f"ran {name} with {json.dumps(args, sort_keys=True)}", False
            return await builtin(args), False
        server, tool = match.groups()
        await self.mcp_handshake(server)
        response = await self.mcp(server, "tools/call", {"name": tool, "arguments": args})
        if "error" in response:
            return f"MCP error: {response['error'].get('message')}", True
        result = response["result"]
        text = "".join(block.get("text", "") for block in result.get("content", []))
        return text, bool(result.get("isError"))

    async def _on_sdk_request(self, frame: JSON) -> None:
        request = frame["request"]
        body: JSON = {}
        if request["subtype"] == "initialize":
            self.initialize_request = request
            body = {"commands": [], "models": []}
        elif request["subtype"] == "interrupt":
            self.interrupts += 1
            self.interrupted.set()
            body = {"still_queued": []}
            for request_id in list(self._waiting):
                if request_id.startswith("perm-"):
                    await self.cancel(request_id)
        await self.send(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": frame["request_id"], "response": body},
            }
        )

    def _answer(self, request_id: str, response: JSON | None) -> None:
        done = self._waiting.pop(request_id, None)
        if done is None:
            return
        self._answers[request_id] = response
        done.set()
