"""The store's parked keys: a model endpoint or an agent account whose window or cap is spent,
shared by every worker and run that opens the same database (`models.parking.ParkingStore`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any


class ParkedKeys:
    """The `parked` table's verbs, for `Store` (which gives `transaction` and `clock`)."""

    clock: Callable[[], float]

    def transaction(self, *, write: bool = True) -> AbstractContextManager[Any]:
        raise NotImplementedError  # Store's own

    def park(self, key: str, until: float, reason: str) -> None:
        """Record that `key` (e.g. a model endpoint) should not be used before `until`."""
        with self.transaction() as tx:
            tx.execute(
                "INSERT INTO parked (key, until, reason) VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET until = excluded.until, reason = excluded.reason",
                (key, until, reason),
            )

    def parked(self, key: str) -> tuple[float, str] | None:
        """(until, reason) while `key` is parked; None once the clock has passed `until`."""
        with self.transaction(write=False) as tx:
            row = tx.one("SELECT until, reason FROM parked WHERE key = ?", (key,))
        if row is None or float(row[0]) <= self.clock():
            return None
        return float(row[0]), str(row[1])

    def parked_keys(self) -> list[str]:
        """Every key parked now."""
        with self.transaction(write=False) as tx:
            rows = tx.all("SELECT key FROM parked WHERE until > ? ORDER BY key", (self.clock(),))
        return [str(row[0]) for row in rows]

    def clear(self, key: str) -> None:
        """`key` is no longer parked (a person cleared it)."""
        with self.transaction() as tx:
            tx.execute("DELETE FROM parked WHERE key = ?", (key,))
