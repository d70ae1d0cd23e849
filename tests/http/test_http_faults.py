"""Agents over HTTP when servers fail: killed and restarted mid-wait, several servers over one PostgreSQL,
no server at all (fail closed with words the model reads)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from http_support import AGENT_WAIT_MS, Site, eventually, site, tool_agent
from server_support import free_port
from store_support import Backend

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.store.http import HttpChannel


async def _approve(s: Site, target: str, server: int = 0) -> None:
    answer = await s.decide(target, server=server)
    assert answer.status_code == 200, answer.text
    assert answer.json()["verdict"] == "applied", answer.json()


async def test_the_server_is_killed_and_restarted_mid_wait_and_the_agent_resumes(
    backend: Backend, tmp_path: Path
) -> None:
    with site(backend, tmp_path) as s:
        channel = HttpChannel(s.url, token=s.tokens["bot"])
        ran: list[Any] = []
        run = tool_agent(channel, "call-r", ran)
        try:
            await s.pending("call-r")
            await eventually(lambda: _connected(channel, 1), "the agent's stream")
            s.servers[0].kill()  # SIGKILL while the agent waits
            await asyncio.sleep(0.3)  # the agent notices and retries against a dead port for a while
            assert not run.done()
            s.servers[0].start()  # same port, same database
            await eventually(lambda: _connected(channel, 2), "the agent's reconnection")
            await _approve(s, "call-r")
            result = await asyncio.wait_for(run, 30)
        finally:
            if not run.done():
                run.cancel()
            await channel.aclose()
        assert result.output.status == "ran" and ran == [{"amount": 10}]
        assert channel.failed_closed == 0


def _states(channels: list[HttpChannel]) -> list[str]:
    """What each agent's channel is doing (for a failure's message)."""
    out = []
    for channel in channels:
        source, task = channel.source, channel._task
        ended = "" if task is None or not task.done() else f" ended={task}"
        out.append(
            f"{channel.endpoint}: connects={channel.connects} url={channel.remote.url} bound={channel.bound} "
            f"down_since={getattr(source, '_down_since', None)} last_error={getattr(source, '_last_error', '')!r}"
            f"{ended}"
        )
    return out


def _story(what: str, s: Site, channels: list[HttpChannel]) -> str:
    """A failure's full account: what went wrong, each agent's channel, the end of each server's log."""
    logs = [f"--- {serve.url} log (end) ---\n{serve.log.read_text(errors='replace')[-3000:]}" for serve in s.servers]
    return "\n".join([what, *_states(channels), *logs])


async def _connected(channel: HttpChannel, times: int) -> bool:
    return channel.connects >= times


async def test_two_servers_on_one_postgresql_the_agent_switches_between_them(
    pg_backend: Backend, tmp_path: Path
) -> None:
    with site(pg_backend, tmp_path, servers=2) as s:
        a, b = s.servers
        channel = HttpChannel([a.url, b.url], token=s.tokens["bot"])
        ran: list[Any] = []
        try:
            # Connected to A, decided on B: the decision crosses servers through PostgreSQL.
            first = tool_agent(channel, "call-1", ran)
            await s.pending("call-1", server=1)
            await _approve(s, "call-1", server=1)
            assert (await asyncio.wait_for(first, 30)).output.status == "ran"
            # A dies mid-wait: the agent moves to B and resumes there; B decides.
            second = tool_agent(channel, "call-2", ran)
            await s.pending("call-2", server=1)
            connects = channel.connects
            a.kill()
            await eventually(lambda: _connected(channel, connects + 1), "the agent on server B")
            assert channel.remote.url == b.url
            await _approve(s, "call-2", server=1)
            assert (await asyncio.wait_for(second, 30)).output.status == "ran"
        finally:
            await channel.aclose()
        assert ran == [{"amount": 10}, {"amount": 10}]  # each once
        store = pg_backend.open()
        assert [store.execution(c).state.value for c in ("call-1", "call-2")] == ["done", "done"]  # type: ignore[union-attr]
        assert store.verify_audit().ok


