"""Every table a reader is shown, checked against the chain: any single-byte edit of a shown cell, any row
deleted, any two rows' contents swapped and any tail cut off is reported by ``verify_audit`` and by
``goldfive audit verify`` (exit 1), on SQLite and PostgreSQL, on a store filled by real runs.

Each tampering is made inside a transaction on the store's own connection, verified there and rolled back,
so one store serves every case. The loops are seeded and bounded in time.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from audited_store import populate
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from store_support import PYTHON, Backend, make_event

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.signing import TrustKey
from goldfive_core.store import Store
from goldfive_core.store.audit import GRANT_COLUMNS

TABLES: dict[str, tuple[str, tuple[str, ...]]] = {
    # table: (its key, the columns readers are shown; the key first)
    "gf_audit": (
        "seq",
        ("seq", "run_id", "sequence", "kind", "event_id", "emitted_at_ms", "body", "prev_hash", "hash"),
    ),
    "gf_approvals": (
        "id",
        (
            "id",
            "run_id",
            "session_id",
            "target_id",
            "kind",
            "prompt",
            "task_id",
            "tool_name",
            "args_json",
            "args_digest",
            "metadata_json",
            "status",
            "requested_at_ms",
            "expires_at_ms",
            "timeout_ms",
            "decided_at_ms",
            "decided_by",
            "decision",
            "detail",
            "edited_args_json",
            "decided_via",
            "decided_channel",
            "decision_sig",
            "quorum_progress",
            "original_args_json",
            "original_args_digest",
            "request_id",
        ),
    ),
    # Not pid, host, heartbeat_at_ms: liveness, not history (docs/reference/trust.md).
    "gf_runs": ("run_id", ("run_id", "session_id", "adapter", "status", "started_at_ms", "ended_at_ms")),
    "gf_grants": ("grant_id", GRANT_COLUMNS),
    # The at-most-once ledger: `show`'s execution line and `pending`'s in-doubt calls (events since migration 13).
    "gf_executions": (
        "target_id",
        (
            "target_id",
            "run_id",
            "state",
            "started_at_ms",
            "finished_at_ms",
            "result_json",
            "pid",
            "host",
            "args_digest",
        ),
    ),
}
BUDGET_S = 12.0
"""Per table and backend, for single-byte edits beyond each cell's first (deletions, swaps and truncations are all
tried)."""


@pytest.fixture
async def filled(backend: Backend, tmp_path: Path) -> tuple[Store, TrustKey]:
    return await populate(backend, tmp_path)


@pytest.fixture
async def filled_sqlite(sqlite_backend: Backend, tmp_path: Path) -> tuple[Store, TrustKey]:
    """The same store on SQLite only: for tamperings only SQLite allows (copies of the file, untyped cells)."""
    return await populate(sqlite_backend, tmp_path)


def _conn(store: Store) -> Any:
    return store.db.conn()  # type: ignore[attr-defined]  # the tampering under test


def _run(store: Store, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    cur = store.db.execute(_conn(store), sql, params)  # type: ignore[attr-defined]
    return list(cur.fetchall()) if cur.description else []


def _rows(store: Store, table: str) -> list[dict[str, Any]]:
    key, columns = TABLES[table]
    found = _run(store, f"SELECT {', '.join(columns)} FROM {table} ORDER BY {key}")
    return [dict(zip(columns, r, strict=True)) for r in found]


def _tampered(
    store: Store, change: Callable[[], None], trust: TrustKey | None = None
) -> tuple[bool, tuple[str, ...]] | None:
    """Make ``change`` in a transaction, verify inside it, roll back; None when the database refused the change."""
    conn = _conn(store)
    conn.execute("BEGIN")
    try:
        try:
            change()
        except Exception:  # a unique key, a NUL in PostgreSQL text: not an edit anyone can make
            return None
        report = store.verify_audit(trust_key=trust)
        return report.ok, report.problems
    finally:
        conn.execute("ROLLBACK")


def _byte_edits(value: Any, rng: random.Random, postgres: bool) -> Iterator[Any]:
    """Values that differ from ``value`` in one byte (one flipped bit), or by one added byte when it is empty."""
    if isinstance(value, int) and not isinstance(value, bool):
        for _ in range(2):
            yield value ^ (1 << rng.randrange(63))
        return
    raw = bytes(value) if isinstance(value, bytes | memoryview) else str(value).encode()
    if not raw:
        yield "x"
        return
    for _ in range(2):
        pos = rng.randrange(len(raw))
        forged = bytearray(raw)
        forged[pos] ^= 1 << rng.randrange(8)
        if isinstance(value, bytes | memoryview):
            yield bytes(forged)
            continue
        try:
            yield bytes(forged).decode("utf-8")
        except UnicodeDecodeError:
            if not postgres:  # SQLite keeps any bytes as TEXT: garbage that must be reported, not crash verify
                yield _NotUtf8(bytes(forged))


class _NotUtf8(bytes):
    """Bytes to store as TEXT (SQLite ``CAST(? AS TEXT)``)."""


def _set(store: Store, table: str, key: str, key_value: Any, column: str, value: Any) -> None:
    mark = "CAST(? AS TEXT)" if isinstance(value, _NotUtf8) else "?"
    arg = bytes(value) if isinstance(value, _NotUtf8) else value
    _run(store, f"UPDATE {table} SET {column} = {mark} WHERE {key} = ?", (arg, key_value))


def _swap_keys(store: Store, table: str, key: str, a: Any, b: Any) -> None:
    """Swap two rows' contents (every other column) by swapping their keys."""
    temp: Any = -(2**40) if isinstance(a, int) else "swap-placeholder"
    _run(store, f"UPDATE {table} SET {key} = ? WHERE {key} = ?", (temp, a))
    _run(store, f"UPDATE {table} SET {key} = ? WHERE {key} = ?", (a, b))
    _run(store, f"UPDATE {table} SET {key} = ? WHERE {key} = ?", (b, temp))


