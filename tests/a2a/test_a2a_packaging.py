"""goldfive_adk.a2a is an extra: nothing else imports it, and without a2a-sdk it names the install command."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from a2a_support import REPO

_BLOCKED = textwrap.dedent(
    """
    import importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "a2a" or name.startswith("a2a."):
                raise ImportError(f"blocked: {name}")
            return None

    sys.meta_path.insert(0, Block())
    import goldfive_adk, goldfive_core, goldfive_core.store
    assert "goldfive_adk.a2a" not in sys.modules and "a2a" not in sys.modules
    try:
        import goldfive_adk.a2a
    except ImportError as exc:
        print(exc)
    """
)


def test_without_a2a_sdk_the_module_names_the_extra_and_nothing_else_loads_it() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _BLOCKED], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert "pip install 'goldfive[a2a]'" in out.stdout
