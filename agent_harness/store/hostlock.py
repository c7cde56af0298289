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
from collections.abc import Iterator
from pathlib import Path

from agent_harness.store.database import PostgresStore, SqliteStore, Store
from agent_harness.store.errors import StoreError

# Any constant works; it only has to be the same in every process that takes these locks.
HOST_LOCK_KEY = 0x6A68_686C


def plan_sync_lock(repo: str, plan_key: str) -> str:
    """The lock a sync of plan `plan_key` to `repo`'s issues is made under, wherever it runs
    (a run, the HTTP API)."""
    return f"plan sync {repo} {plan_key}"


class LockBusy(StoreError):
    """Another process holds the lock, and the caller would not wait."""


@contextlib.contextmanager
def held_by_this_host(store: Store, name: str, *, wait: bool = True) -> Iterator[None]:
    """Hold the lock `name` of `store` for the block, waiting while another host holds it
    (or, with `wait` False, raising LockBusy at once)."""
    if isinstance(store, PostgresStore):
        with _postgres_lock(store, name, wait):
            yield
    elif isinstance(store, SqliteStore):
        with _file_lock(store.path, name, wait):
            yield
    else:
        yield  # a store no other host can open


@contextlib.contextmanager
def _postgres_lock(store: PostgresStore, name: str, wait: bool) -> Iterator[None]:
    import psycopg

    try:
        conn = store._connect()  # its own session: the store's connections run transactions
    except psycopg.Error as exc:
        raise StoreError(store.where, f"cannot open: {store._describe(exc)}") from exc
    try:
        key = "SELECT %s::int4, hashtext(current_schema() || ':' || %s)"
        take = "pg_advisory_lock" if wait else "pg_try_advisory_lock"
        lock = f"SELECT {take}(k.a, k.b)::text FROM ({key}) AS k(a, b)"
        try:
            row = conn.execute(lock, (HOST_LOCK_KEY, name)).fetchone()
        except psycopg.Error as exc:
            raise StoreError(store.where, f"lock {name}: {store._describe(exc)}") from exc
        if row is not None and row[0] == "false":
            raise LockBusy(store.where, f"{name}: held by another process")
        try:
            yield
        finally:
            # Closing the connection ends the session and with it the lock, but the server ends
            # a session after the client has moved on: a host asking at once could still find
            # the lock held. Unlocking first lets go before this block returns.
            unlock = f"SELECT pg_advisory_unlock(k.a, k.b) FROM ({key}) AS k(a, b)"
            with contextlib.suppress(psycopg.Error):
                conn.execute(unlock, (HOST_LOCK_KEY, name))
    finally:
        with contextlib.suppress(psycopg.Error):
            conn.close()


@contextlib.contextmanager
def _file_lock(database: Path, name: str, wait: bool) -> Iterator[None]:
    import fcntl
    import hashlib

    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    path = database.with_name(f"{database.name}.lock-{digest}")
    try:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise StoreError(str(database), f"lock {name}: {exc}") from exc
    with handle:
        try:  # released when the file closes, or the process ends
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockBusy(str(database), f"{name}: held by another process") from None
        yield
