"""Latency of GET /api/summary and GET /api/work at 10,000 items and 1,000,000 events, against a
bare FastAPI route returning a constant on the same server (same guard, same uvicorn), as
p50 and p99 ratios (goal: p99 under 10x the bare route). Not a test: run it by hand,

    .venv/bin/python benchmarks/bench_api.py [--items 10000] [--events 1000000] [--requests 400]

The database is built once in a temporary directory (a million events take a while to write);
`--events 100000` gives a quicker first look.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from agent_harness.plan.model import WorkItem
from agent_harness.queue.items import enqueue
from agent_harness.queue.leases import claim_next
from agent_harness.store.database import open_store

PROJECT = "bench/api:PLAN"
TOKEN = "bench-token-0123456789"
CTX = multiprocessing.get_context("fork")


def build(db: Path, items: int, events: int) -> None:
    store = open_store(str(db))
    work = [WorkItem(id=f"T{n}", title=f"item {n}", line=n, form="heading") for n in range(items)]
    enqueue(store, PROJECT, work)
    for n in range(50):
        claim_next(store, PROJECT, f"bench/w{n}", 600 if n % 2 else -1)  # half live, half stale
    store.close()
    have = sqlite3.connect(db).execute("SELECT COUNT(*) FROM events").fetchone()[0]
    payload = json.dumps({"from": "pending", "to": "claimed", "worker": "bench/w1", "attempt": 1})
    rows = (
        (time.time(), PROJECT, f"T{n % items}", "claimed", payload) for n in range(events - have)
    )
    conn = sqlite3.connect(db)
    with conn:  # plain rows: the benchmark reads them, nothing verifies their seals
        conn.executemany(
            "INSERT INTO events (ts, project, item, kind, payload) VALUES (?, ?, ?, ?, ?)", rows
        )
    conn.close()


def serve(db: Path, port: int) -> None:
    import uvicorn

    from agent_harness.api.app import create_app
    from agent_harness.api.context import ApiContext

    app = create_app(ApiContext(store=open_store(str(db)), mode="monitoring"), token=TOKEN)

    @app.get("/bench/constant")
    def constant() -> dict[str, int]:
        return {"ok": 1}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def measure(client: httpx.Client, path: str, n: int) -> list[float]:
    for _ in range(20):  # warm: connections, statement caches, page cache
        client.get(path).raise_for_status()
    took = []
    for _ in range(n):
        start = time.perf_counter()
        client.get(path).raise_for_status()
        took.append(time.perf_counter() - start)
    return took


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=400)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-api-") as scratch:
        db = Path(scratch) / "harness.sqlite"
        began = time.monotonic()
        build(db, args.items, args.events)
        print(f"built {args.items} items, {args.events} events in {time.monotonic() - began:.0f} s")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = CTX.Process(target=serve, args=(db, port), daemon=True)
        server.start()
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers) as client:
            while True:
                try:
                    client.get("/healthz")
                    break
                except httpx.ConnectError:
                    time.sleep(0.05)
            results: dict[str, Any] = {}
            for path in ("/bench/constant", "/api/summary", f"/api/work?project={PROJECT}"):
                results[path] = measure(client, path, args.requests)
        server.terminate()
    bare = results["/bench/constant"]
    b50, b99 = pct(bare, 0.5), pct(bare, 0.99)
    print(f"{'route':<36} {'p50 ms':>8} {'p99 ms':>8} {'p50 x':>7} {'p99 x':>7}")
    for path, took in results.items():
        p50, p99 = pct(took, 0.5), pct(took, 0.99)
        print(f"{path:<36} {p50 * 1e3:8.2f} {p99 * 1e3:8.2f} {p50 / b50:7.1f} {p99 / b99:7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
