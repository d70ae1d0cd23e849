"""goldfive_core.policy: its public names are pinned, and it needs nothing beyond the standard library."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import goldfive_core.policy as policy

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = [
    "RequestView",
    "Judgment",
    "QuorumTally",
    "QuorumStep",
    "PolicyAuthority",
    "GrantError",
    "GrantRecords",
    "GrantBook",
    "Refusal",
    "find_grant",
    "Grant",
    "DEFAULT_ASK",
    "ENV_VAR",
    "Allow",
    "Ask",
    "Deny",
    "Escalation",
    "EvalError",
    "Expression",
    "ExpressionError",
    "GrantScope",
    "Policy",
    "PolicyCall",
    "PolicyError",
    "Rule",
    "RuleReviewer",
    "Verdict",
    "compile_expression",
    "default_policy",
    "format_duration",
    "load_policy",
    "load_policy_from_env",
    "parse_duration",
    "parse_policy",
    "tool_pattern_matches",
]


def test_public_names_are_pinned() -> None:
    assert sorted(policy.__all__) == sorted(EXPECTED)
    for name in policy.__all__:
        obj = getattr(policy, name)
        assert getattr(obj, "__doc__", None) or not callable(obj), f"{name} has no docstring"


def test_policy_errors_are_goldfive_config_errors() -> None:
    from goldfive_core import ConfigError, GoldfiveError

    assert issubclass(policy.PolicyError, ConfigError) and issubclass(policy.PolicyError, GoldfiveError)


def test_the_policy_package_imports_nothing_outside_the_standard_library_and_core() -> None:
    script = textwrap.dedent(
        """
        import sys
        before = set(sys.modules)
        import goldfive_core
        core = set(sys.modules)
        import goldfive_core.policy
        added = sorted(m for m in set(sys.modules) - core if not m.startswith("goldfive_core"))  # core: allowed
        third = [m for m in added if m.split(".")[0] not in sys.stdlib_module_names]
        assert not third, third
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
