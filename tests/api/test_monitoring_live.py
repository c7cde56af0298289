"""A monitoring server reads a database another process is writing: every answer is a
consistent state, and it follows the writer to the end."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agent_harness.api.app import create_app
from agent_harness.api.context import ApiContext
from agent_harness.store.database import open_store
from tests.api.conftest import AUTH, TOKEN

pytestmark = pytest.mark.acceptance

WRITER = """
import sys
from agent_harness.plan.model import WorkItem
from agent_harness.queue.items import enqueue
from agent_harness.queue.leases import claim_next, complete
from agent_harness.store.database import open_store

store = open_store(sys.argv[1])
items = [WorkItem(id=f"T{n}", title=f"item {n}", line=n, form="heading") for n in range(1, 41)]
enqueue(store, "me/app:PLAN", items)
for _ in items:
    lease = claim_next(store, "me/app:PLAN", "writer/w1", 600)
    complete(store, lease, "pr_open")
store.close()
"""


def test_monitoring_follows_a_database_another_process_writes(db_dir: Path) -> None:
    db = str(db_dir / "shared.sqlite")
    open_store(db).close()  # created and migrated before either side starts
    writer = subprocess.Popen([sys.executable, "-c", WRITER, db])
    store = open_store(db)
    try:
        client = TestClient(create_app(ApiContext(store=store, mode="monitoring"), token=TOKEN))
        seen: list[int] = []
        deadline = time.monotonic() + 60  # a fail-safe for a hung writer, not a measurement
        while time.monotonic() < deadline:
            summary = client.get("/api/summary", headers=AUTH).json()
            counts = summary["counts"]
            assert sum(counts.values()) in (0, 40)  # never a half-written enqueue
            seen.append(counts.get("pr_open", 0))
            if seen[-1] == 40 and writer.poll() is not None:
                break
        assert writer.wait(timeout=60) == 0
        assert seen == sorted(seen) and seen[-1] == 40  # it only ever moved forward
        work = client.get("/api/work", params={"state": "pr_open", "limit": 5}, headers=AUTH)
        assert work.json()["total"] == 40
        last = client.get("/api/events", params={"after": 0, "limit": 1000}, headers=AUTH).json()
        assert len(last["events"]) == 120  # enqueued, claimed and completed for each item
    finally:
        store.close()
        if writer.poll() is None:
            writer.kill()
