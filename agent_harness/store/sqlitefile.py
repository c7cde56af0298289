"""A SQLite file opened as the store wants it: refused when it is no regular file, switched
to WAL (waiting out other processes doing the same), with its pragmas set."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import time
from pathlib import Path
from typing import Any

from agent_harness.store.errors import StoreError


def open_sqlite(path: Path, where: str, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection to the database file at `path` (made, with its directory, if missing)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(where, f"cannot create its directory: {exc}") from exc
    with contextlib.suppress(OSError):  # nothing there yet: SQLite makes the file
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            # A device or pipe is no database, and SQLite would put its journal beside it.
            what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise StoreError(where, f"{what}; a SQLite database is a file")
    _make_owner_only(path)

    conn = sqlite3.connect(
        path,
        timeout=busy_timeout_s,
        isolation_level=None,  # the store issues BEGIN/COMMIT itself
        check_same_thread=False,  # closed from the owning Store, used by one thread only
    )
    try:
        _use_wal(conn, busy_timeout_s)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error:
        conn.close()
        raise
    _tighten(path)  # a database, as SQLite has just read it: notes.txt never gets here
    return conn


def _make_owner_only(path: Path) -> None:
    """Make a new database readable by its owner alone: it holds every item's history.
    (SQLite gives its -wal and -shm the database's own permissions; an empty file is an empty
    database to it.) A file already there is left for `_tighten`, once SQLite has read it."""
    with contextlib.suppress(OSError):  # there already, made just now by another process
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _tighten(path: Path) -> None:
    """A database an earlier version made readable by others is made its owner's alone, with
    its -wal and -shm, when it is ours. Done by its permissions alone: opening the file here
    and closing it again would drop the locks every other connection of this process holds
    on it (POSIX locks belong to the process, and go with any descriptor's close). What
    cannot be done (a file of another user's) is left as it is."""
    for found in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(OSError):
            held = os.stat(found)
            if held.st_uid == os.getuid() and held.st_mode & 0o077:
                os.chmod(found, stat.S_IMODE(held.st_mode) & 0o700)


def _use_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> None:
    """Switch the file to WAL, waiting out other processes doing the same.

    On a fresh file the switch is a write that starts as a read: when two processes make it at
    once, SQLite refuses one of them at once ("database is locked") instead of calling the busy
    handler, as waiting could deadlock. So the refusal is retried here, with a short growing
    pause, until the busy timeout; the file is WAL after the first switch, and then the pragma
    only reads."""
    deadline = time.monotonic() + busy_timeout_s
    pause = 0.002
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def refuse_foreign_file(store: Any) -> None:
    """Refuse, before a table is made, a SQLite file that holds tables and none of the work
    database's: `work --db audit.sqlite` would otherwise make the audit database a queue (and
    `work verify` call it intact)."""
    with store.transaction(write=False) as tx:
        names = [str(row[0]) for row in tx.all(store.dialect.tables())]
    if not names or "schema_migrations" in names:
        return
    from agent_harness.errors import UsageError

    what = (
        "it is the audit database"
        if "audit_schema" in names
        else (f"it holds tables of its own ({names[0]})")
    )
    raise UsageError(
        f"{store.where} is not a work database: {what}; give --db the harness's database"
    )
