"""Whether a run's process is alive, as a state with its reason beside it; and a run's stored status.

:func:`judge_liveness` answers a :class:`RunLiveness`: code compares its :class:`Liveness` ``state``;
people read its ``reason`` (``"live"``, ``"finished"`` or a sentence saying why the process is gone) —
the words ``goldfive runs``, ``goldfive show`` and the inbox have always shown.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from enum import StrEnum

from .._util import now_ms
from .rows import RunRow, StoredRunStatus

__all__ = [
    "DEFAULT_STALE_AFTER_MS",
    "DETACHED_LIVENESS",
    "HOST",
    "Liveness",
    "RunLiveness",
    "StoredRunStatus",
    "judge_liveness",
    "run_liveness",
]

DEFAULT_STALE_AFTER_MS = 15_000
"""A run whose process has not written a heartbeat for this long is considered gone."""

HOST = socket.gethostname()


class Liveness(StrEnum):
    """Whether a run's process is there to apply a decision."""

    LIVE = "live"
    """Its process heartbeats."""
    FINISHED = "finished"
    """It ended (RunCompleted / RunAborted)."""
    DETACHED = "detached"
    """It ended to wait for a person on a parked call and resumes by itself when that is decided."""
    GONE = "gone"
    """It never reported, crashed, or its process stopped heartbeating (``reason`` says which)."""


DETACHED_LIVENESS = "detached: it waits for this decision and resumes by itself when it is decided"
"""The reason of a run that ended to wait for a person (``detach_after``)."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class RunLiveness:
    """A run's :class:`Liveness` and the words a person is shown for it."""

    state: Liveness
    reason: str
    """``"live"``, ``"finished"`` or a sentence saying why the process is gone (what people read; never compared)."""

    @property
    def live(self) -> bool:
        """Its process is alive."""
        return self.state is Liveness.LIVE

    @property
    def waits(self) -> bool:
        """A decision still reaches the run: it is live, or detached (it resumes when decided)."""
        return self.state in (Liveness.LIVE, Liveness.DETACHED)

    @classmethod
    def of_words(cls, reason: str) -> RunLiveness:
        """The liveness whose words are ``reason`` (for callers that still pass the words of :func:`run_liveness`)."""
        for state, words in (
            (Liveness.LIVE, "live"),
            (Liveness.FINISHED, "finished"),
            (Liveness.DETACHED, DETACHED_LIVENESS),
        ):
            if reason == words:
                return cls(state=state, reason=reason)
        return cls(state=Liveness.GONE, reason=reason)


_LIVE = RunLiveness(state=Liveness.LIVE, reason="live")
_FINISHED = RunLiveness(state=Liveness.FINISHED, reason="finished")
_DETACHED = RunLiveness(state=Liveness.DETACHED, reason=DETACHED_LIVENESS)


def _gone(reason: str) -> RunLiveness:
    return RunLiveness(state=Liveness.GONE, reason=reason)


def judge_liveness(
    run: RunRow | None, *, stale_after_ms: int = DEFAULT_STALE_AFTER_MS, now: int | None = None
) -> RunLiveness:
    """Whether ``run``'s process is alive (``now``: the store's clock; default this host's)."""
    if run is None:
        return _gone("no process ever reported this run (no heartbeat recorded)")
    if run.status is StoredRunStatus.DETACHED:
        return _DETACHED
    if run.status is StoredRunStatus.CRASHED:
        return _gone(f"crashed: its process {run.pid} on {run.host} stopped heartbeating")
    if run.status is not StoredRunStatus.RUNNING:
        return _FINISHED
    now = now_ms() if now is None else now
    if run.host == HOST and run.pid > 0 and not _pid_alive(run.pid):
        return _gone(f"its process {run.pid} on {run.host} is gone (killed or crashed)")
    age = now - run.heartbeat_at_ms
    if age > stale_after_ms:
        return _gone(f"no heartbeat from process {run.pid} on {run.host} for {age / 1000:.0f} s")
    return _LIVE


def run_liveness(run: RunRow | None, *, stale_after_ms: int = DEFAULT_STALE_AFTER_MS, now: int | None = None) -> str:
    """The words of :func:`judge_liveness` (``"live"``, ``"finished"`` or why the process is gone), for people."""
    return judge_liveness(run, stale_after_ms=stale_after_ms, now=now).reason


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True
