"""The lock a clone's pushes and fetches take: pushes of different branches run side by side,
a fetch runs alone (it rewrites every remote-tracking ref), and a waiting fetch goes first."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class RemoteRefsLock:
    """Pushes of different branches share it (each rewrites only its own remote-tracking ref);
    a fetch holds it alone, since it rewrites them all. A waiting fetch goes before new pushes."""

    def __init__(self) -> None:
        self._state = threading.Condition()
        self._pushing = 0
        self._fetching = False
        self._fetches_waiting = 0

    @property
    def fetches_waiting(self) -> int:
        with self._state:
            return self._fetches_waiting

    @contextmanager
    def push(self) -> Iterator[None]:
        with self._state:
            self._state.wait_for(lambda: not self._fetching and not self._fetches_waiting)
            self._pushing += 1
        try:
            yield
        finally:
            with self._state:
                self._pushing -= 1
                self._state.notify_all()

    @contextmanager
    def fetch(self) -> Iterator[None]:
        with self._state:
            self._fetches_waiting += 1
            self._state.wait_for(lambda: not self._fetching and not self._pushing)
            self._fetches_waiting -= 1
            self._fetching = True
        try:
            yield
        finally:
            with self._state:
                self._fetching = False
                self._state.notify_all()
