"""The log's order on PostgreSQL: events commit out of id order without any lock, and a reader
paging by cursor neither shows an event before the ones that may still commit ahead of it nor
passes over an event that commits late."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from agent_harness.queue.items import enqueue
from agent_harness.queue.views import item_view, summary
from agent_harness.store.chain import GENESIS, event_hash, seal_settled, verify_chain, verify_item
from agent_harness.store.database import Store, open_store
from agent_harness.store.migrations import MIGRATIONS
from agent_harness.store.protection import AHEAD
from agent_harness.store.rebase import LogAhead
from tests.shared.stores import Engine, item

pytestmark = pytest.mark.integration

P = "octo/app:PLAN"


@pytest.fixture
def pg(pg_engine: Engine) -> Engine:
    """PostgreSQL: what follows needs two writers at once."""
    # SQLite has one writer at a time, so its ids always commit in id order.
    return pg_engine


@pytest.fixture
def held(pg: Engine) -> Iterator[Any]:
    """A transaction of another writer that has drawn an event id and not yet committed."""
    import psycopg

    with psycopg.connect(pg.url) as conn:
        conn.execute(f'SET search_path TO "{pg.schema}"')
        yield conn


def _late_event(conn: Any) -> int:
    row = conn.execute(
        "INSERT INTO events (ts, project, item, kind, payload) "
        "VALUES (1.0, %s, 'T1', 'note', '{}') RETURNING id",
        (P,),
    ).fetchone()
    return int(row[0])


def _page_until(store: Store, after: int, wanted: set[int]) -> list[int]:
    """Page on from `after` until every id in `wanted` was handed out (transactions of other
    tests on the same server may hold the settled point back for a moment)."""
    seen: list[int] = []
    deadline = time.monotonic() + 10
    while not wanted <= set(seen) and time.monotonic() < deadline:
        page = store.events(after, 100, project=P)
        seen += [e.id for e in page]
        after = page[-1].id if page else after
        if not page:
            time.sleep(0.01)
    return seen


@pytest.mark.postgres
def test_an_event_that_commits_late_is_neither_passed_over_nor_shown_early(
    pg: Engine, held: Any
) -> None:
    store = pg.open()
    try:
        store.record_outside_event(P, "T1", "note", {"n": 0})
        late = _late_event(held)  # drawn first, committed last
        store.record_outside_event(P, "T1", "note", {"n": 1})
        early = max(e.id for e in store.all_events(project=P))
        assert early > late
        shown = [e.id for e in store.events(0, 100, project=P)]
        assert early not in shown and late not in shown  # not settled while `late` may commit
        cursor = shown[-1] if shown else 0
        held.commit()
        rest = _page_until(store, cursor, {late, early})
        everything = shown + rest
        assert sorted(everything) == sorted(set(everything))  # nothing handed out twice
        assert {late, early} <= set(everything)
        assert everything.index(late) < everything.index(early)  # the older transaction first
        seal_settled(store)
        chain = verify_chain(store)
        assert chain.intact and chain.unsealed == 0 and chain.checked == 3
    finally:
        store.close()


@pytest.mark.postgres
def test_a_reader_with_a_cursor_from_before_a_late_commit_still_gets_it(
    pg: Engine, held: Any
) -> None:
    store = pg.open()
    try:
        late = _late_event(held)
        for n in range(3):
            store.record_outside_event(P, "T1", "note", {"n": n})
        held.commit()
        ids = _page_until(store, 0, {late})
        # Wherever a reader stopped, going on from there hands out the rest exactly once.
        for stop in range(len(ids)):
            rest = _page_until(store, ids[stop], set(ids[stop + 1 :]))
            assert rest == ids[stop + 1 :]
    finally:
        store.close()


def test_a_log_sealed_before_the_upgrade_stays_one_chain_after_it(engine: Engine) -> None:
    """A database written by the release before migration 7 (ids sealed in id order) is
    upgraded in place: old and new events form one unbroken chain, in one order."""
    store = open_store(engine.url, schema=engine.schema, migrate=False, check_protection=False)
    try:
        store.migrate(MIGRATIONS[:6])
        previous = GENESIS
        with store.transaction() as tx:  # what the release before wrote: events, then seals
            for n in range(4):
                tx.execute(
                    "INSERT INTO events (ts, project, item, kind, payload) VALUES (?, ?, ?, ?, ?)",
                    (float(n), P, "T1", "note", f'{{"n": {n}}}'),
                )
            rows = tx.all("SELECT id, ts, project, item, kind, payload, external_id FROM events")
            for row in sorted(rows):
                digest = event_hash(previous, row)
                tx.execute(
                    "INSERT INTO event_chain (event_id, prev_hash, hash) VALUES (?, ?, ?)",
                    (row[0], previous, digest),
                )
                previous = digest
        assert store.migrate() == len(MIGRATIONS) - 6
        for n in range(4, 7):
            store.record_outside_event(P, "T1", "note", {"n": n})
        seal_settled(store)
        chain = verify_chain(store)
        assert chain.intact and chain.checked == 7 and chain.unsealed == 0
        followed = [e.payload.as_dict()["n"] for e in store.events(0, 100, project=P)]
        assert followed == list(range(7))
    finally:
        store.close()


@pytest.mark.postgres
def test_the_chain_goes_on_from_its_own_head_when_the_head_event_is_deleted(pg: Engine) -> None:
    """The newest transaction's event ends the chain although its id is not the largest;
    deleting it by hand is named, and the next write still seals instead of failing."""
    import psycopg

    store = pg.open()
    writers = [psycopg.connect(pg.url) for _ in range(3)]
    try:
        for conn in writers:
            conn.execute(f'SET search_path TO "{pg.schema}"')
            conn.execute("SELECT pg_current_xact_id()")  # transactions begin in this order
        oldest, middle, newest = writers
        _late_event(oldest)
        head = _late_event(newest)  # a smaller id than the middle one's, sealed last
        _late_event(middle)
        for conn in writers:
            conn.commit()
        seal_settled(store)
        with psycopg.connect(pg.url, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{pg.schema}"')
            conn.execute("ALTER TABLE events DISABLE TRIGGER USER")
            conn.execute("DELETE FROM events WHERE id = %s", (head,))
            conn.execute("ALTER TABLE events ENABLE TRIGGER USER")
        store.record_outside_event(P, "T1", "note", {"after": "tampering"})
        seal_settled(store)
        report = verify_chain(store)
        assert [(b.event_id, b.problem) for b in report.breaks] == [(head, "was deleted")]
        assert report.unsealed == 0
    finally:
        for conn in writers:
            conn.close()
        store.close()


@pytest.mark.postgres
def test_an_items_view_and_the_summarys_last_event_hold_with_ids_out_of_order(
    pg: Engine, held: Any
) -> None:
    store = pg.open()
    try:
        enqueue(store, P, [item("T1")])
        held.execute("SELECT pg_current_xact_id()")  # the older transaction, still open
        store.record_outside_event(P, "T1", "note", {"n": 1})  # newer, committed, unsettled
        newer = max(e.id for e in store.all_events(project=P))
        assert summary(store).last_event_id != newer  # not a place to follow from yet
        mark = summary(store).last_event_id
        older = _late_event(held)  # a larger id from the older transaction
        held.commit()
        assert older > newer
        shown = [e.id for e in item_view(store, P, "T1").events]
        assert newer in shown and older in shown
        followed = _page_until(store, mark, {newer, older})
        assert {newer, older} <= set(followed)
    finally:
        store.close()


@pytest.mark.postgres
def test_an_items_chain_check_covers_all_its_events_when_their_ids_are_out_of_order(
    pg: Engine, held: Any
) -> None:
    store = pg.open()
    try:
        held.execute("SELECT pg_current_xact_id()")  # the older transaction, still open
        store.record_outside_event(P, "T1", "note", {"n": 0})  # smaller id, newer transaction
        late = _late_event(held)  # the item's event first in the log's order, largest id
        held.commit()
        store.record_outside_event(P, "T9", "note", {"n": 1})
        seal_settled(store)
        report = verify_item(store, P, "T1")
        assert report is not None and report.intact
        assert report.checked >= 2  # both of T1's events (a range of ids min..max checked none)
        assert late == max(e.id for e in store.all_events(project=P, item="T1"))
        assert verify_item(store, P, "no-such-item") is None
    finally:
        store.close()


@pytest.mark.postgres
def test_a_log_copied_from_a_server_ahead_is_refused_then_rebased_in_its_order(
    pg: Engine, held: Any
) -> None:
    """pg_dump into another server keeps the first server's transaction ids, which may lie
    ahead of the new one's: followers would see no new event. The store refuses to open it and
    `restore_protection` (`work verify --restore`) moves the ids down, order and chain kept."""
    store = pg.open()
    try:
        store.record_outside_event(P, "T1", "note", {"n": 0})
        held.execute("INSERT INTO meta (key, value) VALUES ('early', '1')")  # its xid, first
        store.record_outside_event(P, "T1", "note", {"n": 1})
        late = _late_event(held)  # an older transaction's event with a higher id
        store.record_outside_event(P, "T1", "note", {"n": 2})
        held.commit()
        seal_settled(store)
        before = [e.id for e in store.events(0, 100, project=P)]
        assert late in before and before != sorted(before)
    finally:
        store.close()
    shift = "(tx::text::bigint + 1000000000000)::text::xid8"
    for table, guard in (("events", "events_no_change"), ("event_chain", "event_chain_no_change")):
        held.execute(f"ALTER TABLE {table} DISABLE TRIGGER {guard}")
        held.execute(f"UPDATE {table} SET tx = {shift}")
        held.execute(f"ALTER TABLE {table} ENABLE TRIGGER {guard}")
    held.commit()
    with pytest.raises(LogAhead) as refused:
        pg.open()
    assert refused.value.exit_code == 2
    assert "work verify --restore" in refused.value.message

    repaired = pg.open(check_protection=False)
    try:
        assert repaired.restore_protection() == [AHEAD]
        assert repaired.unprotected() == []
        assert [e.id for e in repaired.events(0, 100, project=P)] == before
        repaired.record_outside_event(P, "T1", "note", {"n": 3})
        seal_settled(repaired)
        after = repaired.events(0, 100, project=P)
        assert [e.id for e in after][:-1] == before and after[-1].payload.as_dict() == {"n": 3}
        chain = verify_chain(repaired)
        assert chain.intact and chain.checked == 5 and chain.unsealed == 0
    finally:
        repaired.close()
    pg.open().close()
