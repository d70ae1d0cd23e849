"""``goldfive events --follow`` prints every event, including those an agent appends while the command starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from store_support import make_event

from goldfive_core import cli
from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import SqliteStore, open_store


def test_follow_prints_events_appended_between_its_first_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "g.db"
    open_store(str(db)).close()
    writer = open_store(str(db))
    original = SqliteStore.audit_rows
    calls = 0

    def audit_rows(self: SqliteStore, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        rows = original(self, **kwargs)
        if calls == 1:  # the agent starts right after the command's first (empty) read
            writer.append_events(
                [
                    make_event("run-f", 0, events_pb2.RunStarted(adapter="callable")),
                    make_event("run-f", 1, events_pb2.TaskStarted(task_id="t")),
                ],
                pid=1,
                host="h",
            )
        return rows

    def stop_following(_seconds: float) -> None:
        raise KeyboardInterrupt  # the person presses Ctrl-C once the command has nothing new to print

    monkeypatch.setattr(SqliteStore, "audit_rows", audit_rows)
    monkeypatch.setattr(cli.time, "sleep", stop_following)
    assert cli.main(["--db", str(db), "events", "--follow", "--json"]) == 0
    kinds = [
        next(k for k in json.loads(line)["event"] if k.endswith("_started"))
        for line in capsys.readouterr().out.splitlines()
    ]
    assert kinds == ["run_started", "task_started"]
    writer.close()
