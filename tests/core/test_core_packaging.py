"""Packaging facts a user relies on: the core imports with only protobuf, and its public names are pinned."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import goldfive_core

ROOT = Path(__file__).resolve().parents[2]

_BLOCKED_IMPORT = textwrap.dedent(
    """
    import importlib.abc
    import sys

    BLOCKED = ("google.adk", "google.genai", "claude_agent_sdk", "mcp", "grpc", "grpc_tools")

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ImportError(f"blocked by the test: {name}")
            return None

    sys.meta_path.insert(0, Block())
    import goldfive_core
    import goldfive_core.adapters.callable
    import goldfive_core.reporting, goldfive_core.routing, goldfive_core.runner, goldfive_core.convert
    import goldfive_core.testing
    from goldfive_core.testing import AwaitableSink, ScriptedReviewer, ReviewRule, Approve

    leaked = sorted(m for m in sys.modules if any(m == b or m.startswith(b + ".") for b in BLOCKED))
    assert not leaked, leaked
    print("ok", len(goldfive_core.__all__))
    """
)


_LAZY_IMPORT = textwrap.dedent(
    """
    import os, sys
    os.environ.pop("GOLDFIVE_POLICY", None)
    import goldfive_core
    heavy = sorted(m for m in sys.modules if m.startswith(("goldfive_core.policy", "goldfive_core.store", "tomllib")))
    assert not heavy, heavy
    from goldfive_core import Session, SteeringConfig
    session = Session(config=SteeringConfig())
    assert session.policy is None
    heavy = sorted(m for m in sys.modules if m.startswith("goldfive_core.policy"))
    assert not heavy, heavy
    print("ok")
    """
)


def test_import_and_a_session_without_policies_leave_the_policy_package_unloaded() -> None:
    # import goldfive_core stays cheap (<= 50 ms target): the policy parser loads only when a policy is used.
    proc = subprocess.run(
        [sys.executable, "-c", _LAZY_IMPORT], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


_BARE_IMPORT = textwrap.dedent(
    """
    import sys
    import goldfive_core
    loaded = sorted(m for m in sys.modules if m.startswith("goldfive_core.") or m in ("asyncio", "google.protobuf"))
    assert not loaded, loaded
    assert set(goldfive_core.__all__) <= set(dir(goldfive_core))
    values = {name: getattr(goldfive_core, name) for name in goldfive_core.__all__}
    from goldfive_core.session import Session
    from goldfive_core.adapters.callable import wrap
    assert values["Session"] is Session and values["wrap"] is wrap
    try:
        goldfive_core.NoSuchName
    except AttributeError as exc:
        assert "NoSuchName" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")
    print("ok")
    """
)


def test_import_goldfive_core_loads_names_on_first_use() -> None:
    # import goldfive_core <= 50 ms (bench/import_time.py): nothing is loaded until a name is used, and
    # then every public name resolves to the object its module defines.
    proc = subprocess.run(
        [sys.executable, "-c", _BARE_IMPORT], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_core_imports_with_host_sdks_blocked() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _BLOCKED_IMPORT], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok ")


EXPECTED_ALL = [
    "AckResult",
    "Adapter",
    "AgentTools",
    "ApprovalBook",
    "ApprovalError",
    "ApprovalOutcome",
    "ApprovalRecord",
    "ApprovalRequest",
    "ApprovalStatus",
    "CallableAdapter",
    "ChannelBusyError",
    "ConfigError",
    "ControlAck",
    "ControlChannel",
    "ControlKind",
    "ControlMessage",
    "ControlRouter",
    "ControlTransport",
    "Decision",
    "Detector",
    "Drift",
    "DriftKind",
    "DriftSeverity",
    "EventEmitter",
    "EventSink",
    "GoldfiveError",
    "Guidance",
    "InMemorySink",
    "InterventionLevel",
    "InvalidTransitionError",
    "JsonlSink",
    "LoggingSink",
    "MissingExtraError",
    "Principal",
    "REPORTING_TOOL_NAMES",
    "RunCancelledError",
    "RunResult",
    "RunStatus",
    "RunTerminatedError",
    "Runner",
    "Session",
    "SteeringConfig",
    "TOOL_SPECS",
    "Task",
    "TaskStatus",
    "ToolSpec",
    "args_digest",
    "call_reporting_tool",
    "canonical_json",
    "wrap",
]
"""The curated public surface of goldfive_core. Adding a name is a decision: add it here too."""

# The escalation ladder's names (issue 4), pinned with the rest.
ESCALATION_NAMES = {
    "DEFAULT_LADDER",
    "DefaultSteerer",
    "DelegationDetector",
    "LadderRow",
    "LoopingToolCallDetector",
    "StepBudgetDetector",
    "install_default_steering",
}


def test_public_api_is_pinned() -> None:
    assert sorted(goldfive_core.__all__) == sorted([*EXPECTED_ALL, *ESCALATION_NAMES])
    assert len(set(goldfive_core.__all__)) == len(goldfive_core.__all__)
    for name in goldfive_core.__all__:
        obj = getattr(goldfive_core, name)
        if callable(obj):
            assert obj.__doc__, f"{name} has no docstring"


TESTING_ALL = [
    "Action",
    "Approve",
    "AwaitableSink",
    "Call",
    "Edit",
    "LetTimeOut",
    "NeverAnswer",
    "Reject",
    "Review",
    "ReviewRequest",
    "ReviewRule",
    "ReviewSeen",
    "ScriptedModel",
    "ScriptedReviewer",
    "ScriptedVerdicts",
    "SeenRequest",
    "Transport",
    "Turn",
]
"""goldfive_core.testing's public names (for users' own tests)."""


def test_testing_public_api_is_pinned() -> None:
    import goldfive_core.testing as testing

    assert sorted(testing.__all__) == TESTING_ALL
    for name in testing.__all__:
        obj = getattr(testing, name)
        if isinstance(obj, type):  # Action and Turn are type aliases
            assert obj.__doc__, f"goldfive_core.testing.{name} has no docstring"


_NO_ADK = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "google.adk" or name.startswith("google.adk."):
                raise ImportError(f"blocked by the test: {name}")
            return None

    sys.meta_path.insert(0, Block())
    import goldfive_core.testing
    try:
        from goldfive_core.testing import ScriptedModel
    except ImportError as exc:
        print(type(exc).__name__, exc)
    """
)


