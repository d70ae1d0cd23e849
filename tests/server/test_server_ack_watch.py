"""A decision's ack watched over its whole delivery (``AckWatch.watch``): looked for once, then handed over.

A delivery waits for its ack in quarter-second slices (its run's liveness is checked between them). The watch
stays registered across the slices, so an ack stored between two of them is handed over by the watcher, and an
ack stored before the watch began is found by its one first look; a watch ended leaves nothing behind.
"""

from __future__ import annotations

import threading

import pytest
from store_support import Backend

from goldfive_core.control import ControlAck, ControlKind, ControlMessage
from goldfive_core.server import acks as acks_module
from goldfive_core.server.acks import AckWatch
from goldfive_core.server.threads import ServerThreads
from goldfive_core.store import Store


def _acked(store: Store, msg: ControlMessage) -> ControlAck:
    ident = store.post_control(msg, run_id="run-a")
    assert store.claim_controls_for([(ident, "agent-a")]) == [ident]
    ack = ControlAck.success(msg.id, "approved")
    store.ack_controls([(ident, ack)])
    return ack


async def test_an_ack_stored_between_two_slices_is_handed_to_the_watch(backend: Backend) -> None:
    store = backend.open()
    threads = ServerThreads()
    watch = AckWatch(store, threads=threads)
    msg = ControlMessage(ControlKind.APPROVE, {"target_id": "coffee", "run_id": "run-a"})
    store.post_control(ControlMessage(ControlKind.APPROVE, {"target_id": "tea", "run_id": "run-a"}), run_id="run-a")
    try:
        with watch.watch(msg.id) as watched:
            assert await watched.wait(0.3) is None  # the first slice: nothing yet
            assert watch.waiting == 1  # still watched between the slices
            ack = _acked(store, msg)
            got = await watched.wait(10)
            assert got is not None and got.control_id == ack.control_id and got.ok
        assert watch.waiting == 0
    finally:
        await watch.aclose()
        threads.shutdown()


async def test_an_ack_stored_before_the_watch_began_is_found_by_its_first_look(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The watcher's safety-net slice is made longer than the waits below: only a look of the watch's own finds an
    # ack whose news came before the watch began.
    monkeypatch.setattr(acks_module, "_WATCH_SLICE_S", 30.0)
    store = backend.open()
    threads = ServerThreads()
    watch = AckWatch(store, threads=threads)
    msg = ControlMessage(ControlKind.APPROVE, {"target_id": "coffee", "run_id": "run-a"})
    try:
        ack = _acked(store, msg)
        with watch.watch(msg.id) as watched:
            got = await watched.wait(5)
            assert got is not None and got.control_id == ack.control_id
        # The watcher listens now and its news of that ack is spent: the one-slice wait looks too.
        assert await watch.wait_ack(msg.id, 5) is not None
    finally:
        _acked(store, ControlMessage(ControlKind.APPROVE, {"target_id": "tea", "run_id": "run-a"}))  # wake it
        await watch.aclose()
        threads.shutdown()


async def test_a_watch_begun_before_its_message_is_posted_gets_the_ack_without_a_look_of_its_own(
    backend: Backend,
) -> None:
    """``goldfive serve`` watches a decision's ack before it posts the message: the ack is stored after the watch
    began, so the watcher reads it (on its first look after listening, or woken by the ack's news), and the
    delivery makes no look of its own: one thread hop and one read fewer per decision."""
    store = backend.open()
    threads = ServerThreads()
    watch = AckWatch(store, threads=threads)
    looks: list[str] = []
    real = store.get_acks

    def get_acks(ids: list[str]) -> dict[str, ControlAck]:
        looks.append(threading.current_thread().name)
        return real(ids)

    store.get_acks = get_acks  # type: ignore[method-assign]
    try:
        for target in ("coffee", "tea"):  # the first before the watcher listens, the second after
            msg = ControlMessage(ControlKind.APPROVE, {"target_id": target, "run_id": "run-a"})
            with watch.watch(msg.id, before_post=True) as watched:
                ack = _acked(store, msg)
                got = await watched.wait(10)
                assert got is not None and got.control_id == ack.control_id and got.ok
    finally:
        await watch.aclose()
        threads.shutdown()
    assert looks and all(name.startswith("goldfive-ack-watch") for name in looks), looks
