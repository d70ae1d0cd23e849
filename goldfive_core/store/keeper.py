"""Writes a run must not lose while its process lives: a finished body's "done", kept through any outage.

A body that ran and whose "done" cannot be written yet (the store is out of reach past its retry budget)
is handed to the store's :class:`WriteKeeper`: one thread per store retries it, with backoff, until the
store answers — however long that takes while the process lives. The run's closing event waits for the
run's kept writes (:meth:`WriteKeeper.wait_run`, called by :class:`~goldfive_core.store.StoreSink`), and the
process waits for them when it closes its channel or sink and at exit (:meth:`WriteKeeper.drain`), for at
most ``GOLDFIVE_STORE_DRAIN_S`` seconds (:data:`DEFAULT_DRAIN_S`); what is still unwritten then is logged,
by name, at ERROR. So a call that finished is not left "in doubt" because of an outage.
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import threading
import time
import weakref
from collections.abc import Callable

from .._util import env_seconds
from ..retry import Backoff
from .base import StoreError, StoreUnavailableError
from .roles import StoreHandle

__all__ = ["DEFAULT_DRAIN_S", "WriteKeeper", "drain_seconds", "keeper_for"]

logger = logging.getLogger(__name__)

_OUTAGE = Backoff(first_s=0.1, cap_s=2.0)
"""How a kept write waits out a store outage before it is tried again."""

DEFAULT_DRAIN_S = 60.0
"""How long closing a channel or sink (and the process's exit) waits for unwritten events and "done" records."""


def drain_seconds() -> float:
    """``GOLDFIVE_STORE_DRAIN_S`` (0 = do not wait), else :data:`DEFAULT_DRAIN_S`."""
    return env_seconds("GOLDFIVE_STORE_DRAIN_S", DEFAULT_DRAIN_S, high=86_400.0, zero_ok=True)


@dataclasses.dataclass(eq=False)
class _Kept:
    what: str
    run_id: str
    write: Callable[[], object]


class WriteKeeper:
    """Retries kept writes of one store until they land; see the module docstring."""

    def __init__(self, store: StoreHandle) -> None:
        # Only the store's name, never the store: the registry below maps stores to keepers weakly, and a keeper
        # holding its store would keep every store (and its database connections) alive for good. A kept write
        # holds the store it writes to while it is pending, which is what must live on.
        self.url = store.url
        self._pending: list[_Kept] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.written = 0
        """How many kept writes landed (observability and tests)."""

    def keep(self, what: str, run_id: str, write: Callable[[], object]) -> None:
        """Retry ``write`` (idempotent; raises StoreUnavailableError while the store is out of reach) until it lands."""
        with self._cond:
            self._pending.append(_Kept(what, run_id, write))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="goldfive-keeper", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def pending(self, run_id: str | None = None) -> list[str]:
        """What is still unwritten (of ``run_id``, or of every run)."""
        with self._cond:
            return [k.what for k in self._pending if run_id is None or k.run_id == run_id]

    def wait_run(self, run_id: str, timeout: float) -> bool:
        """Wait until no write of ``run_id`` is kept (at most ``timeout`` s); False when some still are."""
        return self._wait(lambda: not any(k.run_id == run_id for k in self._pending), timeout)

    def drain(self, timeout: float) -> list[str]:
        """Wait for every kept write (at most ``timeout`` s); what is still unwritten is logged and returned."""
        self._wait(lambda: not self._pending, timeout)
        lost = self.pending()
        if lost:
            logger.error(
                "store %s: gave up after waiting %g s (GOLDFIVE_STORE_DRAIN_S); %d record(s) NOT written: %s",
                self.url,
                timeout,
                len(lost),
                "; ".join(lost),
            )
        return lost

    def _wait(self, done: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._cond:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def _run(self) -> None:
        delays = _OUTAGE.delays()
        while True:
            with self._cond:
                if not self._pending:
                    self._thread = None
                    return
                kept = self._pending[0]
            try:
                kept.write()
            except StoreUnavailableError as exc:
                delay = delays.next()
                logger.warning("store %s: %s not written yet; retrying in %.1f s: %s", self.url, kept.what, delay, exc)
                time.sleep(delay)
                continue
            except StoreError as exc:  # refused for good (not an outage): retrying cannot help
                logger.error("store %s: %s refused, NOT written: %s", self.url, kept.what, exc)
            else:
                self.written += 1
                logger.info("store %s: %s written after an outage", self.url, kept.what)
            delays.reset()
            with self._cond:
                self._pending.remove(kept)
                self._cond.notify_all()


_KEEPERS: weakref.WeakKeyDictionary[StoreHandle, WriteKeeper] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def keeper_for(store: StoreHandle) -> WriteKeeper:
    """The keeper of ``store`` (one per store object: its ledger and its sink share it)."""
    with _LOCK:
        keeper = _KEEPERS.get(store)
        if keeper is None:
            keeper = _KEEPERS[store] = WriteKeeper(store)
        return keeper


def _drain_all_at_exit() -> None:
    with _LOCK:
        keepers = list(_KEEPERS.values())
    busy = [k for k in keepers if k.pending()]
    if busy:
        deadline = time.monotonic() + drain_seconds()
        for keeper in busy:
            keeper.drain(max(deadline - time.monotonic(), 0.0))


atexit.register(_drain_all_at_exit)
