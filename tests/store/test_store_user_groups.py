"""Policy groups of users change in one transaction: admins changing one user's groups at once all count."""

from __future__ import annotations

import threading

import pytest
from store_support import Backend

from goldfive_core.store import users as users_mod


def test_concurrent_group_changes_of_one_user_are_all_kept(backend: Backend) -> None:
    setup = backend.open()
    users_mod.add_user(setup, "ana", "approver", groups=["base"])
    n = 5  # x 6 rounds + "base" = 31 groups, under MAX_GROUPS (32)
    stores = [backend.open() for _ in range(n)]
    for store in stores:  # connect before the race, so the changes overlap instead of queueing on connects
        assert store.user("ana") is not None
    start = threading.Barrier(n)
    failures: list[BaseException] = []

    def change(i: int) -> None:
        try:
            start.wait(timeout=30)
            for round_ in range(6):
                users_mod.set_groups(stores[i], "ana", add=[f"g{i}r{round_}"])
        except BaseException as exc:  # reported below, with the thread's error
            failures.append(exc)

    threads = [threading.Thread(target=change, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    user = setup.user("ana")
    assert user is not None
    assert set(user.groups) == {"base"} | {f"g{i}r{r}" for i in range(n) for r in range(6)}
    for store in (setup, *stores):
        store.close()


def test_a_refused_group_change_changes_nothing(backend: Backend) -> None:
    store = backend.open()
    users_mod.add_user(store, "ana", "approver", groups=["ops"])
    with pytest.raises(users_mod.UserError, match="permission role"):
        users_mod.set_groups(store, "ana", add=["finance", "admin"], remove=["ops"])
    user = store.user("ana")
    assert user is not None and user.groups == ("ops",)
    with pytest.raises(users_mod.UserError, match="at most"):
        users_mod.set_groups(store, "ana", add=[f"g{i}" for i in range(users_mod.MAX_GROUPS)])
    user = store.user("ana")
    assert user is not None and user.groups == ("ops",)
    with pytest.raises(users_mod.UserError, match="unknown user"):
        users_mod.set_groups(store, "nobody", add=["x"])
    store.close()
