"""Counts of the requests the forge served, by method and route template.

Benchmarks and tests compare how many calls a client made, so requests are counted at the
server. A mark is just the number of requests seen so far; counts since a mark are the tail.
"""

from __future__ import annotations

import threading
from collections import Counter


class RequestLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._keys: list[str] = []

    def record(self, method: str, template: str | None) -> None:
        with self._lock:
            self._keys.append(f"{method} {template or '(no route)'}")

    def mark(self) -> int:
        with self._lock:
            return len(self._keys)

    def counts(self, since_mark: int | None = None) -> dict[str, int]:
        with self._lock:
            return dict(Counter(self._keys[since_mark or 0 :]))
