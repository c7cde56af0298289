"""A clock for tests: epoch seconds that move only when the test, or the code's own sleep,
says so.

The harness takes its time from an injected `clock` and waits through an injected `sleep`.
Handing it one `FakeClock` as both (`clock=fake, sleep=fake.sleep`) turns every wait into an
instant jump of the same clock, so a test can cover an hour of backoff without waiting and
without measuring real time.
"""

from __future__ import annotations

import threading

# A fixed instant rather than the time of the run, so a test sees the same timestamps on
# every run.
DEFAULT_START = 1_800_000_000.0


class FakeClock:
    """Epoch seconds that stand still until `advance` or `sleep` moves them.

    `now` may also be set outright when a test needs to be at a given instant. Sleeps are
    remembered in `slept`, in the order they were asked for. Safe to share between threads.
    """

    def __init__(self, start: float = DEFAULT_START) -> None:
        self.now = start
        self.slept: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move by `seconds`; a negative step is allowed, since a wall clock can be set back."""
        with self._lock:
            self.now += seconds

    def sleep(self, seconds: float) -> None:
        """Advance by `seconds` at once; refuses a negative length, as `time.sleep` does."""
        if seconds < 0:
            raise ValueError(f"sleep length must be non-negative (got {seconds})")
        with self._lock:
            self.slept.append(seconds)
            self.now += seconds
