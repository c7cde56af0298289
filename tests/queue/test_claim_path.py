"""The claim's hot path: its hand-written event payload and the plain-object transaction."""

from __future__ import annotations

import json
import math
import sqlite3
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent_harness.config import BudgetSettings
from agent_harness.queue.items import ItemState, enqueue
from agent_harness.queue.leases import LAPSE_CHECK_S, _claimed_json, claim_next, release
from agent_harness.queue.views import item_view
from agent_harness.store.chain import verify_chain, verify_item
from agent_harness.store.database import SqliteStore, Store, open_store
from agent_harness.store.errors import EventsUnprotected, StoreError
from agent_harness.store.migrations import MIGRATIONS, SQLITE_CLAIM_LOG_V8
from agent_harness.testing.clock import FakeClock
from tests.shared.stores import Engine, item

P = "owner/repo:plan"


@pytest.mark.unit
@pytest.mark.parametrize("worker", ["w1", "host-1/état", 'quote" back\\slash', "tab\tnl\n", "💥"])
@pytest.mark.parametrize(
    "expires", [1_800_000_060.0, 0.1, 1e300, 1712345678.1234567, 5, -0.0, math.inf, math.nan]
)
def test_the_claimed_payload_is_what_json_dumps_writes(worker: str, expires: float) -> None:
    for was in (ItemState.PENDING, ItemState.WAITING, "review"):
        expected = {
            "from": was,
            "to": ItemState.CLAIMED,
            "worker": worker,
            "attempt": 2,
            "token": 17,
            "expires_at": expires,
        }
        written = _claimed_json(was, worker, 2, 17, expires)
        assert written == json.dumps(expected, sort_keys=True, default=str)


@pytest.mark.integration
def test_a_claim_records_its_lease_in_the_event(store: Store, clock: FakeClock) -> None:
    clock.advance(0.123456789)
    enqueue(store, P, [item("T0")])
    lease = claim_next(store, P, "wörker", 60.5)
    assert lease is not None
    event = store.all_events(project=P, item="T0")[-1]
    assert event.kind == "claimed" and event.ts == clock.now
    assert event.payload.as_dict() == {
        "from": "pending",
        "to": "claimed",
        "worker": "wörker",
        "attempt": 1,
        "token": lease.token,
        "expires_at": lease.expires_at,
    }


@pytest.mark.integration
def test_an_error_in_a_transaction_writes_nothing_and_frees_the_connection(store: Store) -> None:
    with pytest.raises(ValueError), store.transaction() as tx:
        tx.execute("INSERT INTO meta (key, value) VALUES ('a', '1')")
        tx.record_outside_event(P, None, "never")
        raise ValueError("boom")
    assert store.get_meta("a") is None and store.events() == []
    with pytest.raises(StoreError), store.transaction() as tx:
        tx.execute("INSERT INTO no_such_table VALUES (1)")
    with pytest.raises(RuntimeError, match="nested"), store.transaction(), store.transaction():
        pass
    store.set_meta("a", "2")  # neither left the connection held nor a transaction open
    assert store.get_meta("a") == "2"


@pytest.mark.integration
def test_a_failing_commit_rolls_back_and_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError), store.transaction() as tx:
        tx.execute("INSERT INTO meta (key, value) VALUES ('b', '1')")
        # The event is written at commit; an external id of the wrong type cannot be bound.
        tx.record_outside_event(P, None, "bad", external_id=object())  # type: ignore[arg-type]
    assert store.get_meta("b") is None
    store.set_meta("b", "ok")
    assert store.get_meta("b") == "ok"


@pytest.mark.integration
def test_a_closed_store_refuses_transactions(store: Store) -> None:
    store.close()
    with pytest.raises(StoreError, match="closed"), store.transaction():
        pass


@pytest.mark.integration
def test_a_lease_that_lapses_is_taken_back_before_pending_work(
    engine: Engine, store: Store, clock: FakeClock
) -> None:
    """Lapsed leases are looked for whenever one may have lapsed: at once for leases this
    store saw, and within LAPSE_CHECK_S for one another process took after it last looked."""
    enqueue(store, P, [item(f"T{n}") for n in range(6)])
    first = claim_next(store, P, "w1", 0.2)  # this store's own short lease
    assert first is not None and first.item_id == "T0"
    clock.advance(0.3)
    again = claim_next(store, P, "w1", 300)
    assert again is not None and (again.item_id, again.attempt) == ("T0", 1)

    looked = claim_next(store, P, "w1", 300)  # nothing lapsed now: the next look is due later
    assert looked is not None and looked.item_id == "T1"

    other = engine.open(clock=clock)  # another host, after this store last looked
    try:
        theirs = claim_next(other, P, "w2", 0.1)
    finally:
        other.close()
    assert theirs is not None and theirs.item_id == "T2"
    clock.advance(0.2)  # their lease has lapsed; this store has not looked since
    unaware = claim_next(store, P, "w1", 300)
    assert unaware is not None and unaware.item_id == "T3"
    clock.advance(LAPSE_CHECK_S)
    recovered = claim_next(store, P, "w1", 300)
    assert recovered is not None and (recovered.item_id, recovered.worker) == ("T2", "w1")
    kinds = [e.kind for e in store.all_events(project=P, item="T2")]
    assert kinds[-2:] == ["lease_expired", "claimed"]


