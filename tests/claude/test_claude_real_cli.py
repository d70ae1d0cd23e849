"""Second tier: the SDK's bundled Claude Code CLI, offline, against a mock Messages API on 127.0.0.1.

Checks what the fake CLI cannot: that the real CLI sends every tool use (even an allowed one) through
``can_use_tool`` when goldfive's PreToolUse hook answers "ask", that denial messages and a Stop hook's
``additionalContext`` reach the model's next request, and that CANCEL interrupts a live CLI.
Skipped when the bundled CLI is missing or cannot start, or with GOLDFIVE_SKIP_REAL_CLI=1.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import claude_agent_sdk
import pytest
from claude_agent_sdk import ClaudeAgentOptions

from goldfive_core import ControlKind, Detector, Drift
from goldfive_core.session import Session
from tests.claude.claude_support import LOOKUP, REFUND, Harness, make_harness
from tests.claude.mock_messages_api import Block, MockMessagesAPI, offline_env, text, tool_use

CLI = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"


def _cli_problem() -> str | None:
    if os.environ.get("GOLDFIVE_SKIP_REAL_CLI"):
        return "GOLDFIVE_SKIP_REAL_CLI is set"
    if not CLI.is_file():
        return f"no bundled CLI at {CLI}"
    try:
        done = subprocess.run([str(CLI), "--version"], capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the bundled CLI does not start: {exc}"
    return None if done.returncode == 0 else f"the bundled CLI exited {done.returncode}"


pytestmark = pytest.mark.skipif(bool(problem := _cli_problem()), reason=problem or "")

ARGS = {"order_id": "42", "amount": 30}


def _options(h: Harness, api: MockMessagesAPI, home: Path, **kwargs: Any) -> ClaudeAgentOptions:
    env = offline_env(api.url, str(home))
    return h.options(tools=[], setting_sources=[], max_turns=6, env=env, cwd=str(home), model="claude-mock", **kwargs)


def _tool_results(body: Mapping[str, Any]) -> int:
    return sum(
        1
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    )


async def _converse(h: Harness, options: ClaudeAgentOptions, person: Any, detectors: tuple[Detector, ...] = ()) -> Any:
    run = h.gf.run(options, title="real cli")
    run.session.detectors.extend(detectors)
    async with run, asyncio.timeout(60), asyncio.TaskGroup() as tg:
        deciding = tg.create_task(person())
        await run.query("refund order 42")
        async for _ in run.receive_response():
            pass
        await deciding
    return run


async def test_real_cli_approval_then_a_steer_at_the_end_of_the_turn_reaches_the_model(tmp_path: Path) -> None:
    h = make_harness()
    loop = asyncio.get_running_loop()

    def respond(body: dict[str, Any]) -> list[Block]:
        done = _tool_results(body)
        if done == 0:
            return [tool_use("toolu_01RealRefund", REFUND, ARGS)]
        if "also email the customer" not in str(body["messages"]):
            # The steer arrives while the model writes its last answer; the Stop hook must hand it over.
            steer = h.control(ControlKind.STEER, text="also email the customer")
            assert asyncio.run_coroutine_threadsafe(steer, loop).result(10).ok
            return [text("refund handled")]
        return [text("emailing the customer too")]

    async def person() -> None:
        (requested,) = await h.sink.wait_for("approval_requested", timeout=30)
        assert requested.approval_requested.metadata["tool_name"] == REFUND
        assert (await h.control(ControlKind.APPROVE, target_id="toolu_01RealRefund")).ok

    with MockMessagesAPI(respond) as api:
        run = await _converse(h, _options(h, api, tmp_path), person)
    assert h.shop.refunds == [ARGS]
    assert len(api.requests) == 3 and "also email the customer" in str(api.requests[2]["messages"])
    assert run.result.status == "COMPLETED" and run.result.output == "emailing the customer too"
    assert run.session.session_id and h.sink.events[-1].session_id == run.session.session_id


class _Seen(Detector):
    def __init__(self) -> None:
        self.tools: list[str] = []

    def on_tool_call(self, session: Session, tool_name: str, args: Mapping[str, Any]) -> Drift | None:
        self.tools.append(tool_name)
        return None


@pytest.mark.filterwarnings("ignore::claude_agent_sdk.CanUseToolShadowedWarning")
async def test_real_cli_gates_allowed_tools_and_the_model_reads_the_rejection(tmp_path: Path) -> None:
    h = make_harness()
    seen = _Seen()

    def respond(body: dict[str, Any]) -> list[Block]:
        done = _tool_results(body)
        if done == 0:
            return [tool_use("toolu_01RealLookup", LOOKUP, {"order_id": "42"})]
        if done == 1:
            return [tool_use("toolu_01RealRefund", REFUND, ARGS)]
        return [text("I will not refund")]

    async def person() -> None:
        await h.sink.wait_for("approval_requested", timeout=30)
        ack = await h.control(ControlKind.REJECT, target_id="toolu_01RealRefund", reason="over the refund limit")
        assert ack.ok

    with MockMessagesAPI(respond) as api:
        run = await _converse(h, _options(h, api, tmp_path, allowed_tools=[LOOKUP]), person, (seen,))
    assert seen.tools == [LOOKUP, REFUND]  # the allowed lookup still passed the step gate
    assert h.shop.lookups == [{"order_id": "42"}] and h.shop.refunds == []
    assert "over the refund limit" in str(api.requests[-1]["messages"])
    assert run.result.status == "COMPLETED"


async def test_real_cli_cancel_interrupts_the_run(tmp_path: Path) -> None:
    h = make_harness()

    def respond(body: dict[str, Any]) -> list[Block]:
        return [tool_use("toolu_01RealRefund", REFUND, ARGS)] if _tool_results(body) == 0 else [text("stopped")]

    async def person() -> None:
        await h.sink.wait_for("approval_requested", timeout=30)
        assert (await h.control(ControlKind.CANCEL, reason="wrong customer")).ok

    with MockMessagesAPI(respond) as api:
        run = await _converse(h, _options(h, api, tmp_path), person)
    assert h.shop.refunds == [] and len(api.requests) == 1
    assert run.result.status == "CANCELLED"
    assert h.sink.of("run_aborted")[0].run_aborted.reason == "wrong customer"


def test_the_example_takes_the_real_path_when_an_api_key_is_set(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> list[Block]:
        if _tool_results(body) == 0:
            return [tool_use("toolu_01Example", REFUND, {"order_id": "1042", "amount": 250})]
        return [text("all done")]

    with MockMessagesAPI(respond) as api:
        env = {**os.environ, **offline_env(api.url, str(tmp_path))}
        done = subprocess.run(
            [sys.executable, "examples/claude_agent.py", "--decision", "edit", "--amount", "99"],
            cwd=Path(__file__).resolve().parents[2],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert done.returncode == 0, done.stderr
    assert "(running the real Claude)" in done.stdout
    assert "ledger: [{'amount': 99, 'order_id': '1042'}]" in done.stdout
