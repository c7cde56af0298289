"""GitHub's primary rate limit: a budget of requests per token per hour.

A window opens at a token's first counted request and resets an hour later, so `reset` is a
fixed epoch second for the whole window. The clock is injected, so a test can run out a window
and step past its reset without waiting.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_S = 3600


@dataclass(frozen=True)
class RateState:
    limit: int
    remaining: int
    used: int
    reset: int

    def headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit": str(self.limit),
            "x-ratelimit-remaining": str(self.remaining),
            "x-ratelimit-used": str(self.used),
            "x-ratelimit-reset": str(self.reset),
            "x-ratelimit-resource": "core",
        }


class RateLimiter:
    def __init__(self, limit: int, clock: Callable[[], float]) -> None:
        self.limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[str, tuple[int, int]] = {}  # token -> (reset epoch, used)

    def _window(self, token: str) -> tuple[int, int]:
        now = self._clock()
        reset, used = self._windows.get(token, (0, 0))
        if now >= reset:
            reset, used = math.ceil(now) + WINDOW_S, 0
            self._windows[token] = (reset, used)
        return reset, used

    def peek(self, token: str) -> RateState:
        with self._lock:
            reset, used = self._window(token)
            return RateState(self.limit, max(self.limit - used, 0), used, reset)

    def spend(self, token: str) -> RateState:
        with self._lock:
            reset, used = self._window(token)
            used += 1
            self._windows[token] = (reset, used)
            return RateState(self.limit, max(self.limit - used, 0), used, reset)
