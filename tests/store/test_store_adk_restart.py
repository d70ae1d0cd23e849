"""A resumable ADK agent killed while it waits; the person approves; the restarted run replays the call.

The replayed call (same function_call_id) must use the decision recorded while the agent was down,
the tool body must run exactly once, and a crash inside the body must be reported in doubt, not re-run.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_support import HERE, PYTHON, Backend, wait_until

pytest.importorskip("google.adk")

SCRIPT = str(HERE / "adk_agent_proc.py")


def _cli(backend: Backend, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", *argv], env=backend.env(), capture_output=True, text=True, timeout=45
    )


class AdkProc:
    def __init__(self, backend: Backend, tmp: Path, *argv: str) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, SCRIPT, *argv, "--sessions", str(tmp / "sessions.json"), "--marker", str(tmp / "marker")],
            env=backend.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def first_call(self) -> tuple[str, str]:
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, self.proc.stderr.read() if self.proc.stderr else "exited"
            if line.startswith("call "):
                _, invocation, call_id, _name = line.split()
                return invocation, call_id

    def finish(self) -> list[str]:
        out, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err
        return out.splitlines()


@pytest.fixture
def procs() -> Iterator[list[AdkProc]]:
    started: list[AdkProc] = []
    yield started
    for p in started:
        if p.proc.poll() is None:
            p.proc.kill()
            p.proc.communicate(timeout=10)


def _start_and_kill(backend: Backend, tmp: Path, procs: list[AdkProc]) -> tuple[str, str]:
    first = AdkProc(backend, tmp, "start")
    procs.append(first)
    invocation, call_id = first.first_call()
    store = backend.open()
    wait_until(lambda: any(r.target_id == call_id for r in store.approvals()), what="the confirmation in the store")
    first.proc.kill()
    first.proc.communicate(timeout=10)
    return invocation, call_id


def test_replayed_call_uses_the_decision_recorded_while_down(
    backend: Backend, tmp_path: Path, procs: list[AdkProc]
) -> None:
    invocation, call_id = _start_and_kill(backend, tmp_path, procs)
    listed = _cli(backend, "pending")
    assert f"{call_id}  [orphaned]" in listed.stdout
    recorded = _cli(backend, "approve", call_id, "--by", "ann", "--edit", '{"to": "bob", "amount": 4}')
    assert recorded.returncode == 0 and recorded.stdout.startswith("recorded:"), recorded.stderr

    second = AdkProc(backend, tmp_path, "resume", invocation)
    procs.append(second)
    lines = second.finish()
    assert 'text tool said {"sent": 4, "to": "bob"}' in lines
    assert (tmp_path / "marker").read_text().splitlines() == ["bob 4"]
    store = backend.open()
    assert not store.approvals()  # not asked again
    assert store.execution(call_id).state.value == "done"  # type: ignore[union-attr]
    assert json.loads(store.execution(call_id).result_json) == {"sent": 4, "to": "bob"}  # type: ignore[union-attr]


def test_crash_in_the_tool_body_is_in_doubt_on_replay(backend: Backend, tmp_path: Path, procs: list[AdkProc]) -> None:
    invocation, call_id = _start_and_kill(backend, tmp_path, procs)
    assert _cli(backend, "approve", call_id, "--by", "ann").returncode == 0

    dying = AdkProc(backend, tmp_path, "resume", invocation, "--die-in-body")
    procs.append(dying)
    dying.proc.communicate(timeout=30)
    assert dying.proc.returncode == 9
    assert (tmp_path / "marker").read_text().splitlines() == ["bob 10"]
    assert f"IN DOUBT  {call_id}" in _cli(backend, "pending").stdout

    again = AdkProc(backend, tmp_path, "resume", invocation)
    procs.append(again)
    lines = again.finish()
    assert any(line.startswith("text tool said") and '"in_doubt"' in line for line in lines), lines
    assert (tmp_path / "marker").read_text().splitlines() == ["bob 10"]  # never re-run
