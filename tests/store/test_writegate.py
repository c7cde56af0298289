"""The SQLite write gate's lock: first come, first served, and a writer that gives up or is
interrupted while in line does not keep the others out."""

from __future__ import annotations

import signal
import threading
from types import FrameType

import pytest

from agent_harness.store.writegate import FairLock

pytestmark = pytest.mark.unit


def test_waiters_are_served_in_the_order_they_asked() -> None:
    gate = FairLock()
    assert gate.acquire(1)
    served: list[int] = []
    in_line = threading.Semaphore(0)

    def wait_then_note(n: int) -> None:
        in_line.release()
        assert gate.acquire(10)
        served.append(n)
        gate.release()

    threads = []
    for n in range(3):
        thread = threading.Thread(target=wait_then_note, args=(n,))
        thread.start()
        assert in_line.acquire(timeout=10)
        while len(gate._queue) < n + 1:  # the thread is in line before the next one starts
            pass
        threads.append(thread)
    gate.release()
    for thread in threads:
        thread.join(10)
    assert served == [0, 1, 2]


def test_a_writer_that_gives_up_leaves_the_line() -> None:
    gate = FairLock()
    assert gate.acquire(1)
    assert gate.acquire(0.01) is False
    gate.release()
    assert gate.acquire(0)  # nobody is left in line ahead


def test_a_writer_interrupted_in_line_leaves_it() -> None:
    gate = FairLock()
    assert gate.acquire(1)

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    try:
        with pytest.raises(KeyboardInterrupt):
            gate.acquire(30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    gate.release()
    assert gate.acquire(0)  # the interrupted writer no longer stands in line
