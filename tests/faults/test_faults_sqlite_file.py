"""A SQLite file deleted or replaced under a running agent is noticed, not written to in the dark.

SQLite keeps writing to a deleted file's inode, and a new connection would create an empty file in
its place: without a check, a run goes on recording approvals and its at-most-once ledger where
nobody can read them. The store checks before each use that its path still names the file it opened.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from goldfive_core import AgentTools, Task, wrap
from goldfive_core.store import SqliteStore, StoreUnavailableError, run_approved


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def test_a_deleted_file_is_reported_and_not_recreated(tmp_path: Path) -> None:
    path = tmp_path / "gf.db"
    store = SqliteStore(path)
    store.retry_budget_s = 0.0
    assert store.approvals() == []
    _remove(path)
    with pytest.raises(StoreUnavailableError, match="was deleted while this process had it open"):
        store.approvals()
    with pytest.raises(StoreUnavailableError, match="was deleted"):
        store.heartbeat(["run-1"])
    assert not path.exists()  # no empty file was made in its place


def test_a_replaced_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "gf.db"
    store = SqliteStore(path)
    shutil.copy(path, tmp_path / "copy.db")
    os.replace(tmp_path / "copy.db", path)  # e.g. a backup restored over it
    with pytest.raises(StoreUnavailableError, match="was replaced by another file"):
        store.approvals()
    assert SqliteStore(path).approvals() == []  # a new process opens the file now there


async def test_an_agent_whose_file_was_deleted_fails_closed(tmp_path: Path) -> None:
    path = tmp_path / "gf.db"
    store = SqliteStore(path)
    store.retry_budget_s = 0.2
    ran: list[Any] = []

    async def body(args: Any) -> str:
        ran.append(args)
        return "sent"

    async def agent(task: Task, tools: AgentTools) -> Any:
        _remove(path)  # someone deletes the database while the run goes on
        return await run_approved(
            tools.session, store, call_id="pay-1", tool_name="send_money", args={"amount": 1}, body=body
        )

    result = await wrap(agent).run()
    out = result.output
    assert out.status == "unavailable" and ran == []
    assert out.detail.startswith("did not run: send_money was not started") and "was deleted" in out.detail
    assert result.status.value == "COMPLETED"
