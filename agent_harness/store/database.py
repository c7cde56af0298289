"""The harness database: migrations, an append-only event log (and its JSONL ingest), parking.

One small `Store` speaks to SQLite (the default, one file) or PostgreSQL (fleets across hosts);
other modules write SQL with `?` placeholders through a `Tx` and never see the driver. Events
are written last in their transaction; a reader that follows the log pages in the log's order
(`dialects`), so it never skips an event, though on PostgreSQL ids commit in any order.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_harness.errors import UsageError
from agent_harness.secrets.redact import redact_payload
from agent_harness.secrets.shapes import mask_url
from agent_harness.store import pglink, protection, reading
from agent_harness.store.chain import seal_pending
from agent_harness.store.dbclock import DatabaseClock
from agent_harness.store.dialects import POSTGRES, SQLITE, Dialect
from agent_harness.store.errors import EventsUnprotected, SchemaTooNew, StoreError
from agent_harness.store.events import Event, Payload
from agent_harness.store.migrations import MIGRATIONS, Migration
from agent_harness.store.parked import ParkedKeys
from agent_harness.store.pglink import KEYWORD_DSN, SERVER_ENDED, refuse_keyword_dsn
from agent_harness.store.rebase import LogAhead
from agent_harness.store.sqlitefile import open_sqlite, refuse_foreign_file
from agent_harness.store.writegate import FORKS, FairLock, restore_timeout, take_turn, write_gate

Clock = Callable[[], float]


Row = tuple[Any, ...]


DEFAULT_SQLITE_PATH = Path(".agent-harness") / "harness.sqlite"


_MIGRATION_LOCK_KEY = 0x6A68_6D67


@dataclass(slots=True)
class _PendingEvent:
    ts: float
    project: str
    item: str | None
    kind: str
    payload: dict[str, Any] | str  # a str is the payload already written as JSON
    external_id: str | None


# Constant texts, so each connection's statement cache keeps them prepared.
_INSERT_EVENT = (
    "INSERT INTO events (ts, project, item, kind, payload, external_id) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id"
)


# Without an external id nothing can conflict: every row is new, nothing to read back.
_INSERT_EVENT_PLAIN = "INSERT INTO events (ts, project, item, kind, payload) VALUES (?, ?, ?, ?, ?)"


class Tx:
    """One open transaction. Statements use `?` placeholders on both engines."""

    __slots__ = ("_events", "_sql", "clock", "conn", "dialect", "seal")

    def __init__(self, conn: Any, dialect: Dialect, clock: Clock) -> None:
        self.conn = conn
        self.dialect = dialect
        self.clock = clock
        self._events: list[_PendingEvent] = []
        self._sql: Callable[[str], str] = dialect.sql
        # Whether this commit also seals the events not yet sealed (see event_chain). The claim
        # path turns it off: its one event is sealed by the next write, at a third less cost.
        self.seal = True

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        cursor = self.conn.execute(self._sql(sql), tuple(params))
        return int(cursor.rowcount)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row = self.conn.execute(self._sql(sql), tuple(params)).fetchone()
        return None if row is None else tuple(row)

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return [tuple(r) for r in self.conn.execute(self._sql(sql), tuple(params))]

    def append_event(
        self, project: str, item: str | None, payload: Payload, *, ts: float | None = None
    ) -> None:
        """Queue an event of the harness's own; it is written when the transaction commits, or
        not at all. Its kind is the payload's."""
        self._events.append(
            _PendingEvent(
                ts=self.clock() if ts is None else ts,
                project=project,
                item=item,
                kind=payload.kind,
                # Text from outside in a payload (an agent's last words, a provider's message,
                # a check's output) may hold a credential: the log keeps it masked.
                payload=redact_payload(payload.as_dict()),
                external_id=None,
            )
        )

    def record_outside_event(
        self,
        project: str,
        item: str | None,
        kind: str,
        data: dict[str, Any] | None = None,
        *,
        external_id: str | None = None,
        ts: float | None = None,
    ) -> None:
        """Queue an event from outside the harness (an ingested line, a CI system), of any kind
        and shape; it is read back typed when its kind is known and its fields fit. What it
        says someone said (`OUTSIDE_TEXT` fields) is masked where it holds a credential."""
        self._events.append(
            _PendingEvent(
                ts=self.clock() if ts is None else ts,
                project=project,
                item=item,
                kind=kind,
                payload=redact_payload(dict(data or {})),
                external_id=external_id,
            )
        )

    def append_event_json(
        self, project: str, item: str | None, kind: str, payload_json: str, *, ts: float
    ) -> None:
        """`append_event` for a payload the caller has already written as a JSON object (the
        claim path, where json.dumps costs more than the SQL)."""
        self._events.append(_PendingEvent(ts, project, item, kind, payload_json, None))

    def add_events(self, events: Sequence[_PendingEvent]) -> None:
        self._events.extend(events)

    def flush_events(self) -> int:
        """Write the queued events now; returns how many were new (not seen external ids)."""
        if not self._events:
            return 0
        added = 0
        execute = self.conn.execute
        for event in self._events:
            payload = event.payload
            text = (
                payload
                if isinstance(payload, str)
                else json.dumps(payload, sort_keys=True, default=str)
            )
            if event.external_id is None:
                execute(
                    self._sql(_INSERT_EVENT_PLAIN),
                    (event.ts, event.project, event.item, event.kind, text),
                )
                added += 1
                continue
            row = execute(
                self._sql(_INSERT_EVENT),
                (event.ts, event.project, event.item, event.kind, text, event.external_id),
            ).fetchone()
            added += row is not None
        self._events.clear()
        if added and self.seal:
            seal_pending(self)
        return added


