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
    goes behind those already waiting.

    Free and unwanted, it is taken and given back under one plain lock (a claim takes it on
    every write, so that path is kept short). A thread that has to wait gets a lock of its own
    in the line, and whoever releases hands the lock straight to the first in line."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()  # guards _held and _queue
        self._held = False
        self._queue: collections.deque[threading.Lock] = collections.deque()

    def acquire(self, timeout: float) -> bool:
        """Take the lock, waiting at most `timeout` seconds; False if that ran out first."""
        with self._mutex:
            if not self._held:  # free means nobody is in line: a release hands it on
                self._held = True
                return True
            turn = threading.Lock()
            turn.acquire()
            self._queue.append(turn)
        try:
            if turn.acquire(timeout=max(timeout, 0.0)):
                return True  # handed over: _held stayed True for us
        except BaseException:  # interrupted (Ctrl-C) while in line
            if not self._leave(turn):
                self.release()  # it was handed to us meanwhile: pass it on
            raise
        if self._leave(turn):
            return False
        turn.acquire()  # handed over just as the wait ran out: it is ours
        return True

    def _leave(self, turn: threading.Lock) -> bool:
        """Step out of the line; False when already taken out of it (the lock handed over)."""
        with self._mutex:
            try:
                self._queue.remove(turn)
            except ValueError:
                return False
            return True

    def release(self) -> None:
        with self._mutex:
            if self._queue:
                self._queue.popleft().release()  # theirs now; _held stays True
            else:
                self._held = False


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
