"""The turns a process's threads take to write one SQLite file.

SQLite lets one writer in at a time; the others wait in its busy handler, which sleeps and
retries. Under a stream of short writes from other threads a sleeper can miss every turn for
seconds (one thread's lease renewal starved by the others' claims). So threads of one process
queue first, first come first served, on a lock of their own; only other processes still meet
the busy handler. (Making processes take turns too, at an advisory lock on a file beside the
database polled every 50 to 500 us, was measured and dropped: with 8 processes claiming it
cost more than SQLite's own handler, docs/ARCHITECTURE.md "The queue at its limit".)
"""

from __future__ import annotations

import collections
import os
import threading
from pathlib import Path


class FairLock:
    """A lock granted in the order it was asked for: a thread that releases it and asks again
    goes behind those already waiting."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())  # never taken twice by one thread
        self._held = False
        self._queue: collections.deque[object] = collections.deque()

    def acquire(self, timeout: float) -> bool:
        """Take the lock, waiting at most `timeout` seconds; False if that ran out first."""
        me = object()
        with self._cond:
            if not self._held and not self._queue:  # free, nobody waiting: no line to join
                self._held = True
                return True
            self._queue.append(me)
            try:
                ready = self._cond.wait_for(
                    lambda: not self._held and self._queue[0] is me, timeout
                )
            except BaseException:  # interrupted (Ctrl-C) while in line: leave the line
                self._leave(me)
                raise
            if not ready:
                self._leave(me)
                return False
            self._queue.popleft()
            self._held = True
            return True

    def _leave(self, me: object) -> None:
        """Step out of the line (the caller holds the condition)."""
        self._queue.remove(me)
        self._cond.notify_all()  # the next in line may be free to go now

    def release(self) -> None:
        with self._cond:
            self._held = False
            if self._queue:
                self._cond.notify_all()


_WRITE_GATES: dict[str, FairLock] = {}
_WRITE_GATES_GUARD = threading.Lock()

# Counts the forks this process came from: a gate looked up under another count belongs to a
# parent (compared on every write, where os.getpid() would cost a system call).
FORKS = [0]


def _fresh_gates() -> None:
    """A forked child starts with no gate held (a parent's thread may have held one)."""
    global _WRITE_GATES_GUARD
    _WRITE_GATES.clear()
    _WRITE_GATES_GUARD = threading.Lock()
    FORKS[0] += 1


os.register_at_fork(after_in_child=_fresh_gates)


def write_gate(path: Path) -> FairLock:
    """The lock this process's writers of the SQLite file at `path` take in turn."""
    key = os.path.realpath(path)
    with _WRITE_GATES_GUARD:
        return _WRITE_GATES.setdefault(key, FairLock())
