"""Opening the audit database: where it lives, its own migrations, its append-only guards.

The audit database is separate from the work database on purpose: the work database is
disposable (delete it and the queue starts over), the audit record is not. It reuses the
store's `Store` for connections and transactions, with its own numbered migrations
(`agent_harness.audit.schema`) recorded in its own `audit_schema` table.
"""

from __future__ import annotations

import time
from pathlib import Path

from agent_harness.audit.schema import AUDIT_MIGRATIONS, PG_GUARDS, SQLITE_GUARDS
from agent_harness.errors import HarnessError
from agent_harness.store.database import Clock, Store, open_store

AUDIT_FILE = "audit.sqlite"


class AuditUnprotected(HarnessError):
    """The audit database no longer refuses changes to its rows."""

    exit_code = 2


class NotAnAudit(HarnessError):
    """The database named as the audit's holds tables of something else."""

    exit_code = 2


def audit_url(flag: str | None, work_url: str) -> str:
    """--audit-db / AGENT_HARNESS_AUDIT_DB, else `audit.sqlite` beside the work database (or in
    the state directory's place when the work database is PostgreSQL)."""
    if flag:
        return flag
    if work_url.startswith(("postgresql://", "postgres://")):
        return str(Path(".agent-harness") / AUDIT_FILE)
    return str(Path(work_url.removeprefix("sqlite:///")).parent / AUDIT_FILE)


def open_audit(
    url: str, *, clock: Clock = time.time, schema: str | None = None, check: bool = True
) -> Store:
    """Open (and migrate) the audit database at `url` (a path, sqlite:///path or a PostgreSQL
    URL). A database whose guards were dropped or disabled is refused (`AuditUnprotected`)."""
    store = open_store(url, clock=clock, schema=schema, migrate=False, check_protection=False)
    try:
        _refuse_foreign(store)
        migrate(store)
        if check:
            missing = unprotected(store)
            if missing:
                raise AuditUnprotected(
                    f"audit database {store.where}: the record is not protected "
                    f"({', '.join(missing)}); its history may have been changed"
                )
    except BaseException:
        store.close()
        raise
    return store


def _refuse_foreign(store: Store) -> None:
    """Refuse, before a table is made, a database that holds tables and none of the audit's:
    the work database, or any other file given by mistake, would gain the audit's tables (and
    every read answer $0 from them)."""
    with store.transaction(write=False) as tx:
        names = [str(row[0]) for row in tx.all(store.dialect.tables())]
    if not names or "audit_schema" in names:
        return
    what = (
        "the work database" if "schema_migrations" in names else f"tables of its own ({names[0]})"
    )
    raise NotAnAudit(
        f"{store.where} is not an audit database: it holds {what}; the audit keeps a "
        "database of its own (--audit-db, or leave it out for audit.sqlite beside the work one)"
    )


def migrate(store: Store) -> int:
    """Apply the audit migrations this database lacks (kept in `audit_schema`, apart from a
    work store's); returns how many were applied."""
    return store.migrate(AUDIT_MIGRATIONS, table="audit_schema")


def unprotected(store: Store) -> list[str]:
    """Each append-only guard that is missing or disabled, in words; empty when intact."""
    with store.transaction(write=False) as tx:
        if store.dialect.name == "postgresql":
            rows = tx.all(
                "SELECT t.tgname, t.tgenabled FROM pg_trigger t JOIN pg_class c "
                "ON c.oid = t.tgrelid WHERE c.relnamespace = current_schema()::regnamespace "
                "AND NOT t.tgisinternal"
            )
            found = {str(name): str(enabled) for name, enabled in rows}
            problems = [f"trigger {name} is missing" for name in PG_GUARDS if name not in found]
            return problems + [
                f"trigger {name} is disabled" for name in PG_GUARDS if found.get(name) == "D"
            ]
        rows = tx.all("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")
        have = {str(name): " ".join(str(sql).split()) for name, sql in rows}
        return [
            f"trigger {name} is missing" if name not in have else f"trigger {name} was altered"
            for name, text in SQLITE_GUARDS.items()
            if have.get(name) != " ".join(text.split())
        ]
