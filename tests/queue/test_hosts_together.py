"""Several hosts on one database: starting together on a new project, and items another host
still holds when this one runs out of work; a host killed holding an item, whose item another
host takes over once its lease lapses, and does once."""

from __future__ import annotations

import collections
import multiprocessing
from typing import Any

import pytest

from agent_harness.queue.items import enqueue, list_items
from agent_harness.store.database import open_store
from tests.shared.stores import Engine, item

pytestmark = pytest.mark.integration

P = "hosts/test:plan"
CTX = multiprocessing.get_context("fork")


def _enqueue_at(url: str, schema: str | None, go: Any, out: Any) -> None:
    store = open_store(url, schema=schema)
    try:
        go.wait(20)  # every host starts at the same moment, on an empty queue
        result = enqueue(
            store, P, [item(f"T{n}", *([f"T{n - 1}"] if n else [])) for n in range(30)]
        )
        out.put(("ok", len(result.added)))
    except Exception as exc:  # the failure itself is what the test reports
        out.put(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        store.close()


def test_hosts_starting_together_on_a_new_project_all_enqueue_without_error(
    engine: Engine,
) -> None:
    engine.open().close()  # migrated once, as a first run would
    go, out = CTX.Event(), CTX.Queue()
    procs = [CTX.Process(target=_enqueue_at, args=(engine.url, engine.schema, go, out), daemon=True)
             for _ in range(8)]  # fmt: skip
    for proc in procs:
        proc.start()
    go.set()
    results = [out.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(20)
    assert [kind for kind, _ in results] == ["ok"] * 8, results
    assert sum(added for _, added in results) == 30  # each item added by exactly one host
    store = engine.open()
    try:
        assert len(list_items(store, P)) == 30
        enqueued = collections.Counter(
            e.item for e in store.all_events(project=P) if e.kind == "enqueued"
        )
        assert set(enqueued.values()) == {1}
    finally:
        store.close()


def _host(url: str, schema: str | None, name: str, go: Any, out: Any) -> None:
    """A host's worker: claim and complete until nothing is left (a host named h3 claims one
    item and then hangs, holding it, until the test kills it)."""
    import time

    from agent_harness.queue import leases

    store = open_store(url, schema=schema)
    try:
        go.wait(20)
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 8.0:  # a fail-safe, not a measurement
            lease = leases.claim_next(store, P, f"{name}/w1", 1.0)
            if lease is None:
                if all(r.state.value == "pr_open" for r in list_items(store, P)):
                    break
                time.sleep(0.05)
                continue
            idle_since = time.monotonic()
            if name == "h3":
                out.put(("holding", lease.item_id))
                time.sleep(3600)  # dies here, holding the lease
            leases.complete(store, lease)
            out.put(("done", lease.item_id))
        out.put(("finished", name))
    finally:
        store.close()


def test_a_killed_hosts_items_are_taken_over_after_its_lease_and_done_once(
    engine: Engine,
) -> None:

    store = engine.open()
    try:
        enqueue(store, P, [item(f"T{n}") for n in range(12)])
    finally:
        store.close()
    # A queue per host: a host killed while writing to a shared queue would hold its lock.
    # h3 claims first, so it surely holds an item when it dies; then h1 and h2 start.
    gates = {"h3": CTX.Event(), "h1": CTX.Event(), "h2": CTX.Event()}
    outs = {name: CTX.Queue() for name in gates}
    procs = {
        name: CTX.Process(
            target=_host, args=(engine.url, engine.schema, name, gates[name], outs[name])
        )
        for name in gates
    }
    for proc in procs.values():
        proc.daemon = True
        proc.start()
    gates["h3"].set()
    kind, held = outs["h3"].get(timeout=60)
    assert kind == "holding"  # h3 took an item ...
    procs["h3"].kill()  # ... and died with it (SIGKILL)
    gates["h1"].set()
    gates["h2"].set()
    done: list[str] = []
    for name in ("h1", "h2"):
        while True:
            kind, what = outs[name].get(timeout=60)
            if kind == "finished":
                break
            done.append(what)
    for proc in procs.values():
        proc.join(10)
    assert sorted(done) == sorted(f"T{n}" for n in range(12))  # every item done exactly once
    store = engine.open()
    try:
        claims = [e for e in store.all_events(project=P) if e.kind == "claimed" and e.item == held]
        assert str(claims[0].payload.worker).startswith("h3/")
        assert len(claims) == 2  # h3's claim, then one other host's after the lease lapsed
    finally:
        store.close()
