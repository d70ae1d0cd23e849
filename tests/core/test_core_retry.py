"""The one retry policy: delays grow to a cap, the budget is a deadline, other errors pass at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from goldfive_core.retry import Backoff, aretry, retry


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s

    async def asleep(self, s: float) -> None:
        self.sleep(s)


def failing(times: int, exc: type[Exception] = ConnectionError) -> tuple[Callable[[], str], dict[str, int]]:
    calls = {"n": 0}

    def fn() -> str:
        calls["n"] += 1
        if calls["n"] <= times:
            raise exc("down")
        return "ok"

    return fn, calls


def test_delays_double_up_to_the_cap_and_reset() -> None:
    delays = Backoff(first_s=0.1, cap_s=0.5).delays()
    assert [delays.next() for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    delays.reset()
    assert delays.next() == 0.1


def test_a_call_that_recovers_within_the_budget_returns_its_value() -> None:
    clock = Clock()
    fn, calls = failing(3)
    assert retry(fn, budget_s=10, on=ConnectionError, what="x", clock=clock, sleep=clock.sleep) == "ok"
    assert calls["n"] == 4
    assert clock.slept == [0.05, 0.1, 0.2]


def test_the_budget_is_a_deadline_and_the_last_error_is_raised() -> None:
    clock = Clock()
    fn, calls = failing(100)
    with pytest.raises(ConnectionError):
        retry(fn, budget_s=0.3, on=ConnectionError, what="x", clock=clock, sleep=clock.sleep)
    assert sum(clock.slept) == pytest.approx(0.3)  # the last sleep is cut to what was left
    assert calls["n"] == len(clock.slept) + 1


def test_a_budget_of_zero_tries_once() -> None:
    clock = Clock()
    fn, calls = failing(1)
    with pytest.raises(ConnectionError):
        retry(fn, budget_s=0, on=ConnectionError, what="x", clock=clock, sleep=clock.sleep)
    assert calls["n"] == 1 and clock.slept == []


def test_an_error_it_was_not_told_to_retry_is_raised_at_once() -> None:
    clock = Clock()
    fn, calls = failing(1, exc=KeyError)
    with pytest.raises(KeyError):
        retry(fn, budget_s=10, on=ConnectionError, what="x", clock=clock, sleep=clock.sleep)
    assert calls["n"] == 1


def test_the_async_form_behaves_the_same() -> None:
    clock = Clock()
    fn, calls = failing(2)

    async def afn() -> str:
        return fn()

    got = asyncio.run(aretry(afn, budget_s=10, on=ConnectionError, what="x", clock=clock, sleep=clock.asleep))
    assert got == "ok" and calls["n"] == 3 and clock.slept == [0.05, 0.1]


def test_a_policy_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError):
        Backoff(first_s=0)
    with pytest.raises(ValueError):
        Backoff(first_s=1, cap_s=0.5)
