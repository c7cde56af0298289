"""Several hosts on one database: starting together on a new project, and items another host
still holds when this one runs out of work."""

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
