"""Appends events to the store named by the environment from one process (tests/store concurrency)."""

from __future__ import annotations

import os
import sys

from store_support import make_event

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.store import open_store


def main() -> None:
    run_id, batches, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = open_store()
    seq = 0
    for _ in range(batches):
        events = []
        for _ in range(size):
            events.append(make_event(run_id, seq, events_pb2.TaskProgress(task_id="t", message=f"{run_id} {seq}")))
            seq += 1
        store.append_events(events, pid=os.getpid(), host="h")


if __name__ == "__main__":
    main()