def _cli(backend: Backend, db: str | None = None, *more: str) -> subprocess.CompletedProcess[str]:
    env = backend.env()
    if db is not None:
        env["GOLDFIVE_DB"] = db
    return subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", "audit", "verify", *more],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("table", list(TABLES))
async def test_any_tampering_of_a_shown_table_is_reported(
    filled: tuple[Store, TrustKey], backend: Backend, table: str, tmp_path: Path
) -> None:
    """With the key decisions are signed with (``audit verify --public-key``): a signature is verified too."""
    store, trust = filled
    postgres = backend.name == "postgres"
    key, columns = TABLES[table]
    rows = _rows(store, table)
    assert len(rows) >= 2, rows
    missed: list[str] = []

    def check(what: str, change: Callable[[], None]) -> None:
        found = _tampered(store, change, trust)
        if found is not None and found[0]:
            missed.append(what)

    # Single-byte edits of every shown cell (seeded; each cell at least once within the budget).
    rng = random.Random(f"{table}-{backend.name}")
    cells = [(row, column) for row in rows for column in columns]
    rng.shuffle(cells)
    # Every cell gets its first edit whatever the machine's speed; the budget only bounds the further ones.
    deadline = time.monotonic() + BUDGET_S
    covered: set[tuple[Any, str]] = set()
    edited = 0
    for row, column in cells:
        for forged in _byte_edits(row[column], rng, postgres):
            if forged == row[column]:
                continue
            if (row[key], column) in covered and time.monotonic() > deadline:
                break
            edited += 1
            check(
                f"{column} of {row[key]!r}: {row[column]!r} -> {forged!r}",
                lambda r=row, c=column, f=forged: _set(store, table, key, r[key], c, f),
            )
            covered.add((row[key], column))
    assert edited >= len(cells), f"only {edited} edits of {len(cells)} cells"

    # Every row deleted; every pair of rows swapped; every tail cut off.
    for row in rows:
        check(f"delete {row[key]!r}", lambda r=row: _run(store, f"DELETE FROM {table} WHERE {key} = ?", (r[key],)))
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            if {c: a[c] for c in columns if c != key} != {c: b[c] for c in columns if c != key}:
                check(f"swap {a[key]!r} {b[key]!r}", lambda x=a, y=b: _swap_keys(store, table, key, x[key], y[key]))
    for row in rows[:-1]:
        check(f"cut after {row[key]!r}", lambda r=row: _run(store, f"DELETE FROM {table} WHERE {key} > ?", (r[key],)))
    assert not missed, f"{len(missed)} tamperings of {table} passed verify: {missed[:10]}"
    assert store.verify_audit(trust_key=trust).ok  # every change was rolled back

    # The command: an edit of a shown cell exits 1 and names the row; undone, it exits 0 again.
    row = rows[-1]
    column = columns[1]
    original = row[column]
    forged = original + 1 if isinstance(original, int) else original + "-forged"
    _set(store, table, key, row[key], column, forged)
    cli = _cli(backend)
    assert cli.returncode == 1 and "TAMPERED" in cli.stdout, cli.stdout + cli.stderr
    assert "Traceback" not in cli.stderr
    _set(store, table, key, row[key], column, original)
    assert _cli(backend).returncode == 0


