"""Many worker processes on one queue: every item done exactly once, dead workers recovered.

Counts come from the event log, never from timings.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import signal
import time
from typing import Any

import pytest

from agent_harness.queue.items import enqueue, get_item
from agent_harness.queue.leases import Lease, LeaseLost, claim_next, complete
from agent_harness.store.chain import seal_settled, verify_chain
from agent_harness.store.database import open_store
from tests.shared.stores import Engine, item

pytestmark = pytest.mark.integration

P = "load/test:plan"
CTX = multiprocessing.get_context("fork")


def _start(target: Any, *args: Any) -> Any:
    # Daemonic, so a failed test can never leave pytest waiting on a child at exit.
    proc = CTX.Process(target=target, args=args, daemon=True)
    proc.start()
    return proc


def _work_until_empty(url: str, schema: str | None, worker: str) -> None:
    store = open_store(url, schema=schema)
    try:
        while (lease := claim_next(store, P, worker, 30)) is not None:
            complete(store, lease, "merged")
    finally:
        store.close()


def test_eight_processes_complete_a_thousand_items_exactly_once(engine: Engine) -> None:
    store = engine.open()
    try:
        # A thousand: enough for every process to meet every other at the claim, many times
        # over (the soak and bench_queue take the queue further, outside the suite).
        enqueue(store, P, [item(f"T{n}") for n in range(1000)])
        procs = [_start(_work_until_empty, engine.url, engine.schema, f"w{n}") for n in range(8)]
        for proc in procs:
            proc.join(120)
        assert [p.exitcode for p in procs] == [0] * 8
        events = store.all_events(project=P)
        claims = collections.Counter(e.item for e in events if e.kind == "claimed")
        completions = collections.Counter(e.item for e in events if e.kind == "completed")
        assert len(completions) == 1000 and set(completions.values()) == {1}
        assert len(claims) == 1000 and set(claims.values()) == {1}  # no double claims
        workers = {e.payload.as_dict()["worker"] for e in events if e.kind == "completed"}
        assert len(workers) > 1  # the work really was shared
        ids = [e.id for e in events]
        assert ids == sorted(ids)
        # Paging by cursor in the log's order hands out every event once, none passed over.
        paged, after = [], 0
        while page := store.events(after, 300, project=P):
            paged += [e.id for e in page]
            after = page[-1].id
        assert sorted(paged) == ids
        # Eight writers sealed their events concurrently: one unforked chain covers them all.
        seal_settled(store)  # seals whatever the fast claim path left unsealed
        chain = verify_chain(store)
        assert chain.intact and chain.unsealed == 0 and chain.checked == len(events)
    finally:
        store.close()


def _claim_and_hang(url: str, schema: str | None, out: Any) -> None:
    store = open_store(url, schema=schema)
    lease = claim_next(store, P, "doomed", 1.0)
    out.send(lease)
    time.sleep(60)  # killed long before this ends


def _reclaim(url: str, schema: str | None, out: Any) -> None:
    store = open_store(url, schema=schema)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lease = claim_next(store, P, "heir", 30)
        if lease is not None:
            complete(store, lease, "merged")
            out.send(lease)
            return
        time.sleep(0.05)  # the one real wait: a real lease has to run out on the real clock
    out.send(None)


def test_a_killed_worker_item_is_reclaimed_and_its_late_complete_refused(
    engine: Engine,
) -> None:
    store = engine.open()
    try:
        enqueue(store, P, [item("T0")])
        # One pipe per child: a queue's shared lock could die with the killed child.
        doomed_end, doomed_out = CTX.Pipe(duplex=False)
        doomed = _start(_claim_and_hang, engine.url, engine.schema, doomed_out)
        assert doomed_end.poll(20)
        stale: Lease = doomed_end.recv()
        assert stale.item_id == "T0"
        assert doomed.pid is not None
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.join(10)
        assert doomed.exitcode == -signal.SIGKILL
        heir_end, heir_out = CTX.Pipe(duplex=False)
        heir = _start(_reclaim, engine.url, engine.schema, heir_out)
        assert heir_end.poll(20)
        taken: Lease | None = heir_end.recv()
        heir.join(10)
        # The killed worker's attempt is given back: the heir runs attempt 1 again.
        assert taken is not None and taken.worker == "heir" and taken.attempt == 1
        with pytest.raises(LeaseLost):
            complete(store, stale, "merged")  # the zombie's late report
        record = get_item(store, P, "T0")
        assert record.state == "merged"
        kinds = [e.kind for e in store.all_events(project=P, item="T0")]
        assert kinds == ["enqueued", "claimed", "lease_expired", "claimed", "completed"]
    finally:
        store.close()