class Store(ParkedKeys):
    """A database opened by URL. Safe to share between threads: each thread has a connection."""

    def __init__(self, url: str, dialect: Dialect, *, clock: Clock, where: str) -> None:
        self.url = url
        self.dialect = dialect
        self.clock = clock
        self.where = where
        self._local = threading.local()
        self._all: list[tuple[Any, threading.Lock]] = []
        self._guard = threading.Lock()
        self._closed = False

    # --- engine specifics -------------------------------------------------------------------

    def _connect(self) -> Any:
        raise NotImplementedError

    def _begin(self, conn: Any, write: bool) -> None:
        conn.execute("BEGIN")

    def _take_turn(self) -> None:
        """Before a write transaction of this thread: its turn, released by `_ended`."""
        self._local.gated = self._turn()

    def _turn(self) -> FairLock | None:
        """Wait for this process's turn to write (engines with one writer at a time) and return
        what to release after it; None when writers need no turns."""
        return None

    def _ended(self) -> None:
        """After COMMIT or ROLLBACK of this thread's transaction."""
        gate = getattr(self._local, "gated", None)
        if gate is not None:
            self._local.gated = None
            self._turn_over(gate)

    def _turn_over(self, gate: FairLock) -> None:
        """Give back the turn `_turn` returned."""
        gate.release()

    def _driver_errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def _describe(self, exc: BaseException) -> str:
        return " ".join(str(exc).split()) or type(exc).__name__

    def _is_broken(self, conn: Any) -> bool:
        return False

    def _lock_migrations(self, tx: Tx) -> None:
        """Taken inside the migration transaction so two processes never migrate at once."""

    # --- connections and transactions -------------------------------------------------------

    def _conn(self) -> tuple[Any, threading.Lock]:
        """This thread's connection and the lock `close()` takes before closing it."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise StoreError(self.where, "the store is closed")
            try:
                conn = self._connect()
            except self._driver_errors() as exc:
                raise StoreError(self.where, f"cannot open: {self._describe(exc)}") from exc
            self._local.conn = conn
            self._local.lock = threading.Lock()
            with self._guard:
                self._all.append((conn, self._local.lock))
        lock: threading.Lock = self._local.lock
        return conn, lock

    def transaction(self, *, write: bool = True) -> AbstractContextManager[Tx]:
        """Run a block atomically: on any error nothing of it is written."""
        return _Transaction(self, write)

    def _discard(self, conn: Any) -> None:
        """Forget and close this thread's connection (the caller holds or owns its lock)."""
        self._local.conn = None
        with self._guard:
            self._all = [(c, lock) for c, lock in self._all if c is not conn]
        try:
            conn.close()
        except self._driver_errors():
            pass  # it is already unusable; a fresh connection is opened on next use

    def forget_thread(self) -> None:
        """Close this thread's connection; call it before a short-lived thread ends."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            with self._local.lock:
                self._discard(conn)

    def statement(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """Run one statement as a transaction of its own; returns its first row, if any.

        Cheaper than `transaction()` by two round trips; for writes that fit in one statement.
        """
        for again in (False, True):
            conn, lock = self._hold()
            try:
                gate = self._turn()
                try:
                    row = conn.execute(self.dialect.sql(sql), tuple(params)).fetchone()
                except self._driver_errors() as exc:
                    lost = self._lost_unused(conn, exc)
                    if self._is_broken(conn):
                        self._discard(conn)
                    if lost and not again:
                        continue  # the server ended it before the statement ran: once more
                    raise StoreError(self.where, self._describe(exc)) from exc
                finally:
                    if gate is not None:
                        self._turn_over(gate)
            finally:
                self._let_go(lock)
            break
        return None if row is None else tuple(row)

    def _lost_unused(self, conn: Any, exc: BaseException) -> bool:
        """Whether `exc` says the server had ended this connection, so what was sent on it
        did not run (and sending it again on a new connection is safe)."""
        return False

    def _hold(self) -> tuple[Any, threading.Lock]:
        """This thread's connection, held so that `close()` elsewhere waits instead of pulling
        it away mid-statement (for SQLite a crash, not an error); the thread is marked in a
        transaction until `_let_go`. A lock already held is either this thread's own
        transaction (refused: nested) or a `close()` elsewhere (waited for), so the common case
        (a claim's statement) asks nothing more."""
        conn, lock = self._conn()
        local = self._local
        if not lock.acquire(blocking=False):
            if getattr(local, "in_tx", False):
                raise RuntimeError("nested transactions are not supported")
            lock.acquire()
        if self._closed:
            lock.release()
            raise StoreError(self.where, "the store is closed")
        local.in_tx = True
        return conn, lock

    def _let_go(self, lock: threading.Lock) -> None:
        self._local.in_tx = False
        lock.release()

    def close(self) -> None:
        """Close every thread's connection, each once no statement is running on it."""
        with self._guard:
            self._closed = True
            conns, self._all = self._all, []
        for conn, lock in conns:
            with lock:
                try:
                    conn.close()
                except self._driver_errors():
                    pass  # closing a broken connection has nothing left to save

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- migrations -------------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        with self.transaction(write=False) as tx:
            row = tx.one("SELECT MAX(version) FROM schema_migrations")
        return int(row[0]) if row and row[0] is not None else 0

    def migrate(
        self, migrations: Sequence[Migration] = MIGRATIONS, table: str = "schema_migrations"
    ) -> int:
        """Apply the migrations this database lacks (the work store's, or another numbered
        list kept in its own `table`, as the audit's); returns how many were applied."""
        known = migrations[-1].version
        with self.transaction() as tx:
            self._lock_migrations(tx)
            tx.execute(
                f"CREATE TABLE IF NOT EXISTS {table} "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            row = tx.one(f"SELECT MAX(version) FROM {table}")
            current = int(row[0]) if row and row[0] is not None else 0
            if current > known:
                raise SchemaTooNew(self.where, current, known)
            postgres = self.dialect.name == "postgresql"
            fresh = [m for m in migrations if m.version > current]
            for migration in fresh:
                for statement in migration.postgres if postgres else migration.sqlite:
                    tx.execute(statement)
                tx.execute(
                    f"INSERT INTO {table} (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, self.clock()),
                )
        return len(fresh)

    # --- protection of the event log ---------------------------------------------------------

    def unprotected(self) -> list[str]:
        """What is missing from the append-only protection: each trigger (or the function they
        call) that is gone, disabled or no longer says what it said; empty when intact."""
        with self.transaction(write=False) as tx:
            return protection.problems(tx)

    def check_protection(self) -> None:
        """Refuse to go on with an event log whose append-only triggers were tampered with, or
        (PostgreSQL) one copied from a server whose transaction ids are ahead of this one's."""
        missing = self.unprotected()
        if missing == [protection.AHEAD]:
            raise LogAhead(self.where, self.repair_command())
        if missing:
            raise EventsUnprotected(self.where, missing, self.repair_command())

    def repair_command(self) -> str:
        target = self.where if self.dialect.name == "sqlite" else "<this database URL>"
        return f"agent-harness work verify --restore --db {target}"

    def restore_protection(self) -> list[str]:
        """Re-create whatever `unprotected()` names; returns what was restored. The history
        itself cannot be repaired, only checked: run `store.chain.verify_chain` after this."""
        problems = self.unprotected()
        if problems:
            with self.transaction() as tx:
                protection.restore(tx)
        return problems

    # --- events -----------------------------------------------------------------------------

    def append_event(
        self, project: str, item: str | None, payload: Payload, *, ts: float | None = None
    ) -> None:
        """Append one event of the harness's own, in a transaction of its own."""
        with self.transaction() as tx:
            tx.append_event(project, item, payload, ts=ts)

    def record_outside_event(
        self,
        project: str,
        item: str | None,
        kind: str,
        data: dict[str, Any] | None = None,
        *,
        external_id: str | None = None,
        ts: float | None = None,
    ) -> bool:
        """Append one event from outside the harness; False when its external id was already
        recorded (see `Tx.record_outside_event`)."""
        with self.transaction() as tx:
            tx.record_outside_event(project, item, kind, data, external_id=external_id, ts=ts)
            return tx.flush_events() == 1

    def events(
        self,
        after_id: int = 0,
        limit: int = 500,
        *,
        project: str | None = None,
        item: str | None = None,
    ) -> list[Event]:
        """Settled events after the event `after_id`, in the log's order: page by passing the
        last id back in, and no event ever appears before a cursor already handed out (see
        `dialects` on the log's order; on SQLite it is simply id order)."""
        return reading.follow(self, after_id, limit, project, item)

    def all_events(self, *, project: str | None = None, item: str | None = None) -> list[Event]:
        """Every matching event visible now, in id order, read page by page (this process's
        own writes included, settled or not: for reading a history, not for following one)."""
        out: list[Event] = []
        after = 0
        while True:
            found = reading.page(self, "id > ?", (after,), 1000, project, item, "id")
            out.extend(found)
            if len(found) < 1000:
                return out
            after = found[-1].id

    # --- meta (the parked keys are `store.parked`) -----------------------------------------

    def get_meta(self, key: str) -> str | None:
        with self.transaction(write=False) as tx:
            row = tx.one("SELECT value FROM meta WHERE key = ?", (key,))
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as tx:
            tx.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )


class SqliteStore(Store):
    def __init__(self, path: Path, *, clock: Clock, busy_timeout_s: float = 60.0) -> None:
        super().__init__(f"sqlite:///{path}", SQLITE, clock=clock, where=str(path))
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._gate_of = (FORKS[0], write_gate(path))

    def _connect(self) -> Any:
        return open_sqlite(self.path, self.where, self.busy_timeout_s)

    def _begin(self, conn: Any, write: bool) -> None:
        if write:
            self._take_turn()
        # IMMEDIATE takes the write lock up front, so two writers never both read-then-write.
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def _turn(self) -> FairLock:
        # Writers take turns here, not in SQLite's busy handler (writegate).
        gate = self._gate()
        try:
            taken = take_turn(gate, self._local.conn, self.busy_timeout_s)
        except sqlite3.Error as exc:
            raise StoreError(self.where, self._describe(exc)) from exc
        if taken is None:
            raise StoreError(self.where, "database is locked")
        self._local.shortened = taken
        return gate

    def _turn_over(self, gate: FairLock) -> None:
        if getattr(self._local, "shortened", False):
            self._local.shortened = False
            restore_timeout(getattr(self._local, "conn", None), self.busy_timeout_s)
        gate.release()

    def _gate(self) -> FairLock:
        """This file's write gate, looked up once per process (a forked child gets its own)."""
        forks, gate = self._gate_of
        if forks != FORKS[0]:
            forks, gate = self._gate_of = (FORKS[0], write_gate(self.path))
        return gate

    def _driver_errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.Error,)


