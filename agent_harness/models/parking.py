"""Parked endpoints: an account's spent window, shared by every worker that calls it.

A window that resets in hours is not something one worker should wait out in a sleep: the
endpoint is parked until the reset, every worker sees it, and a call to a parked endpoint
fails at once with `EndpointParked` instead of spending another request on a certain 429.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from agent_harness.errors import HarnessError
from agent_harness.models.failures import Failure

# A spent cap (credit, billing, quota) has no reset of its own: its endpoint stays parked until
# a person clears it (`agent-harness work unpark ENDPOINT`). Stored as a time so every parking
# store keeps one shape; any `until` at or after it reads "until cleared".
UNTIL_CLEARED = 253402214400.0  # 9999-12-31


def until_text(until: float) -> str:
    """When a parked endpoint reopens, as a person reads it."""
    if until >= UNTIL_CLEARED:
        return "a person clears it"
    return datetime.fromtimestamp(until, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class EndpointParked(HarnessError):
    """A model endpoint is parked until its usage window resets."""

    exit_code = 75  # EX_TEMPFAIL: come back later

    def __init__(
        self, endpoint: str, until: float, reason: str, failure: Failure | None = None
    ) -> None:
        self.endpoint = endpoint
        self.until = until
        self.reason = reason
        self.failure = failure
        clear = f" (agent-harness work unpark {endpoint})" if until >= UNTIL_CLEARED else ""
        super().__init__(
            f"model endpoint {endpoint} is parked until {until_text(until)}{clear}: {reason}"
        )


class ParkingStore(Protocol):
    """Where parked endpoints are recorded; `agent_harness.store.database` implements it durably."""

    def park(self, key: str, until: float, reason: str) -> None: ...

    def parked(self, key: str) -> tuple[float, str] | None: ...

    def parked_keys(self) -> list[str]: ...

    def clear(self, key: str) -> None: ...


class MemoryParking:
    """Parking shared by the workers of one process, forgotten when it exits."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._parked: dict[str, tuple[float, str]] = {}

    def park(self, key: str, until: float, reason: str) -> None:
        with self._lock:
            self._parked[key] = (until, reason)

    def parked(self, key: str) -> tuple[float, str] | None:
        with self._lock:
            entry = self._parked.get(key)
        if entry is None or entry[0] <= self._clock():
            return None
        return entry

    def parked_keys(self) -> list[str]:
        with self._lock:
            return [key for key, (until, _) in self._parked.items() if until > self._clock()]

    def clear(self, key: str) -> None:
        with self._lock:
            self._parked.pop(key, None)


def unpark(parking: ParkingStore, endpoint: str) -> list[str]:
    """Clear every park of `endpoint` (its URL, or a whole key such as `agent:claude`): what a
    person does once a cap is raised. The keys cleared; none when nothing of it was parked."""
    wanted = endpoint.strip().rstrip("/")
    keys = [
        key
        for key in parking.parked_keys()
        if key == endpoint.strip() or key.split("#", 1)[0].rstrip("/") == wanted
    ]
    for key in keys:
        parking.clear(key)
    return keys
