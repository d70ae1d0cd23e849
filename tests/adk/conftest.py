"""Shared fixtures for the ADK plugin tests: a channel, a sink, tool bodies that record their calls."""

from __future__ import annotations

from typing import Any

import pytest
from google.adk.tools.function_tool import FunctionTool

from goldfive_adk import GoldfivePlugin
from goldfive_core import ControlChannel, SteeringConfig
from goldfive_core.testing import AwaitableSink


class Bank:
    """Tool bodies that record every call that really ran."""

    def __init__(self) -> None:
        self.transfers: list[dict[str, Any]] = []
        self.lookups: list[str] = []

    def transfer_funds(self, amount: int, to: str) -> dict[str, Any]:
        """Move money to an account."""
        self.transfers.append({"amount": amount, "to": to})
        return {"ok": True, "amount": amount, "to": to}

    def lookup(self, account: str) -> dict[str, Any]:
        """Read an account's balance."""
        self.lookups.append(account)
        return {"account": account, "balance": 100}

    def tools(self, *, confirm: Any = True) -> list[FunctionTool]:
        """transfer_funds (requires confirmation per ``confirm``) and lookup (no confirmation)."""

        def transfer_funds(amount: int, to: str) -> dict[str, Any]:
            """Move money to an account."""
            return self.transfer_funds(amount, to)

        def lookup(account: str) -> dict[str, Any]:
            """Read an account's balance."""
            return self.lookup(account)

        return [FunctionTool(transfer_funds, require_confirmation=confirm), FunctionTool(lookup)]


@pytest.fixture
def bank() -> Bank:
    """Fresh tool bodies."""
    return Bank()


@pytest.fixture
def channel() -> ControlChannel:
    """An in-memory control channel."""
    return ControlChannel()


@pytest.fixture
def sink() -> AwaitableSink:
    """A sink tests can await."""
    return AwaitableSink()


@pytest.fixture
def plugin(channel: ControlChannel, sink: AwaitableSink) -> GoldfivePlugin:
    """The plugin with a channel bound and a generous (but finite) approval wait."""
    return GoldfivePlugin(control=channel, sinks=[sink], config=SteeringConfig(approval_default_timeout_ms=10_000))
