"""A lock every host sharing a store takes in turn: for work on the tracker that two hosts must
not do at once, such as mirroring a plan to issues (two syncs at once each see no issue for an
item and each create one).

On PostgreSQL it is a session advisory lock on a connection of its own, keyed by the schema and
the lock's name; the server drops it when that connection ends, so a host killed while holding
it holds nobody up. On SQLite, whose hosts share one machine, it is an advisory lock on a file
beside the database, which the kernel drops when the process ends.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from agent_harness.store.database import PostgresStore, SqliteStore, Store
from agent_harness.store.errors import StoreError

# Any constant works; it only has to be the same in every process that takes these locks.
HOST_LOCK_KEY = 0x6A68_686C


def plan_sync_lock(repo: str, plan_key: str) -> str:
    """The lock a sync of plan `plan_key` to `repo`'s issues is made under, wherever it runs
    (a run, the HTTP API)."""
    return f"plan sync {repo} {plan_key}"


def reconcile_lock(repo: str) -> str:
    """The lock a reconcile pass and a watch of pull requests of `repo` run under, in any
    process: two at once each saw the same merge as new, and each said so on its issue."""
    return f"reconcile {repo}"


class LockBusy(StoreError):
    """Another process holds the lock, and the caller would not wait."""


class Held:
    """A lock being held, which can be asked whether it still is.

    A file lock lasts as long as its process. A PostgreSQL session lock lasts as long as its
    connection, which the server can end while the process lives on (a restart, a failover, a
    pooler or firewall dropping an idle connection, `pg_terminate_backend`): then another
    process may take the lock, believing the holder dead."""

    def __init__(self, check: Callable[[], bool | None] | None = None) -> None:
        self._check = check

    def still_held(self) -> bool | None:
        """True while the lock is this process's. Where its connection was lost, the lock is
        taken again on a new one if nobody else has it (True); False when another process took
        it meanwhile; None when that cannot be told now (the server does not answer)."""
        return True if self._check is None else self._check()


@contextlib.contextmanager
def held_by_this_host(store: Store, name: str, *, wait: bool = True) -> Iterator[Held]:
    """Hold the lock `name` of `store` for the block, waiting while another host holds it
    (or, with `wait` False, raising LockBusy at once)."""
    if isinstance(store, PostgresStore):
        with _postgres_lock(store, name, wait) as held:
            yield held
    elif isinstance(store, SqliteStore):
        with _file_lock(store.path, name, wait):
            yield Held()
    else:
        yield Held()  # a store no other host can open


_KEY = "SELECT %s::int4, hashtext(current_schema() || ':' || %s)"
# How long an ended session of ours may keep its lock before the server lets it go.
RELEASE_WAIT_S = 5.0


class _PostgresLock:
    """One session lock on a connection of its own (the store's connections run
    transactions), kept so it can be asked after and taken again."""

    def __init__(self, store: PostgresStore, name: str) -> None:
        self.store, self.name = store, name
        self.conn: Any = None
        self.backend: int | None = None  # the server's process holding the lock for us

    def take(self, wait: bool) -> bool:
        import psycopg

        try:
            self.conn = self.store._connect()
        except psycopg.Error as exc:
            raise StoreError(self.store.where, f"cannot open: {self.store._describe(exc)}") from exc
        take = "pg_advisory_lock" if wait else "pg_try_advisory_lock"
        lock = f"SELECT {take}(k.a, k.b)::text FROM ({_KEY}) AS k(a, b)"
        try:
            row = self.conn.execute(lock, (HOST_LOCK_KEY, self.name)).fetchone()
        except psycopg.Error as exc:
            self.close()
            raise StoreError(
                self.store.where, f"lock {self.name}: {self.store._describe(exc)}"
            ) from exc
        if row is not None and row[0] == "false":
            self.close()
            return False
        self.backend = self.conn.info.backend_pid
        return True

    def still_held(self) -> bool | None:
        import psycopg

        if self.conn is not None:
            try:
                self.conn.execute("SELECT 1").fetchone()  # the session, and its lock, lives
                return True
            except psycopg.Error:
                self.close()
        try:
            if self.take(wait=False):  # lost with its connection: taken again if free
                return True
            # Held: by another process, or by our own old session, which the server keeps
            # until it sees the link gone (a link cut on our side only): ended, and taken again.
            if self.backend is not None and self._end_own_old_session():
                return self._take_once_released()
            return False
        except StoreError:
            return None  # the server does not answer now: whether it is held is not known

    def _take_once_released(self) -> bool:
        """Take the lock our ended old session held: the server ends a session on its own time
        (`pg_terminate_backend` only asks), so a loaded server may still hold it a moment."""
        deadline = time.monotonic() + RELEASE_WAIT_S
        while True:
            if self.take(wait=False):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def _end_own_old_session(self) -> bool:
        """End the server's old session of ours if it still holds this lock; True if it did."""
        import psycopg

        holder = (
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l, "
            f"({_KEY}) AS k(a, b) WHERE l.locktype = 'advisory' AND l.granted "
            "AND l.classid::bigint = k.a AND l.pid = %s "
            "AND l.objid::bigint = ((k.b::bigint %% 4294967296) + 4294967296) %% 4294967296"
        )
        try:
            with self.store._connect() as conn:
                row = conn.execute(holder, (HOST_LOCK_KEY, self.name, self.backend)).fetchone()
        except psycopg.Error:
            return False
        return bool(row and row[0])

    def release(self) -> None:
        import psycopg

        # Closing the connection ends the session and with it the lock, but the server ends a
        # session after the client has moved on: a host asking at once could still find the
        # lock held. Unlocking first lets go before this block returns.
        unlock = f"SELECT pg_advisory_unlock(k.a, k.b) FROM ({_KEY}) AS k(a, b)"
        with contextlib.suppress(psycopg.Error, AttributeError):
            self.conn.execute(unlock, (HOST_LOCK_KEY, self.name))
        self.close()

    def close(self) -> None:
        import psycopg

        with contextlib.suppress(psycopg.Error, AttributeError):
            self.conn.close()
        self.conn = None