@pytest.mark.integration
def test_sqlite_refuses_a_database_whose_claims_would_go_unlogged(sqlite_engine: Engine) -> None:
    """SQLite logs a claim by a trigger in the claim's own statement: without the trigger the
    queue and its log would part, so the store refuses to open until it is restored."""
    sqlite_engine.open().close()
    conn = sqlite3.connect(sqlite_engine.url, isolation_level=None)
    conn.execute("DROP TRIGGER items_claimed_event")
    conn.close()
    with pytest.raises(EventsUnprotected) as refused:
        sqlite_engine.open()
    assert "trigger items_claimed_event is missing" in refused.value.missing
    repaired = sqlite_engine.open(check_protection=False)
    try:
        assert repaired.restore_protection()
        enqueue(repaired, P, [item("T0")])
        lease = claim_next(repaired, P, "w1", 60)
        assert lease is not None
        assert [e.kind for e in repaired.all_events(project=P, item="T0")][-1] == "claimed"
    finally:
        repaired.close()
    sqlite_engine.open().close()


@pytest.mark.integration
@pytest.mark.parametrize("lease_s", [0.1, 1e300])
def test_a_claim_event_reads_back_whatever_the_lease(
    store: Store, clock: FakeClock, lease_s: float
) -> None:
    """The claim's event, however the engine writes it, is JSON the log reads back; a lease
    that never ends (`inf`, which SQLite's trigger would write as `Inf`) is refused, by the
    settings and by the claim."""
    enqueue(store, P, [item("T0")])
    with pytest.raises(ValueError, match="finite"):
        claim_next(store, P, "w1", math.inf)
    with pytest.raises(ValidationError):
        BudgetSettings(lease_s=math.inf)
    lease = claim_next(store, P, "w1", lease_s)
    assert lease is not None
    event = store.all_events(project=P, item="T0")[-1]
    assert event.kind == "claimed"
    assert event.payload.as_dict()["expires_at"] == lease.expires_at


@pytest.mark.integration
def test_a_short_lease_this_store_took_on_the_fast_path_is_taken_back_once_it_lapses(
    store: Store, clock: FakeClock
) -> None:
    """LAPSE_CHECK_S bounds the delay only for leases other processes took: one this store took
    itself, even by the one-statement claim, is looked for as soon as it lapses."""
    enqueue(store, P, [item(f"T{n}") for n in range(4)])
    first = claim_next(store, P, "w1", 300)  # looks for lapsed leases: none for a second
    short = claim_next(store, P, "w1", LAPSE_CHECK_S / 4)  # the one-statement claim
    assert first is not None and short is not None and short.item_id == "T1"
    clock.advance(LAPSE_CHECK_S / 2)  # the short lease has lapsed
    again = claim_next(store, P, "w1", 300)
    assert again is not None and (again.item_id, again.attempt) == ("T1", 1)


@pytest.mark.integration
def test_a_clock_stepped_back_does_not_put_off_looking_for_lapsed_leases(
    engine: Engine, store: Store, clock: FakeClock
) -> None:
    """The next look for lapsed leases is a time on the store's clock: when that clock is set
    back (NTP stepping a host's clock), the look is not put off until it reaches that time
    again, an hour of lapsed leases never taken back."""
    enqueue(store, P, [item(f"T{n}") for n in range(6)])
    assert claim_next(store, P, "w1", 300) is not None  # looked: the next look within 1 s
    clock.now -= 3600  # the clock is stepped back an hour
    other = engine.open(clock=clock)  # another host's claim, after the step
    try:
        theirs = claim_next(other, P, "w2", 60)
    finally:
        other.close()
    assert theirs is not None and theirs.item_id == "T1"
    clock.advance(61 + LAPSE_CHECK_S)  # their lease has lapsed, and more than a look's delay
    again = claim_next(store, P, "w1", 300)
    assert again is not None and (again.item_id, again.worker) == ("T1", "w1")