class PostgresStore(Store):
    def __init__(self, url: str, *, clock: Clock, schema: str | None = None) -> None:
        super().__init__(url, POSTGRES, clock=clock, where=mask_url(url))
        self.schema = schema

    def _connect(self) -> Any:
        import psycopg

        conn = pglink.connect(self.url)
        if self.schema is not None:
            from psycopg import sql

            # Two first opens can race past IF NOT EXISTS; the loser's schema exists all the same.
            with contextlib.suppress(psycopg.errors.UniqueViolation):
                conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
                )
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(self.schema)))
        return conn

    def _driver_errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.Error,)

    def server_time(self) -> float:
        """The server's wall clock, on a connection of its own (clocks are read mid-transaction)."""
        import psycopg

        try:
            with pglink.connect(self.url) as conn:
                row = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()
        except psycopg.Error as exc:
            raise StoreError(self.where, self._describe(exc)) from None
        if row is None:
            raise StoreError(self.where, "the server did not say what time it is")
        return float(row[0])

    def _describe(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split())
        return text.replace(self.url, self.where) or type(exc).__name__

    def _is_broken(self, conn: Any) -> bool:
        return bool(conn.broken)

    def _lost_unused(self, conn: Any, exc: BaseException) -> bool:
        # Ended by the server (an administrator, a shutdown, a restart): whatever was running
        # on it was rolled back, so nothing of it was written.
        return bool(conn.broken) and getattr(exc, "sqlstate", None) in SERVER_ENDED

    def _lock_migrations(self, tx: Tx) -> None:
        tx.one(
            "SELECT pg_advisory_xact_lock(?, hashtext(current_schema()))", (_MIGRATION_LOCK_KEY,)
        )


