"""Spend budgets: per item, and per run, checked before money is spent, not after.

Before each agent run or reviewer call, the spent amount plus a bound on the next call (the
largest call of that role seen so far, or the configured `budgets.max_call_usd`, whichever is
larger) must stay within the budget; so a budget is never passed by more than one call's
bound. Every reported cost counts, of a failed run as much as of a successful one. Unknown
cost is never counted as zero, and only the harness's own events count (an ingested file can
spend nothing).

An item over its budget fails for good (spending more cannot bring it back under). A run over
its budget stops claiming: the item that found it spent is given back with its attempt
refunded, for the next run, because running out of budget is not its fault.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable

from agent_harness.errors import UsageError
from agent_harness.pipeline.history import ItemHistory
from agent_harness.store.database import Store
from agent_harness.store.events import AgentFinished, Reviewed
from agent_harness.store.migrations import UNCHAINED
from agent_harness.store.payload import plausible_usd

# The paid roles of an attempt and the event that reports what each call cost.
ROLE_EVENTS = {"implementer": AgentFinished.KIND.value, "reviewer": Reviewed.KIND.value}
_SLACK = 1e-9  # float sums such as 0.1 + 0.2 must not refuse a call that fits exactly


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


def _costs(store: Store, project: str, kinds: tuple[str, ...]) -> list[dict[str, object]]:
    """The payloads of the harness's own cost-bearing events of `kinds` in `project`."""
    marks = ", ".join("?" for _ in kinds)
    with store.transaction(write=False) as tx:
        rows = tx.all(
            f"SELECT payload FROM events WHERE project = ? AND kind IN ({marks}) "
            f"AND external_id IS NULL AND {UNCHAINED}",  # none of them a claim: by index
            (project, *kinds),
        )
    return [json.loads(row[0]) if isinstance(row[0], str) else dict(row[0]) for row in rows]


def call_bound(store: Store, project: str, role: str, configured: float | None) -> float:
    """What the next call of `role` may cost: the largest one seen so far in the project, or
    the configured `max_call_usd`, whichever is larger; 0 while neither is known."""
    seen = [
        cost
        for payload in _costs(store, project, (ROLE_EVENTS[role],))
        if (cost := plausible_usd(payload.get("cost_usd"))) is not None
    ]
    known = [*seen, *([configured] if configured is not None else [])]
    return max(known, default=0.0)


def counted_usd(costs: Iterable[float | None], max_call: float | None) -> float | None:
    """What a budget counts as spent of `costs` (each call's, None where not known): every
    known cost, and each unknown one at `max_call`, the most one call may cost; None when a
    cost is unknown and no `max_call` is set (never 0: then the budget cannot be kept)."""
    total = 0.0
    for cost in costs:
        if cost is None and max_call is None:
            return None
        total += max_call if cost is None else cost  # type: ignore[operator]
    return total


def unknown_cost(key: str) -> str:
    """Why a budget stops: a call's cost is not known, and nothing says what to count."""
    return (
        "an agent run or review reported no cost, so the budget cannot be kept; set "
        f"budgets.max_call_usd (the most one call may cost) to count each such call at that "
        f"({key})"
    )


def item_bound(store: Store, project: str, role: str, max_call: float | None) -> float:
    """What the item must still be able to pay before a call of `role`: that call's bound,
    and for an agent run the review after it too (an agent paid for whose work no review
    could then be paid for is money spent on nothing)."""
    bound = call_bound(store, project, role, max_call)
    return bound + (
        call_bound(store, project, "reviewer", max_call) if role == "implementer" else 0.0
    )


def next_call_refused(
    history: ItemHistory, limit: float | None, role: str, bound: float, max_call: float | None
) -> str | None:
    """Why the item may not pay for another `role` call (its spend plus `bound`, see
    `item_bound`, would pass `limit`, or its spend is not known); None when it may."""
    if limit is None:
        return None
    spent = counted_usd(history.call_costs(), max_call)
    if spent is None:
        return f"item cost budget: {unknown_cost('budgets.item_cost_usd')}"
    if spent + bound <= limit + _SLACK:
        return None
    what = "agent run and the review after it" if role == "implementer" else f"{role} call"
    return (
        f"item cost budget: {format_usd(spent)} spent of {format_usd(limit)}, and the next "
        f"{what} may cost up to {format_usd(bound)} (budgets.item_cost_usd)"
    )


def item_over_budget(history: ItemHistory, limit: float | None) -> str | None:
    """Why the item may not go on, when what it has spent passes `limit`; None otherwise."""
    spent = history.spent_usd()
    if limit is None or spent is None or spent <= limit + _SLACK:
        return None
    return (
        f"item cost budget spent: {format_usd(spent)} of {format_usd(limit)} "
        "(budgets.item_cost_usd)"
    )


