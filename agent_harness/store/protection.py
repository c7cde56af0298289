"""Checking that the append-only triggers are still in place and still say what they said.

A dropped, disabled or rewritten trigger would let history be edited without a trace; a store
that finds one refuses to open (see `Store.check_protection`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from agent_harness.store.migrations import (
    CLAIM_CHAIN_VERSION,
    CLAIM_LOG_VERSION,
    PG_GUARDS,
    PG_REFUSE_FUNCTION,
    SQLITE_CLAIM_LOG,
    SQLITE_CLAIM_LOG_V8,
    SQLITE_GUARDS,
)
from agent_harness.store.rebase import log_ahead, rebase_log

if TYPE_CHECKING:
    from agent_harness.store.database import Tx


# Said when the log's transaction ids lie ahead of the server's (see store.rebase).
AHEAD = "the event log names transactions ahead of this server's (copied from another server?)"


def problems(tx: Tx) -> list[str]:
    """Each append-only guard that is missing, disabled or altered, in words; on PostgreSQL
    also a log whose transaction ids lie ahead of the server's."""
    if tx.dialect.name == "postgresql":
        return _pg_unprotected(tx) + ([AHEAD] if log_ahead(tx) else [])
    found = {str(name): _squash(str(sql)) for name, sql in tx.all(_SQLITE_TRIGGERS)}
    expected = _sqlite_guards(tx)
    return [
        _guard_problem(name, found.get(name))
        for name, text in expected.items()
        if found.get(name) != _squash(text)
    ] + [_STRANGER.format(name=name) for name in sorted(found.keys() - expected.keys())]


def restore(tx: Tx) -> None:
    """Re-create every guard as the migrations made it (a guard that is fine is made again),
    re-basing first a PostgreSQL log whose transaction ids lie ahead of the server's."""
    postgres = tx.dialect.name == "postgresql"
    guards = PG_GUARDS if postgres else _sqlite_guards(tx)
    for name, table in tx.all(_PG_TRIGGERS if postgres else _SQLITE_TRIGGERS):
        if name not in guards:  # a stranger goes; the guards are made again below
            dropped = f"DROP TRIGGER {_quoted(name)}"
            tx.execute(dropped + (f" ON {_quoted(table)}" if postgres else ""))
    for name, table in tx.all(_PG_RULES) if postgres else ():
        tx.execute(f"DROP RULE {_quoted(name)} ON {_quoted(table)}")
    for name in guards:
        table = "event_chain" if name.startswith("event_chain") else "events"
        tx.execute(f"DROP TRIGGER IF EXISTS {name}" + (f" ON {table}" if postgres else ""))
    if postgres:
        if log_ahead(tx):
            rebase_log(tx)  # with the guards down, which refuse the UPDATE it makes
        tx.execute(PG_REFUSE_FUNCTION)
    for text in guards.values():
        tx.execute(text)


def _sqlite_guards(tx: Tx) -> dict[str, str]:
    """The triggers this SQLite file should have: the append-only guards, and the claim's log
    as the latest migration that made it left it."""
    found = tx.one(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    )
    version = tx.one("SELECT MAX(version) FROM schema_migrations") if found else None
    at = 0 if version is None or version[0] is None else int(version[0])
    if at < CLAIM_LOG_VERSION:
        return SQLITE_GUARDS
    claim_log = SQLITE_CLAIM_LOG if at >= CLAIM_CHAIN_VERSION else SQLITE_CLAIM_LOG_V8
    return {**SQLITE_GUARDS, **claim_log}


def _quoted(name: str) -> str:
    """A name as an SQL identifier, whatever it holds (a stranger's name may hold quotes)."""
    return '"' + str(name).replace('"', '""') + '"'


def _squash(text: str) -> str:
    return " ".join(text.split())


def _guard_problem(name: str, found: str | None) -> str:
    return f"trigger {name} is missing" if found is None else f"trigger {name} was altered"


# Every table of the work store: a trigger on any of them (not only on the log) could forge an
# event or change what a write does, so each must be one the harness made. (The audit's tables
# have names of their own, so an audit in the same database is not taken for a stranger.)
_TABLES = (
    "'events', 'event_chain', 'items', 'deps', 'meta', 'parked', 'projects', 'schema_migrations'"
)
_PG_TRIGGERS_OF = (
    "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
    "WHERE c.relnamespace = current_schema()::regnamespace "
    f"AND c.relname IN ({_TABLES}) AND NOT t.tgisinternal"
)
_PG_TRIGGERS = f"SELECT t.tgname, c.relname {_PG_TRIGGERS_OF}"
_PG_TRIGGER_TEXTS = f"SELECT t.tgname, t.tgenabled, pg_get_triggerdef(t.oid) {_PG_TRIGGERS_OF}"
_PG_RULES = (
    "SELECT rulename, tablename FROM pg_rules WHERE schemaname = current_schema() "
    f"AND tablename IN ({_TABLES}) ORDER BY rulename"
)
_SQLITE_TRIGGERS = (  # the second column is its text here, its table on PostgreSQL
    f"SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ({_TABLES})"
)
# One the harness did not make (or an older one left behind) could log a claim twice, forge an
# event or change what a write does.
_STRANGER = "trigger {name} is not one the harness made"


# What each PostgreSQL guard must say: the table, the operations and the level it fires at.
_PG_EXPECTED = {
    "events_no_change": ("events", "DELETE OR UPDATE", "ROW"),
    "events_no_truncate": ("events", "TRUNCATE", "STATEMENT"),
    "event_chain_no_change": ("event_chain", "DELETE OR UPDATE", "ROW"),
    "event_chain_no_truncate": ("event_chain", "TRUNCATE", "STATEMENT"),
}


def _pg_unprotected(tx: Tx) -> list[str]:
    rows = tx.all(_PG_TRIGGER_TEXTS)
    found = {str(name): (str(enabled), _squash(str(text))) for name, enabled, text in rows}
    problems = [_STRANGER.format(name=name) for name in sorted(found.keys() - _PG_EXPECTED.keys())]
    # A rule rewrites a statement before any trigger sees it (`DO INSTEAD NOTHING` on a
    # DELETE from events): the harness makes none, so any is a stranger.
    problems += [f"rule {name} is not one the harness made" for name, _ in tx.all(_PG_RULES)]
    for name, (table, operations, level) in _PG_EXPECTED.items():
        if name not in found:
            problems.append(f"trigger {name} is missing")
            continue
        enabled, text = found[name]
        pattern = (
            rf"CREATE TRIGGER {name} BEFORE {operations} ON (?:\S+\.)?{table} FOR EACH {level} "
            r"EXECUTE FUNCTION (?:\S+\.)?events_refuse_change\(\)"
        )
        if enabled == "D":
            problems.append(f"trigger {name} is disabled")
        elif not re.fullmatch(pattern, text):
            problems.append(f"trigger {name} was altered")
    body = tx.one(
        "SELECT prosrc FROM pg_proc WHERE proname = 'events_refuse_change' "
        "AND pronamespace = current_schema()::regnamespace"
    )
    expected = _squash(PG_REFUSE_FUNCTION.split("$$")[1])
    if body is None:
        problems.append("function events_refuse_change is missing")
    elif _squash(str(body[0])) != expected:
        problems.append("function events_refuse_change was altered")
    return problems
