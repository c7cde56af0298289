"""Claims per second of the work queue at 1, 4 and 8 processes, on SQLite and PostgreSQL.

Each figure is printed next to a bare `UPDATE ... RETURNING` claim loop on the same engine in
the same run (a plain driver connection, none of the harness's code), and as a ratio to it
(goal: >= 0.5). Not a test: run it by hand,

    .venv/bin/python benchmarks/bench_queue.py [--pg postgresql://postgres@127.0.0.1/test]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from agent_harness.plan.model import WorkItem
from agent_harness.queue.items import enqueue
from agent_harness.queue.leases import claim_next
from agent_harness.store.database import Store, open_store

PROJECT = "bench/queue:plan"
CTX = multiprocessing.get_context("fork")


def _bare_claim_sql(store: Store) -> str:
    lock = store.dialect.skip_locked
    return (
        "UPDATE bare SET state = 'claimed', worker = ? WHERE id = "
        f"(SELECT id FROM bare WHERE state = 'pending' ORDER BY id LIMIT 1{lock}) RETURNING id"
    )


def _bare_connection(url: str, schema: str | None) -> Any:
    """A plain driver connection, with the harness's settings but none of its code."""
    if url.startswith("postgresql://"):
        import psycopg

        conn = psycopg.connect(url, autocommit=True)
        if schema is not None:
            conn.execute(f'SET search_path TO "{schema}"')
        return conn
    conn = sqlite3.connect(url, timeout=60, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _bare_worker(url: str, schema: str | None, worker: str, barrier: Any, out: Any) -> None:
    store = open_store(url, schema=schema, migrate=False)
    sql = store.dialect.sql(_bare_claim_sql(store))
    store.close()
    conn = _bare_connection(url, schema)
    claims = 0
    barrier.wait()
    while conn.execute(sql, (worker,)).fetchone() is not None:  # one autocommit statement
        claims += 1
    out.put(claims)
    conn.close()


def _queue_worker(url: str, schema: str | None, worker: str, barrier: Any, out: Any) -> None:
    store = open_store(url, schema=schema, migrate=False)
    claims = 0
    barrier.wait()
    while claim_next(store, PROJECT, worker, 300) is not None:
        claims += 1
    out.put(claims)
    store.close()


def _run(target: Any, url: str, schema: str | None, procs: int) -> tuple[int, float]:
    barrier = CTX.Barrier(procs + 1)
    out = CTX.Queue()
    workers = [
        CTX.Process(target=target, args=(url, schema, f"w{n}", barrier, out)) for n in range(procs)
    ]
    for proc in workers:
        proc.start()
    barrier.wait()
    started = time.perf_counter()
    total = sum(out.get() for _ in workers)
    elapsed = time.perf_counter() - started
    for proc in workers:
        proc.join()
    return total, elapsed


def _fresh(url: str, schema: str | None, items: int) -> Store:
    store = open_store(url, schema=schema)
    with store.transaction() as tx:
        tx.execute("DROP TABLE IF EXISTS bare")
        tx.execute("CREATE TABLE bare (id INTEGER PRIMARY KEY, state TEXT NOT NULL, worker TEXT)")
        tx.execute("CREATE INDEX bare_state ON bare (state, id)")
        for n in range(items):
            tx.execute("INSERT INTO bare (id, state) VALUES (?, 'pending')", (n,))
        tx.execute("DELETE FROM deps")
        tx.execute("DELETE FROM items")
    enqueue(
        store,
        PROJECT,
        [WorkItem(id=f"T{n}", title="x", line=1, form="heading") for n in range(items)],
    )
    return store


def bench_engine(name: str, url: str, schema: str | None, items: int, rounds: int) -> list[str]:
    lines = []
    for procs in (1, 4, 8):
        best_bare = best_ours = 0.0
        # Alternate the two loops on fresh tables and keep each one's best round, so neither
        # is favoured by running first (cold caches) or by a noisy neighbour on the machine.
        for _ in range(rounds):
            _fresh(url, schema, items).close()
            bare_n, bare_s = _run(_bare_worker, url, schema, procs)
            ours_n, ours_s = _run(_queue_worker, url, schema, procs)
            assert bare_n == items and ours_n == items, (bare_n, ours_n)
            best_bare = max(best_bare, bare_n / bare_s)
            best_ours = max(best_ours, ours_n / ours_s)
        lines.append(
            f"{name:10} {procs:>2} procs  claim_next {best_ours:8.0f}/s  "
            f"bare UPDATE..RETURNING {best_bare:8.0f}/s  ratio {best_ours / best_bare:5.2f}"
        )
        print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pg", help="PostgreSQL URL; omitted means SQLite only")
    parser.add_argument("--items", type=int, default=2000, help="items per run (default 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per figure, best kept")
    parser.add_argument("--no-sqlite", action="store_true", help="measure PostgreSQL only")
    args = parser.parse_args(argv)
    if not args.no_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            bench_engine("sqlite", str(Path(tmp) / "bench.sqlite"), None, args.items, args.rounds)
    if args.pg:
        schema = f"ah_bench_{uuid.uuid4().hex[:8]}"
        try:
            bench_engine("postgresql", args.pg, schema, args.items, args.rounds)
        finally:
            # The default schema holds no harness tables, so there is no event log to check.
            store = open_store(args.pg, migrate=False, check_protection=False)
            with store.transaction() as tx:
                tx.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
