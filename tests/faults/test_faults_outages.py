"""Outages never kill a run: store calls retry within a budget, then the call fails closed with a result
the model sees; a body that ran is never reported in doubt because "done" was written late.

Every adapter goes through the one tool-call gate and its ledger, so each fails closed the same way:
a callable agent (``run_approved``), a real ADK Runner with ``GoldfivePlugin``, and the Claude adapter
over the fake CLI transport.

SQLite: a full disk is injected at the driver boundary (``sqlite3.OperationalError: database or disk
is full`` — what SQLite raises on ENOSPC) on the writes to the execution ledger. PostgreSQL: the
agent reaches the server through :class:`OutageProxy`; "restarting" it cuts every connection and
refuses new ones until it is back (the shared server itself must not be restarted), while the agent
waits and while the body runs. Connections terminated by the server (``pg_terminate_backend``) are
tested too.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from outage_proxy import OutageProxy
from store_support import PG_DSN, Backend, await_until

from goldfive_core import AgentTools, ControlKind, ControlMessage, Task, wrap
from goldfive_core.errors import StoreUnavailableError
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import ExecutionState, SqliteStore, Store, StoreChannel, run_approved


@contextlib.contextmanager
def disk_full(store: SqliteStore, *, on: str) -> Iterator[list[int]]:
    """Make every statement starting with ``on`` fail as SQLite does on ENOSPC, until the block ends."""
    hits: list[int] = []
    real = store.db.execute

    def failing(conn: Any, sql: str, params: Any = ()) -> Any:
        if sql.lstrip().startswith(on):
            hits.append(1)
            raise sqlite3.OperationalError("database or disk is full")
        return real(conn, sql, params)

    store.db.execute = failing  # type: ignore[method-assign]
    try:
        yield hits
    finally:
        store.db.execute = real  # type: ignore[method-assign]


def _guarded_agent(store: Store, ran: list[dict[str, Any]], *, call_id: str = "pay-1", before_body: Any = None) -> Any:
    async def body(args: Any) -> dict[str, Any]:
        if before_body is not None:
            await before_body()
        ran.append(dict(args))
        return {"sent": args["amount"]}

    async def agent(task: Task, tools: AgentTools) -> Any:
        outcome = await run_approved(
            tools.session,
            store,
            call_id=call_id,
            tool_name="send_money",
            args={"amount": 10},
            body=body,
            timeout_ms=20_000,
        )
        return {"status": outcome.status, "result": outcome.result, "detail": outcome.detail}

    return agent


async def _approve(backend: Backend, target: str) -> None:
    store = backend.open()
    await await_until(lambda: store.approvals(), what=f"{target} pending")
    ack = await StoreChannel(backend.open()).send(ControlMessage(ControlKind.APPROVE, {"target_id": target}))
    assert ack.ok, ack.detail


async def test_full_disk_past_the_budget_fails_closed_and_the_body_does_not_run(sqlite_backend: Backend) -> None:
    store = sqlite_backend.open()
    assert isinstance(store, SqliteStore)
    store.retry_budget_s = 0.3
    channel = StoreChannel(sqlite_backend.open())
    ran: list[dict[str, Any]] = []
    run = asyncio.create_task(wrap(_guarded_agent(store, ran), control=channel, sinks=[channel.sink]).run())
    with disk_full(store, on="INSERT INTO gf_executions") as hits:
        await _approve(sqlite_backend, "pay-1")
        result = await run
    assert len(hits) >= 2  # retried before giving up
    out = result.output
    assert out["status"] == "unavailable" and ran == []
    assert out["detail"].startswith("did not run: send_money was not started because the goldfive store")
    assert "database or disk is full" in out["detail"]
    assert store.execution("pay-1") is None  # nothing recorded: a replay may still run it once
    assert result.status.value == "COMPLETED"  # the run went on; nothing was raised into the agent's loop
    await channel.aclose()


async def test_a_short_full_disk_is_retried_and_the_body_runs_once(sqlite_backend: Backend) -> None:
    store = sqlite_backend.open()
    assert isinstance(store, SqliteStore)
    channel = StoreChannel(sqlite_backend.open())
    ran: list[dict[str, Any]] = []
    freed = asyncio.Event()

    async def free_space_soon() -> None:
        freed.set()

    run = asyncio.create_task(
        wrap(_guarded_agent(store, ran, before_body=free_space_soon), control=channel, sinks=[channel.sink]).run()
    )
    with disk_full(store, on="UPDATE gf_executions SET state = 'done'") as hits:
        await _approve(sqlite_backend, "pay-1")
        await freed.wait()
        # "done" fails while the disk is full; the body's result still reaches the model at once.
        out = (await run).output
        assert out["status"] == "ran" and out["result"] == {"sent": 10} and ran == [{"amount": 10}]
        await await_until(lambda: hits, what="the failed 'done' write")
        row = store.execution("pay-1")
        assert row is not None and row.state is ExecutionState.EXECUTING
    # Space is back: the "done" retried in the background lands; the call is never left in doubt.
    await await_until(
        lambda: (store.execution("pay-1") or row).state is ExecutionState.DONE, limit_s=20, what="done recorded"
    )
    await channel.aclose()


def _terminate(schema: str | None) -> int:
    import psycopg

    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
            (f"goldfive:{schema}",),
        ).fetchone()
    return int(killed[0]) if killed else 0


@pytest.mark.parametrize("when", ["mid-wait", "mid-body"])
async def test_postgres_connections_dropped_mid_wait_or_mid_body(postgres_backend: Backend, when: str) -> None:
    store = postgres_backend.open()
    channel = StoreChannel(postgres_backend.open())
    ran: list[dict[str, Any]] = []

    async def drop_connections() -> None:
        if when == "mid-body":
            assert await asyncio.to_thread(_terminate, postgres_backend.schema) >= 1

    run = asyncio.create_task(
        wrap(_guarded_agent(store, ran, before_body=drop_connections), control=channel, sinks=[channel.sink]).run()
    )
    if when == "mid-wait":
        await await_until(lambda: postgres_backend.open().approvals(), what="pay-1 pending")
        assert await asyncio.to_thread(_terminate, postgres_backend.schema) >= 2
    await _approve(postgres_backend, "pay-1")
    out = (await run).output
    assert out["status"] == "ran" and ran == [{"amount": 10}]
    row = store.execution("pay-1")
    assert row is not None and row.state is ExecutionState.DONE  # reconnected and recorded: not in doubt
    await channel.aclose()


@pytest.mark.parametrize("backend_name", ["sqlite", "postgres"])
async def test_a_store_out_when_the_channel_binds_is_retried_and_the_approval_still_lands(
    request: pytest.FixtureRequest, backend_name: str
) -> None:
    """The store is out of reach at the very moment the agent's inbox starts listening (its first LISTEN, or its
    wake socket): the inbox retries like any other look, and the person's approval is still applied."""
    backend: Backend = request.getfixturevalue(f"{backend_name}_backend")
    store = backend.open()
    agents_store = backend.open()
    refused: list[str] = []

    def out_twice(name: str) -> Any:
        real = getattr(agents_store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if len(refused) < 2:
                refused.append(name)
                raise StoreUnavailableError(f"{name}: the store is out (injected)")
            return real(*args, **kwargs)

        return call

    agents_store.inbox_waiter = out_twice("inbox_waiter")  # type: ignore[method-assign]
    agents_store.wait_inbox = out_twice("wait_inbox")  # type: ignore[method-assign]
    channel = StoreChannel(agents_store)
    ran: list[dict[str, Any]] = []
    run = asyncio.create_task(wrap(_guarded_agent(store, ran), control=channel, sinks=[channel.sink]).run())
    await _approve(backend, "pay-1")
    out = (await run).output
    assert refused, "the injected outage was never hit"
    assert out["status"] == "ran" and ran == [{"amount": 10}]
    await channel.aclose()


def test_sqlite_waiters_back_off_while_idle(sqlite_backend: Backend) -> None:
    """Idle agents are idle: polls slow down to idle_poll_interval_s (bench/idle.py measures CPU and latency)."""
    store = SqliteStore(sqlite_backend.location, idle_poll_interval_s=0.04)
    steps = [store.poll_interval_s]
    while steps[-1] < 0.04:
        steps.append(store._next_poll(steps[-1]))
    assert steps[0] == 0.002 and steps[-1] == 0.04 and len(steps) < 12  # fast after activity, capped when idle
    with pytest.raises(ValueError, match="idle_poll_interval_s must be > 0"):
        SqliteStore(sqlite_backend.location, idle_poll_interval_s=0)


async def test_run_approved_refuses_an_edit_that_is_not_a_json_object(sqlite_backend: Backend) -> None:
    from goldfive_core import ControlChannel, InMemorySink

    store = sqlite_backend.open()
    channel = ControlChannel()
    events = InMemorySink()
    ran: list[dict[str, Any]] = []
    run = asyncio.create_task(wrap(_guarded_agent(store, ran), control=channel, sinks=[events]).run())
    await events.wait_for("approval_requested")
    for edit, why in (({1: 2}, "must have string keys"), ({"amount": float("nan")}, "not JSON")):
        ack = await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": "pay-1", "edited_args": edit}))
        assert not ack.ok and why in ack.detail, ack.detail  # refused; the request stays pending
    ok = await channel.send(ControlMessage(ControlKind.APPROVE, {"target_id": "pay-1", "edited_args": {"amount": 3}}))
    assert ok.ok, ok.detail
    out = (await run).output
    assert out["status"] == "ran" and ran == [{"amount": 3}]


# -- every adapter through the one gate ----------------------------------------------------------------


def _claude_harness(channel: StoreChannel) -> Any:
    pytest.importorskip("claude_agent_sdk")
    from goldfive_core import SteeringConfig
    from goldfive_core.adapters.claude import FakeClaudeCLI, GoldfiveClaude
    from goldfive_core.testing import AwaitableSink
    from tests.claude.claude_support import REFUND, REFUND_SCHEMA, Harness, make_shop

    sink = AwaitableSink()
    gf = GoldfiveClaude(
        control=channel,
        sinks=[sink, channel.sink],
        config=SteeringConfig(approval_default_timeout_ms=20_000),
        gate_tools=[REFUND],
        tool_schemas={REFUND: REFUND_SCHEMA},
    )
    return Harness(gf, channel, sink, make_shop(), FakeClaudeCLI(session_id="sess-outage"))


class _Agent:
    """One agent of the given kind on ``channel``; ``go()`` runs it; what it ran and was told is kept."""

    def __init__(self, kind: str, channel: StoreChannel, *, before_body: Any = None) -> None:
        self.kind, self.channel, self.before_body = kind, channel, before_body
        self.ran: list[dict[str, Any]] = []
        self.told = ""
        """What the model was told about the call (the tool's result, or why it did not run)."""
        self.target = "pay-1"

    async def go(self) -> None:
        await getattr(self, f"_{self.kind}")()

    async def _callable(self) -> None:
        out = (
            await wrap(
                _guarded_agent(self.channel.store, self.ran, before_body=self.before_body),
                control=self.channel,
                sinks=[self.channel.sink],
            ).run()
        ).output
        self.told = f"{out['status']}: {out['detail']} {out['result']}"

    async def _adk(self) -> None:
        pytest.importorskip("google.adk")
        from google.adk.agents.llm_agent import LlmAgent
        from google.adk.apps import App
        from google.adk.runners import Runner
        from google.adk.sessions import InMemorySessionService
        from google.adk.tools.function_tool import FunctionTool
        from google.genai import types

        from goldfive_adk import GoldfivePlugin
        from goldfive_core.testing import Call, ScriptedModel

        async def send_money(amount: int) -> dict[str, Any]:
            """Move money."""
            if self.before_body is not None:
                await self.before_body()
            self.ran.append({"amount": amount})
            return {"sent": amount}

        seen: list[str] = []

        def answer(model_saw: Any) -> str:
            seen.append(str(model_saw.last_response))
            return "done"

        self.target = "adk-pay-1"
        plugin = GoldfivePlugin(control=self.channel, sinks=[self.channel.sink])
        agent = LlmAgent(
            name="ops",
            model=ScriptedModel([Call("send_money", {"amount": 10}, id=self.target), answer]),
            tools=[FunctionTool(send_money, require_confirmation=True)],
        )
        app = App(name="outage_adk", root_agent=agent, plugins=[plugin])
        runner = Runner(app=app, session_service=InMemorySessionService())
        session = await runner.session_service.create_session(app_name=app.name, user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="pay bob")])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass
        self.told = seen[0]

    async def _claude(self) -> None:
        from claude_agent_sdk import create_sdk_mcp_server, tool

        from tests.claude.claude_support import REFUND, REFUND_SCHEMA, Shop, converse

        h = _claude_harness(self.channel)
        self.target = "toolu_pay"

        @tool("refund", "Refund an order", REFUND_SCHEMA)
        async def refund(args: dict[str, Any]) -> dict[str, Any]:
            if self.before_body is not None:
                await self.before_body()
            self.ran.append({"amount": args["amount"]})
            return {"content": [{"type": "text", "text": f"refunded {args['amount']}"}]}

        h.shop = Shop([], [], create_sdk_mcp_server("shop", tools=[refund]))

        async def script() -> None:
            use = await h.cli.use_tool(self.target, REFUND, {"order_id": "7", "amount": 10}, permission_limit_s=60)
            self.told = use.output if use.ran else str((use.permission or {}).get("message"))
            await h.cli.result()

        async with h.run() as run:
            await converse(run, h.cli, "refund order 7", script, limit_s=60)


