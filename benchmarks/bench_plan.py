"""Plan parser speed: agent-harness's parse vs markdown-it-py tokenizing the same text.

Prints, for plans of 100, 1,000 and 10,000 items, the parse time as a ratio to the bare
tokenizer measured in the same run (target: <= 1.5x at 10,000 items, growing linearly), and
the peak memory of parsing 10,000 items.

    .venv/bin/python benchmarks/bench_plan.py
"""

from __future__ import annotations

import time
import tracemalloc

from markdown_it import MarkdownIt

from agent_harness.plan.markdown import parse_plan


def make_plan(n: int) -> str:
    """A plan mixing the three item forms, with metadata and dependencies on every item."""
    out = ["# Generated plan", ""]
    for i in range(1, n + 1):
        dep = f"T{i - 1}" if i > 1 else "none"
        if i % 3 == 0:
            out += [
                f"### T{i}: Heading item {i}",
                f"Body text for item {i}, with `code` and **bold**.",
                f"labels: area-{i % 7}, kind",
                f"depends on: {dep}",
                "check: `pytest -q`",
                "",
            ]
        elif i % 3 == 1:
            out += [
                f"- [ ] T{i} Checkbox item {i}",
                f"  - depends on: {dep}",
                "  - check: make",
                "",
            ]
        else:
            out += [
                "| id | title | depends on |",
                "|---|---|---|",
                f"| T{i} | Row {i} | {dep} |",
                "",
            ]
    return "\n".join(out) + "\n"


def best_of(repeats: int, fn: object) -> float:
    assert callable(fn)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    md = MarkdownIt("commonmark").enable("table")
    print(f"{'items':>7} {'tokenize s':>11} {'parse s':>9} {'ratio':>6} {'per item us':>12}")
    for n in (100, 1_000, 10_000):
        text = make_plan(n)
        repeats = 5 if n < 10_000 else 3
        base = best_of(repeats, lambda text=text: md.parse(text))
        ours = best_of(repeats, lambda text=text: parse_plan(text))
        assert len(parse_plan(text).items) == n
        print(f"{n:>7} {base:>11.4f} {ours:>9.4f} {ours / base:>5.2f}x {ours / n * 1e6:>12.1f}")
    text = make_plan(10_000)
    tracemalloc.start()
    parse_plan(text)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"peak memory parsing 10,000 items: {peak / 1024 / 1024:.1f} MiB "
        f"(plan text {len(text) / 1024 / 1024:.1f} MiB)"
    )


if __name__ == "__main__":
    main()