@contextlib.contextmanager
def _postgres_lock(store: PostgresStore, name: str, wait: bool) -> Iterator[Held]:
    lock = _PostgresLock(store, name)
    if not lock.take(wait):
        raise LockBusy(store.where, f"{name}: held by another process")
    try:
        yield Held(lock.still_held)
    finally:
        lock.release()


@contextlib.contextmanager
def _file_lock(database: Path, name: str, wait: bool) -> Iterator[None]:
    """An advisory lock on a file beside `database` (see `exclusive_file`)."""
    import hashlib

    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    with contextlib.ExitStack() as stack:
        try:  # the lock's own errors, not those of the work done under it
            stack.enter_context(
                exclusive_file(database.with_name(f"{database.name}.lock-{digest}"), wait=wait)
            )
        except FileHeld:
            raise LockBusy(str(database), f"{name}: held by another process") from None
        except OSError as exc:
            raise StoreError(str(database), f"lock {name}: {exc}") from exc
        yield


class FileHeld(Exception):
    """Another process holds the file's lock; `holder` is what it wrote in the file."""

    def __init__(self, path: Path, holder: str) -> None:
        self.path = path
        self.holder = holder
        super().__init__(f"{path} is held ({holder or 'by another process'})")


@contextlib.contextmanager
def exclusive_file(path: Path, *, wait: bool) -> Iterator[IO[str]]:
    """An advisory lock on `path`, open for the holder to write in, and removed when the last
    holder lets go. Without `wait`, a held lock raises `FileHeld` with what its holder wrote.

    The holder removes the file while it still holds it. A process that opened it before then
    and got the lock after finds the name gone or naming another file, and opens it again: the
    lock held is always the one on the file of that name."""
    import fcntl

    while True:
        with open(path, "a+", encoding="utf-8") as handle:
            try:  # released when the file closes, or the process ends
                fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                raise FileHeld(path, handle.read().strip()) from None
            if not _names(path, handle.fileno()):
                continue  # its last holder removed it while this one waited: take the new one
            try:
                yield handle
            finally:
                with contextlib.suppress(OSError):
                    path.unlink()  # still holding it, so nobody takes this file after
            return


def _names(path: Path, fd: int) -> bool:
    """Whether `path` is still the name of the open file `fd`."""
    import os

    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
