"""The detached-invocation table: recorded WAITING, exactly one claim wins, a lapsed lease is taken over."""

from __future__ import annotations

import threading

from store_support import Backend, wait_until

from goldfive_core.store import DetachedStatus


def _record(store, target: str = "adk-1") -> None:  # type: ignore[no-untyped-def]
    store.record_detached(
        target, run_id="run-1", app_name="app", user_id="u", session_id="s1", invocation_id="e-1", detail="waits"
    )


def test_recorded_waiting_and_listed(backend: Backend) -> None:
    store = backend.open()
    _record(store)
    (row,) = store.detached_runs(app_name="app")
    assert row.status is DetachedStatus.WAITING and row.invocation_id == "e-1" and row.claimed_by == ""
    assert store.detached_runs(app_name="other") == []


def test_exactly_one_concurrent_claim_wins(backend: Backend) -> None:
    _record(backend.open())
    wins: list[str] = []
    barrier = threading.Barrier(4)

    def claim(owner: str) -> None:
        store = backend.open()
        barrier.wait()
        if store.claim_detached("adk-1", owner=owner, lease_ms=60_000):
            wins.append(owner)

    threads = [threading.Thread(target=claim, args=(f"p{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(wins) == 1
    store = backend.open()
    assert store.detached("adk-1").claimed_by == wins[0]  # type: ignore[union-attr]
    assert not store.settle_detached("adk-1", owner="someone-else", resumed=True)
    assert store.settle_detached("adk-1", owner=wins[0], resumed=True, detail="approve")
    row = store.detached("adk-1")
    assert row is not None and row.status is DetachedStatus.RESUMED
    assert not store.claim_detached("adk-1", owner="late", lease_ms=60_000)


def test_a_lapsed_lease_is_taken_over_and_a_released_one_waits_again(backend: Backend) -> None:
    store = backend.open()
    _record(store)
    assert store.claim_detached("adk-1", owner="dead", lease_ms=1)
    wait_until(lambda: store.claim_detached("adk-1", owner="next", lease_ms=60_000), what="the lease to lapse")
    assert not store.claim_detached("adk-1", owner="third", lease_ms=60_000)
    assert store.settle_detached("adk-1", owner="next", resumed=False)
    assert store.detached("adk-1").status is DetachedStatus.WAITING  # type: ignore[union-attr]
