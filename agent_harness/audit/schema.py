"""The audit database's numbered migrations, per engine, and the triggers that keep it honest.

Every audited table refuses UPDATE. Rollups, deliveries, baselines and ingest runs refuse
DELETE too; raw events refuse a DELETE unless a maintenance run has rolled up the row and
declared its day past retention (`maintenance_runs`), so thinning can only remove what a
rollup already answers for. Released migrations are never edited: add a higher number.
"""

from __future__ import annotations

from agent_harness.store.migrations import Migration

# Tables whose rows are never changed or removed once written.
SEALED_TABLES = ("rollup_cost", "rollup_activity", "deliveries", "baselines", "ingest_runs")

# A raw event may go only when a maintenance run covered it and marked its day thinnable.
_THIN_ALLOWED = (
    "EXISTS (SELECT 1 FROM maintenance_runs m WHERE OLD.id <= m.through_id "
    "AND OLD.day < m.cutoff_day AND OLD.day < m.thin_before)"
)


def _sqlite_guards() -> dict[str, str]:
    guards: dict[str, str] = {}
    for table in (*SEALED_TABLES, "maintenance_runs", "audit_events"):
        guards[f"{table}_no_update"] = (
            f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'audit rows are append-only: UPDATE refused'); END"
        )
    for table in (*SEALED_TABLES, "maintenance_runs"):
        guards[f"{table}_no_delete"] = (
            f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
            f"BEGIN SELECT RAISE(ABORT, 'audit rows are append-only: DELETE refused'); END"
        )
    guards["audit_events_no_delete"] = (
        f"CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events "
        f"WHEN NOT {_THIN_ALLOWED} "
        f"BEGIN SELECT RAISE(ABORT, 'audit events are deleted only when rolled up and past "
        f"retention: DELETE refused'); END"
    )
    return guards


SQLITE_GUARDS = _sqlite_guards()


PG_FUNCTIONS = (
    """CREATE OR REPLACE FUNCTION audit_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION 'audit rows are append-only: % refused', TG_OP; END $$""",
    f"""CREATE OR REPLACE FUNCTION audit_thin_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF TG_OP = 'DELETE' AND {_THIN_ALLOWED} THEN RETURN OLD; END IF;
         RAISE EXCEPTION 'audit events are deleted only when rolled up and past retention: '
           '% refused', TG_OP;
       END $$""",
)


def _pg_guards() -> dict[str, str]:
    guards: dict[str, str] = {}
    for table in (*SEALED_TABLES, "maintenance_runs"):
        guards[f"{table}_no_change"] = (
            f"CREATE TRIGGER {table}_no_change BEFORE UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION audit_refuse_change()"
        )
    for table in (*SEALED_TABLES, "maintenance_runs", "audit_events"):
        guards[f"{table}_no_truncate"] = (
            f"CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION audit_refuse_change()"
        )
    guards["audit_events_no_change"] = (
        "CREATE TRIGGER audit_events_no_change BEFORE UPDATE OR DELETE ON audit_events "
        "FOR EACH ROW EXECUTE FUNCTION audit_thin_only()"
    )
    return guards


PG_GUARDS = _pg_guards()


def _tables(real: str, big_id: str) -> tuple[str, ...]:
    """The raw events and deliveries; `real` and `big_id` are the engine's float and row-id
    types."""
    return (
        f"""CREATE TABLE audit_events (
            id {big_id},
            source_id TEXT NOT NULL UNIQUE,
            source TEXT NOT NULL,
            ts {real} NOT NULL,
            day TEXT NOT NULL,
            project TEXT NOT NULL,
            item TEXT,
            kind TEXT NOT NULL,
            payload TEXT NOT NULL,
            outcome TEXT,
            role TEXT,
            vendor TEXT,
            model TEXT,
            usage_source TEXT,
            tokens_in BIGINT,
            tokens_out BIGINT,
            cache_read BIGINT,
            cache_write BIGINT,
            cost_usd {real},
            cost_reason TEXT,
            price_version TEXT,
            reported_cost_usd {real},
            ingested_at {real} NOT NULL)""",
        "CREATE INDEX audit_events_day ON audit_events (day, id)",
        "CREATE INDEX audit_events_item ON audit_events (project, item, id)",
        f"""CREATE TABLE deliveries (
            id {big_id},
            source_id TEXT NOT NULL UNIQUE,
            project TEXT NOT NULL,
            item TEXT NOT NULL,
            outcome TEXT NOT NULL,
            ts {real} NOT NULL,
            day TEXT NOT NULL,
            claimed_ts {real},
            pr_ts {real},
            attempts INTEGER NOT NULL)""",
    )


def _book_tables(real: str, big_id: str) -> tuple[str, ...]:
    """The tables ingest and maintenance keep their books in, and the kept-forever rollups."""
    return (
        f"""CREATE TABLE ingest_runs (
            id {big_id},
            source TEXT NOT NULL,
            started {real} NOT NULL,
            finished {real} NOT NULL,
            high_water BIGINT NOT NULL,
            added INTEGER NOT NULL,
            duplicates INTEGER NOT NULL,
            skipped INTEGER NOT NULL,
            problems TEXT NOT NULL,
            last_ts {real},
            last_kind TEXT)""",
        "CREATE INDEX ingest_runs_source ON ingest_runs (source, high_water)",
        f"""CREATE TABLE maintenance_runs (
            id {big_id},
            ran_at {real} NOT NULL,
            through_id BIGINT NOT NULL,
            cutoff_day TEXT NOT NULL,
            thin_before TEXT NOT NULL,
            rolled INTEGER NOT NULL,
            thinned INTEGER NOT NULL)""",
        """CREATE TABLE rollup_cost (
            run BIGINT NOT NULL,
            day TEXT NOT NULL,
            project TEXT NOT NULL,
            role TEXT,
            vendor TEXT,
            model TEXT,
            usage_source TEXT NOT NULL,
            cost_reason TEXT,
            price_version TEXT,
            calls BIGINT NOT NULL,
            unknown_calls BIGINT NOT NULL,
            cost_nusd BIGINT,
            reported_calls BIGINT NOT NULL,
            reported_nusd BIGINT,
            tokens_in BIGINT NOT NULL,
            tokens_out BIGINT NOT NULL,
            cache_read BIGINT NOT NULL,
            cache_write BIGINT NOT NULL)""",
        "CREATE INDEX rollup_cost_day ON rollup_cost (day)",
        """CREATE TABLE rollup_activity (
            run BIGINT NOT NULL,
            day TEXT NOT NULL,
            project TEXT NOT NULL,
            events BIGINT NOT NULL,
            reviews BIGINT NOT NULL,
            rejections BIGINT NOT NULL)""",
        "CREATE INDEX rollup_activity_day ON rollup_activity (day)",
        f"""CREATE TABLE baselines (
            label TEXT PRIMARY KEY,
            delivered INTEGER NOT NULL,
            days {real} NOT NULL,
            recorded_at {real} NOT NULL)""",
    )


_PG_ID = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"


# Released migrations are never edited: add a new one instead.
AUDIT_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "audit events, deliveries, rollups, baselines; append-only",
        sqlite=(
            *_tables("REAL", "INTEGER PRIMARY KEY"),
            *_book_tables("REAL", "INTEGER PRIMARY KEY"),
            *SQLITE_GUARDS.values(),
        ),
        postgres=(
            *_tables("DOUBLE PRECISION", _PG_ID),
            *_book_tables("DOUBLE PRECISION", _PG_ID),
            *PG_FUNCTIONS,
            *PG_GUARDS.values(),
        ),
    ),
)
