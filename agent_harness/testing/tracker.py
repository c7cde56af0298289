"""An in-memory tracker for tests that must not open a socket: issues, labels, milestones, PRs.

`MemoryTracker` implements the `Tracker` protocol with the behaviour the harness relies on
(numbers shared by issues and pull requests, the newest pull of a head branch, labels replaced
whole, a fixed clock for timestamps). What GitHub really does over HTTP is the embedded forge's
job and is tested there; this fake is for testing the logic above the tracker quickly.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from agent_harness.tracker.protocol import (
    CommentRecord,
    CommitRecord,
    IssueDraft,
    IssueRecord,
    Listing,
    PullFeedback,
    PullRecord,
    RepoInfo,
    RepoNotFound,
    RequestTally,
    TrackerError,
)
from agent_harness.tracker.writes import Pace


class MemoryTracker:
    """One repository's issues and pull requests, kept in memory. `tally` counts calls."""

    def __init__(
        self, repo: str = "octo/app", *, default_branch: str = "main", archived: bool = False
    ) -> None:
        self.repo = repo
        self.tally = RequestTally()
        self.write_pace = Pace(settle_s=0.0, sleep=lambda _seconds: None)
        self.info = RepoInfo(repo, default_branch, f"file:///{repo}.git", archived)
        self.exists = True
        self.issues: dict[int, IssueRecord] = {}
        self.pulls: dict[int, PullRecord] = {}
        self.comments: dict[int, list[CommentRecord]] = {}
        self.labels: list[str] = []
        self.milestones: dict[str, int] = {}
        self.commits: dict[str, list[CommitRecord]] = {}
        self.feedback: dict[int, PullFeedback] = {}  # what a test says CI and reviewers said
        self.branch_heads: dict[str, str] = {}
        self._next = 1
        self._tick = 0
        self._failures: dict[str, list[Exception | None]] = {}  # None: let that call through
        self._lost_answers: list[Exception] = []  # raised by creates that landed
        # Issues a listing does not show yet (`list_issues`, `recent_issues`): a listing that
        # lags behind writes, as a search index or a replica can.
        self.unlisted: set[int] = set()
        self.unlisted_recent: set[int] = set()

    def fail_next(self, kind: str, *errors: Exception, after: int = 0) -> None:
        """Make the next calls of `kind` (e.g. "create_pull") raise these, one each, once
        `after` more calls of it went through."""
        self._failures.setdefault(kind, []).extend([None] * after + list(errors))

    def fail_after_next(self, kind: str, *errors: Exception) -> None:
        """Make the next calls of `kind` do their work and then raise these, one each: a write
        that landed while its answer was lost. Only issue creates take these so far."""
        if kind != "create_issue":
            raise ValueError(f"fail_after_next is not wired for {kind!r}, only 'create_issue'")
        self._lost_answers.extend(errors)

    def _count(self, kind: str, write: bool = False) -> None:
        self.tally.count(kind, write)
        waiting = self._failures.get(kind)
        if waiting:
            error = waiting.pop(0)
            if error is not None:
                raise error

    def _number(self) -> int:
        number, self._next = self._next, self._next + 1
        return number

    def _now(self) -> str:
        # Every write is a second later than the one before, so "updated since" is well defined.
        self._tick += 1
        moment = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self._tick)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    # -- repository ----------------------------------------------------------------------------
    def ensure_repo(self, create: bool = False, auto_init: bool = True) -> None:
        self._count("get_repo")
        if not self.exists:
            if not create:
                raise RepoNotFound(f"{self.repo} not found")
            self.exists = True

    def repo_info(self) -> RepoInfo:
        self._count("get_repo")
        return self.info

    # -- issues --------------------------------------------------------------------------------
    def list_issues(self) -> list[IssueRecord]:
        self._count("list_issues")
        return [issue for number, issue in self.issues.items() if number not in self.unlisted]

    def recent_issues(self, count: int = 30) -> list[IssueRecord]:
        self._count("list_issues")
        shown = (i for i in self.issues.values() if i.number not in self.unlisted_recent)
        return sorted(shown, key=lambda i: -i.number)[:count]

    def create_issue(self, draft: IssueDraft) -> IssueRecord:
        self._count("create_issue", write=True)
        number = self._number()
        issue = IssueRecord(
            number,
            draft.title,
            draft.body,
            "open",
            tuple(draft.labels),
            draft.milestone,
            f"https://tracker.invalid/{self.repo}/issues/{number}",
            self._now(),
        )
        self.issues[number] = issue
        if self._lost_answers:
            raise self._lost_answers.pop(0)
        return issue

    def update_issue(self, number: int, draft: IssueDraft) -> IssueRecord:
        self._count("update_issue", write=True)
        issue = replace(
            self._issue(number),
            title=draft.title,
            body=draft.body,
            labels=tuple(draft.labels),
            milestone=draft.milestone,
            updated_at=self._now(),
        )
        self.issues[number] = issue
        return issue

    def _issue(self, number: int) -> IssueRecord:
        if number not in self.issues:
            raise TrackerError(f"no issue #{number} in {self.repo}", 404)
        return self.issues[number]

    def get_issue(self, number: int) -> IssueRecord:
        self._count("get_issue")
        return self._issue(number)

    def list_labels(self) -> list[str]:
        self._count("list_labels")
        return list(self.labels)

    def create_label(self, name: str, color: str = "ededed") -> None:
        self._count("create_label", write=True)
        if name not in self.labels:
            self.labels.append(name)

    def list_milestones(self) -> dict[str, int]:
        self._count("list_milestones")
        return dict(self.milestones)

    def create_milestone(self, title: str) -> int:
        self._count("create_milestone", write=True)
        return self.milestones.setdefault(title, len(self.milestones) + 1)

    def list_comments(self, number: int) -> list[CommentRecord]:
        self._count("list_comments")
        return list(self.comments.get(number, []))

    def create_comment(self, number: int, body: str) -> CommentRecord:
        self._count("create_comment", write=True)
        made = [c for cs in self.comments.values() for c in cs]
        comment = CommentRecord(len(made) + 1, body, self._now())
        self.comments.setdefault(number, []).append(comment)
        return comment

    def set_labels(self, number: int, labels: tuple[str, ...]) -> tuple[str, ...]:
        self._count("set_labels", write=True)
        self.issues[number] = replace(self._issue(number), labels=tuple(labels))
        return tuple(labels)

    # -- pull requests -------------------------------------------------------------------------
    def find_pull(self, head_branch: str) -> PullRecord | None:
        self._count("list_pulls")
        found = [p for p in self.pulls.values() if p.head_ref == head_branch]
        return max(found, key=lambda p: p.number) if found else None

    def create_pull(self, title: str, body: str, head: str, base: str) -> PullRecord:
        self._count("create_pull", write=True)
        if any(p.head_ref == head and p.state == "open" for p in self.pulls.values()):
            raise TrackerError(f"a pull request for {head} is already open", 422)
        number = self._number()
        pull = PullRecord(
            number,
            title,
            body,
            "open",
            head,
            "",
            base,
            url=f"https://tracker.invalid/{self.repo}/pull/{number}",
            updated_at=self._now(),
        )
        self.pulls[number] = pull
        return pull

    def update_pull(self, number: int, title: str, body: str) -> PullRecord:
        self._count("update_pull", write=True)
        pull = replace(self.get_pull(number), title=title, body=body, updated_at=self._now())
        self.pulls[number] = pull
        return pull

    def close_pull(self, number: int) -> PullRecord:
        self._count("update_pull", write=True)
        pull = replace(self.get_pull(number), state="closed", updated_at=self._now())
        self.pulls[number] = pull
        return pull

    def get_pull(self, number: int) -> PullRecord:
        self._count("get_pull")
        if number not in self.pulls:
            raise TrackerError(f"no pull request #{number} in {self.repo}", 404)
        return self.pulls[number]

    def merge(self, number: int, sha: str = "f" * 40) -> PullRecord:
        """What a person merging on the tracker does (for tests)."""
        pull = replace(
            self.pulls[number],
            state="closed",
            merged=True,
            merged_at=self._now(),
            merge_commit_sha=sha,
            updated_at=self._now(),
        )
        self.pulls[number] = pull
        return pull

    def pulls_by_update(
        self, stop_before: str | None = None, etag: str | None = None
    ) -> Listing[PullRecord]:
        self._count("list_pulls")
        newest = sorted(self.pulls.values(), key=lambda p: p.updated_at, reverse=True)
        kept = tuple(p for p in newest if stop_before is None or p.updated_at >= stop_before)
        return Listing(kept, None, complete=len(kept) == len(newest))

    def commits_since(
        self, branch: str, since: str, etag: str | None = None
    ) -> Listing[CommitRecord]:
        self._count("list_commits")
        kept = tuple(c for c in self.commits.get(branch, []) if c.date >= since)
        return Listing(kept, None)

    # -- after the pull request ---------------------------------------------------------------
    def pull_feedback(self, number: int) -> PullFeedback:
        self._count("get_pull")
        pull = self.pulls[number]
        state = self.feedback.get(number)
        if state is not None:
            return state
        return PullFeedback(number, pull.head_sha, pull.base_ref, "clean")

    def pull_untouched(self, number: int) -> bool:
        self._count("list_timeline")
        said = self.feedback.get(number)
        return said is None or not (said.reviews or said.line_comments or said.comments)

    def pulls_with_status(self, state: str, etag: str | None = None) -> Listing[int]:
        self._count("search_issues")
        wanted = (lambda f: bool(f.failing())) if state == "failure" else PullFeedback.passing
        return Listing(tuple(n for n, f in self.feedback.items() if wanted(f)), None)

    def branch_head(self, branch: str, etag: str | None = None) -> Listing[str]:
        self._count("get_ref")
        head = self.branch_heads.get(branch)
        return Listing((head,) if head else (), None)

    def merge_pull(self, number: int, sha: str) -> str:
        self._count("merge_pull", write=True)
        return self.merge(number).merge_commit_sha or ""