def _by_scan(store: Store, item_id: str) -> list[int]:
    """The item's event ids found without its index or its claim chain: the whole project's
    log, read in id order, filtered here."""
    return [e.id for e in store.all_events(project=P) if e.item == item_id]


@pytest.mark.integration
def test_an_items_history_holds_every_claim_however_it_was_logged(
    store: Store, clock: FakeClock
) -> None:
    """On SQLite a claim of a pending item is chained from the item's row instead of indexed
    (one page fewer per claim); claims of lapsed or parked items are written by the harness
    and indexed. Every reader of one item's history finds both kinds, and no other item's."""
    enqueue(store, P, [item("T0"), item("T1")], max_attempts=9)
    for _ in range(3):  # each claim of T0 from pending is chained; T1's are interleaved
        leases = [claim_next(store, P, "w1", 60) for _ in range(2)]
        assert [lease.item_id if lease else None for lease in leases] == ["T0", "T1"]
        for lease in leases:
            assert lease is not None
            release(store, lease)
    lease = claim_next(store, P, "w1", 0.5)
    assert lease is not None and lease.item_id == "T0"
    clock.advance(1)  # it lapses, and is taken back by a claim the harness logs itself
    taken_back = claim_next(store, P, "w2", 60)
    assert taken_back is not None and (taken_back.item_id, taken_back.worker) == ("T0", "w2")

    expected = _by_scan(store, "T0")
    claims = [e for e in store.all_events(project=P, item="T0") if e.kind == "claimed"]
    assert [e.payload.as_dict()["worker"] for e in claims] == ["w1"] * 4 + ["w2"]
    assert [e.id for e in store.all_events(project=P, item="T0")] == expected
    assert [e.id for e in store.all_events(item="T0")] == expected  # any project
    assert [e.id for e in store.events(0, 1000, project=P, item="T0")] == expected
    assert [e.id for e in store.events(expected[3], 2, project=P, item="T0")] == expected[4:6]
    assert [e.id for e in item_view(store, P, "T0").events] == expected
    assert [e.id for e in item_view(store, P, "T0", limit=3).events] == expected[-3:]
    assert [e.id for e in store.all_events(project=P, item="T1")] == _by_scan(store, "T1")
    report = verify_item(store, P, "T0")
    assert report is not None and report.intact  # over the stretch from its first to its last
    assert report == verify_chain(store, first_id=expected[0], last_id=expected[-1])


@pytest.mark.integration
def test_a_claim_from_pending_writes_one_page_fewer_than_an_indexed_event(
    sqlite_engine: Engine,
) -> None:
    """What the claim chain is for: the WAL pages a claim writes, counted with checkpoints
    off. An indexed event costs a page of its table and one of its index on top of the
    claim's own two (its row and its state's index): 4.5 a claim on average, before."""
    store = sqlite_engine.open()
    try:
        enqueue(store, P, [item(f"T{n}") for n in range(400)])
    finally:
        store.close()
    conn = sqlite3.connect(sqlite_engine.url, isolation_level=None)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA wal_autocheckpoint=0")  # a checkpoint would empty the WAL midway
    store = sqlite_engine.open()
    try:
        claims = 0
        while claim_next(store, P, "w1", 300) is not None:
            claims += 1
        wal = Path(f"{sqlite_engine.url}-wal").stat().st_size
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    finally:
        store.close()
        conn.close()
    assert claims == 400
    pages = wal / (page + 24) / claims  # each WAL frame: a 24-byte header and the page
    assert pages < 3.6, pages


@pytest.mark.integration
def test_claims_logged_before_the_chain_stay_in_their_items_history(
    sqlite_engine: Engine,
) -> None:
    """A SQLite file whose claims were indexed (migration 8) is upgraded in place: each item's
    history holds its claims from before and after, and the guards check the new triggers."""
    store = open_store(sqlite_engine.url, migrate=False, check_protection=False)
    try:
        store.migrate(MIGRATIONS[:8])
        enqueue(store, P, [item("T0"), item("T1")], max_attempts=9)
        with store.transaction() as tx:  # a claim as the release before made it, then undone
            for state, worker in (("claimed", "old"), ("pending", None)):
                tx.execute(
                    "UPDATE items SET state = ?, attempts = attempts + 1, fence = fence + 1, "
                    "lease_worker = ?, lease_expires = 1e10 WHERE project = ? AND id = 'T0'",
                    (state, worker, P),
                )
        assert store.migrate() == len(MIGRATIONS) - 8
        assert store.unprotected() == []
        for worker in ("new1", "new2"):
            lease = claim_next(store, P, worker, 60)
            assert lease is not None and lease.item_id == "T0"
            release(store, lease)
        history = store.all_events(project=P, item="T0")
        assert [e.id for e in history] == _by_scan(store, "T0")
        workers = [e.payload.as_dict()["worker"] for e in history if e.kind == "claimed"]
        assert workers == ["old", "new1", "new2"]
    finally:
        store.close()