async def test_the_command_reports_deletion_swap_and_truncation(
    filled_sqlite: tuple[Store, TrustKey], sqlite_backend: Backend, tmp_path: Path
) -> None:
    """Committed tamperings, one of each kind per table, through ``goldfive audit verify`` (copies of the SQLite
    file; on PostgreSQL the same tamperings run through the library in the test above)."""
    filled, backend = filled_sqlite, sqlite_backend
    for table, (key, _columns) in TABLES.items():
        rows = _rows(filled[0], table)
        for kind in ("delete", "swap", "cut"):
            copy = tmp_path / f"{table}-{kind}.db"
            with sqlite3.connect(backend.location) as source, sqlite3.connect(copy) as dest:
                source.backup(dest)
            conn = sqlite3.connect(copy, isolation_level=None)
            first, last = rows[0][key], rows[-1][key]
            if kind == "delete":
                conn.execute(f"DELETE FROM {table} WHERE {key} = ?", (first,))
            elif kind == "cut":
                conn.execute(f"DELETE FROM {table} WHERE {key} > ?", (first,))
            else:
                temp: Any = -(2**40) if isinstance(first, int) else "swap-placeholder"
                conn.execute(f"UPDATE {table} SET {key} = ? WHERE {key} = ?", (temp, first))
                conn.execute(f"UPDATE {table} SET {key} = ? WHERE {key} = ?", (first, last))
                conn.execute(f"UPDATE {table} SET {key} = ? WHERE {key} = ?", (last, temp))
            conn.close()
            cli = _cli(backend, str(copy))
            assert cli.returncode == 1 and "TAMPERED" in cli.stdout, (table, kind, cli.stdout, cli.stderr)
            assert "Traceback" not in cli.stderr
            shutil.rmtree(copy, ignore_errors=True)


GARBAGE: tuple[tuple[str, str, str, str], ...] = (
    # (table, column, SQL value, the row named in the report)
    ("gf_audit", "kind", "CAST(x'fffe' AS TEXT)", "row {key}"),
    ("gf_audit", "body", "'not bytes'", "row {key}"),
    ("gf_audit", "emitted_at_ms", "'yesterday'", "row {key}"),
    ("gf_audit", "prev_hash", "x'00ff'", "row {key}"),
    ("gf_approvals", "prompt", "CAST(x'c328' AS TEXT)", "approval #{key}"),
    ("gf_approvals", "status", "CAST(x'ff' AS TEXT)", "approval #{key}"),
    ("gf_approvals", "metadata_json", "x'ff'", "approval #{key}"),
    ("gf_approvals", "requested_at_ms", "'soon'", "approval #{key}"),
    ("gf_approvals", "decision_sig", "42", "approval #{key}"),
    ("gf_runs", "status", "CAST(x'ff' AS TEXT)", "run {key!r}"),
    ("gf_runs", "started_at_ms", "x'01'", "run {key!r}"),
    ("gf_grants", "rule", "CAST(x'80' AS TEXT)", "grant {key!r}"),
    ("gf_grants", "revoked_at_ms", "'never'", "grant {key!r}"),
    ("gf_chain_head", "hash", "x'ff'", "head"),
    ("gf_chain_head", "seq", "'last'", "head"),
)


