"""A decision's ack watched over its whole delivery (``AckWatch.watch``): looked for once, then handed over.

A delivery waits for its ack in quarter-second slices (its run's liveness is checked between them). The watch
stays registered across the slices, so an ack stored between two of them is handed over by the watcher, and an
ack stored before the watch began is found by its one first look; a watch ended leaves nothing behind.
"""

from __future__ import annotations

from store_support import Backend

from goldfive_core.control import ControlAck, ControlKind, ControlMessage
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


async def test_an_ack_stored_before_the_watch_began_is_found_by_its_first_look(backend: Backend) -> None:
    store = backend.open()
    threads = ServerThreads()
    watch = AckWatch(store, threads=threads)
    msg = ControlMessage(ControlKind.APPROVE, {"target_id": "coffee", "run_id": "run-a"})
    try:
        ack = _acked(store, msg)
        with watch.watch(msg.id) as watched:
            got = await watched.wait(10)
            assert got is not None and got.control_id == ack.control_id
        assert await watch.wait_ack(msg.id, 10) is not None  # the one-slice wait looks too
    finally:
        await watch.aclose()
        threads.shutdown()