class _Transaction:
    """`Store.transaction()`: the connection held (as in `statement`) and BEGIN .. COMMIT as one
    plain object, as a claim is short enough that generator-based context managers showed in
    its profile."""

    __slots__ = ("_conn", "_lock", "_store", "_tx", "_write")

    def __init__(self, store: Store, write: bool) -> None:
        self._store = store
        self._write = write

    def __enter__(self) -> Tx:
        store = self._store
        for again in (False, True):
            conn, lock = store._hold()
            self._conn = conn
            self._lock = lock
            try:
                store._begin(conn, self._write)
            except BaseException as exc:
                if not again and isinstance(exc, store._driver_errors()) and store._is_broken(conn):
                    # The connection was lost while it sat idle (a server restart, a failover,
                    # an idle timeout): BEGIN did nothing, so once more on a new one.
                    store._discard(conn)
                    self._release()
                    continue
                self._end(exc)
                raise
            break
        self._tx = Tx(conn, store.dialect, store.clock)
        return self._tx

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            try:
                self._tx.flush_events()
                self._conn.execute("COMMIT")
            except BaseException as failed:
                self._end(failed)
                raise
            self._release()
            return
        self._end(exc)

    def _release(self) -> None:
        self._store._ended()
        self._store._let_go(self._lock)

    def _end(self, exc: BaseException) -> None:
        """Roll back after `exc`; a driver error comes out as a StoreError, others as they are."""
        store, conn = self._store, self._conn
        errors = store._driver_errors()
        try:
            # The engine may have rolled back already; the first error is the one that matters.
            with contextlib.suppress(*errors):
                conn.execute("ROLLBACK")
            if isinstance(exc, errors):
                if store._is_broken(conn):
                    store._discard(conn)
                raise StoreError(store.where, store._describe(exc)) from exc
        finally:
            self._release()