async def test_garbage_in_any_cell_is_reported_never_a_crash(
    filled_sqlite: tuple[Store, TrustKey], sqlite_backend: Backend
) -> None:
    """Cells of the wrong type and text that is not UTF-8 (SQLite keeps whatever is written; PostgreSQL's typed
    UTF-8 columns refuse them at the write) name their row; the command exits 1 with no traceback."""
    store, _trust = filled_sqlite
    backend = sqlite_backend
    for table, column, value, named in GARBAGE:
        key = TABLES[table][0] if table in TABLES else "id"
        first = _run(store, f"SELECT {key} FROM {table} ORDER BY {key} LIMIT 1")[0][0]
        conn = sqlite3.connect(backend.location, isolation_level=None)
        before = conn.execute(f"SELECT {column} FROM {table} WHERE {key} = ?", (first,)).fetchone()[0]
        conn.execute(f"UPDATE {table} SET {column} = {value} WHERE {key} = ?", (first,))
        try:
            report = store.verify_audit()
            assert not report.ok, (table, column)
            if table != "gf_chain_head":
                want = named.format(key=first)
                assert any(want in p for p in report.problems), (table, column, want, report.problems)
            cli = _cli(backend)
            assert cli.returncode == 1 and "TAMPERED" in cli.stdout, (table, column, cli.stdout, cli.stderr)
            assert "Traceback" not in cli.stderr, cli.stderr
        finally:
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (before, first))
            conn.close()
    assert store.verify_audit().ok


async def test_a_decision_signature_is_verified_with_the_key(filled: tuple[Store, TrustKey], backend: Backend) -> None:
    """Without the key a signature block's form is checked; with it (``--public-key``) its signature too."""
    store, trust = filled
    signed = store.approvals_for("call-0")[0]
    unsigned = store.approvals_for("call-3")[0]  # approved by ana on the command line too, never signed
    assert signed.decision_sig and not unsigned.decision_sig
    _run(store, "UPDATE gf_approvals SET decision_sig = ? WHERE id = ?", (signed.decision_sig, unsigned.id))
    assert store.verify_audit().ok  # a well-formed block pasted onto another decision: only the key tells
    report = store.verify_audit(trust_key=trust)
    assert not report.ok and any(
        f"approval #{unsigned.id} ('call-3'" in p and "decision_sig does not verify with the given key" in p
        for p in report.problems
    ), report.problems
    cli = _cli(backend)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    keyed = _cli(backend, None, "--public-key", trust.text())
    assert keyed.returncode == 1 and "decision_sig does not verify with the given key" in keyed.stdout, keyed.stdout
    _run(store, "UPDATE gf_approvals SET decision_sig = '' WHERE id = ?", (unsigned.id,))
    _run(store, "UPDATE gf_approvals SET decision_sig = 'signed' WHERE id = ?", (signed.id,))
    report = store.verify_audit()  # not a block at all: reported without the key
    assert any(f"approval #{signed.id}" in p and "decision_sig" in p for p in report.problems), report.problems


def _renumber(store: Store, table: str, key: str, new: str, where: str) -> None:
    """Renumber rows without passing through a taken number (both databases check keys row by row)."""
    _run(store, f"UPDATE {table} SET {key} = -({new}) WHERE {where}")
    _run(store, f"UPDATE {table} SET {key} = -{key} WHERE {key} < 0")