@pytest.mark.integration
def test_a_pending_item_claimed_by_other_sql_is_logged_and_found(sqlite_engine: Engine) -> None:
    """A claim that does not name its event's id (SQL other than the harness's claim) is still
    logged by the schema, unchained and so indexed: the item's history finds it."""
    store = sqlite_engine.open()
    try:
        enqueue(store, P, [item("T0")], max_attempts=9)
        first = claim_next(store, P, "w1", 60)
        assert first is not None
        release(store, first)
        with store.transaction() as tx:
            tx.execute(
                "UPDATE items SET state = 'claimed', lease_worker = 'by-hand' "
                "WHERE project = ? AND id = 'T0'",
                (P,),
            )
        history = store.all_events(project=P, item="T0")
        assert [e.id for e in history] == _by_scan(store, "T0")
        workers = [e.payload.as_dict()["worker"] for e in history if e.kind == "claimed"]
        assert workers == ["w1", "by-hand"]
    finally:
        store.close()


@pytest.mark.integration
def test_an_upgraded_sqlite_file_with_the_old_claim_trigger_is_refused(
    sqlite_engine: Engine,
) -> None:
    """The claim trigger of migration 8 would log claims the history no longer finds by index;
    after migration 9 it counts as altered, and the repair puts the chaining one back."""
    sqlite_engine.open().close()
    conn = sqlite3.connect(sqlite_engine.url, isolation_level=None)
    conn.execute("DROP TRIGGER items_claimed_event")
    conn.execute(SQLITE_CLAIM_LOG_V8["items_claimed_event"])
    conn.close()
    with pytest.raises(EventsUnprotected) as refused:
        sqlite_engine.open()
    assert refused.value.missing == ("trigger items_claimed_event was altered",)
    repaired = sqlite_engine.open(check_protection=False)
    try:
        assert repaired.restore_protection()
        assert repaired.unprotected() == []
    finally:
        repaired.close()


@pytest.mark.integration
def test_a_projects_log_reads_whole_with_and_without_chained_claims(store: Store) -> None:
    """Reading by project alone takes the history index when none of the project's claims is
    chained, and the log itself when some are; either way every event of it, in order, and
    none of another project's."""
    enqueue(store, P, [item("T0")], max_attempts=9)
    other = "owner/repo:notes"
    for n in range(3):
        store.record_outside_event(other, None, "note", {"n": n})
        lease = claim_next(store, P, "w1", 60)
        assert lease is not None
        release(store, lease)
    everything = store.all_events()
    for project in (P, other):
        expected = [e.id for e in everything if e.project == project]
        assert [e.id for e in store.all_events(project=project)] == expected
        assert [e.id for e in store.events(0, 1000, project=project)] == expected
    assert [e.payload.as_dict()["n"] for e in store.all_events(project=other)] == [0, 1, 2]
    assert sum(e.kind == "claimed" for e in store.all_events(project=P)) == 3


@pytest.mark.integration
def test_workers_polling_an_idle_queue_never_wait_for_the_write_lock(sqlite_engine: Engine) -> None:
    """A claim that finds nothing reads and never writes: idle workers polling a SQLite queue
    do not queue up behind (or hold up) the writers that are busy."""
    opened = sqlite_engine.open()
    enqueue(opened, P, [item("T0")])
    assert claim_next(opened, P, "busy", 60) is not None  # the only item, now taken
    opened.close()
    impatient = SqliteStore(Path(sqlite_engine.url), clock=time.time, busy_timeout_s=0.05)
    writer = sqlite3.connect(sqlite_engine.url, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # another process is writing, for a long while
        for _ in range(3):  # the look that finds nothing, and the polls right after it
            assert claim_next(impatient, P, "idle", 60) is None
        writer.execute("INSERT INTO deps (project, item, dep) VALUES ('x', 'y', 'z')")
        writer.execute("COMMIT")
        enqueue(impatient, P, [item("T0"), item("T1")])  # new work arrives: it is claimed
        lease = claim_next(impatient, P, "idle", 60)
        assert lease is not None and lease.item_id == "T1"
        assert claim_next(impatient, P, "idle", 60) is None
    finally:
        writer.close()
        impatient.close()
