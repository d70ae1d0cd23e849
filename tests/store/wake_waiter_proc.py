"""Waits on a SQLite store from another process, with a 30 s fallback poll (tests/store/test_store_wake.py).

    python wake_waiter_proc.py DB inbox          # prints "woken <seconds>" when the inbox may have news
    python wake_waiter_proc.py DB ack CONTROL_ID # prints "acked <seconds> <result>" when the ack is stored

Waits at most 25 s, so a waiter nobody poked reports "timeout" before the fallback poll could see the news.
"""

from __future__ import annotations

import sys
import time

from goldfive_core.store import SqliteStore

WAIT_S = 25.0


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    db, what = sys.argv[1], sys.argv[2]
    store = SqliteStore(db, wake_fallback_s=30.0, create=False)
    started = time.monotonic()
    if what == "inbox":
        store.wait_inbox(0)  # the first look only notes the database's version
        before = store._data_version()
        store.wait_inbox(WAIT_S)
        woken = store._data_version() != before
        _say(f"{'woken' if woken else 'timeout'} {time.monotonic() - started:.3f}")
    else:
        ack = store.wait_ack(sys.argv[3], WAIT_S)
        result = "timeout" if ack is None else f"acked {ack.result.value}"
        _say(f"{result} {time.monotonic() - started:.3f}")
    store.close()


if __name__ == "__main__":
    main()
