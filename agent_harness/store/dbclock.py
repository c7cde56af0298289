"""The database's clock, for stores that several hosts share.

A lease is a time in the database: "held by w1 until t". Every host compares that time with
its own clock, so a host whose clock runs five minutes fast sees every live lease as lapsed
and takes the item from a worker that is still on it. On PostgreSQL the hosts therefore read
the time as the database server has it: the host's clock plus an offset measured against the
server (`clock_timestamp()`), taken again every `resync_s` seconds of the host's monotonic
clock so a host clock that is stepped (NTP, a suspended laptop) is put right within that.

The offset is measured on a connection of its own, because the clock is read inside the
store's transactions. If a later measurement fails (a network blip), the last offset stands:
the time it gives is off by no more than the host clock drifted since.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

RESYNC_S = 30.0


class DatabaseClock:
    """A clock (seconds since the epoch, like `time.time`) that agrees with the database's."""

    def __init__(
        self,
        host: Callable[[], float],
        read_database: Callable[[], float],
        *,
        resync_s: float = RESYNC_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._host = host
        self._read_database = read_database
        self._resync_s = resync_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._offset: float | None = None
        self._synced_at = 0.0

    @property
    def offset(self) -> float:
        """Seconds to add to the host's clock to get the database's (as last measured)."""
        return self._offset or 0.0

    def sync(self) -> None:
        """Measure the offset now: the database's time against the midpoint of the host's
        readings before and after asking it, which halves the error of the round trip."""
        before = self._host()
        database = self._read_database()
        after = self._host()
        with self._lock:
            self._offset = database - (before + after) / 2
            self._synced_at = self._monotonic()

    def __call__(self) -> float:
        if self._offset is None:
            self.sync()  # the first reading: without it there is no time to give, so raise
        elif self._monotonic() - self._synced_at >= self._resync_s:
            try:
                self.sync()
            except Exception:  # keep the last offset; the next reading tries again
                with self._lock:
                    self._synced_at = self._monotonic()
        return self._host() + self.offset
