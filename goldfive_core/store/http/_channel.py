"""HttpChannel: an agent's control channel that speaks HTTP to ``goldfive serve`` — no database on the agent's host.

It implements :class:`~goldfive_core.control.ControlTransport` like the in-memory and store channels, so
``wrap(agent, control=HttpChannel(url, token=...), sinks=[channel.sink])``, ``GoldfivePlugin(control=...)``
and ``GoldfiveClaude(control=...)`` work unchanged. It is a :class:`~goldfive_core.store.StoreChannel`
whose store is the server: the same dispatch, signature checks, sweep, sink and at-most-once ledger, with
the inbox delivered by the server (SSE) instead of read from a database.

While a run is bound, one streaming request (``GET /api/agent/stream``) names the runs this channel serves;
the server pushes each control message addressed to them the moment it is posted (server push, not
polling). Each message is dispatched on the loop and its ack posted back; an ack that could not be
posted is kept and posted first after a reconnect, and a message the server sends again (it was claimed
for this channel and never acked) is answered with the ack it already got, never dispatched twice.

When the server cannot be reached the channel retries with backoff, rotating through its URLs (several
``goldfive serve`` over one PostgreSQL), and resumes where it was. After ``unreachable_after_s`` without a
server every open approval of its runs is withdrawn with a result the model reads ("goldfive serve
unreachable ...; this was not approved"): fail closed, never an exception into the agent's loop.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import httpx
from google.protobuf import json_format

from ..._util import shorten
from ...control import DEFAULT_SEND_TIMEOUT_S, ControlAck, ControlMessage, Dispatcher
from ...convert import ack_to_proto, message_from_proto
from ...errors import ChannelBusyError
from ...pb.v1 import control_pb2, events_pb2
from ...routing import ControlRouter
from ...session import Session
from ...signing import TrustKey
from ...toolcall import Replay, ToolCall
from ..base import InboxRow, Store, StoreError, StoreUnavailableError
from ..channel import StoreChannel
from ..execution import StoreLedger
from ._remote import AgentRefused, RemoteStore, answer, loads

__all__ = ["DEFAULT_UNREACHABLE_AFTER_S", "HttpChannel", "HttpLedger"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_UNREACHABLE_AFTER_S = 30.0
"""How long the channel tries to reach a server before it fails its open approvals closed."""

_READ_TIMEOUT_S = 45.0
"""A stream that sent nothing (not even its 15 s ping) for this long is taken as broken."""

_LOOK_S = 0.5
"""How often the serving loop looks at in-process state (runs added, unbind) while the stream is quiet."""

_SEEN = 4096


class HttpChannel(StoreChannel):
    """A control channel over HTTP to ``goldfive serve`` with an ``agent`` token; see the module docstring.

    ``url`` is one server or several behind one PostgreSQL (tried in turn). ``trust_key`` (or
    ``GOLDFIVE_TRUST_KEY``): apply only decisions the server signed. ``timeout_s`` bounds each request;
    ``unreachable_after_s`` bounds how long open approvals wait for an unreachable server.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        token: str,
        trust_key: TrustKey | str | None = None,
        timeout_s: float = 10.0,
        unreachable_after_s: float = DEFAULT_UNREACHABLE_AFTER_S,
        sweep_interval_s: float = 30.0,
        name: str | None = None,
    ) -> None:
        if unreachable_after_s <= 0:
            raise ValueError(f"unreachable_after_s must be > 0, got {unreachable_after_s}")
        remote = RemoteStore([url] if isinstance(url, str) else list(url), token=token, timeout_s=timeout_s)
        super().__init__(cast(Store, remote), name=name, sweep_interval_s=sweep_interval_s, trust_key=trust_key)
        self.remote = remote
        self.unreachable_after_s = unreachable_after_s
        self.ledger = HttpLedger(remote, trust=self.trust_key, unreachable_after_s=unreachable_after_s)
        self.connects = 0
        """How many times the stream (re)connected (observability and tests)."""
        self.failed_closed = 0
        """How many open approvals were withdrawn because no server could be reached."""
        self._down_since: float | None = None
        self._last_error = ""

    def __repr__(self) -> str:
        return f"HttpChannel({', '.join(self.remote.urls)!r}, endpoint={self.endpoint!r})"

    # -- sending: an agent sends nothing but to its own runs ----------------------------------------------------
    async def send(self, msg: ControlMessage, *, timeout: float | None = DEFAULT_SEND_TIMEOUT_S) -> ControlAck:  # noqa: ASYNC109
        """Dispatch a message for this process's own run (goldfive's escalation PAUSE); refuse anything else."""
        if not isinstance(msg, ControlMessage):
            return ControlAck.failure("", f"expected a ControlMessage, got {type(msg).__name__}")
        if self._dispatcher is not None and self._local_target(msg):
            return self._dispatch_local(self._dispatcher, msg)
        return ControlAck.failure(
            msg.id,
            "not delivered: an agent's HttpChannel cannot send control messages to other runs; "
            "people decide and control runs through goldfive serve",
        )

    # -- serving ---------------------------------------------------------------------------------------------------
    def bind(self, dispatcher: Dispatcher, *, owner: object | None = None) -> None:
        """Start serving this process's runs from the server, on the running loop."""
        if self._dispatcher is not None:
            if self._dispatcher == dispatcher:
                return
            raise ChannelBusyError(f"this HttpChannel is already bound to {self._owner!r}; use one channel per runner")
        loop = asyncio.get_running_loop()
        self._dispatcher = dispatcher
        self._owner = owner
        self._generation += 1
        self._warn_without_sink(owner)
        self._task = loop.create_task(
            self._serve_http(self._generation, dispatcher), name=f"goldfive-http-{self.endpoint}"
        )

    def _runs(self) -> list[str]:
        owner = self._owner
        if not isinstance(owner, ControlRouter):
            return []
        return sorted(s.run_id for s in owner.sessions)

    async def _cancellable(self, awaitable: asyncio.Future[T] | Any) -> T:
        """Await something that unbind may cancel (only while no ack is owed)."""
        task = asyncio.current_task()
        assert task is not None
        self._idle.add(task)
        try:
            return cast(T, await awaitable)
        finally:
            self._idle.discard(task)

    async def _serve_http(self, generation: int, dispatcher: Dispatcher) -> None:
        owed: dict[int, ControlAck] = {}
        seen: collections.OrderedDict[int, ControlAck] = collections.OrderedDict()
        timeout = httpx.Timeout(self.remote.timeout_s, read=_READ_TIMEOUT_S)
        client = httpx.AsyncClient(timeout=timeout, headers=self.remote.headers)
        delay = 0.05
        try:
            while self._generation == generation or owed:
                base = self.remote.url
                try:
                    await self._post_acks(client, base, owed)
                    if self._generation != generation:
                        return
                    runs = self._runs()
                    if not runs:
                        await self._cancellable(asyncio.sleep(_LOOK_S))
                        continue
                    await self._sweep_now(dispatcher)
                    await self._listen(client, base, runs, dispatcher, owed, seen, generation)
                    delay = 0.05
                except AgentRefused as exc:
                    # A bad or revoked token, a run of another agent: retrying the same request cannot help soon.
                    logger.error("%s: %s", self, exc)
                    owed.clear()
                    self._fail_closed(f"goldfive serve refused this agent: {exc}")
                    await self._cancellable(asyncio.sleep(5.0))
                except (StoreUnavailableError, httpx.HTTPError, StoreError, ValueError, KeyError, TypeError) as exc:
                    # Out of reach, or an answer this agent cannot read (another version?): the same bounded
                    # retry, then fail closed; the serving task never dies silently.
                    self.remote.rotate(base)
                    now = time.monotonic()
                    if self._down_since is None:
                        self._down_since = now
                        logger.warning("%s: lost goldfive serve at %s; reconnecting: %s", self, base, exc)
                    self._last_error = shorten(f"{type(exc).__name__}: {exc}", 300)
                    if now - self._down_since >= self.unreachable_after_s:
                        self._fail_closed(
                            f"goldfive serve unreachable for {now - self._down_since:.0f} s "
                            f"({', '.join(self.remote.urls)}; last error: {self._last_error})"
                        )
                        if self._generation != generation:
                            return  # unbound and no server: the owed acks are lost with the connection
                    await (self._cancellable(asyncio.sleep(delay)) if not owed else asyncio.sleep(delay))
                    delay = min(delay * 2, 1.0)
        finally:
            await client.aclose()
            self.remote.close()

    async def _sweep_now(self, dispatcher: Dispatcher) -> None:
        async def io(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
            return await asyncio.to_thread(fn, *args, **kwargs)

        await self._sweep(io, dispatcher)

    async def _listen(
        self,
        client: httpx.AsyncClient,
        base: str,
        runs: list[str],
        dispatcher: Dispatcher,
        owed: dict[int, ControlAck],
        seen: collections.OrderedDict[int, ControlAck],
        generation: int,
    ) -> None:
        params: dict[str, str | list[str]] = {"run": runs, "endpoint": self.endpoint}
        async with client.stream("GET", base + "/api/agent/stream", params=params) as response:
            if response.status_code != 200:
                await response.aread()
                answer(base, response)
            frames: asyncio.Queue[tuple[int, InboxRow] | BaseException | None] = asyncio.Queue()
            reader = asyncio.get_running_loop().create_task(self._read(response, frames))
            try:
                next_sweep = time.monotonic() + self._sweep_interval_s
                while self._generation == generation and self._runs() == runs:
                    try:
                        frame: tuple[int, InboxRow] | BaseException | None = await self._cancellable(
                            asyncio.wait_for(frames.get(), _LOOK_S)
                        )
                    except TimeoutError:
                        if time.monotonic() >= next_sweep:
                            await self._sweep_now(dispatcher)
                            next_sweep = time.monotonic() + self._sweep_interval_s
                        continue
                    if frame is None:
                        raise StoreUnavailableError(f"goldfive serve at {base} closed the stream")
                    if isinstance(frame, BaseException):
                        raise frame
                    ident, row = frame
                    if ident < 0:  # the "connected" line: the server holds our subscription
                        if self._down_since is not None:
                            logger.warning("%s: reconnected to goldfive serve at %s", self, base)
                        self._down_since = None
                        self.connects += 1
                        continue
                    ack = seen.get(ident)
                    if ack is None:
                        ack = self._dispatch_row(dispatcher, row)
                        seen[ident] = ack
                        while len(seen) > _SEEN:
                            seen.popitem(last=False)
                    owed[ident] = ack
                    await self._post_acks(client, base, owed)
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)

    async def _read(
        self, response: httpx.Response, out: asyncio.Queue[tuple[int, InboxRow] | BaseException | None]
    ) -> None:
        """Parse the SSE stream into inbox rows (``(-1, ...)`` marks the connected comment)."""
        ident = ""
        event = ""
        data: list[str] = []
        try:
            async for line in response.aiter_lines():
                if line == "":
                    if event == "control" and data:
                        frame = self._frame(ident, "\n".join(data))
                        if frame is not None:
                            out.put_nowait(frame)
                    ident, event, data = "", "", []
                    continue
                if line.startswith(":"):
                    if line.startswith(": connected"):
                        out.put_nowait((-1, _NO_ROW))
                    continue
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "id":
                    ident = value
                elif name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
            out.put_nowait(None)
        except Exception as exc:  # handed to the serving loop, which reconnects
            out.put_nowait(exc)

    def _frame(self, ident: str, text: str) -> tuple[int, InboxRow] | None:
        body = loads(text)
        inbox_id = body.get("inbox_id") if isinstance(body, dict) else None
        if not isinstance(inbox_id, int):
            logger.warning("%s: a control frame without an inbox id (id %r) was ignored", self, shorten(ident, 40))
            return None
        run_id = body.get("run_id") if isinstance(body.get("run_id"), str) else ""
        try:
            proto = control_pb2.ControlEvent()
            json_format.ParseDict(body.get("message") or {}, proto)
            msg = message_from_proto(proto)
        except (json_format.ParseError, TypeError, ValueError) as exc:
            problem = f"the server sent a control message this agent cannot read: {shorten(str(exc), 200)}"
            row = InboxRow(
                id=inbox_id,
                control_id="",
                kind="",
                payload={},
                run_id=run_id,
                issued_at_ms=0,
                status="claimed",
                problem=problem,
            )
            return inbox_id, row
        row = InboxRow(
            id=inbox_id,
            control_id=msg.id,
            kind=str(msg.kind),
            payload=dict(msg.payload),
            run_id=run_id,
            issued_at_ms=msg.issued_at_ms,
            status="claimed",
        )
        return inbox_id, row

    async def _post_acks(self, client: httpx.AsyncClient, base: str, owed: dict[int, ControlAck]) -> None:
        if not owed:
            return
        acks = [
            {"inbox_id": ident, "ack": json_format.MessageToDict(ack_to_proto(ack), preserving_proto_field_name=True)}
            for ident, ack in owed.items()
        ]
        try:
            response = await client.post(base + "/api/agent/acks", json={"endpoint": self.endpoint, "acks": acks})
        except httpx.HTTPError as exc:
            raise StoreUnavailableError(f"goldfive serve at {base} unreachable: {type(exc).__name__}: {exc}") from None
        try:
            answer(base, response)
        except AgentRefused as exc:
            logger.error("%s: acks refused, dropped: %s", self, exc)
        owed.clear()

    def _fail_closed(self, why: str) -> None:
        """Withdraw every open approval of this channel's runs with words the model reads."""
        owner = self._owner
        if not isinstance(owner, ControlRouter):
            return
        detail = f"{why}. No one could answer, so this was NOT approved: do not assume it was; try again later or stop."
        for session in owner.sessions:
            for target in session.approvals.open_targets():
                if session.approvals.close(target, detail) is not None:
                    self.failed_closed += 1
                    logger.error("%s: withdrew the open approval %r of run %s: %s", self, target, session.run_id, why)
                    session.events.emit(events_pb2.ApprovalCancelled(target_id=target, reason=shorten(detail, 2000)))


