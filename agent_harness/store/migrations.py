"""The numbered schema migrations, per engine, and the triggers that keep events append-only.

Released migrations are never edited: a change is a new, higher-numbered migration.
"""

from __future__ import annotations

from dataclasses import dataclass

# The triggers that make the event log append-only, by name, as each engine is given them.
# Released migrations create them; `restore_protection` re-creates the same texts.
SQLITE_GUARDS: dict[str, str] = {
    "events_no_update": """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
               BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END""",
    "events_no_delete": """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
               BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE refused'); END""",
    "event_chain_no_update": """CREATE TRIGGER event_chain_no_update BEFORE UPDATE ON event_chain
               BEGIN SELECT RAISE(ABORT, 'event seals are append-only: UPDATE refused'); END""",
    "event_chain_no_delete": """CREATE TRIGGER event_chain_no_delete BEFORE DELETE ON event_chain
               BEGIN SELECT RAISE(ABORT, 'event seals are append-only: DELETE refused'); END""",
}


# SQLite writes a claim of a pending item in one statement: the UPDATE that takes the item, and
# a trigger, which logs the `claimed` event in the same statement (SQLite has no INSERT inside
# a WITH, which is how PostgreSQL does it). Guarded like the append-only triggers, since a claim
# without its event would make the log disagree with the queue. The payload has the keys, order
# and separators `json.dumps(..., sort_keys=True)` gives, though not always its very text (a
# worker's non-ASCII letters stay as they are; the expiry is written with 17 digits, which read
# back as the very float the lease holds, where Python writes the shortest such digits).
_CLAIMED_PAYLOAD = """'{"attempt": ' || NEW.attempts || ', "expires_at": '
                 || printf('%!.17g', NEW.lease_expires)
                 || ', "from": "pending", "to": "claimed", "token": ' || NEW.fence
                 || ', "worker": ' || json_quote(NEW.lease_worker) || '}'"""

# The trigger as migration 8 made it (released: never edited).
SQLITE_CLAIM_LOG_V8: dict[str, str] = {
    "items_claimed_event": f"""CREATE TRIGGER items_claimed_event AFTER UPDATE OF state ON items
               WHEN OLD.state = 'pending' AND NEW.state = 'claimed'
               BEGIN INSERT INTO events (ts, project, item, kind, payload) VALUES (
                 NEW.updated_at, NEW.project, NEW.id, 'claimed',
                 {_CLAIMED_PAYLOAD}); END""",
}

# Since migration 9 a claim chains the item's claims instead of indexing them: the claim sets
# the item's `last_claim` to the id its event will get (the log's next id: SQLite writes one
# statement at a time), and the trigger writes the event under that id, naming the claim before
# it (`prev`, 0 for none). The item's row is being written anyway, so the chain costs no page,
# where an index entry cost one per claim; `store.reading.of_item` walks it. A pending item
# claimed by other SQL, which leaves `last_claim` as it was, is logged unchained (`prev` NULL),
# and so indexed.
_CLAIMED_CHAINED = "NEW.last_claim > COALESCE(OLD.last_claim, 0)"
SQLITE_CLAIM_LOG: dict[str, str] = {
    "items_claimed_event": f"""CREATE TRIGGER items_claimed_event AFTER UPDATE OF state ON items
               WHEN OLD.state = 'pending' AND NEW.state = 'claimed' AND {_CLAIMED_CHAINED}
               BEGIN INSERT INTO events (id, ts, project, item, kind, payload, prev) VALUES (
                 NEW.last_claim, NEW.updated_at, NEW.project, NEW.id, 'claimed',
                 {_CLAIMED_PAYLOAD}, COALESCE(OLD.last_claim, 0)); END""",
    "items_claimed_unchained": f"""CREATE TRIGGER items_claimed_unchained AFTER UPDATE OF state
               ON items WHEN OLD.state = 'pending' AND NEW.state = 'claimed'
               AND NOT COALESCE({_CLAIMED_CHAINED}, 0)
               BEGIN INSERT INTO events (ts, project, item, kind, payload) VALUES (
                 NEW.updated_at, NEW.project, NEW.id, 'claimed',
                 {_CLAIMED_PAYLOAD}); END""",
}

# What a claim on SQLite sets `last_claim` to: the id the trigger gives its event.
NEXT_EVENT_ID = "(SELECT COALESCE(MAX(id), 0) + 1 FROM events)"

# The first migrations that have SQLITE_CLAIM_LOG_V8 and SQLITE_CLAIM_LOG.
CLAIM_LOG_VERSION = 8
CLAIM_CHAIN_VERSION = 9

# The events `events_item_history` indexes: all but the claims the trigger chained. A query that
# wants that index says this (or `kind <> 'claimed'`, which implies it) among its conditions.
UNCHAINED = "(kind <> 'claimed' OR prev IS NULL)"