async def test_a_server_killed_mid_burst_of_decisions_loses_none_and_runs_each_body_once(
    pg_backend: Backend, tmp_path: Path
) -> None:
    calls = [f"burst-{i}" for i in range(8)]
    with site(pg_backend, tmp_path, servers=2) as s:
        a, b = s.servers
        channels = [HttpChannel([a.url, b.url], token=s.tokens["bot"]) for _ in calls]
        ran: list[Any] = []
        runs = [tool_agent(channel, call, ran) for channel, call in zip(channels, calls, strict=True)]
        try:
            for call in calls:
                await s.pending(call, server=1)
            for channel in channels:
                await eventually(lambda channel=channel: _connected(channel, 1), "every agent's stream on A")
            # A burst of decisions on A, whose agents all wait on A; A is SIGKILLed once the first is answered.
            burst = [asyncio.create_task(s.decide(call, server=0)) for call in calls]
            await asyncio.wait(burst, return_when=asyncio.FIRST_COMPLETED)
            a.kill()
            answers = await asyncio.gather(*burst, return_exceptions=True)
            applied = [c for c, r in zip(calls, answers, strict=True) if not isinstance(r, BaseException)]
            assert all(r.status_code == 200 for r in answers if not isinstance(r, BaseException)), answers
            # The person decides again on B whatever got no answer: applied now, or refused as decided already.
            for call, answer in zip(calls, answers, strict=True):
                if isinstance(answer, BaseException):
                    again = await s.decide(call, server=1)
                    if again.status_code not in (200, 409):  # the whole story, not pytest's shortened repr
                        pytest.fail(_story(f"{call} decided again on B: {again.status_code} {again.text}", s, channels))
                    # Applied now; or refused: decided already, or its run already ended (A had applied it and
                    # died before answering; the agent's run went on). Each body ran once either way (below).
                    said = again.json()["detail"]
                    assert again.status_code == 200 or "already" in said or "no active run" in said, again.json()
            results = await asyncio.wait_for(asyncio.gather(*runs), 60)
        finally:
            for run in runs:
                if not run.done():
                    run.cancel()
            for channel in channels:
                await channel.aclose()
        assert applied  # at least the first decision was answered before the kill
        assert [r.output.status for r in results] == ["ran"] * len(calls)  # nothing lost: every call went on
        assert ran == [{"amount": 10}] * len(calls)  # and each body ran once
        store = pg_backend.open()
        assert [store.execution(c).state.value for c in calls] == ["done"] * len(calls)  # type: ignore[union-attr]
        assert store.verify_audit().ok


