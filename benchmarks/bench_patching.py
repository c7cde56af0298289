"""How far the diff-apply ladder gets on the corpus of imperfect model edits.

Run: .venv/bin/python benchmarks/bench_patching.py

Each case of tests/implement/patching_corpus is applied in a fresh git repository. The report
counts the rung that first took each edit, the edits refused, whether the result matched the
expected bytes, and compares with the baseline measured in the same run: plain `git apply` and
nothing else.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from agent_harness.implement.patching import RUNGS, apply_edit

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "implement" / "patching_corpus"
# Shapes models really write in edit blocks, each reported on its own line.
SHAPES = {
    "34-search-replace-ellipsis-between-blocks": "a '...' line between two blocks",
    "35-search-replace-makefile": "a block for Makefile (no extension)",
    "36-blocks-for-files-without-extension": "Dockerfile, LICENSE, a temporary name",
    "37-search-stray-blank-first-line": "a stray blank first line in SEARCH",
    "38-search-bare-name-one-match": "a bare name that fits one file in the tree",
    "48-fail-bare-name-two-matches": "a bare name that fits two files (refuse)",
}


def files_under(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def prepare(case: Path, work: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=work, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "bench@example.invalid")
    git("config", "user.name", "bench")
    git("config", "core.autocrlf", "false")
    for rel, data in files_under(case / "before").items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    git("add", "-A")
    git("commit", "-q", "-m", "originals")
    for rel in files_under(case / "base") if (case / "base").is_dir() else {}:
        git("hash-object", "-w", str(case / "base" / rel))


def main() -> int:
    cases = sorted(p.parent for p in CORPUS.glob("*/case.json"))
    first_rung: Counter[str] = Counter()
    wrong: list[str] = []
    shapes: dict[str, str] = {}
    baseline_ok = 0
    intended = 0
    refused_ok = 0
    must_fail = 0
    elapsed = 0.0
    for case in cases:
        meta = json.loads((case / "case.json").read_text())
        edit = (case / "edit.txt").read_bytes().decode("utf-8")
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            prepare(case, work)
            before = files_under(work)
            started = time.perf_counter()
            result = apply_edit(work, edit)
            elapsed += time.perf_counter() - started
            after = files_under(work)
        first_rung[result.rung or "refused"] += 1
        if case.name in SHAPES:
            shapes[case.name] = result.rung or "refused"
        if meta["expect"] == "refused":
            must_fail += 1
            if not result.applied and after == before:
                refused_ok += 1
            else:
                wrong.append(case.name)
            continue
        intended += 1
        if not result.applied or after != files_under(case / "after"):
            wrong.append(case.name)
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            prepare(case, work)
            plain = subprocess.run(
                ["git", "apply", "-"], cwd=work, input=edit.encode(), capture_output=True
            )
            if plain.returncode == 0 and files_under(work) == files_under(case / "after"):
                baseline_ok += 1

    total = len(cases)
    print(f"corpus: {total} cases ({intended} intended edits, {must_fail} that must be refused)")
    print()
    print(f"{'rung':<22}{'first to succeed':>18}{'share':>9}")
    for rung in (*RUNGS, "refused"):
        n = first_rung[rung]
        print(f"{rung:<22}{n:>18}{n / total:>9.0%}")
    print()
    ladder_ok = intended - (len(wrong) - (must_fail - refused_ok))
    print(f"intended edits landed correctly: {ladder_ok}/{intended} with the ladder,")
    print(f"                                 {baseline_ok}/{intended} with plain `git apply`")
    if baseline_ok:
        print(f"ratio ladder / plain git apply: {ladder_ok / baseline_ok:.2f}x")
    print(f"must-fail edits refused, worktree untouched: {refused_ok}/{must_fail}")
    print(f"mean apply_edit time: {1000 * elapsed / total:.1f} ms per case")
    print()
    for name, shape in SHAPES.items():
        verdict = "as expected" if name not in wrong else "NOT as expected"
        print(f"{shape:<46}{shapes.get(name, 'missing'):>14}  {verdict}")
    if wrong:
        print("cases that did not end as expected: " + ", ".join(wrong))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
