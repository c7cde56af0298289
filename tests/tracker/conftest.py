"""A forge repository with a real clone, and a helper that plays the run pipeline and the humans:
open marked PRs from pushed branches, merge, close, revert by PR or by commit, force-push."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_harness.git.naming import branch_name
from agent_harness.store.database import Store, open_store
from agent_harness.testing.forge import TOKEN, RunningForge, running_forge
from agent_harness.tracker.github import GitHubTracker
from agent_harness.tracker.markers import Marker, PullMarker

REPO = "octo/app"
PLAN = "PLAN"
PROJECT = f"{REPO}:{PLAN}"  # how the run pipeline names a plan's queue


def git(cwd: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "Dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "Dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
        "HOME": str(cwd),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def no_sleep(seconds: float) -> None:
    del seconds


@dataclass
class Scene:
    rf: RunningForge
    clone: Path
    tmp: Path

    @property
    def repo(self) -> Any:
        return self.rf.github.get_repo(REPO)

    def tracker(self, token: str = TOKEN) -> GitHubTracker:
        return GitHubTracker(
            REPO, token, self.rf.server.api_url, write_spacing_s=0.0, sleep=no_sleep
        )

    def issue(self, item: str, labels: tuple[str, ...] = ("feature",)) -> int:
        marker = Marker(item, PLAN, "h" * 12, labels).render()
        created = self.repo.create_issue(f"{item}: work", body=f"Do {item}.\n\n{marker}")
        for label in labels:
            created.add_to_labels(label)
        return int(created.number)

    def push_branch(self, branch: str, filename: str, content: str) -> str:
        git(self.clone, "fetch", "-q", "origin")
        git(self.clone, "checkout", "-q", "-B", branch, "origin/main")
        (self.clone / filename).write_text(content)
        git(self.clone, "add", filename)
        git(self.clone, "commit", "-q", "-m", f"{filename} on {branch}")
        git(self.clone, "push", "-q", "origin", branch)
        return git(self.clone, "rev-parse", "HEAD")

    def open_pr(self, item: str, issue: int | None = None) -> int:
        issue = self.issue(item) if issue is None else issue
        branch = branch_name(item, f"{item} work")
        self.push_branch(branch, f"{item}.txt", f"{item}\n")
        body = f"Closes #{issue}\n\n{PullMarker(item, PLAN, issue).render()}"
        return int(
            self.repo.create_pull(base="main", head=branch, title=f"{item}: work", body=body).number
        )

    def merge(self, number: int, method: str = "merge") -> str:
        result = self.repo.get_pull(number).merge(merge_method=method)
        return str(result.sha)

    def close(self, number: int) -> None:
        self.repo.get_pull(number).edit(state="closed")

    def _revert_commit(self, sha: str) -> None:
        parents = git(self.clone, "rev-list", "--parents", "-n", "1", sha).split()[1:]
        mainline = ["-m", "1"] if len(parents) > 1 else []
        git(self.clone, "revert", "--no-edit", *mainline, sha)

    def revert_pr(self, number: int) -> int:
        """What GitHub's Revert button does: a branch with the revert, a PR, then its merge."""
        pull = self.repo.get_pull(number)
        git(self.clone, "fetch", "-q", "origin")
        branch = f"revert-{number}-{pull.head.ref.replace('/', '-')}"
        git(self.clone, "checkout", "-q", "-B", branch, "origin/main")
        self._revert_commit(pull.merge_commit_sha)
        git(self.clone, "push", "-q", "origin", branch)
        body = f"Reverts {REPO}#{number}"
        revert = self.repo.create_pull(
            base="main", head=branch, title=f'Revert "{pull.title}"', body=body
        )
        self.merge(revert.number)
        return int(revert.number)

    def revert_on_main(self, sha: str) -> str:
        """A `git revert` pushed straight to the default branch."""
        git(self.clone, "fetch", "-q", "origin")
        git(self.clone, "checkout", "-q", "-B", "main", "origin/main")
        self._revert_commit(sha)
        git(self.clone, "push", "-q", "origin", "main")
        return git(self.clone, "rev-parse", "HEAD")

    def writes(self, mark: int) -> dict[str, int]:
        counts = self.rf.forge.request_counts(mark)
        return {k: v for k, v in counts.items() if not k.startswith("GET ")}


@pytest.fixture
def scene(tmp_path: Path) -> Iterator[Scene]:
    with running_forge(tmp_path / "forge") as rf:
        rf.forge.create_repo("octo", "app", auto_init=True)
        clone = tmp_path / "clone"
        subprocess.run(
            ["git", "clone", "-q", rf.forge.clone_url("octo", "app"), str(clone)], check=True
        )
        yield Scene(rf, clone, tmp_path)
        assert rf.forge.server_errors == []


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with open_store(str(tmp_path / "harness.sqlite")) as opened:
        yield opened
