"""The turns writers take to write one SQLite file.

SQLite lets one writer in at a time; the others wait in its busy handler, which sleeps 1 ms,
then 2, 5, 10 and more, and retries. Under a stream of short writes a sleeper can miss every
turn for seconds (one thread's lease renewal starved by the others' claims), and while writers
sleep the file stands idle: with four processes claiming, most of the time went to sleeping.
So writers take turns before they meet SQLite: threads of one process first come, first
served, on a lock of their own; then processes, on an advisory lock of a file beside the
database, looked at again within half a millisecond while another holds it. The kernel drops
that lock when its process dies. Only writers that are not the harness's (the sqlite3 shell)
still meet the busy handler.
"""

from __future__ import annotations

import collections
import fcntl
import os
import threading
import time
from pathlib import Path

# How soon a writer looks again at the file lock another process holds: first, and at most.
_FIRST_LOOK_S = 0.00005
_LONGEST_LOOK_S = 0.0005


class FairLock:
    """A lock granted in the order it was asked for: a thread that releases it and asks again
    goes behind those already waiting."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
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


class WriteGate:
    """One SQLite file's write turns: this process's threads in order, then other processes."""

    def __init__(self, lock_file: Path) -> None:
        self.threads = FairLock()
        self._lock_file = lock_file
        self._fd: int | None = None  # opened at the first write; -1 when it cannot be
        self.users = 0  # the stores of this process that write through it (see write_gate)

    def acquire(self, timeout: float) -> bool:
        """This process's turn, then the file's, within `timeout` seconds; False if it ran out."""
        deadline = time.monotonic() + timeout
        if not self.threads.acquire(timeout):
            return False
        try:
            if self._take_file(deadline):
                return True
        except BaseException:
            self.threads.release()
            raise
        self.threads.release()
        return False

    def release(self) -> None:
        try:
            if self._fd is not None and self._fd >= 0:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            self.threads.release()

    def close(self) -> None:
        """Close the lock file (its last store has closed; no write is under way)."""
        fd, self._fd = self._fd, None
        if fd is not None and fd >= 0:
            os.close(fd)

    def _take_file(self, deadline: float) -> bool:
        if self._fd is None:
            try:
                self._fd = os.open(self._lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError:
                self._fd = -1  # a directory it cannot write: SQLite's own handler alone
        if self._fd < 0:
            return True
        pause = _FIRST_LOOK_S
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() + pause > deadline:
                    return False
            time.sleep(pause)
            pause = min(pause * 2, _LONGEST_LOOK_S)


_WRITE_GATES: dict[str, WriteGate] = {}
_WRITE_GATES_GUARD = threading.Lock()


def _fresh_gates() -> None:
    """A forked child starts with no gate held (a parent's thread may have held one)."""
    global _WRITE_GATES_GUARD
    _WRITE_GATES.clear()
    _WRITE_GATES_GUARD = threading.Lock()


os.register_at_fork(after_in_child=_fresh_gates)


def write_gate(path: Path) -> WriteGate:
    """The turns this process's writers of the SQLite file at `path` take, with every other
    process's (through `<file>.write-lock`)."""
    key = os.path.realpath(path)
    with _WRITE_GATES_GUARD:
        gate = _WRITE_GATES.get(key)
        if gate is None:
            gate = _WRITE_GATES[key] = WriteGate(Path(key + ".write-lock"))
        gate.users += 1
        return gate


def drop_gate(gate: WriteGate) -> None:
    """A store that had `gate` from write_gate has closed: the last one closes its lock file,
    so a process that opens many databases in turn keeps no descriptor for those it closed."""
    with _WRITE_GATES_GUARD:
        gate.users -= 1
        if gate.users > 0:
            return
        for key, known in list(_WRITE_GATES.items()):
            if known is gate:
                del _WRITE_GATES[key]
        gate.close()
