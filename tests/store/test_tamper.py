"""Tampering with the event history: dropped or altered triggers are refused on open, and every
edit, deletion or insertion made behind the triggers' back is named by the hash chain."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_harness.cli import main
from agent_harness.store.chain import seal_settled, verify_chain
from agent_harness.store.database import Store, open_store
from agent_harness.store.errors import EventsUnprotected
from agent_harness.store.migrations import MIGRATIONS
from tests.shared.stores import Engine

pytestmark = pytest.mark.integration


@contextmanager
def raw(engine: Engine) -> Iterator[Any]:
    """A plain connection, as someone editing the database by hand would use."""
    if engine.name == "sqlite":
        conn = sqlite3.connect(engine.url, isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()
        return
    import psycopg

    with psycopg.connect(engine.url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{engine.schema}"')
        yield conn


def history(store: Store, n: int = 6) -> None:
    for index in range(n):
        store.record_outside_event("octo/app:PLAN", "T1", "note", {"n": index})
    # On PostgreSQL an event is sealed once no older transaction is in flight (another test's,
    # say); wait for that, so every event of the history is sealed.
    seal_settled(store)


def drop_update_guard(engine: Engine, conn: Any) -> None:
    if engine.name == "sqlite":
        conn.execute("DROP TRIGGER events_no_update")
    else:
        conn.execute("DROP TRIGGER events_no_change ON events")


def drop_delete_guard(engine: Engine, conn: Any) -> None:
    if engine.name == "sqlite":
        conn.execute("DROP TRIGGER events_no_delete")
    else:
        conn.execute("DROP TRIGGER events_no_change ON events")


def test_an_untouched_history_holds(store: Store) -> None:
    history(store)
    report = verify_chain(store)
    assert report.intact and report.checked == 6 and report.unsealed == 0


def test_a_dropped_trigger_is_refused_on_open_with_the_repair_command(
    engine: Engine, store: Store
) -> None:
    history(store)
    store.close()
    with raw(engine) as conn:
        drop_update_guard(engine, conn)
    with pytest.raises(EventsUnprotected) as refused:
        engine.open()
    assert refused.value.exit_code == 2
    assert "is missing" in refused.value.message
    assert "agent-harness work verify --restore" in refused.value.message


def test_an_event_edited_behind_the_triggers_is_named(engine: Engine, store: Store) -> None:
    history(store)
    store.close()
    with raw(engine) as conn:
        drop_update_guard(engine, conn)
        conn.execute("UPDATE events SET payload = ? WHERE id = 3".replace("?", "'{\"n\": 99}'"))
    repaired = open_store(engine.url, schema=engine.schema, check_protection=False)
    try:
        assert repaired.restore_protection()
        assert repaired.unprotected() == []
        report = verify_chain(repaired)
        assert not report.intact
        assert [(b.event_id, b.problem) for b in report.breaks] == [
            (3, "was changed after it was written")
        ]
    finally:
        repaired.close()
    engine.open().close()  # protected again: opens without complaint, history still flagged


def test_a_deleted_event_and_a_slipped_in_event_are_named(engine: Engine, store: Store) -> None:
    history(store)
    store.close()
    with raw(engine) as conn:
        drop_delete_guard(engine, conn)
        conn.execute("DELETE FROM events WHERE id = 2")
        # A forged row slipped between two sealed ones, with an id below the last seal.
        conn.execute(
            "INSERT INTO events (id, ts, project, item, kind, payload) "
            "VALUES (2, 1.0, 'octo/app:PLAN', 'T1', 'review', '{\"approved\": true}')"
            if engine.name == "sqlite"
            else "INSERT INTO events (id, ts, project, item, kind, payload) OVERRIDING SYSTEM "
            "VALUE VALUES (2, 1.0, 'octo/app:PLAN', 'T1', 'review', '{\"approved\": true}')"
        )
        conn.execute("DELETE FROM events WHERE id = 5")
    store = open_store(engine.url, schema=engine.schema, check_protection=False)
    try:
        problems = {(b.event_id, b.problem) for b in verify_chain(store).breaks}
    finally:
        store.close()
    assert problems == {(2, "was changed after it was written"), (5, "was deleted")}


def test_a_trigger_replaced_by_one_that_does_nothing_is_refused(engine: Engine) -> None:
    engine.open().close()
    with raw(engine) as conn:
        if engine.name == "sqlite":
            conn.execute("DROP TRIGGER events_no_delete")
            conn.execute(
                "CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT 1; END"
            )
            expected = "trigger events_no_delete was altered"
        else:
            conn.execute(
                "CREATE OR REPLACE FUNCTION events_refuse_change() RETURNS trigger "
                "LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$"
            )
            expected = "function events_refuse_change was altered"
    with pytest.raises(EventsUnprotected) as refused:
        engine.open()
    assert expected in refused.value.missing


@pytest.mark.postgres
@pytest.mark.parametrize("engine", ["postgres"], indirect=True)  # SQLite cannot disable one
def test_a_disabled_trigger_is_refused(engine: Engine) -> None:
    engine.open().close()
    with raw(engine) as conn:
        conn.execute("ALTER TABLE events DISABLE TRIGGER events_no_truncate")
    with pytest.raises(EventsUnprotected) as refused:
        engine.open()
    assert refused.value.missing == ("trigger events_no_truncate is disabled",)


def test_a_history_from_before_the_chain_is_sealed_on_the_next_write(db_dir: Path) -> None:
    path = db_dir / "old.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at REAL NOT NULL)"
    )
    for migration in MIGRATIONS[:3]:
        for statement in migration.sqlite:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO schema_migrations VALUES (?, ?, 0)", (migration.version, migration.name)
        )
    for index in range(3):
        conn.execute(
            "INSERT INTO events (ts, project, item, kind, payload) "
            "VALUES (?, 'p', 'T1', 'note', ?)",
            (1000.0 + index, json.dumps({"n": index})),
        )
    conn.close()
    store = open_store(str(path))
    try:
        assert verify_chain(store).unsealed == 3
        store.record_outside_event("p", "T1", "note", {"n": 3})
        report = verify_chain(store)
        assert report.intact and report.checked == 4 and report.unsealed == 0
    finally:
        store.close()


def test_work_verify_and_show_tell_the_truth_from_the_cli(
    sqlite_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent_harness.plan.model import WorkItem
    from agent_harness.queue.items import enqueue

    store = sqlite_engine.open()
    enqueue(store, "octo/app:PLAN", [WorkItem(id="T1", title="t", line=1, form="heading")])
    history(store, 3)
    store.close()
    db = ["--db", sqlite_engine.url]
    assert main(["work", "verify", *db]) == 0
    assert "the history holds" in capsys.readouterr().out

    with raw(sqlite_engine) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("UPDATE events SET kind = 'approved' WHERE kind = 'note' AND id = 3")
    assert main(["work", "show", "T1", *db]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "work verify --restore" in err[0]

    assert main(["work", "verify", "--restore", *db]) == 1
    out = capsys.readouterr().out
    assert "restored: trigger events_no_update is missing" in out
    assert "broken: event 3: was changed after it was written" in out

    assert main(["work", "show", "T1", *db]) == 1
    captured = capsys.readouterr()
    assert "warning: this history does not hold: event 3" in captured.err


def test_the_last_sealed_event_deleted_is_named_and_writing_goes_on(
    engine: Engine, store: Store
) -> None:
    history(store)
    store.close()
    with raw(engine) as conn:
        drop_delete_guard(engine, conn)
        conn.execute("DELETE FROM events WHERE id = (SELECT MAX(event_id) FROM event_chain)")
    store = open_store(engine.url, schema=engine.schema, check_protection=False)
    try:
        store.record_outside_event("octo/app:PLAN", "T1", "note", {"n": 6})  # not refused
        seal_settled(store)
        report = verify_chain(store)
    finally:
        store.close()
    # SQLite hands the freed id 6 to the next event, which then fails the old seal of 6.
    gone = "was changed after it was written" if engine.name == "sqlite" else "was deleted"
    assert [(b.event_id, b.problem) for b in report.breaks] == [(6, gone)]
    assert report.unsealed == 0


@pytest.mark.parametrize("table", ["items", "events", "projects"])
def test_a_trigger_the_harness_did_not_make_is_refused_and_the_repair_drops_it(
    engine: Engine, table: str
) -> None:
    # Beside guards that are all intact, a trigger slipped in could forge events or undo a
    # claim; its name is made to break naive SQL quoting.
    engine.open().close()
    name = 'sneaky"; --'
    quoted = '"' + name.replace('"', '""') + '"'
    with raw(engine) as conn:
        if engine.name == "sqlite":
            conn.execute(
                f"CREATE TRIGGER {quoted} AFTER INSERT ON {table} BEGIN "
                "INSERT INTO events (ts, project, kind, payload) "
                "SELECT 0, 'x', 'forged', '{}' WHERE 0; END"
            )
        else:
            conn.execute(
                "CREATE FUNCTION nothing() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RETURN NEW; END $$"
            )
            conn.execute(
                f"CREATE TRIGGER {quoted} AFTER INSERT ON {table} FOR EACH ROW "
                "EXECUTE FUNCTION nothing()"
            )
    with pytest.raises(EventsUnprotected) as refused:
        engine.open()
    assert refused.value.missing == (f"trigger {name} is not one the harness made",)
    _repair_and_check(engine)
    engine.open().close()


@pytest.mark.postgres
@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
def test_a_rule_that_swallows_deletes_from_the_log_is_refused_and_dropped(engine: Engine) -> None:
    # A rule rewrites the DELETE before the guard trigger sees it: a deleted event would then
    # vanish without the trigger's refusal, or be kept while the deleter thinks it is gone.
    engine.open().close()
    with raw(engine) as conn:
        conn.execute('CREATE RULE "quiet" AS ON DELETE TO events DO INSTEAD NOTHING')
    with pytest.raises(EventsUnprotected) as refused:
        engine.open()
    assert refused.value.missing == ("rule quiet is not one the harness made",)
    _repair_and_check(engine)


def _repair_and_check(engine: Engine) -> None:
    """`work verify --restore`'s repair, and nothing left to refuse after it."""
    repaired = engine.open(check_protection=False)
    try:
        assert repaired.restore_protection()
        assert repaired.unprotected() == []
    finally:
        repaired.close()
