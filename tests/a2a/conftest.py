"""Fixtures for the A2A tests: agents served over A2A in their own processes, stopped after each test."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("google.adk")
pytest.importorskip("a2a")
pytest.importorskip("uvicorn")

# wait_until and free_port are the detach tests' (tests/detach/adk_http_support.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "detach"))

from a2a_support import Agent, Webhook, World


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


@pytest.fixture
def agents(world: World) -> Iterator[Callable[[], Agent]]:
    started: list[Agent] = []

    def start() -> Agent:
        agent = Agent(world)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.stop()


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()
