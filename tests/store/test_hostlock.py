"""The lock hosts sharing a store take in turn (the plan's sync to issues): a second holder waits
for the first, another name does not, and a holder killed with the lock holds nobody up."""

from __future__ import annotations

import multiprocessing
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent_harness.store.hostlock import LockBusy, held_by_this_host
from tests.shared.stores import Engine

pytestmark = pytest.mark.integration

NAME = "plan sync o/r PLAN"
CTX = multiprocessing.get_context("fork")


def _take(engine: Engine, name: str, got: list[str], trying: threading.Event | None = None) -> None:
    store = engine.open()
    try:
        if trying is not None:
            trying.set()
        with held_by_this_host(store, name):
            got.append(f"{name} taken")
    finally:
        store.close()


def test_a_second_host_waits_until_the_first_lets_go(engine: Engine) -> None:
    engine.open().close()
    order: list[str] = []
    trying = threading.Event()
    second = threading.Thread(target=_take, args=(engine, NAME, order, trying), daemon=True)
    first = engine.open()
    try:
        with held_by_this_host(first, NAME):
            order.append("first in")
            second.start()
            assert trying.wait(10)
            second.join(0.5)  # room for a lock that does not hold the second to let it in
            order.append("first out")
        second.join(20)
    finally:
        first.close()
    assert order == ["first in", "first out", f"{NAME} taken"]


def test_another_name_is_not_held_up(engine: Engine) -> None:
    engine.open().close()
    got: list[str] = []
    first = engine.open()
    try:
        with held_by_this_host(first, NAME):
            other = threading.Thread(target=_take, args=(engine, "another", got), daemon=True)
            other.start()
            other.join(20)
            assert got == ["another taken"]
    finally:
        first.close()


def _hold_forever(engine: Engine, holding: Any) -> None:
    import time

    store = engine.open()
    with held_by_this_host(store, NAME):
        holding.set()
        time.sleep(3600)  # killed here, holding the lock


def test_a_host_killed_holding_the_lock_holds_nobody_up(engine: Engine) -> None:
    engine.open().close()
    holding = CTX.Event()
    proc = CTX.Process(target=_hold_forever, args=(engine, holding), daemon=True)
    proc.start()
    try:
        assert holding.wait(30)
        proc.kill()  # SIGKILL
        proc.join(20)
        got: list[str] = []
        taker = threading.Thread(target=_take, args=(engine, NAME, got), daemon=True)
        taker.start()
        taker.join(30)
        assert got == [f"{NAME} taken"]
    finally:
        if proc.is_alive():
            proc.kill()


def test_a_holder_that_would_not_wait_is_told_at_once(engine: Engine) -> None:
    first, second = engine.open(), engine.open()
    try:
        with held_by_this_host(first, NAME, wait=False):
            refused = pytest.raises(LockBusy, match="held by another process")
            with refused, held_by_this_host(second, NAME, wait=False):
                pass  # refused before the block
            with held_by_this_host(second, "another name", wait=False):
                pass  # another name is not held
        with held_by_this_host(second, NAME, wait=False):
            pass  # free again once the first let go
    finally:
        first.close()
        second.close()


def _drop_lock_sessions(engine: Engine, name: str) -> int:
    """End the server session holding lock `name` of `engine`'s schema, as a database restart,
    a failover or a pooler dropping an idle connection would: how many were ended."""
    import psycopg

    from agent_harness.store.hostlock import HOST_LOCK_KEY

    query = (
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
        "AND classid = %s::bigint::oid AND objid::bigint = "
        "((hashtext(%s || ':' || %s)::bigint %% 4294967296) + 4294967296) %% 4294967296"
    )
    with psycopg.connect(engine.url.split("?")[0], autocommit=True) as conn:
        rows = conn.execute(query, (HOST_LOCK_KEY, engine.schema, name)).fetchall()
    return len(rows)


def test_a_lock_lost_with_its_connection_is_taken_again_or_known_to_be_taken(
    pg_engine: Engine,
) -> None:
    first, second = pg_engine.open(), pg_engine.open()
    try:
        with held_by_this_host(first, NAME, wait=False) as held:
            assert held.still_held()
            assert _drop_lock_sessions(pg_engine, NAME) == 1
            assert held.still_held()  # nobody took it meanwhile: taken again
            refused = pytest.raises(LockBusy, match="held by another process")
            with refused, held_by_this_host(second, NAME, wait=False):
                pass  # and it is held again, by the first
            assert _drop_lock_sessions(pg_engine, NAME) == 1
            with held_by_this_host(second, NAME, wait=False):
                # Another process took it while the first had lost it: the first is told.
                assert not held.still_held()
    finally:
        first.close()
        second.close()


def test_a_lock_still_held_by_our_own_cut_off_session_is_taken_back_not_called_taken(
    pg_engine: Engine,
) -> None:
    """The link was cut on our side only: the server keeps our old session, and its lock, until
    it notices. That session is ours to end; the run is not told another took its host id."""
    from agent_harness.store.database import PostgresStore
    from agent_harness.store.hostlock import _PostgresLock

    store = pg_engine.open()
    try:
        assert isinstance(store, PostgresStore)
        lock = _PostgresLock(store, NAME)
        assert lock.take(wait=False)
        old_session = lock.conn  # still open on the server: it holds the lock
        lock.conn = None  # what this process is left with once its side of the link is gone
        assert lock.still_held() is True
        assert lock.conn is not None and lock.conn.info.backend_pid != old_session.info.backend_pid
        lock.release()
    finally:
        store.close()


def test_a_server_that_does_not_answer_leaves_it_unknown_not_taken(db_dir: Path) -> None:
    from agent_harness.store.database import PostgresStore
    from agent_harness.store.hostlock import _PostgresLock

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = PostgresStore(
        f"postgresql://postgres@127.0.0.1:{port}/test?connect_timeout=2", clock=time.time
    )
    lock = _PostgresLock(store, NAME)
    assert lock.still_held() is None  # not False: the run goes on and asks again


def test_sqlites_lock_file_goes_with_its_last_holder_and_still_admits_one_at_a_time(
    tmp_path: Path,
) -> None:
    # The files were left beside the database, one for every lock ever taken.
    from agent_harness.store.database import open_store

    path = tmp_path / "harness.sqlite"
    stores = [open_store(str(path)) for _ in range(3)]
    inside: list[int] = []
    most = [0]
    guard = threading.Lock()

    def take(store: Any, rounds: int) -> None:
        for _ in range(rounds):
            with held_by_this_host(store, NAME):
                with guard:
                    inside.append(1)
                    most[0] = max(most[0], len(inside))
                time.sleep(0.001)
                with guard:
                    inside.pop()

    try:
        threads = [threading.Thread(target=take, args=(s, 40), daemon=True) for s in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert most == [1]  # never two holders, though the file was removed and made again
        with held_by_this_host(stores[0], NAME):
            assert [p.name for p in tmp_path.glob("*.lock-*")] != []
    finally:
        for store in stores:
            store.close()
    assert sorted(p.name for p in tmp_path.iterdir() if ".lock-" in p.name) == []
