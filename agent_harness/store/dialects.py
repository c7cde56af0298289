"""The two SQL engines, told apart: placeholders, row locks, the event log's order, and URLs
fit to show.

Modules write SQL with `?` placeholders and never see the driver; the dialect turns them into
what psycopg wants.

The log's order. SQLite has one writer at a time, so event ids become visible in id order.
PostgreSQL commits transactions in any order: one that drew id 10 may commit after one that
drew id 11, and a reader that had paged past 11 would never see 10. Instead of making every
writer wait on one lock so ids commit in order, each event names the transaction that wrote it
(`tx`, an xid8) and a reader that pages by a cursor follows (tx, id) and stops at the oldest
transaction still in flight: every event before that point is settled, as no transaction that
could still commit sorts before it. A cursor is still an event id; its place in the order is
looked up.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    """The few places where the SQL of the two engines differs."""

    name: str
    lock_rows: str  # appended to a SELECT that reads rows it will change
    skip_locked: str  # appended to a SELECT that picks one free row among many
    # Whether the database itself logs the `claimed` event of a pending item's claim (SQLite,
    # by the trigger migration 8 made); elsewhere the claim's own statement writes it.
    logs_claims: bool = False

    def log_order(self, alias: str = "", *, desc: bool = False) -> str:
        """ORDER BY columns that list events in the order they settled (newest first if
        `desc`)."""
        at = f"{alias}." if alias else ""
        d = " DESC" if desc else ""
        return f"{at}tx{d}, {at}id{d}" if self.name == "postgresql" else f"{at}id{d}"

    def settled(self, alias: str = "") -> str:
        """A condition for events no transaction still in flight can commit before."""
        at = f"{alias}." if alias else ""
        if self.name != "postgresql":
            return "1 = 1"
        return f"{at}tx <= pg_snapshot_xmin(pg_current_snapshot())"

    def after_cursor(
        self, cursor: int, alias: str = "", *, settled: bool = True
    ) -> tuple[str, tuple[int, ...]]:
        """A condition (and its parameters) for the events after the event `cursor`: settled
        ones only, unless `settled` is False."""
        at = f"{alias}." if alias else ""
        if self.name != "postgresql":
            return f"{at}id > ?", (cursor,)
        # The cursor's place: its own transaction (or, for an id that names no event, that of
        # the event before it). `<=` the oldest transaction in flight admits this transaction's
        # own events only when it is the oldest, as then nothing can commit before them.
        after = (
            f"({at}tx, {at}id) > (COALESCE((SELECT c.tx FROM events c WHERE c.id <= ? "
            "ORDER BY c.id DESC LIMIT 1), '0'::xid8), ?)"
        )
        if settled:
            after += f" AND {self.settled(alias)}"
        return after, (cursor, cursor)

    def tables(self) -> str:
        """A query for the names of the tables the database (its schema) holds, sorted."""
        if self.name == "postgresql":
            return (
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() ORDER BY table_name"
            )
        return (
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )

    def sql(self, text: str) -> str:
        if self.name != "postgresql":
            return text
        return _pyformat(text)


@functools.lru_cache(maxsize=4096)
def _pyformat(text: str) -> str:
    """`?` placeholders as psycopg wants them; cached, as the same few texts come back."""
    return text.replace("%", "%%").replace("?", "%s")


SQLITE = Dialect("sqlite", lock_rows="", skip_locked="", logs_claims=True)


POSTGRES = Dialect("postgresql", lock_rows=" FOR UPDATE", skip_locked=" FOR UPDATE SKIP LOCKED")
