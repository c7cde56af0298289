"""The shared fake clock: still until told, and a sleep that moves it instead of waiting."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from agent_harness.testing.clock import DEFAULT_START, FakeClock

pytestmark = pytest.mark.unit


def test_it_stands_still_until_told() -> None:
    clock = FakeClock()
    assert clock() == clock() == DEFAULT_START
    clock.advance(90.5)
    assert clock() == DEFAULT_START + 90.5
    assert clock.slept == []  # advancing is not sleeping


def test_it_starts_where_asked_and_can_be_set() -> None:
    clock = FakeClock(start=1000.0)
    assert clock() == 1000.0
    clock.now = 50.0
    assert clock() == 50.0


def test_sleep_moves_the_clock_and_is_remembered() -> None:
    clock = FakeClock(start=0.0)
    clock.sleep(2.5)
    clock.sleep(0)
    clock.sleep(3600)
    assert clock() == 3602.5
    assert clock.slept == [2.5, 0, 3600]


def wait_until(deadline: float, now: Callable[[], float], sleep: Callable[[float], None]) -> int:
    """Code written the way the harness waits: poll a clock, sleep between polls."""
    naps = 0
    while now() < deadline:
        sleep(10)
        naps += 1
    return naps


def test_a_clock_and_its_sleep_injected_together_see_each_other() -> None:
    clock = FakeClock()
    assert wait_until(DEFAULT_START + 35, clock, clock.sleep) == 4
    assert clock() == DEFAULT_START + 40


def test_it_can_be_set_back_but_never_sleeps_backwards() -> None:
    clock = FakeClock()
    clock.advance(-1)  # wall clocks get corrected backwards; code must survive it
    assert clock() == DEFAULT_START - 1
    with pytest.raises(ValueError, match="non-negative"):
        clock.sleep(-0.1)
    assert clock() == DEFAULT_START - 1 and clock.slept == []


def test_sleeps_from_many_threads_all_count() -> None:
    clock = FakeClock(start=0.0)

    def nap() -> None:
        for _ in range(1000):
            clock.sleep(1)

    threads = [threading.Thread(target=nap) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clock() == 4000 and len(clock.slept) == 4000
