"""Plan -> issues sync cost, counted at the forge: requests and writes per pass.

For plans of 100 and 1,000 items against the in-process forge: a first sync, a re-sync of the
unchanged plan (target: requests <= ceil(N/100) + 2, writes = 0) and a re-sync with 5 items
edited (target: writes = 5). Beside each figure is a naive baseline measured in the same run:
one lookup request per item (what a client that finds issues by title or number would pay).
Write spacing is set to 0 here, which GitHub's guidance would not allow against api.github.com.

    .venv/bin/python benchmarks/bench_sync.py
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

from agent_harness.plan.markdown import parse_plan
from agent_harness.plan.model import Plan
from agent_harness.testing.forge import TOKEN, running_forge
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.sync import sync_plan


def make_plan(n: int, edited: frozenset[int] = frozenset()) -> Plan:
    lines = ["## Milestone: M1", ""]
    for i in range(1, n + 1):
        title = f"Item {i}" + (" (edited)" if i in edited else "")
        lines += [f"### T{i}: {title}", f"Body {i}.", "labels: bench", "check: `true`", ""]
    return parse_plan("\n".join(lines), source="PLAN.md")


def naive_lookups(forge, numbers: list[int]) -> int:  # type: ignore[no-untyped-def]
    """One GET per issue, as a client without a listing pass would do."""
    mark = forge.forge.mark()
    repo = forge.github.get_repo("bench/app")
    for number in numbers:
        repo.get_issue(number)
    return sum(forge.forge.request_counts(mark).values())


def counted(forge, fn) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    mark = forge.forge.mark()
    fn()
    counts = forge.forge.request_counts(mark)
    writes = sum(n for key, n in counts.items() if not key.startswith("GET "))
    return sum(counts.values()), writes


def measure(n: int) -> tuple[bool, list[tuple[str, int, int]], int]:
    with tempfile.TemporaryDirectory() as tmp, running_forge(Path(tmp)) as forge:
        forge.forge.create_repo("bench", "app")
        tracker = GitHubTracker("bench/app", TOKEN, forge.server.api_url, write_spacing_s=0)
        plan = make_plan(n)
        first = counted(forge, lambda: sync_plan(plan, tracker, "PLAN"))
        naive = naive_lookups(forge, [i.number for i in tracker.list_issues()])
        again = counted(forge, lambda: sync_plan(plan, tracker, "PLAN"))
        edited = make_plan(n, frozenset({1, n // 4, n // 2, 3 * n // 4, n}))
        five = counted(forge, lambda: sync_plan(edited, tracker, "PLAN"))
        tracker.close()
    ok = again[0] <= math.ceil(n / 100) + 2 and again[1] == 0 and five[1] == 5
    rows = [("first sync", *first), ("unchanged", *again), ("5 edited", *five)]
    return ok, rows, naive


def main() -> int:
    ok = True
    print("write spacing: 0 s (benchmark only)")
    print(f"{'items':>6} {'pass':<14} {'requests':>9} {'writes':>7} {'naive':>7} {'ratio':>6}")
    for n in (100, 1_000):
        good, rows, naive = measure(n)
        ok &= good
        for name, requests, writes in rows:
            print(
                f"{n:>6} {name:<14} {requests:>9} {writes:>7} {naive:>7} {requests / naive:>5.2f}x"
            )
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
