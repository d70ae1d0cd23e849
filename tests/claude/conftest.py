"""The Claude adapter tests need the ``claude`` extra; without it the directory is skipped."""

from __future__ import annotations

import pytest

pytest.importorskip("claude_agent_sdk")

from tests.claude.claude_support import Harness, make_harness


@pytest.fixture
def h() -> Harness:
    """A fresh harness: GoldfiveClaude gating mcp__shop__refund, a channel, a waitable sink, a fake CLI."""
    return make_harness()