ADAPTERS = ["callable", "adk", "claude"]


@pytest.mark.parametrize("kind", ADAPTERS)
async def test_a_full_disk_past_the_budget_fails_closed_for_every_adapter(sqlite_backend: Backend, kind: str) -> None:
    channel = StoreChannel(sqlite_backend.open())
    store = channel.store
    assert isinstance(store, SqliteStore)
    store.retry_budget_s = 0.3
    agent = _Agent(kind, channel)
    run = asyncio.create_task(agent.go())
    with disk_full(store, on="INSERT INTO gf_executions") as hits:
        decider = sqlite_backend.open()
        rows = await await_until(lambda: decider.approvals(), what="the request")
        ack = await StoreChannel(sqlite_backend.open()).send(
            ControlMessage(ControlKind.APPROVE, {"target_id": rows[0].target_id, "decided_by": "ann"})
        )
        assert ack.ok, ack.detail
        await run  # nothing was raised into the agent's loop
    assert len(hits) >= 2  # retried before giving up
    assert agent.ran == []  # fail closed: the body did not run
    assert "store_unavailable" in agent.told or agent.told.startswith("unavailable: "), agent.told
    assert "did not run: send_money" in agent.told or "did not run: mcp__shop__refund" in agent.told, agent.told
    assert "database or disk is full" in agent.told
    assert store.execution(rows[0].target_id) is None  # nothing recorded: a replay may still run it once
    # The person was told "approved"; the run's record tells them it did not run.
    await asyncio.to_thread(channel.sink.flush)
    drifts = [
        events_pb2.Event.FromString(r.body).drift_detected.detail
        for r in decider.audit_rows(limit=1000)
        if r.kind == "drift_detected"
    ]
    assert any(d.startswith("approved by ann, but") and "did not run" in d for d in drifts), drifts
    await channel.aclose()