async def test_a_store_numbered_before_the_upgrade_verifies_and_is_checked_from_then_on(
    filled: tuple[Store, TrustKey], backend: Backend
) -> None:
    store, trust = filled
    # What goldfive before schema 12 wrote: database-numbered rows and records (gaps where a write rolled back),
    # a run's decision at its ack's time, a revocation a moment before its event.
    _run(store, "DELETE FROM gf_meta WHERE key IN ('audit_numbered_after', 'approvals_numbered_after')")
    _run(store, "UPDATE gf_meta SET value = '11' WHERE key = 'schema_version'")
    _renumber(store, "gf_audit", "seq", "seq + 5", "seq > 10")
    _run(store, "UPDATE gf_chain_head SET seq = seq + 5 WHERE id = 1")
    _renumber(store, "gf_approvals", "id", "id * 10", "id > 1")
    _run(store, "UPDATE gf_approvals SET decided_at_ms = decided_at_ms - 2 WHERE decided_via = 'run'")
    _run(store, "UPDATE gf_grants SET revoked_at_ms = revoked_at_ms - 1 WHERE revoked_at_ms > 0")
    assert not store.verify_audit().ok  # read as if numbered without gaps, it is not
    # Migration 14 (after 11) adds request_id: drop it for the upgrade, then give the records back the ids their
    # requests' events carry (events this test wrote with today's code; an old agent's events and records had none).
    request_ids = _run(store, "SELECT id, request_id FROM gf_approvals")
    _run(store, "ALTER TABLE gf_approvals DROP COLUMN request_id")

    upgraded = backend.open()  # migration 12 notes where the numbering without gaps starts
    for ident, request_id in request_ids:
        _run(upgraded, "UPDATE gf_approvals SET request_id = ? WHERE id = ?", (request_id, ident))
    assert upgraded.verify_audit(trust_key=trust).ok, upgraded.verify_audit(trust_key=trust).problems
    head = upgraded.audit_head()[0]
    run = "run-after-upgrade"
    upgraded.append_events(
        [
            make_event(run, 0, events_pb2.RunStarted(adapter="callable")),
            make_event(run, 1, events_pb2.ApprovalRequested(target_id="late-1", kind="task", prompt="ok?")),
        ],
        pid=1,
        host="h",
    )
    late = upgraded.approvals_for("late-1")[0]
    highest = max(r.id for r in upgraded.approvals(open_only=False, limit=100) if r.target_id != "late-1")
    new_head = upgraded.audit_head()[0]
    numbers = [r.seq for r in upgraded.audit_rows(after_seq=head - 1, limit=100)]
    assert numbers == list(range(head, new_head + 1)) and new_head >= head + 2  # numbered on without gaps
    assert late.id == highest + 1
    assert upgraded.verify_audit(trust_key=trust).ok

    def problems(change: Callable[[], None]) -> str:
        found = _tampered(upgraded, change, trust)
        assert found is not None and not found[0]
        return " ".join(found[1])

    first, second = (r for r in _rows(upgraded, "gf_approvals")[:2])
    assert "out of the order" in problems(lambda: _swap_keys(upgraded, "gf_approvals", "id", first["id"], second["id"]))
    assert "id differs" in problems(lambda: _set(upgraded, "gf_approvals", "id", late.id, "id", late.id + 1))
    assert "does not follow" in problems(lambda: _set(upgraded, "gf_audit", "seq", new_head, "seq", new_head + 1))


def test_a_key_or_checkpoint_is_not_silently_dropped_through_a_server() -> None:
    """Through ``--url`` the server answers from its database: a check against a key is refused, not skipped."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOLDFIVE_")}
    remote = ["--url", "http://127.0.0.1:9", "--token", "gf5_x"]
    cli = subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", *remote, "audit", "verify", "--public-key", "ed25519:" + "A" * 43 + "="],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 2 and "use --db or --dsn, not --url" in cli.stderr, cli.stdout + cli.stderr


@pytest.fixture
def filled_now(backend: Backend, tmp_path: Path) -> tuple[Store, TrustKey]:
    """The same store for a synchronous (hypothesis) test."""
    return asyncio.run(populate(backend, tmp_path))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_single_byte_edit_found_by_hypothesis(
    filled_now: tuple[Store, TrustKey], backend: Backend, data: st.DataObject
) -> None:
    """Hypothesis picks the table, row, column, byte and bit (each edit rolled back; one store for all examples)."""
    store, trust = filled_now
    table = data.draw(st.sampled_from(list(TABLES)), label="table")
    key, columns = TABLES[table]
    row = data.draw(st.sampled_from(_rows(store, table)), label="row")
    column = data.draw(st.sampled_from(columns), label="column")
    value = row[column]
    forged: Any
    if isinstance(value, int):
        forged = value ^ (1 << data.draw(st.integers(0, 62), label="bit"))
    else:
        raw = bytes(value) if isinstance(value, bytes | memoryview) else str(value).encode()
        if not raw:
            forged = "x"
        else:
            edit = bytearray(raw)
            edit[data.draw(st.integers(0, len(raw) - 1), label="byte")] ^= 1 << data.draw(
                st.integers(0, 7), label="bit"
            )
            if isinstance(value, bytes | memoryview):
                forged = bytes(edit)
            else:
                try:
                    forged = bytes(edit).decode("utf-8")
                except UnicodeDecodeError:
                    assume(backend.name == "sqlite")  # PostgreSQL text holds UTF-8 only
                    forged = _NotUtf8(bytes(edit))
    found = _tampered(store, lambda: _set(store, table, key, row[key], column, forged), trust)
    assume(found is not None)  # a taken key, a NUL in PostgreSQL text: not an edit that can be made
    assert found is not None and not found[0], (table, row[key], column, value, forged)