class RunBudget:
    """The run's spend limit: what this run (its `run_id`) has paid, and whether another call
    still fits. Once it does not, the run stops claiming (`on_spent`) and says why.

    Workers pay in parallel, so a call's bound is reserved while it runs (`reserve`, then
    `settle` once its cost is recorded): two calls never both count on the same room. A call
    whose bound is not known yet runs alone, so it cannot be one of several that pass.
    """

    def __init__(
        self,
        store: Store,
        project: str,
        limit: float | None,
        run_id: str = "",
        max_call: float | None = None,
    ) -> None:
        self.store = store
        self.project = project
        self.limit = limit
        self.run_id = run_id
        self.max_call = max_call  # what a call of unknown cost counts as (None: cannot tell)
        self.reason: str | None = None
        self.on_spent: Callable[[], None] = lambda: None
        self._hit = threading.Event()
        self._cond = threading.Condition()
        self._reserved: list[float] = []  # the bounds of the calls in flight

    @property
    def spent(self) -> bool:
        return self._hit.is_set()

    def spent_usd(self) -> float | None:
        """What this run's agents and reviewers cost, as far as known; None when nothing was."""
        return known_cost_of([p.get("cost_usd") for p in self._mine()])

    def counted_usd(self) -> float | None:
        """What this run's budget counts as spent (see `counted_usd`)."""
        return counted_usd(self._call_costs(), self.max_call)

    def unpriced(self) -> int:
        """This run's agent runs and reviews whose cost is not known (an agent that reported
        none, a model no price list knows)."""
        return sum(1 for cost in self._call_costs() if cost is None)

    def _call_costs(self) -> list[float | None]:
        """What each of this run's agent runs and reviews cost, None where not known; an
        agent never started cost nothing and is left out."""
        return [
            plausible_usd(p.get("cost_usd"))
            for p in self._mine()
            if p.get("state") != "missing_binary"
        ]

    def _mine(self) -> list[dict[str, object]]:
        kinds = tuple(ROLE_EVENTS.values())
        return [
            p for p in _costs(self.store, self.project, kinds) if p.get("run_id") == self.run_id
        ]

    def reserve(self, bound_of: Callable[[], float]) -> float | None:
        """Hold room for one call that may cost `bound_of()` (0: not known yet), waiting while
        calls in flight hold what it needs; the bound held (give it to `settle`), or None
        (from now on) when it cannot fit."""
        if self.limit is None:
            return None if self._hit.is_set() else 0.0
        with self._cond:
            while not self._hit.is_set():
                bound = bound_of()  # a call that ended while this one waited may raise it
                counted = self.counted_usd()
                if counted is None:
                    self._stop_unknown()
                    break
                spent = counted
                if spent >= self.limit or spent + bound > self.limit + _SLACK:
                    self._stop(spent, bound)
                    break
                room = spent + sum(self._reserved) + bound <= self.limit + _SLACK
                known = bound > 0 and 0.0 not in self._reserved
                if not self._reserved or (known and room):
                    self._reserved.append(bound)
                    return bound
                self._cond.wait()
        self.on_spent()
        return None

    def settle(self, bound: float) -> None:
        """The call that reserved `bound` has ended and its cost is recorded."""
        with self._cond:
            if bound in self._reserved:
                self._reserved.remove(bound)
            self._cond.notify_all()

    def room(self, held: float) -> float | None:
        """What one call that holds `held` may spend: the limit less what was spent and what
        the other calls in flight hold; None without a limit."""
        if self.limit is None:
            return None
        with self._cond:
            others = sum(self._reserved) - held
            counted = self.counted_usd()  # not known: no room
            return self.limit - (self.limit if counted is None else counted) - others

    def stop(self, why: str) -> None:
        """Stop claiming: a call found no room left (`why`)."""
        with self._cond:
            self._halt(f"run cost budget: {why} (budgets.run_cost_usd)")
        self.on_spent()

    def check(self) -> bool:
        """Look at what has been spent; True (from now on) once the limit is reached."""
        if self.limit is None or self._hit.is_set():
            return self._hit.is_set()
        with self._cond:
            counted = self.counted_usd()
            if counted is None:
                self._stop_unknown()
            elif counted >= self.limit:
                self._stop(counted, 0.0)
        if self._hit.is_set():
            self.on_spent()
        return self._hit.is_set()

    def _stop_unknown(self) -> None:
        """Say that a cost is unknown, so the limit cannot be kept (the caller holds the
        condition)."""
        self._halt(f"run cost budget: {unknown_cost('budgets.run_cost_usd')}")

    def _stop(self, spent: float, bound: float) -> None:
        """Say why no call fits any more (the caller holds the condition)."""
        fits = self.limit is not None and spent < self.limit
        nxt = f"; the next call may cost up to {format_usd(bound)}" if fits else ""
        self._halt(
            f"run cost budget spent: {format_usd(spent)} of {format_usd(self.limit)}"
            f"{nxt} (budgets.run_cost_usd)"
        )

    def _halt(self, reason: str) -> None:
        """No call fits any more, for `reason` (the caller holds the condition)."""
        self.reason = reason
        self._hit.set()
        self._cond.notify_all()


def known_cost_of(costs: list[object]) -> float | None:
    """The sum of the known costs; None when none was known (never 0)."""
    known = [usd for c in costs if (usd := plausible_usd(c)) is not None]
    return sum(known) if known else None


class OverBudget(UsageError):
    """A retry of an item whose next call would pass its budget: raise the budget first."""


def check_retry(
    store: Store, project: str, item_id: str, limit: float | None, max_call: float | None
) -> None:
    """Refuse (`OverBudget`) to re-queue an item that could not pay for its next agent run
    within `limit` (budgets.item_cost_usd); a raised budget lets it go again."""
    if limit is None:
        return
    history = ItemHistory.read(store, project, item_id)
    bound = item_bound(store, project, "implementer", max_call)
    reason = next_call_refused(history, limit, "implementer", bound, max_call)
    if reason is not None:
        unknown = "budgets.max_call_usd" in reason  # the fix it names is not a higher budget
        fix = "" if unknown else "; raise the budget to retry it"
        raise OverBudget(f"{item_id} not re-queued: {reason}{fix}")
