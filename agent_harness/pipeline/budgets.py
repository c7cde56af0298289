"""Spend budgets: per item, and per run. Unknown cost is never counted as zero.

An item over its budget fails for good (spending more cannot bring it back under). A run over
its budget stops claiming: items claimed after that are given back with their attempt refunded,
for the next run, because running out of budget is not their fault.
"""

from __future__ import annotations

import threading

from agent_harness.pipeline.history import ItemHistory, known_cost
from agent_harness.store.database import Store


def format_usd(value: float | None) -> str:
    """Money as a person reads it: `$1.25`, `$0.03`, `$0.00014` (two significant digits below a
    cent, never float noise such as 0.00014000000000000001), and `unknown` for None."""
    if value is None:
        return "unknown"
    if value == 0 or abs(value) >= 0.01:
        return f"${value:,.2f}"
    from decimal import Decimal

    exact = Decimal(repr(value))
    places = -exact.adjusted() + 1  # two significant digits
    return f"${round(exact, places):f}"


def item_over_budget(history: ItemHistory, limit: float | None) -> str | None:
    """Why the item may not go on, when what it has spent passes `limit`; None otherwise."""
    spent = history.spent_usd()
    if limit is None or spent is None or spent <= limit:
        return None
    return (
        f"item cost budget spent: {format_usd(spent)} of {format_usd(limit)} "
        "(budgets.item_cost_usd)"
    )


class RunBudget:
    """The run's spend limit, checked after every attempt, and whether it has been reached."""

    def __init__(self, store: Store, project: str, limit: float | None) -> None:
        self.store = store
        self.project = project
        self.limit = limit
        self._hit = threading.Event()

    @property
    def spent(self) -> bool:
        return self._hit.is_set()

    def spent_usd(self) -> float | None:
        """What the project's agents and reviewers reported; None when nothing was known."""
        return known_cost(event.payload for event in self.store.all_events(project=self.project))

    def check(self) -> bool:
        """Look at what has been spent; True (from now on) once the limit is reached."""
        if self.limit is not None and not self._hit.is_set():
            spent = self.spent_usd()
            if spent is not None and spent >= self.limit:
                self._hit.set()
        return self._hit.is_set()
