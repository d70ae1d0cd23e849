"""The fault-injection suite uses the store tests' backends: SQLite and a real PostgreSQL.

The fixtures (and the rule that PostgreSQL tests fail instead of skipping where it is expected)
live in tests/store/conftest.py; they are loaded from there, not copied.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "store"))

from store_support import store_conftest

_fixtures = store_conftest()

backend = _fixtures.backend
postgres_backend = _fixtures.postgres_backend
sqlite_backend = _fixtures.sqlite_backend