PG_REFUSE_FUNCTION = (
    "CREATE OR REPLACE FUNCTION events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN RAISE EXCEPTION 'events are append-only: % refused', TG_OP; END $$"
)


PG_GUARDS: dict[str, str] = {
    "events_no_change": """CREATE TRIGGER events_no_change BEFORE UPDATE OR DELETE ON events
               FOR EACH ROW EXECUTE FUNCTION events_refuse_change()""",
    "events_no_truncate": """CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
               FOR EACH STATEMENT EXECUTE FUNCTION events_refuse_change()""",
    "event_chain_no_change": """CREATE TRIGGER event_chain_no_change BEFORE UPDATE OR DELETE
               ON event_chain FOR EACH ROW EXECUTE FUNCTION events_refuse_change()""",
    "event_chain_no_truncate": """CREATE TRIGGER event_chain_no_truncate BEFORE TRUNCATE
               ON event_chain FOR EACH STATEMENT EXECUTE FUNCTION events_refuse_change()""",
}


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]


# Released migrations are never edited: add a new one instead.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "append-only event log",
        sqlite=(
            """CREATE TABLE events (
                id INTEGER PRIMARY KEY,
                ts REAL NOT NULL,
                project TEXT NOT NULL,
                item TEXT,
                kind TEXT NOT NULL,
                payload TEXT NOT NULL,
                external_id TEXT)""",
            """CREATE UNIQUE INDEX events_external_id ON events (external_id)
               WHERE external_id IS NOT NULL""",
            "CREATE INDEX events_project_item ON events (project, item, id)",
            """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
               BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END""",
            """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
               BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE refused'); END""",
        ),
        postgres=(
            """CREATE TABLE events (
                id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                ts DOUBLE PRECISION NOT NULL,
                project TEXT NOT NULL,
                item TEXT,
                kind TEXT NOT NULL,
                payload TEXT NOT NULL,
                external_id TEXT)""",
            """CREATE UNIQUE INDEX events_external_id ON events (external_id)
               WHERE external_id IS NOT NULL""",
            "CREATE INDEX events_project_item ON events (project, item, id)",
            """CREATE FUNCTION events_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN
                 RAISE EXCEPTION 'events are append-only: % refused', TG_OP;
               END $$""",
            """CREATE TRIGGER events_no_change BEFORE UPDATE OR DELETE ON events
               FOR EACH ROW EXECUTE FUNCTION events_refuse_change()""",
            """CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
               FOR EACH STATEMENT EXECUTE FUNCTION events_refuse_change()""",
        ),
    ),
    Migration(
        2,
        "work queue",
        sqlite=(
            """CREATE TABLE items (
                project TEXT NOT NULL,
                id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                title TEXT NOT NULL,
                content_hash TEXT NOT NULL,
                item_json TEXT NOT NULL,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                max_attempts INTEGER NOT NULL,
                fence INTEGER NOT NULL DEFAULT 0,
                lease_worker TEXT,
                lease_expires REAL,
                not_before REAL,
                reason TEXT,
                blocked_by TEXT,
                flagged_json TEXT,
                updated_at REAL NOT NULL,
                PRIMARY KEY (project, id))""",
            "CREATE INDEX items_ready ON items (project, seq, id) WHERE state = 'pending'",
            "CREATE INDEX items_due ON items (project, not_before) WHERE state = 'waiting'",
            """CREATE INDEX items_leased ON items (project, lease_expires)
               WHERE lease_expires IS NOT NULL""",
            """CREATE TABLE deps (
                project TEXT NOT NULL,
                item TEXT NOT NULL,
                dep TEXT NOT NULL,
                PRIMARY KEY (project, item, dep))""",
            "CREATE INDEX deps_reverse ON deps (project, dep)",
        ),
        postgres=(
            """CREATE TABLE items (
                project TEXT NOT NULL,
                id TEXT NOT NULL,
                seq INTEGER NOT NULL,
                title TEXT NOT NULL,
                content_hash TEXT NOT NULL,
                item_json TEXT NOT NULL,
                state TEXT NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                max_attempts INTEGER NOT NULL,
                fence BIGINT NOT NULL DEFAULT 0,
                lease_worker TEXT,
                lease_expires DOUBLE PRECISION,
                not_before DOUBLE PRECISION,
                reason TEXT,
                blocked_by TEXT,
                flagged_json TEXT,
                updated_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (project, id))""",
            "CREATE INDEX items_ready ON items (project, seq, id) WHERE state = 'pending'",
            "CREATE INDEX items_due ON items (project, not_before) WHERE state = 'waiting'",
            """CREATE INDEX items_leased ON items (project, lease_expires)
               WHERE lease_expires IS NOT NULL""",
            """CREATE TABLE deps (
                project TEXT NOT NULL,
                item TEXT NOT NULL,
                dep TEXT NOT NULL,
                PRIMARY KEY (project, item, dep))""",
            "CREATE INDEX deps_reverse ON deps (project, dep)",
        ),
    ),
    Migration(
        3,
        "parking and meta",
        sqlite=(
            "CREATE TABLE parked (key TEXT PRIMARY KEY, until REAL NOT NULL, reason TEXT NOT NULL)",
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ),
        postgres=(
            """CREATE TABLE parked (key TEXT PRIMARY KEY, until DOUBLE PRECISION NOT NULL,
               reason TEXT NOT NULL)""",
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ),
    ),
    Migration(
        4,
        "event seals (hash chain)",
        sqlite=(
            """CREATE TABLE event_chain (
                event_id INTEGER PRIMARY KEY,
                prev_hash TEXT NOT NULL,
                hash TEXT NOT NULL)""",
            SQLITE_GUARDS["event_chain_no_update"],
            SQLITE_GUARDS["event_chain_no_delete"],
        ),
        postgres=(
            """CREATE TABLE event_chain (
                event_id BIGINT PRIMARY KEY,
                prev_hash TEXT NOT NULL,
                hash TEXT NOT NULL)""",
            PG_GUARDS["event_chain_no_change"],
            PG_GUARDS["event_chain_no_truncate"],
        ),
    ),
    Migration(
        5,
        "reclaims: leases taken back from dead workers, counted apart from attempts",
        sqlite=("ALTER TABLE items ADD COLUMN reclaims INTEGER NOT NULL DEFAULT 0",),
        postgres=("ALTER TABLE items ADD COLUMN reclaims INTEGER NOT NULL DEFAULT 0",),
    ),
    Migration(
        6,
        "registered projects (what `serve --supervise` runs); items counted by state from an index",
        sqlite=(
            """CREATE TABLE projects (
                id TEXT PRIMARY KEY,
                spec_json TEXT NOT NULL,
                control TEXT NOT NULL,
                added_json TEXT NOT NULL DEFAULT '[]',
                roles_json TEXT NOT NULL DEFAULT '{}',
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL)""",
            # Counts by state and a page of one state read the index alone (GET /api/work).
            "CREATE INDEX items_by_state ON items (project, state, seq, id)",
        ),
        postgres=(
            """CREATE TABLE projects (
                id TEXT PRIMARY KEY,
                spec_json TEXT NOT NULL,
                control TEXT NOT NULL,
                added_json TEXT NOT NULL DEFAULT '[]',
                roles_json TEXT NOT NULL DEFAULT '{}',
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL)""",
            "CREATE INDEX items_by_state ON items (project, state, seq, id)",
        ),
    ),
    Migration(
        7,
        "events in commit order without a lock: each event names its transaction (PostgreSQL); "
        "one index fewer written per claim",
        # items_by_state (6) already finds the first pending item in order; items_ready only
        # cost every claim a page (SQLite) or every enqueue an index entry (PostgreSQL).
        sqlite=("DROP INDEX items_ready",),
        postgres=(
            "DROP INDEX items_ready",
            # Existing rows all get this migration's transaction, so they keep their id order.
            "ALTER TABLE events ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id()",
            "CREATE INDEX events_log ON events (tx, id)",
            # A seal names its event's transaction, so the chain is walked in the same order.
            "ALTER TABLE event_chain ADD COLUMN tx xid8 NOT NULL DEFAULT pg_current_xact_id()",
            "ALTER TABLE event_chain ALTER COLUMN tx DROP DEFAULT",
            "CREATE INDEX event_chain_log ON event_chain (tx, event_id)",
        ),
    ),
    Migration(
        CLAIM_LOG_VERSION,
        "a claim in one statement (SQLite logs it by trigger); leases found by state, not by an "
        "index of their expiry",
        # items_leased cost every claim an index entry. Live leases are only ever held in the
        # working states (a handful of items, one per worker), which items_by_state lists.
        sqlite=(
            "DROP INDEX items_leased",
            SQLITE_CLAIM_LOG_V8["items_claimed_event"],
        ),
        postgres=("DROP INDEX items_leased",),
    ),
    Migration(
        CLAIM_CHAIN_VERSION,
        "an item's claims chained instead of indexed: one page fewer per claim (SQLite)",
        sqlite=(
            "ALTER TABLE events ADD COLUMN prev INTEGER",
            "ALTER TABLE items ADD COLUMN last_claim INTEGER",
            "DROP TRIGGER items_claimed_event",
            *SQLITE_CLAIM_LOG.values(),
            "DROP INDEX events_project_item",
            f"CREATE INDEX events_item_history ON events (project, item, id) WHERE {UNCHAINED}",
        ),
        # The same columns, never set (PostgreSQL's claim statement logs its event and keeps the
        # full index), so that one query text reads an item's events on both engines.
        postgres=(
            "ALTER TABLE events ADD COLUMN prev BIGINT",
            "ALTER TABLE items ADD COLUMN last_claim BIGINT",
        ),
    ),
)