def open_store(
    url: str | None = None,
    *,
    clock: Clock = time.time,
    schema: str | None = None,
    migrate: bool = True,
    check_protection: bool = True,
    database_clock: bool | None = None,
) -> Store:
    """Open (and migrate) the database at `url`.

    None means `.agent-harness/harness.sqlite` under the current directory; `sqlite:///path` or
    a bare path is a SQLite file; `postgresql://...` is PostgreSQL, where `schema` (created if
    missing) keeps several harnesses or test runs apart in one database.

    An event log whose append-only triggers were dropped, disabled or altered is refused
    (`EventsUnprotected`) unless `check_protection` is False, which only the repair uses.
    On PostgreSQL, times (leases above all) follow the database's clock (`store.dbclock`), so
    a host whose clock is off takes no live lease; by default only when `clock` is the real one.
    """
    store: Store
    if url is None or url == "":
        store = SqliteStore(Path.cwd() / DEFAULT_SQLITE_PATH, clock=clock)
    elif url.startswith("-") or KEYWORD_DSN.match(url):
        refuse_keyword_dsn(url)
        # `--db --json` takes the next option as the database: never make a file so named.
        raise UsageError(
            f"{url[:80]!r} is no database but an option's name: give a path, sqlite:///path or "
            "postgresql://... (./NAME for a file whose name starts with '-')"
        )
    elif url.startswith(("postgresql://", "postgres://")):
        postgres = PostgresStore(url, clock=clock, schema=schema)
        if database_clock or (database_clock is None and clock is time.time):
            postgres.clock = DatabaseClock(clock, postgres.server_time)
        store = postgres
    elif url.startswith("sqlite:///"):
        store = SqliteStore(Path(url[len("sqlite:///") :]), clock=clock)
    elif "://" in url:
        raise UsageError(
            f"unknown database URL {mask_url(url)!r}: use a path, sqlite:///path or postgresql://..."
        )
    else:
        store = SqliteStore(Path(url), clock=clock)
    try:
        if migrate and store.dialect.name == "sqlite":
            refuse_foreign_file(store)  # a read of an audit database must not make it a queue
        if migrate:
            store.migrate()
        if check_protection:
            store.check_protection()
    except BaseException:
        store.close()
        raise
    return store
