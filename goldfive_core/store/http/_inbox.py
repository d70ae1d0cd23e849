"""The server's event stream as an agent channel's source: ``GET /api/agent/stream``, acks posted back.

While a run is bound, one streaming request names the runs the channel serves; the server pushes each control
message addressed to them the moment it is posted (server push, not polling). Each message is dispatched on
the loop and its ack posted back; an ack that could not be posted is kept and posted first after a reconnect,
and a message the server sends again (it was claimed for this channel and never acked) is answered with the
ack it already got, never dispatched twice.

When the server cannot be reached the source retries with backoff, rotating through its URLs, and resumes
where it was. After ``unreachable_after_s`` without a server every open approval of its runs is withdrawn with
a result the model reads: fail closed, never an exception into the agent's loop.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import httpx
from google.protobuf import json_format

from ..._util import shorten
from ...control import ControlAck
from ...convert import ack_to_proto, message_from_proto
from ...pb.v1 import control_pb2, events_pb2
from ...retry import Backoff
from ..agents import ACKS_HEADER, ACKS_WITH_EVENTS, LIVENESS_HEADER, LIVENESS_ON_STREAM, PASS_HEADER
from ..base import InboxRow, StoreError, StoreUnavailableError
from ..claims import FoldedClaims
from ..serving import Served
from ._remote import AgentRefused, RemoteStore, answer, loads

if TYPE_CHECKING:
    from ..sink import StoreSink

__all__ = ["HttpInbox"]

logger = logging.getLogger(__name__)

_READ_TIMEOUT_S = 45.0
"""A stream that sent nothing (not even its ping, every 30 s; older servers every 15 s) for this long is taken as
broken."""

_LOOK_S = 0.5
"""How often the serving loop looks at in-process state (runs added, unbind) while the stream is quiet."""

_REFUSED_PAUSE_S = 5.0
"""After the server refused this agent, how long until it asks again."""

_SEEN = 4096
"""How many inbox ids (with their acks) are remembered, to answer a message sent again without dispatching it."""

_OUTAGE = Backoff(first_s=0.05, cap_s=1.0)
"""Delays between attempts to reach a server that is out of reach."""

Frames = asyncio.Queue[tuple[int, InboxRow] | BaseException | None]


class HttpInbox:
    """The control messages ``goldfive serve`` streams to one agent channel (``endpoint``); see the module."""

    task_name = "goldfive-http"

    def __init__(
        self,
        remote: RemoteStore,
        *,
        endpoint: str,
        sweep_interval_s: float,
        unreachable_after_s: float,
        claims: FoldedClaims | None = None,
    ) -> None:
        self.remote = remote
        self.claims = claims if claims is not None else FoldedClaims()
        """The "executing" claims that ride on APPROVE acks (shared with the channel's ledger)."""
        self.endpoint = endpoint
        self.sweep_interval_s = sweep_interval_s
        self.unreachable_after_s = unreachable_after_s
        self.backlog = 0
        """Always 0: the server pushes each message; nothing waits here."""
        self.connects = 0
        """How many times the stream (re)connected."""
        self.failed_closed = 0
        """How many open approvals were withdrawn because no server could be reached."""
        self._down_since: float | None = None
        self._last_error = ""
        self.sink_of: Callable[[], StoreSink | None] = lambda: None
        """The channel's sink, once made (:class:`~goldfive_core.store.http.HttpChannel` sets it): acks ride on its
        next write, after the events queued before them, to a server that takes events with acks."""
        self.with_events = False
        """Whether the open stream's server takes events with acks (it said so: ACKS_HEADER)."""
        self.rides = 0
        """How many ack posts carried the sink's events (observability and tests)."""

    def __repr__(self) -> str:
        return f"HttpChannel({', '.join(self.remote.urls)!r}, endpoint={self.endpoint!r})"

    def start(self, served: Served) -> Coroutine[Any, Any, None]:
        """The serving loop for one binding (nothing is read before it runs)."""
        return self._serve(served)

    async def _serve(self, served: Served) -> None:
        owed: dict[int, ControlAck] = {}
        seen: collections.OrderedDict[int, ControlAck] = collections.OrderedDict()
        timeout = httpx.Timeout(self.remote.timeout_s, read=_READ_TIMEOUT_S)
        client = httpx.AsyncClient(timeout=timeout, headers=self.remote.headers)
        delays = _OUTAGE.delays()
        try:
            while served.current or owed:
                base = self.remote.url
                try:
                    await self._post_acks(client, base, owed)
                    if not served.current:
                        return
                    runs = served.runs()
                    if not runs:
                        await served.idle(asyncio.sleep(_LOOK_S))
                        continue
                    await served.sweep()
                    await self._listen(client, base, runs, served, owed, seen)
                    delays.reset()
                except AgentRefused as exc:
                    # A bad or revoked token, a run of another agent: retrying the same request cannot help soon.
                    logger.error("%s: %s", self, exc)
                    owed.clear()
                    self._fail_closed(served, f"goldfive serve refused this agent: {exc}")
                    await served.idle(asyncio.sleep(_REFUSED_PAUSE_S))
                except (StoreUnavailableError, httpx.HTTPError, StoreError, ValueError, KeyError, TypeError) as exc:
                    # Out of reach, or an answer this agent cannot read (another version?): the same bounded
                    # retry, then fail closed; the serving task never dies silently.
                    if self._out_of_reach(served, base, exc):
                        return  # unbound and no server: the owed acks are lost with the connection
                    pause = asyncio.sleep(delays.next())
                    await (served.idle(pause) if not owed else pause)
        finally:
            await client.aclose()
            self.remote.close()

    def _out_of_reach(self, served: Served, base: str, exc: BaseException) -> bool:
        """Note an outage (rotating to the next URL); past ``unreachable_after_s`` fail closed. True: give up."""
        self.remote.rotate(base)
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
            logger.warning("%s: lost goldfive serve at %s; reconnecting: %s", self, base, exc)
        self._last_error = shorten(f"{type(exc).__name__}: {exc}", 300)
        if now - self._down_since < self.unreachable_after_s:
            return False
        self._fail_closed(
            served,
            f"goldfive serve unreachable for {now - self._down_since:.0f} s "
            f"({', '.join(self.remote.urls)}; last error: {self._last_error})",
        )
        return not served.current

    async def _listen(
        self,
        client: httpx.AsyncClient,
        base: str,
        runs: list[str],
        served: Served,
        owed: dict[int, ControlAck],
        seen: collections.OrderedDict[int, ControlAck],
    ) -> None:
        params: dict[str, str | list[str]] = {"run": runs, "endpoint": self.endpoint}
        headers = self.remote.pass_headers()
        async with client.stream("GET", base + "/api/agent/stream", params=params, headers=headers) as response:
            if response.status_code != 200:
                await response.aread()
                answer(base, response)
            if proof := response.headers.get(PASS_HEADER):  # kept for the next server this agent reaches
                self.remote.proof = proof
            frames: Frames = asyncio.Queue()
            reader = asyncio.get_running_loop().create_task(self._read(response, frames))
            try:
                if response.headers.get(LIVENESS_HEADER) == LIVENESS_ON_STREAM:
                    self.remote.streamed = frozenset(runs)  # the server stamps them while this stream is open
                self.with_events = response.headers.get(ACKS_HEADER) == ACKS_WITH_EVENTS
                next_sweep = time.monotonic() + self.sweep_interval_s
                while served.current and served.runs() == runs:
                    try:
                        frame = await served.idle(asyncio.wait_for(frames.get(), _LOOK_S))
                    except TimeoutError:
                        if time.monotonic() >= next_sweep:
                            await served.sweep()
                            next_sweep = time.monotonic() + self.sweep_interval_s
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
                    sink = self.sink_of() if self.with_events else None
                    # While the message is dispatched and the acks' ride queued, the sink starts no batch: the
                    # decision's event, emitted as it is dispatched, goes with its ack (held on this thread, briefly).
                    with sink.gate if sink is not None else contextlib.nullcontext():
                        ack = seen.get(ident)
                        if ack is None:
                            ack = served.dispatch(row)
                            seen[ident] = ack
                            self.claims.fold(ident, row, ack, served.sessions())
                            while len(seen) > _SEEN:
                                seen.popitem(last=False)
                        owed[ident] = ack
                        ride = self._ride(sink, base, owed) if sink is not None else None
                    if ride is None or not await self._ridden(ride, owed):
                        await self._post_acks(client, base, owed)
            finally:
                self.remote.streamed = frozenset()  # the sink heartbeats them again from its next beat
                self.with_events = False
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)

    async def _read(self, response: httpx.Response, out: Frames) -> None:
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

    def _ride(self, sink: StoreSink, base: str, owed: dict[int, ControlAck]) -> concurrent.futures.Future[Any] | None:
        """Queue the owed acks to ride on the sink's next write, with the events it has not written yet (the
        decision's event, emitted as the message was dispatched): one request to ``base``, which commits the events
        and then records the acks. None: the sink cannot take it (the caller posts the acks alone)."""
        items = [self._ack_item(ident, ack) for ident, ack in owed.items()]
        return sink.ride(functools.partial(self.remote.acks_with_events, base, self.endpoint, items))

    async def _ridden(self, ride: concurrent.futures.Future[Any], owed: dict[int, ControlAck]) -> bool:
        """Whether the ride took the acks (their claims answered); False: it failed or did not start within the
        request timeout, and the caller posts the acks alone (the sink writes the ride's events the usual way)."""
        try:
            body = await asyncio.wait_for(asyncio.wrap_future(ride), self.remote.timeout_s)
        except (StoreError, httpx.HTTPError, TimeoutError) as exc:  # AgentRefused and unreachable included
            logger.info("%s: acks with events not taken (%s); posting them alone", self, shorten(str(exc), 200))
            return False
        self.rides += 1
        self.claims.answered(owed, body.get("claims") if isinstance(body, dict) else None)
        owed.clear()
        return True

    async def _post_acks(self, client: httpx.AsyncClient, base: str, owed: dict[int, ControlAck]) -> None:
        if not owed:
            return
        acks = [self._ack_item(ident, ack) for ident, ack in owed.items()]
        try:
            response = await client.post(
                base + "/api/agent/acks",
                json={"endpoint": self.endpoint, "acks": acks},
                headers=self.remote.pass_headers(),
            )
        except httpx.HTTPError as exc:
            raise StoreUnavailableError(f"goldfive serve at {base} unreachable: {type(exc).__name__}: {exc}") from None
        claims: Any = None
        try:
            body = answer(base, response)
            claims = body.get("claims") if isinstance(body, dict) else None
        except AgentRefused as exc:
            logger.error("%s: acks refused, dropped: %s", self, exc)
        self.claims.answered(owed, claims)
        owed.clear()

    def _ack_item(self, ident: int, ack: ControlAck) -> dict[str, Any]:
        item: dict[str, Any] = {
            "inbox_id": ident,
            "ack": json_format.MessageToDict(ack_to_proto(ack), preserving_proto_field_name=True),
        }
        claim = self.claims.owed(ident)
        if claim is not None:  # the APPROVE's ack carries the right to run its body: one commit on the server
            item["claim"] = {
                "call_id": claim.target_id,
                "run_id": claim.run_id,
                "args_digest": claim.args_digest,
                "pid": claim.pid,
                "host": claim.host,
            }
        return item

    def _fail_closed(self, served: Served, why: str) -> None:
        """Withdraw every open approval of the bound runs with words the model reads."""
        detail = f"{why}. No one could answer, so this was NOT approved: do not assume it was; try again later or stop."
        for session in served.sessions():
            for target in session.approvals.open_targets():
                if session.approvals.close(target, detail) is not None:
                    self.failed_closed += 1
                    logger.error("%s: withdrew the open approval %r of run %s: %s", self, target, session.run_id, why)
                    session.events.emit(events_pb2.ApprovalCancelled(target_id=target, reason=shorten(detail, 2000)))


_NO_ROW = InboxRow(id=-1, control_id="", kind="", payload={}, run_id="", issued_at_ms=0, status="")
