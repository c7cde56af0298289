"""The claim's hot path: its hand-written event payload and the plain-object transaction."""

from __future__ import annotations

import json
import math

import pytest

from agent_harness.queue.items import ItemState, enqueue
from agent_harness.queue.leases import _claimed_json, claim_next
from agent_harness.store.database import Store, StoreError
from agent_harness.testing.clock import FakeClock
from tests.shared.stores import item

P = "owner/repo:plan"


@pytest.mark.unit
@pytest.mark.parametrize("worker", ["w1", "host-1/état", 'quote" back\\slash', "tab\tnl\n", "💥"])
@pytest.mark.parametrize(
    "expires", [1_800_000_060.0, 0.1, 1e300, 1712345678.1234567, 5, -0.0, math.inf, math.nan]
)
def test_the_claimed_payload_is_what_json_dumps_writes(worker: str, expires: float) -> None:
    for was in (ItemState.PENDING, ItemState.WAITING, "review"):
        expected = {
            "from": was,
            "to": ItemState.CLAIMED,
            "worker": worker,
            "attempt": 2,
            "token": 17,
            "expires_at": expires,
        }
        written = _claimed_json(was, worker, 2, 17, expires)
        assert written == json.dumps(expected, sort_keys=True, default=str)


@pytest.mark.integration
def test_a_claim_records_its_lease_in_the_event(store: Store, clock: FakeClock) -> None:
    clock.advance(0.123456789)
    enqueue(store, P, [item("T0")])
    lease = claim_next(store, P, "wörker", 60.5)
    assert lease is not None
    event = store.all_events(project=P, item="T0")[-1]
    assert event.kind == "claimed" and event.ts == clock.now
    assert event.payload.as_dict() == {
        "from": "pending",
        "to": "claimed",
        "worker": "wörker",
        "attempt": 1,
        "token": lease.token,
        "expires_at": lease.expires_at,
    }


@pytest.mark.integration
def test_an_error_in_a_transaction_writes_nothing_and_frees_the_connection(store: Store) -> None:
    with pytest.raises(ValueError), store.transaction() as tx:
        tx.execute("INSERT INTO meta (key, value) VALUES ('a', '1')")
        tx.record_outside_event(P, None, "never")
        raise ValueError("boom")
    assert store.get_meta("a") is None and store.events() == []
    with pytest.raises(StoreError), store.transaction() as tx:
        tx.execute("INSERT INTO no_such_table VALUES (1)")
    with pytest.raises(RuntimeError, match="nested"), store.transaction(), store.transaction():
        pass
    store.set_meta("a", "2")  # neither left the connection held nor a transaction open
    assert store.get_meta("a") == "2"


@pytest.mark.integration
def test_a_failing_commit_rolls_back_and_is_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError), store.transaction() as tx:
        tx.execute("INSERT INTO meta (key, value) VALUES ('b', '1')")
        # The event is written at commit; an external id of the wrong type cannot be bound.
        tx.record_outside_event(P, None, "bad", external_id=object())  # type: ignore[arg-type]
    assert store.get_meta("b") is None
    store.set_meta("b", "ok")
    assert store.get_meta("b") == "ok"


@pytest.mark.integration
def test_a_closed_store_refuses_transactions(store: Store) -> None:
    store.close()
    with pytest.raises(StoreError, match="closed"), store.transaction():
        pass