class HttpLedger(StoreLedger):
    """The server's execution ledger for the gate, failing closed: a call the server cannot vouch for is not run.

    Each look-up or claim is retried while the server cannot be reached, for at most ``unreachable_after_s``;
    then the gate skips the call (``store_unavailable``) with words the model reads — never an exception
    into the agent's loop. "done" is retried in the background by :class:`StoreLedger` itself.
    """

    def __init__(self, remote: RemoteStore, *, trust: TrustKey | None, unreachable_after_s: float) -> None:
        super().__init__(remote, trust=trust)
        self.unreachable_after_s = unreachable_after_s

    async def _bounded(self, attempt: Callable[[], Awaitable[T]]) -> T:
        deadline = time.monotonic() + self.unreachable_after_s
        delay = 0.05
        while True:
            try:
                return await attempt()
            except StoreUnavailableError:
                if time.monotonic() + delay >= deadline:
                    raise
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    @staticmethod
    def _not_run(call: ToolCall, exc: StoreError) -> Replay:
        detail = (
            f"did not run: {call.tool_name} was NOT run because goldfive serve could not record or vouch for it "
            f"({shorten(str(exc), 300)}). No one could be asked; do not assume it was approved. "
            "Try again later or stop."
        )
        logger.error("%s", detail)
        return Replay(kind="unavailable", detail=detail)

    async def _lookup(self, session: Session, call: ToolCall, digest: str) -> Replay:
        return await self._bounded(lambda: StoreLedger._lookup(self, session, call, digest))

    async def _begin(self, session: Session, call: ToolCall, digest: str) -> Replay | None:
        return await self._bounded(lambda: StoreLedger._begin(self, session, call, digest))

    async def lookup(self, session: Session, call: ToolCall, digest: str) -> Replay:
        """What the server knows about the call; a server out of reach (or refusing) → not run."""
        try:
            return await self._lookup(session, call, digest)
        except StoreError as exc:
            return self._not_run(call, exc)

    async def begin(self, session: Session, call: ToolCall, digest: str) -> Replay | None:
        """Record "executing" before the body runs; a server out of reach (or refusing) → not run."""
        try:
            return await self._begin(session, call, digest)
        except StoreError as exc:
            return self._not_run(call, exc)


_NO_ROW = InboxRow(id=-1, control_id="", kind="", payload={}, run_id="", issued_at_ms=0, status="")
