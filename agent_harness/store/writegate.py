"""The turns a process's threads take to write one SQLite file.

SQLite lets one writer in at a time; the others wait in its busy handler, which sleeps and
retries. Under a stream of short writes from other threads a sleeper can miss every turn for
seconds (one thread's lease renewal starved by the others' claims). So threads of one process
queue first, first come first served, on a lock of their own; only other processes still meet
the busy handler. (Making processes take turns too, at an advisory lock on a file beside the
database polled every 50 to 500 us, was measured and dropped: with 8 processes claiming it
cost more than SQLite's own handler, docs/ARCHITECTURE.md "The queue at its limit".) Time spent
in the line counts against the busy timeout: the handler then gets only what is left of it, so
a write gives up after the timeout in all, not after twice that.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sqlite3
import threading
import time
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


# A wait in line shorter than this leaves SQLite's busy timeout as it is (not worth a PRAGMA).
SHORTEN_AFTER_S = 0.01


def take_turn(gate: FairLock, conn: sqlite3.Connection, timeout_s: float) -> bool | None:
    """Wait in line for `gate`, at most `timeout_s`; None when that ran out. Once it is ours,
    SQLite's handler on `conn` gets what is left of `timeout_s`: True when that shortened it
    (`restore_timeout` puts it back after the write)."""
    asked = time.monotonic()
    if not gate.acquire(timeout=timeout_s):
        return None
    waited = time.monotonic() - asked
    if waited < SHORTEN_AFTER_S:
        return False
    try:
        conn.execute(f"PRAGMA busy_timeout = {max(int((timeout_s - waited) * 1000), 0)}")
    except BaseException:
        gate.release()
        raise
    return True


def restore_timeout(conn: sqlite3.Connection | None, timeout_s: float) -> None:
    """Give `conn` its whole busy timeout back (a connection discarded meanwhile needs none)."""
    if conn is not None:  # a broken one is discarded before its next write
        with contextlib.suppress(sqlite3.Error):
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
