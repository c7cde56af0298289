"""What reconcile costs on the tracker when little has changed, against one request per PR.

Run: .venv/bin/python benchmarks/bench_reconcile.py

An embedded forge holds 500 open harness pull requests (real branches, real git). After one full
run fills the store, k = 0, 5 and 50 of them are merged or closed and reconcile runs again; the
forge counts every request it serves. The baseline, measured in the same run, is the naive
reconciler: one `GET /pulls/{n}` per tracked pull request. Goal: pull and commit listing requests
<= ceil(k/100) + 2 (the rest is the issue work each transition needs in any design).
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agent_harness.store.database import open_store
from agent_harness.testing.forge import TOKEN, running_forge
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.markers import Marker, PullMarker
from agent_harness.tracker.protocol import IssueDraft
from agent_harness.tracker.reconcile import reconcile

TRACKED = 500
CHANGES = (0, 5, 50)
REPO = "octo/app"
LISTINGS = ("GET /repos/{owner}/{repo}/pulls", "GET /repos/{owner}/{repo}/commits")


def git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def branches(clone: Path, count: int) -> list[str]:
    """`count` branches, one commit each on top of main, pushed in a single push."""
    tree = git(clone, "rev-parse", "HEAD^{tree}")
    names, updates = [], []
    for i in range(1, count + 1):
        sha = git(clone, "commit-tree", tree, "-p", "HEAD", "-m", f"T{i}: work")
        names.append(f"agent-harness/T{i}-work")
        updates.append(f"create refs/heads/{names[-1]} {sha}")
    git(clone, "update-ref", "--stdin", stdin="\n".join(updates) + "\n")
    git(clone, "push", "-q", "origin", *[f"{n}:{n}" for n in names])
    return names


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, running_forge(Path(tmp) / "forge") as rf:
        rf.forge.create_repo("octo", "app", auto_init=True)
        clone = Path(tmp) / "clone"
        git(Path(tmp), "clone", "-q", rf.forge.clone_url("octo", "app"), str(clone))
        tracker = GitHubTracker(REPO, TOKEN, rf.server.api_url, write_spacing_s=0.0)
        started = time.perf_counter()
        names = branches(clone, TRACKED)
        changing = sum(CHANGES)
        pulls: list[int] = []
        for i, branch in enumerate(names, start=1):
            issue = None
            if i <= changing:  # only the PRs that will change need an issue to be written to
                marker = Marker(f"T{i}", "PLAN", "0" * 12).render()
                issue = tracker.create_issue(IssueDraft(f"T{i}", marker)).number
            body = PullMarker(f"T{i}", "PLAN", issue).render()
            pulls.append(tracker.create_pull(f"T{i}: work", body, branch, "main").number)
        print(f"setup: {TRACKED} PRs in {time.perf_counter() - started:.1f} s")

        with open_store(str(Path(tmp) / "harness.sqlite")) as store:
            mark = rf.forge.mark()
            full = reconcile(tracker, store=store)
            print(
                f"first run, empty store: {sum(rf.forge.request_counts(mark).values())} requests "
                f"({full.pulls_listed} PRs listed, {len(full.transitions)} transitions)"
            )
            mark = rf.forge.mark()
            for number in pulls:
                tracker.get_pull(number)
            naive = sum(rf.forge.request_counts(mark).values())
            print(f"baseline, one GET per tracked PR: {naive} requests\n")
            print(f"{'k':>4} {'listings':>9} {'goal':>5} {'all requests':>13} {'vs baseline':>12}")
            done = 0
            for k in CHANGES:
                for j, number in enumerate(pulls[done : done + k]):
                    if j % 2 == 0:
                        rf.github.get_repo(REPO).get_pull(number).merge()
                    else:
                        rf.github.get_repo(REPO).get_pull(number).edit(state="closed")
                done += k
                mark = rf.forge.mark()
                report = reconcile(tracker, store=store)
                counts = rf.forge.request_counts(mark)
                listings = sum(counts.get(name, 0) for name in LISTINGS)
                total = sum(counts.values())
                goal = math.ceil(k / 100) + 2
                assert len(report.transitions) == k, report.transitions
                verdict = "ok" if listings <= goal else "OVER"
                ratio = f"{total / naive:.3f}x"
                print(f"{k:>4} {listings:>9} {goal:>5} {total:>13} {ratio:>12}  {verdict}")
                print(f"     by kind: {dict(sorted(counts.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