@pytest.mark.parametrize("kind", ADAPTERS)
@pytest.mark.parametrize("when", ["mid-wait", "mid-body"])
async def test_postgres_restarted_mid_wait_or_mid_body(postgres_backend: Backend, kind: str, when: str) -> None:
    """The agent's server goes away (connections cut, new ones refused) and comes back within the budget."""
    proxy, dsn = OutageProxy.for_dsn(postgres_backend.location)
    try:
        via_proxy = Backend("postgres", dsn, postgres_backend.schema)
        channel = StoreChannel(via_proxy.open())
        loop = asyncio.get_running_loop()

        async def restart_now() -> None:
            if when == "mid-body":
                assert proxy.down() >= 1
                loop.call_later(0.5, proxy.up)

        agent = _Agent(kind, channel, before_body=restart_now)
        run = asyncio.create_task(agent.go())
        decider = postgres_backend.open()
        rows = await await_until(lambda: decider.approvals(), what="the request")
        target = rows[0].target_id
        sender = StoreChannel(postgres_backend.open())
        if when == "mid-wait":
            assert proxy.down() >= 2  # the agent's store, its listener, its sink
            sent = asyncio.create_task(
                sender.send(ControlMessage(ControlKind.APPROVE, {"target_id": target, "decided_by": "ann"}))
            )
            await await_until(lambda: decider.pending_controls(), what="the approval in the inbox")
            assert not sent.done()  # nobody can take it while the agent's server is down
            proxy.up()
            ack = await sent
        else:
            ack = await sender.send(ControlMessage(ControlKind.APPROVE, {"target_id": target, "decided_by": "ann"}))
        assert ack.ok, ack.detail  # "approved" and the agent applied it
        await run
        assert len(agent.ran) == 1, agent.told  # ran once
        assert "sent" in agent.told or "refunded 10" in agent.told or "ran:" in agent.told, agent.told
        if when == "mid-body":
            assert proxy.refused >= 1  # the ledger's "done" met the outage and was retried
        row = await await_until(
            lambda: (r := decider.execution(target)) is not None and r.state is ExecutionState.DONE and r,
            what="done recorded",
        )
        assert row.state is ExecutionState.DONE  # reconnected and recorded: never in doubt
        await channel.aclose()
        await sender.aclose()
    finally:
        proxy.close()
