"""Helpers shared by the store tests (backends, events, bounded condition polling)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from goldfive_core.events import payload_name
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import Store, open_store

PG_DSN = os.environ.get("GOLDFIVE_TEST_PG_DSN", "")

# Shared by every conftest that hands out PostgreSQL backends (tests/store, tests/faults): one count.
PG_RAN = pytest.StashKey[list[str]]()
PG_WANTED = pytest.StashKey[int]()
NO_PG = "PostgreSQL tests need GOLDFIVE_TEST_PG_DSN (set by .ci/run, which starts a loopback server)"


def pg_expected() -> bool:
    """PostgreSQL must be reachable: on CI (``CI=true``) or where a DSN is given."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or bool(PG_DSN)


def pg_problem() -> str:
    """Why PostgreSQL cannot be used ("" when it can)."""
    if not PG_DSN:
        return NO_PG
    import psycopg

    try:
        with psycopg.connect(PG_DSN, autocommit=True, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"PostgreSQL at GOLDFIVE_TEST_PG_DSN is unreachable: {str(exc).strip()[:300]}"
    return ""


HERE = Path(__file__).parent
REPO = HERE.parent.parent
PYTHON = sys.executable


def store_conftest() -> ModuleType:
    """The module pytest loaded for tests/store/conftest.py (so its run counters are shared), else a fresh load:
    how another suite's conftest takes the store tests' fixtures (``backend``, ``postgres_backend``) without a copy."""
    path = (HERE / "conftest.py").resolve()
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and Path(str(module.__file__)).resolve() == path:
            return module
    spec = importlib.util.spec_from_file_location("goldfive_store_test_fixtures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclasses.dataclass
class Backend:
    """Where a test's store lives; ``open()`` gives a new store object (new connections) on it."""

    name: str
    location: str
    schema: str | None = None

    def open(self, **kwargs: Any) -> Store:
        return open_store(self.location, schema=self.schema, **kwargs)

    def env(self) -> dict[str, str]:
        """Environment for a subprocess (agent script or the goldfive command) using this store."""
        env = dict(os.environ)
        env.pop("GOLDFIVE_DSN", None)
        env.pop("GOLDFIVE_DB", None)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        if self.name == "postgres":
            env["GOLDFIVE_DSN"] = self.location
            env["GOLDFIVE_PG_SCHEMA"] = self.schema or "public"
        else:
            env["GOLDFIVE_DB"] = self.location
        return env


def make_event(run_id: str, sequence: int, payload: Any) -> events_pb2.Event:
    """An Event with ``payload`` (e.g. ``ApprovalRequested(...)``)."""
    event = events_pb2.Event(event_id=f"ev-{run_id}-{sequence}", run_id=run_id, sequence=sequence)
    event.emitted_at.FromMilliseconds(1_700_000_000_000 + sequence)
    field = next(
        f.name
        for f in events_pb2.Event.DESCRIPTOR.oneofs_by_name["payload"].fields
        if f.message_type.full_name == type(payload).DESCRIPTOR.full_name
    )
    getattr(event, field).CopyFrom(payload)
    assert payload_name(event) == field
    return event


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll an observable condition (a row appearing) with a deadline; returns its truthy value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)


async def await_until(predicate: Callable[[], Any], limit_s: float = 10.0, what: str = "condition") -> Any:
    """Async variant of :func:`wait_until` (the predicate runs on a worker thread)."""
    return await asyncio.to_thread(wait_until, predicate, limit_s, what)
