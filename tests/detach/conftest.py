"""Fixtures for the detach tests: ADK's HTTP server processes, stopped after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("google.adk")
pytest.importorskip("uvicorn")

from adk_http_support import Server, World


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


@pytest.fixture
def servers(world: World) -> Iterator[Callable[[], Server]]:
    started: list[Server] = []

    def start() -> Server:
        server = Server(world)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