async def test_no_server_fails_closed_with_a_result_the_model_reads(
    sqlite_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOLDFIVE_STORE_DRAIN_S", "1")  # closing waits this long for events no server will take
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    channel = HttpChannel(url, token="gf5_0123456789abcdef_" + "x" * 43, unreachable_after_s=1.0)
    ran: list[Any] = []

    async def flow_a(task: Task, tools: AgentTools) -> Any:
        await tools.report_task_started("t-1")
        return await tools.report_awaiting_approval("deploy?", task_id="t-1", timeout_ms=AGENT_WAIT_MS)

    try:
        answer = await asyncio.wait_for(wrap(flow_a, control=channel, sinks=[channel.sink]).run("go"), 30)
        tool = await asyncio.wait_for(tool_agent(channel, "call-x", ran), 30)
    finally:
        await channel.aclose()
    assert answer.output["decision"] == "cancelled"
    assert "goldfive serve unreachable" in answer.output["detail"] and "NOT approved" in answer.output["detail"]
    assert tool.output.status == "unavailable" and "was NOT run" in tool.output.detail and ran == []
    assert channel.failed_closed == 1


async def test_a_revoked_token_fails_closed_too(sqlite_backend: Backend, tmp_path: Path) -> None:
    with site(sqlite_backend, tmp_path) as s:
        channel = HttpChannel(s.url, token="gf5_0123456789abcdef_" + "x" * 43)

        async def flow_a(task: Task, tools: AgentTools) -> Any:
            await tools.report_task_started("t-2")
            return await tools.report_awaiting_approval("deploy?", task_id="t-2", timeout_ms=AGENT_WAIT_MS)

        try:
            answer = await asyncio.wait_for(wrap(flow_a, control=channel, sinks=[channel.sink]).run("go"), 30)
        finally:
            await channel.aclose()
    assert answer.output["decision"] == "cancelled"
    assert "refused this agent" in answer.output["detail"] and "401" in answer.output["detail"]


async def test_an_agent_killed_mid_wait_gets_the_decision_recorded_meanwhile_on_replay(
    backend: Backend, tmp_path: Path
) -> None:
    marker = tmp_path / "ran.jsonl"
    script = Path(__file__).with_name("http_agent_proc.py")
    with site(backend, tmp_path) as s:
        argv = [sys.executable, str(script), s.url, s.tokens["bot"], "call-k", str(marker)]
        env = s.backend.env()
        first = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        try:
            await s.pending("call-k")
        finally:
            first.kill()  # SIGKILL mid-wait: the request stays in the database, the run's process is gone
            await asyncio.wait_for(first.wait(), 10)
        answer = await s.decide("call-k", body={"reason": "go ahead"})
        assert answer.status_code == 200 and answer.json()["verdict"] == "recorded", answer.text
        assert not marker.exists()

        async def agent() -> dict[str, Any]:
            proc = await asyncio.create_subprocess_exec(
                *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
            )
            out, err = await asyncio.wait_for(proc.communicate(), 60)
            assert proc.returncode == 0, err.decode()
            result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
            return result

        replayed = await agent()  # the restarted agent replays the same call: the recorded decision applies
        assert replayed["status"] == "ran" and replayed["result"] == {"sent": 10}, replayed
        again = await agent()  # and once it ran, never again
        assert again["status"] == "already_done" and again["result"] == {"sent": 10}, again
    # A decision replayed from the store comes with no ack to carry the claim: the ledger posts it on its own.
    assert marker.read_text().splitlines() == ['{"amount": 10, "executing_posts": 1, "to": "bob"}']


async def test_adk_without_a_server_skips_the_tool_and_the_model_reads_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOLDFIVE_STORE_DRAIN_S", "1")  # closing waits this long for events no server will take
    pytest.importorskip("google.adk")
    from google.adk.agents.llm_agent import LlmAgent
    from google.adk.apps import App
    from google.adk.runners import Runner
    from google.adk.sessions import InMemorySessionService
    from google.adk.tools.function_tool import FunctionTool
    from google.genai import types

    from goldfive_adk import GoldfivePlugin
    from goldfive_core.testing import Call, ScriptedModel

    ran: list[int] = []

    def transfer(amount: int) -> dict[str, Any]:
        """Move money."""
        ran.append(amount)
        return {"moved": amount}

    channel = HttpChannel(
        f"http://127.0.0.1:{free_port()}", token="gf5_0123456789abcdef_" + "x" * 43, unreachable_after_s=1.0
    )
    plugin = GoldfivePlugin(control=channel, sinks=[channel.sink])
    agent = LlmAgent(
        name="ops",
        model=ScriptedModel([Call("transfer", {"amount": 10}), lambda seen: f"tool said {seen.last_response}"]),
        tools=[FunctionTool(transfer, require_confirmation=True)],
    )
    app = App(name="http_adk_down", root_agent=agent, plugins=[plugin])
    runner = Runner(app=app, session_service=InMemorySessionService())
    session = await runner.session_service.create_session(app_name=app.name, user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="pay bob")])
    try:
        events = await asyncio.wait_for(
            _collect(runner.run_async(user_id="u", session_id=session.id, new_message=message)), 30
        )
    finally:
        await channel.aclose()
    assert ran == []
    texts = [p.text for e in events for p in (e.content.parts if e.content else []) if p.text]
    assert "was NOT run" in texts[-1] and "goldfive serve" in texts[-1]


async def _collect(stream: Any) -> list[Any]:
    return [e async for e in stream]
