"""The MCP gateway's tests use the store tests' PostgreSQL fixture (``postgres_backend``: a schema of its own,
dropped afterwards; skipped without GOLDFIVE_TEST_PG_DSN), loaded from tests/store/conftest.py, not copied."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "store"))

from store_support import store_conftest

postgres_backend = store_conftest().postgres_backend
