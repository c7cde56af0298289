"""The audit's two measured promises, each as a ratio to a bare baseline in the same run.

1. Ingest throughput (read the work log, type, price and insert each event once) against a
   bare `executemany` of the same rows into the same schema (goal: >= 0.5), for a log of
   model calls only and for one with the demo's share of them.
2. `audit cost` over N raw events and 30 days (29 rolled up, the open day raw) against a bare
   `SELECT sum()` over the raw table: faster, and flat as the history grows (printed again for
   2N events over 60 days, the same per day).

Not a test: run it by hand,

    .venv/bin/python benchmarks/bench_audit.py                 # 20,000 ingested; 100,000 costed
    .venv/bin/python benchmarks/bench_audit.py --events 1000000 # the issue's size (slow to build)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from agent_harness.audit.cost import cost
from agent_harness.audit.database import open_audit
from agent_harness.audit.ingest import ingest_work_store, log_id
from agent_harness.audit.maintenance import maintain
from agent_harness.audit.records import INSERT_ROW, row_of_event
from agent_harness.store.database import open_store
from agent_harness.store.events import Claimed, ModelCall
from agent_harness.testing.clock import FakeClock

DAY = 86_400.0
START = 1_780_000_000.0 - (1_780_000_000.0 % DAY)
MODELS = [("anthropic", "claude-sonnet-4-5"), ("openai", "gpt-4o"), ("openai", "gpt-demo")]


def _work_log(path: Path, count: int, usage_share: float) -> None:
    clock = FakeClock(start=START)
    store = open_store(str(path), clock=clock)
    rng = random.Random(1)
    with store.transaction() as tx:
        for number in range(count):
            clock.now = START + number * (30 * DAY / count)
            if rng.random() >= usage_share:
                tx.append_event(
                    "bench/app:PLAN",
                    f"T{number}",
                    Claimed(to="claimed", worker="w", attempt=1, token=number, expires_at=0.0),
                )
                continue
            vendor, model = rng.choice(MODELS)
            tx.append_event(
                "bench/app:PLAN",
                None,
                ModelCall(
                    role=rng.choice(["reviewer", "implementer"]),
                    vendor=vendor,
                    model=model,
                    tokens_in=rng.randint(1000, 20000),
                    tokens_out=rng.randint(10, 2000),
                    tokens_cached=rng.randint(0, 500),
                ),
            )
    store.close()


def bench_ingest(folder: Path, count: int, usage_share: float, rounds: int = 5) -> None:
    """Best of `rounds`, each into a fresh database, alternating with the baseline, so a busy
    machine slows both alike. `usage_share`: the model calls among the events (each is typed
    and priced; the others are copied)."""
    work_path = folder / f"work-{usage_share}.sqlite"
    _work_log(work_path, count, usage_share)
    work = open_store(str(work_path))
    ident = log_id(work) or "bench"
    values = [row_of_event(event, ident).values(0.0) for event in work.all_events()]
    ours, baseline = float("inf"), float("inf")
    for number in range(rounds):
        audit = open_audit(str(folder / f"ingest-{usage_share}-{number}.sqlite"))
        started = time.perf_counter()
        report = ingest_work_store(work, audit)
        ours = min(ours, time.perf_counter() - started)
        assert report.added == count, report
        audit.close()
        # The baseline: the very rows, already built, inserted with one executemany.
        bare = open_audit(str(folder / f"bare-{usage_share}-{number}.sqlite"))
        started = time.perf_counter()
        with bare.transaction() as tx:
            tx.conn.cursor().executemany(tx.dialect.sql(INSERT_ROW), values)
        baseline = min(baseline, time.perf_counter() - started)
        bare.close()
    work.close()
    print(
        f"ingest {count:>7,} events, {usage_share:4.0%} model calls: {count / ours:>8,.0f}/s   "
        f"bare executemany "
        f"{count / baseline:>10,.0f}/s   ratio {baseline / ours:.2f} (goal >= 0.5)"
    )


def _audit_of(folder: Path, count: int, days: int) -> tuple[object, float]:
    """An audit database of `count` raw usage rows over `days` days, maintained on the last
    (the open day): every earlier day is rolled up, nothing is thinned."""
    audit = open_audit(str(folder / f"cost-{count}-{days}.sqlite"))
    rng = random.Random(2)
    rows = []
    for number in range(count):
        ts = START + number * (days * DAY / count)
        vendor, model = rng.choice(MODELS)
        priced = model != "gpt-demo"
        rows.append(
            (
                f"bench:{number}",
                "work",
                ts,
                time.strftime("%Y-%m-%d", time.gmtime(ts)),
                "bench/app:PLAN",
                None,
                "model.call",
                "{}",
                None,
                rng.choice(["reviewer", "implementer"]),
                vendor,
                model,
                "api",
                rng.randint(1000, 20000),
                rng.randint(10, 2000),
                0,
                0,
                rng.random() / 10 if priced else None,
                None if priced else "no price known",
                "genai-prices" if priced else None,
                None,
                ts,
            )
        )
    with audit.transaction() as tx:
        tx.conn.cursor().executemany(tx.dialect.sql(INSERT_ROW), rows)
    maintain(audit, now=START + (days - 0.5) * DAY, retention_days=3650)
    return audit, START


def bench_cost(folder: Path, count: int) -> None:
    """`count` events over 30 days, then twice the history at the same daily rate: the raw
    scan doubles, `audit cost` should not."""
    for size, days in ((count, 30), (2 * count, 60)):
        audit, _ = _audit_of(folder, size, days)
        ours, bare = float("inf"), float("inf")
        for _ in range(5):  # best of five each, alternating, so load slows both alike
            started = time.perf_counter()
            report = cost(audit)  # type: ignore[arg-type]
            ours = min(ours, time.perf_counter() - started)
            started = time.perf_counter()
            with audit.transaction(write=False) as tx:  # type: ignore[attr-defined]
                tx.one("SELECT SUM(cost_usd) FROM audit_events")
            bare = min(bare, time.perf_counter() - started)
        print(
            f"audit cost over {size:>9,} events, {days} days: {ours * 1000:8.1f} ms   bare "
            f"SELECT sum() {bare * 1000:8.1f} ms   ratio {bare / ours:.1f}x faster "
            f"({report.priced_calls + report.unknown_calls:,} calls)"
        )
        audit.close()  # type: ignore[attr-defined]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ingest", type=int, default=20_000, help="events to ingest")
    parser.add_argument("--events", type=int, default=100_000, help="raw events for the cost")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ah-bench-audit-") as name:
        # Every event a priced call (the worst case), and a run's log as the demo writes it
        # (7 model calls among 127 events).
        bench_ingest(Path(name), args.ingest, 1.0)
        bench_ingest(Path(name), args.ingest, 0.06)
        bench_cost(Path(name), args.events)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