def test_the_scripted_model_without_adk_names_the_install_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _NO_ADK], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("MissingExtraError ") and "pip install 'goldfive[adk]'" in proc.stdout


def test_public_names_the_issue_promises_exist() -> None:
    from goldfive_core import AckResult, ControlAck, ControlKind, ControlMessage

    msg = ControlMessage(ControlKind.APPROVE, {"target_id": "t"}, "id-1", 5)
    assert (msg.kind, dict(msg.payload), msg.id, msg.issued_at_ms) == (
        ControlKind.APPROVE,
        {"target_id": "t"},
        "id-1",
        5,
    )
    ack = ControlAck("id-1", AckResult.SUCCESS, "ok")
    assert (ack.control_id, ack.result, ack.detail) == ("id-1", AckResult.SUCCESS, "ok")


def _pyproject() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return tomllib.load(fh)


def test_distribution_metadata() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    assert project["name"] == "goldfive"
    assert project["requires-python"] == ">=3.11"
    deps = project["dependencies"]
    assert len(deps) == 1 and deps[0].startswith("protobuf>="), deps
    dev = " ".join(project["optional-dependencies"]["dev"])
    for tool in ("pytest", "pytest-asyncio", "anyio", "hypothesis", "ruff", "mypy", "grpcio-tools"):
        assert re.search(rf"(^| ){re.escape(tool)}[<>=!~ ]", dev + " "), f"dev extra lacks {tool}"


def test_protobuf_floor_is_the_gencode_version() -> None:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    floor = re.match(r"protobuf>=([\d.]+)", project["dependencies"][0])
    assert floor is not None
    for path in (ROOT / "goldfive_core" / "pb" / "v1").glob("*_pb2.py"):
        gencode = re.search(r"# Protobuf Python Version: ([\d.]+)", path.read_text())
        assert gencode is not None, path
        assert gencode.group(1) == floor.group(1), f"{path.name} was generated with {gencode.group(1)}"
