"""The fault-injection suite uses the store tests' backends: SQLite and a real PostgreSQL.

The fixtures (and the rule that PostgreSQL tests fail instead of skipping where it is expected)
live in tests/store/conftest.py; they are loaded from there, not copied.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_STORE_TESTS = Path(__file__).resolve().parent.parent / "store"
sys.path.insert(0, str(_STORE_TESTS))


def _store_conftest() -> ModuleType:
    """The module pytest loaded for tests/store/conftest.py (so its run counters are shared), else a fresh load."""
    path = _STORE_TESTS / "conftest.py"
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and Path(str(module.__file__)).resolve() == path:
            return module
    spec = importlib.util.spec_from_file_location("goldfive_store_test_fixtures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_fixtures = _store_conftest()

backend = _fixtures.backend
postgres_backend = _fixtures.postgres_backend
sqlite_backend = _fixtures.sqlite_backend
