"""The live view of a run: one row per item in flight, with its stage, attempt and time."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from agent_harness.store.events import (
    AgentStateChanged,
    AttemptStarted,
    DeliveryDue,
    FailedNote,
    HeldElsewhere,
    Payload,
    PullOpened,
    RetryNote,
    TrackerUnanswered,
    Waiting,
)
from agent_harness.store.executor_events import ExecutorEvent

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live

STAGE_OF = {
    "attempt": "claimed",
    "worktree": "worktree",
    "agent_started": "agent",
    "agent_state": "agent",
    "agent_finished": "agent done",
    "check": "checks",
    "review": "review",
    "pushed": "push",
    "pr_opened": "pr open",
    "waiting": "waiting",
    "failed": "failed",
    "retry": "retrying",
}


class LazyLive:
    """rich's `Live` inside a `with`, started by the first `refresh`."""

    def __init__(self, live: Live) -> None:
        self._live = live
        self._lock = threading.Lock()
        self._inside = False
        self._started = False

    def __enter__(self) -> LazyLive:
        self._inside = True
        return self

    def __exit__(self, *_exc: object) -> None:
        with self._lock:
            self._inside = False
            if self._started:
                self._started = False
                self._live.stop()
                if not self._live.console.is_terminal:
                    # rich ends the table's last line only on a terminal: in a file or a pipe
                    # whatever comes next (the run's error) would be glued to its border.
                    self._live.console.line()

    def refresh(self) -> None:
        with self._lock:
            if not self._inside:
                return
            if self._started:
                self._live.refresh()
            else:
                self._started = True
                self._live.start(refresh=True)

    def get_renderable(self) -> Any:
        return self._live.get_renderable()


class LiveView:
    """Collects pipeline events and renders them as a table that redraws in place."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.clock = clock
        self.rows: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.live: LazyLive | None = None
        self.caption = ""  # what the run waits for (another host, the tracker), or last heard of it

    def __call__(self, kind: str, item: str, payload: Payload) -> None:
        if isinstance(payload, HeldElsewhere | DeliveryDue | TrackerUnanswered):
            self.caption = payload.describe()
            if self.live is not None:
                self.live.refresh()
            return
        if kind not in STAGE_OF and not isinstance(payload, AgentStateChanged | ExecutorEvent):
            return  # run-level notes (reconciled, reclaimed) are not a worker's progress
        with self.lock:
            row = self.rows.setdefault(
                item,
                {"started": self.clock(), "attempt": 1, "worker": "", "stage": "", "note": ""},
            )
            if kind in STAGE_OF:
                row["stage"] = STAGE_OF[kind]
            _follow(row, payload, self.clock())
        if self.live is not None:
            self.live.refresh()

    def display(self) -> LazyLive:
        """The live display: it asks for a new table at each refresh, so the elapsed column
        ticks while an agent works, not only when something happens. It is drawn from the
        first event on: a run refused while it begins says its one line, under no empty table."""
        from rich.live import Live

        live = Live(
            get_renderable=self.table, console=self.console, refresh_per_second=2, transient=False
        )
        self.live = LazyLive(live)
        return self.live

    def table(self) -> Table:
        table = Table(title="agent-harness run", title_justify="left", caption=self.caption or None)
        for name in ("item", "worker", "stage", "attempt", "elapsed", "note"):
            table.add_column(name, overflow="fold")
        with self.lock:
            for item, row in sorted(self.rows.items()):
                # An attempt that ended (a pull request, a failure, parked) stops its clock.
                elapsed = float(row.get("ended") or self.clock()) - float(row["started"])
                note = str(row["note"])
                if row.get("pr") and len(note) + _OTHER_COLUMNS > self.console.width:
                    # A link folded in two opens its first half (the repository's page): the
                    # pull request by number here, its whole link in the report at the end.
                    note = f"PR #{row['pr']}"
                table.add_row(
                    item,
                    str(row["worker"]),
                    str(row["stage"]),
                    str(row["attempt"]),
                    f"{elapsed:5.1f}s",
                    escape(note),
                )
        return table


# The live table's width but its note: item, worker, stage, attempt, elapsed, and the borders.
_OTHER_COLUMNS = 64


def _follow(row: dict[str, Any], payload: Payload, now: float) -> None:
    """Update an item's row from what the event says."""
    if isinstance(payload, PullOpened | FailedNote | RetryNote | Waiting):
        row["ended"] = now
    if isinstance(payload, AttemptStarted):
        row.update(started=now, attempt=payload.attempt, worker=payload.worker, note="", ended=None)
    elif isinstance(payload, AgentStateChanged):
        row["stage"] = f"agent: {payload.state}"
    elif isinstance(payload, ExecutorEvent):
        row["stage"] = "executor"
        row["note"] = payload.describe()[:60]
    elif isinstance(payload, FailedNote | RetryNote):
        row["note"] = payload.reason[:60]
    elif isinstance(payload, PullOpened):
        row["note"], row["pr"] = payload.url, payload.number
    elif isinstance(payload, Waiting):
        # A wait for a time (a window's reset) says when; one for the next run (a spent run
        # budget) or a person says why: "until 03:13", the moment it was put back, read as a
        # timed wait.
        until = payload.until
        timed = until is not None and until > time.time() + 1
        shown = f"until {time.strftime('%H:%M', time.localtime(until))}" if timed else ""
        row["note"] = shown or payload.reason[:60]


class JsonLines:
    """Events as JSON lines on stdout, for scripts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self, kind: str, item: str, payload: Payload) -> None:
        # The event's own name goes under "event": payloads may carry a "kind" of their own.
        record = {**payload.as_dict(), "ts": time.time(), "event": kind, "item": item}
        line = json.dumps(record, default=str)
        with self.lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
