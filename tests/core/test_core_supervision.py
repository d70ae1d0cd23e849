"""One supervision object (goldfive_core.supervision) holds what every adapter's owner holds."""

from __future__ import annotations

from typing import Any

import pytest

from goldfive_core import ControlChannel, InMemorySink, SteeringConfig, wrap
from goldfive_core.supervision import Supervised, Supervision


class _LedgerChannel(ControlChannel):
    """A channel that brings its own ledger (as a StoreChannel brings its store's)."""

    ledger = object()


def _adapters(**options: Any) -> list[Supervised]:
    from goldfive_adk import GoldfivePlugin
    from goldfive_core.adapters.claude import GoldfiveClaude

    async def agent(task: Any, tools: Any) -> None:
        return None

    return [wrap(agent, **options), GoldfivePlugin(**options), GoldfiveClaude(**options)]


def test_every_adapter_keeps_its_channel_sinks_config_and_set_up_in_one_supervision() -> None:
    pytest.importorskip("google.adk")
    pytest.importorskip("claude_agent_sdk")
    channel, sink, config = _LedgerChannel(), InMemorySink(), SteeringConfig(max_reinvokes=7)
    for adapter in _adapters(control=channel, sinks=[sink], config=config, labels={"team": "ops"}):
        held = adapter.supervision
        assert isinstance(held, Supervision)
        assert (adapter.control, adapter.sinks, adapter.config) == (channel, (sink,), config)
        assert adapter.labels == {"team": "ops"} and adapter.router is held.router
        assert adapter.ledger is _LedgerChannel.ledger  # the channel's, when none is given
        adapter.sinks = ()  # written through: the next run gets it
        assert held.sinks == () and held.new_run(adapter="test").session.events.sinks == ()


def test_defaults_are_the_same_for_every_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("google.adk")
    pytest.importorskip("claude_agent_sdk")
    monkeypatch.setenv("GOLDFIVE_STEER_MAX_REINVOKES", "4")
    for adapter in _adapters():
        assert adapter.control is None and adapter.ledger is None and adapter.policy is None
        assert adapter.config.max_reinvokes == 4  # from the environment
        assert adapter.session_setup is not None  # the ladder and its detectors
