"""The goldfive command under hostile input: inert text, limits, paging, exit codes, no tracebacks, read-only opens."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from store_support import PG_DSN, PYTHON, Backend, make_event

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import Store

ESC = "\x1b"
HOSTILE_PROMPT = (
    "transfer 10 EUR to alice"
    + ESC
    + "[2K\r"
    + "verified safe by security team"
    + ESC
    + "]0;pwned\x07"
    + "\u202e"
    + "evil"
)


def cli(backend: Backend, *argv: str | bytes, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [PYTHON, "-m", "goldfive_core.cli", *argv],
        env={**backend.env(), **(env or {})},
        capture_output=True,
        timeout=60,
        check=False,
    )
    out = subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode("utf-8", "replace"),
        result.stderr.decode("utf-8", "replace"),
    )
    assert "Traceback" not in out.stderr, out.stderr
    return out


def _request(run: str, seq: int, target: str, prompt: str = "ok?", task_id: str = "") -> events_pb2.Event:
    return make_event(
        run, seq, events_pb2.ApprovalRequested(target_id=target, kind="task", prompt=prompt, task_id=task_id)
    )


def _seed(store: Store, requests: list[events_pb2.Event], run: str = "run-h") -> None:
    started = make_event(run, 0, events_pb2.RunStarted(adapter="callable"))
    store.append_events([started, *requests], pid=1, host="elsewhere")


def _no_controls(text: str) -> None:
    bad = [ch for ch in text if (ord(ch) < 0x20 and ch != "\n") or 0x7F <= ord(ch) <= 0x9F or ch == "\u202e"]
    assert not bad, f"raw control characters reached the terminal: {bad!r}"


def test_hostile_prompt_and_task_id_are_inert_and_long_fields_are_marked(backend: Backend) -> None:
    store = backend.open()
    _seed(
        store,
        [
            _request("run-h", 1, "evil-1", HOSTILE_PROMPT, task_id="t" + ESC + "[31mred"),
            _request("run-h", 2, "long-1", "x" * 20_000),
        ],
    )
    pending = cli(backend, "pending")
    assert pending.returncode == 0
    _no_controls(pending.stdout)
    assert "\\x1b[2K\\rverified safe" in pending.stdout  # escaped, visible, not acted upon
    assert "… [+19920 chars]" in pending.stdout  # the 20 000-character prompt is shortened with a marker
    shown = cli(backend, "show", "evil-1")
    _no_controls(shown.stdout)
    assert "\\x1b]0;pwned\\x07" in shown.stdout and "\\u202eevil" in shown.stdout
    assert "t\\x1b[31mred" in shown.stdout
    long_shown = cli(backend, "show", "long-1")
    assert "chars]" in long_shown.stdout and len(long_shown.stdout) < 6000
    as_json = cli(backend, "show", "evil-1", "--json")
    _no_controls(as_json.stdout.rstrip("\n"))
    assert json.loads(as_json.stdout)["prompt"] == HOSTILE_PROMPT  # JSON keeps the text whole, escaped
    events = cli(backend, "events")
    _no_controls(events.stdout)
    unknown = cli(backend, "approve", "x" + ESC + "]0;t\x07")
    assert unknown.returncode == 1 and ESC not in unknown.stderr and "\\x1b" in unknown.stderr


def test_pending_pages_oldest_first_and_says_how_many_more(backend: Backend) -> None:
    store = backend.open()
    _seed(store, [_request("run-h", i, f"ask-{i}") for i in range(1, 8)])
    first = cli(backend, "pending", "--limit", "3")
    lines = first.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == ["ask-1", "ask-2", "ask-3"]  # oldest (closest to expiry) first
    assert "showing 1-3 of 7; 4 more: goldfive pending --offset 3" in first.stdout
    rest = json.loads(cli(backend, "pending", "--limit", "3", "--offset", "6", "--json").stdout)
    assert [p["target_id"] for p in rest["pending"]] == ["ask-7"]
    assert (rest["total"], rest["offset"], rest["more"]) == (7, 6, 0)
    everything = cli(backend, "pending")
    assert "showing" not in everything.stdout and everything.stdout.count("ask-") == 7


def test_runs_and_events_say_what_is_not_shown(backend: Backend) -> None:
    store = backend.open()
    for i in range(4):
        _seed(store, [], run=f"run-{i}")
    runs = cli(backend, "runs", "--limit", "2")
    assert "showing 1-2 of 4; 2 more: goldfive runs --offset 2" in runs.stdout
    data = json.loads(cli(backend, "runs", "--limit", "2", "--json").stdout)
    assert (len(data["runs"]), data["total"], data["more"]) == (2, 4, 2)
    events = cli(backend, "events", "--limit", "1")
    assert "(3 earlier events not shown" in events.stdout
    shown = json.loads(cli(backend, "events", "--limit", "1", "--json").stdout)
    assert (len(shown["events"]), shown["total"], shown["earlier"]) == (1, 4, 3)


def test_json_output_is_one_object_per_command(backend: Backend) -> None:
    store = backend.open()
    _seed(store, [_request("run-h", 1, "j-1")])
    for argv in (
        ["pending"],
        ["show", "j-1"],
        ["runs"],
        ["events"],
        ["audit", "verify"],
        ["approve", "nope"],
        ["pause", "--run", "run-nope"],
    ):
        result = cli(backend, *argv, "--json")
        lines = result.stdout.splitlines()
        assert len(lines) == 1, (argv, result.stdout)
        assert isinstance(json.loads(lines[0]), dict)
    error = json.loads(cli(backend, "approve", "nope", "--json").stdout)
    assert error["exit_code"] == 1 and "unknown approval id" in error["error"]


def test_bad_arguments_are_usage_errors_never_tracebacks(backend: Backend) -> None:
    store = backend.open()
    _seed(store, [_request("run-h", 1, "b-1")])
    invalid_utf8 = cli(backend, "approve", b"b-\xff")
    assert invalid_utf8.returncode == 2 and "not valid UTF-8" in invalid_utf8.stderr
    deep = cli(backend, "approve", "b-1", "--edit", "[" * 100_000)
    assert deep.returncode == 2 and "--edit" in deep.stderr
    nested = cli(backend, "approve", "b-1", "--edit", '{"a":' * 100 + "1" + "}" * 100)
    assert nested.returncode == 2 and "nests deeper than 64 levels" in nested.stderr
    nan = cli(backend, "approve", "b-1", "--edit", '{"amount": NaN}')
    assert nan.returncode == 2 and "NaN is not valid JSON" in nan.stderr
    for bad in ("nan", "-1", "0", "inf", "soon"):
        timeout = cli(backend, "approve", "b-1", "--timeout", bad)
        assert timeout.returncode == 2 and "--timeout" in timeout.stderr, bad
    assert cli(backend, "pending", "--limit", "-3").returncode == 2
    nope = cli(backend, "pause", "--run", "run-nope")
    assert nope.returncode == 1 and "no run 'run-nope' in this store" in nope.stderr
    gone = cli(backend, "cancel", "--run", "run-h")  # recorded, but its process (pid 1, another host) reports nothing
    assert gone.returncode == 1 and "run run-h is not running" in gone.stderr
    assert store.approvals()[0].status == "pending"  # nothing was decided by any of the above


def test_size_limits_refuse_with_a_clear_message(backend: Backend) -> None:
    store = backend.open()
    _seed(store, [_request("run-h", 1, "s-1")])
    big_edit = json.dumps({"note": "x" * 100_000})  # one argv string is at most 128 KiB on Linux
    refused = cli(backend, "approve", "s-1", "--edit", big_edit, env={"GOLDFIVE_LIMIT_MAX_EDIT_CHARS": "65536"})
    assert refused.returncode == 2 and "--edit is 100012 characters; the limit is 65536" in refused.stderr
    long_id = cli(backend, "approve", "i" * 1000)
    assert long_id.returncode == 2 and "id is 1000 characters; the limit is 256" in long_id.stderr
    configured = cli(
        backend, "approve", "s-1", "--edit", '{"amount": 12345}', env={"GOLDFIVE_LIMIT_MAX_EDIT_CHARS": "5"}
    )
    assert configured.returncode == 2 and "the limit is 5" in configured.stderr
    bad_config = cli(backend, "pending", env={"GOLDFIVE_LIMIT_MAX_EDIT_CHARS": "lots"})
    assert (
        bad_config.returncode == 2 and "GOLDFIVE_LIMIT_MAX_EDIT_CHARS must be a positive integer" in bad_config.stderr
    )
    assert store.approvals()[0].status == "pending"


def test_a_closed_pipe_ends_quietly(backend: Backend) -> None:
    store = backend.open()
    _seed(store, [_request("run-h", i, f"pipe-{i:04d}", "p" * 150) for i in range(1, 1500)])
    proc = subprocess.Popen(
        [PYTHON, "-m", "goldfive_core.cli", "pending", "--limit", "2000"],
        env=backend.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"pipe-0001")  # like `| head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert err == ""


def test_read_commands_never_create_or_migrate_a_database(tmp_path: Path) -> None:
    foreign = tmp_path / "someone-elses.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    before = hashlib.sha256(foreign.read_bytes()).hexdigest()
    backend = Backend("sqlite", str(foreign))
    for argv in (["pending"], ["runs"], ["events"], ["audit", "verify"], ["approve", "x"], ["pause"]):
        result = cli(backend, *argv)
        assert result.returncode == 3 and "is not a goldfive store" in result.stderr, (argv, result.stderr)
    assert hashlib.sha256(foreign.read_bytes()).hexdigest() == before
    with sqlite3.connect(foreign) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]
    missing = cli(Backend("sqlite", str(tmp_path / "typo.db")), "pending")
    assert missing.returncode == 3 and not (tmp_path / "typo.db").exists()


def test_corrupt_schema_version_is_exit_3(backend: Backend) -> None:
    store = backend.open()
    store.db.execute(store.db.conn(), "UPDATE gf_meta SET value = 'banana' WHERE key = 'schema_version'")  # type: ignore[attr-defined]
    result = cli(backend, "pending")
    assert result.returncode == 3 and "schema version is corrupt" in result.stderr


def test_read_only_sqlite_database_answers_read_commands(tmp_path: Path) -> None:
    home = tmp_path / "ro"
    home.mkdir()
    db = home / "goldfive.db"
    backend = Backend("sqlite", str(db))
    store = backend.open()
    _seed(store, [_request("run-h", 1, "ro-1")])
    store.close()
    for side in (home / "goldfive.db-wal", home / "goldfive.db-shm"):
        if side.exists():  # a clean shutdown leaves none; a reader without write access cannot create them
            side.unlink()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    # The directory is mounted read-only in a private mount namespace: even root cannot write there.
    for argv in (["pending"], ["show", "ro-1"], ["runs"], ["events"], ["audit", "verify"]):
        script = f'mount --bind -o ro "{home}" "{home}" && exec "$@"'
        result = subprocess.run(
            ["unshare", "-rm", "sh", "-c", script, "sh", PYTHON, "-m", "goldfive_core.cli", *argv],
            env=backend.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, (argv, result.stderr)
        assert "Traceback" not in result.stderr
        assert argv == ["audit", "verify"] or "ro-1" in result.stdout or "run-h" in result.stdout, argv
    assert "intact" in result.stdout
    written = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f'mount --bind -o ro "{home}" "{home}" && touch "{home}/x"'],
        capture_output=True,
        check=False,
    )
    assert written.returncode != 0  # the mount really is read-only
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


@pytest.mark.skipif(not PG_DSN, reason="needs GOLDFIVE_TEST_PG_DSN")
def test_read_only_postgres_answers_read_commands(postgres_backend: Backend) -> None:
    store = postgres_backend.open()
    _seed(store, [_request("run-h", 1, "ro-2")])
    read_only = {"PGOPTIONS": "-c default_transaction_read_only=on"}
    for argv in (["pending"], ["show", "ro-2"], ["runs"], ["events"], ["audit", "verify"]):
        result = cli(postgres_backend, *argv, env=read_only)
        assert result.returncode == 0, (argv, result.stderr)
    refused = cli(postgres_backend, "approve", "ro-2", env=read_only)
    assert refused.returncode == 3 and "read-only" in refused.stderr


def test_dsn_passwords_are_never_echoed() -> None:
    for dsn in (
        "postgresql://u:SECRET@[::1/db",
        "postgresql://u:SECRET@127.0.0.1:1/db",
        "postgresql://u:SE%43RET@127.0.0.1:1/db",
        "postgresql://127.0.0.1:1/db?password=SECRET&sslmode=bogus",
    ):
        for argv in (["pending"], ["--dsn", dsn, "pending", "--json"]):
            result = cli(Backend("postgres", dsn, "public"), *argv)
            assert result.returncode == 3, result.stderr
            assert "SECRET" not in result.stdout + result.stderr, (dsn, result.stdout + result.stderr)


def test_pending_says_how_much_of_a_huge_argument_it_left_out(backend: Backend) -> None:
    """A 200 KB argument is shown as its first characters and the true count of the rest (it said
    "[+16 chars]": the line was clipped again, cutting its own marker)."""
    store = backend.open()
    args = json.dumps({"blob": "y" * 200_000})
    huge = events_pb2.ApprovalRequested(
        target_id="huge-1", kind="tool", prompt="Allow upload?", metadata={"tool_name": "upload", "args_json": args}
    )
    _seed(store, [make_event("run-h", 1, huge)])
    pending = cli(backend, "pending")
    assert pending.returncode == 0, pending.stderr
    line = next(x for x in pending.stdout.splitlines() if x.startswith("huge-1"))
    assert f"upload {args[:60]}… [+{len(args) - 60} chars]" in line, line
