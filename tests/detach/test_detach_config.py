"""GoldfivePlugin(detach_after=...) configuration errors, and a Resumer on an App that cannot detach."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.apps import App
from google.adk.sessions import InMemorySessionService

from goldfive_adk import GoldfivePlugin
from goldfive_adk.detach import Resumer
from goldfive_core.control import ControlChannel
from goldfive_core.store import StoreChannel, open_store


def test_detach_after_needs_a_store_channel() -> None:
    with pytest.raises(ValueError, match="detach_after needs control=StoreChannel"):
        GoldfivePlugin(control=ControlChannel(), detach_after=5.0)
    with pytest.raises(ValueError, match="detach_after needs control=StoreChannel"):
        GoldfivePlugin(detach_after=0)


def test_detach_after_needs_a_database_store_not_an_http_channel() -> None:
    http = pytest.importorskip("goldfive_core.store.http")
    channel = http.HttpChannel("http://127.0.0.1:9", token="gf5_x")
    with pytest.raises(ValueError, match=r"over a database \(SQLite or PostgreSQL\).*HttpChannel"):
        GoldfivePlugin(control=channel, detach_after=0)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), True])
def test_detach_after_must_be_a_finite_number_of_seconds(tmp_path: Path, bad: float) -> None:
    with pytest.raises(ValueError, match="detach_after"):
        GoldfivePlugin(control=StoreChannel(open_store(str(tmp_path / "g.db"))), detach_after=bad)


def test_without_detach_after_nothing_is_detached(tmp_path: Path) -> None:
    plugin = GoldfivePlugin(control=StoreChannel(open_store(str(tmp_path / "g.db"))))
    assert plugin.detach is None


def test_a_resumer_needs_a_detaching_plugin_on_a_resumable_app(tmp_path: Path) -> None:
    channel = StoreChannel(open_store(str(tmp_path / "g.db")))
    agent = LlmAgent(name="a", model="scripted")
    with pytest.raises(ValueError, match="no GoldfivePlugin with detach_after"):
        Resumer(
            App(name="x", root_agent=agent, plugins=[GoldfivePlugin(control=channel)]),
            session_service=InMemorySessionService(),
        )
    app = App(name="y", root_agent=agent, plugins=[GoldfivePlugin(control=channel, detach_after=0)])
    with pytest.raises(ValueError, match="not resumable"):
        Resumer(app, session_service=InMemorySessionService())
