"""What the harness needs from an issue tracker, as a Protocol, and the records it passes.

The sync, the run pipeline and the reconciler talk to this interface only. `github.GitHubTracker`
implements it over PyGithub; `testing.tracker.MemoryTracker` implements it in memory.
Records are plain dataclasses built from GitHub's JSON, so nothing lazy hides a request.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from agent_harness.errors import HarnessError
from agent_harness.failures import FailureClass

if TYPE_CHECKING:
    from agent_harness.tracker.writes import Pace


_Record = TypeVar("_Record")


def _readable(
    read: Callable[[type[_Record], dict[str, Any]], _Record],
) -> Callable[[type[_Record], dict[str, Any]], _Record]:
    """`read` (a record's `from_json`), failing with a TrackerError that names the record when
    the answer lacks what it needs (`{}`, a list, a number where an object was due), rather
    than a KeyError that the command line can only call an internal error."""

    @functools.wraps(read)
    def checked(cls: type[_Record], data: dict[str, Any]) -> _Record:
        try:
            return read(cls, data)
        except MISREAD as exc:
            what = re.sub(r"(?<!^)(?=[A-Z])", " ", cls.__name__.removesuffix("Record")).lower()
            raise unreadable(f"is not a readable {what}", exc) from None

    return checked


# What reading an answer that lacks what it must hold raises (a field missing, a list where an
# object was due, a word where a number was).
MISREAD = (KeyError, TypeError, ValueError, AttributeError)


def unreadable(said: str, exc: Exception) -> TrackerError:
    """The TrackerError for an answer misread (`exc`, one of MISREAD): "the tracker's answer
    <said> (no 'number')"."""
    missing = f"no {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else str(exc)
    return TrackerError(f"the tracker's answer {said} ({missing[:120]})")


class TrackerError(HarnessError):
    """The tracker refused or failed a request."""

    exit_code = 4

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class AuthError(TrackerError):
    """No usable token for the tracker."""

    exit_code = 2


class RepoNotFound(TrackerError):
    """The repository does not exist, or the token cannot see it."""


class RepoMoved(TrackerError):
    """GitHub knows the repository by another name now (renamed or transferred): its old name
    answers with redirects, which lose a request's query, so it is refused, not read."""


class PermissionDenied(TrackerError):
    """The token may not do this (or the repository is archived)."""


class ValidationFailed(TrackerError):
    """GitHub answered 422: the request was understood and refused. Never retried."""

    def __init__(self, message: str, field: str | None, code: str | None) -> None:
        super().__init__(message, status=422)
        self.field = field
        self.code = code


class RateLimited(TrackerError):
    """A rate limit whose reset is further away than we are allowed to wait."""

    def __init__(self, message: str, reset_at: float | None) -> None:
        super().__init__(message, status=403)
        self.reset_at = reset_at


class Unreachable(TrackerError):
    """The tracker never answered: refused, no such host. Said at once, not after retries."""


class WriteUncertain(TrackerError):
    """A write failed in a way that may have reached the server; the caller must re-check.

    `in_flight` is true when no answer came at all (a timeout, a dropped connection): the
    server may still be working on the write, so a look right away can miss it."""

    def __init__(self, message: str, *, in_flight: bool = True) -> None:
        super().__init__(message)
        self.in_flight = in_flight


def failure_class(exc: TrackerError) -> FailureClass:
    """What kind of tracker failure this is, for the failure policy: a refusal that will come
    back the same (4xx), a credential or repository problem only a person can fix, or the
    tracker being unavailable for now (5xx, timeouts, rate limits that outlasted the retries).
    A token the tracker no longer accepts (401) is nobody's item's failure: every delivery
    would meet it."""
    if isinstance(exc, AuthError):
        return FailureClass.TRACKER_CREDENTIALS
    if isinstance(exc, PermissionDenied | RepoNotFound):
        return FailureClass.TRACKER_AUTH
    if isinstance(exc, RateLimited | WriteUncertain):
        return FailureClass.TRACKER_UNAVAILABLE
    if exc.status is not None and 400 <= exc.status < 500:
        return FailureClass.TRACKER_REFUSED
    return FailureClass.TRACKER_UNAVAILABLE


@dataclass(frozen=True)
class IssueRecord:
    """One issue as the tracker reported it."""

    number: int
    title: str
    body: str
    state: str
    labels: tuple[str, ...] = ()
    milestone: str | None = None
    url: str = ""
    updated_at: str = ""

    @classmethod
    @_readable
    def from_json(cls, data: dict[str, Any]) -> IssueRecord:
        milestone = data.get("milestone") or None
        return cls(
            number=int(data["number"]),
            title=str(data.get("title") or ""),
            body=str(data.get("body") or ""),
            state=str(data.get("state") or "open"),
            labels=tuple(
                str(label["name"] if isinstance(label, dict) else label)
                for label in data.get("labels") or ()
            ),
            milestone=str(milestone["title"]) if isinstance(milestone, dict) else None,
            url=str(data.get("html_url") or ""),
            updated_at=str(data.get("updated_at") or ""),
        )


@dataclass(frozen=True)
class RepoInfo:
    """The facts about a repository the run pipeline needs."""

    full_name: str
    default_branch: str
    clone_url: str
    archived: bool = False


@dataclass(frozen=True)
class PullRecord:
    """One pull request as the tracker reported it."""

    number: int
    title: str
    body: str
    state: str
    head_ref: str
    head_sha: str
    base_ref: str
    merged: bool = False
    merged_at: str | None = None
    merge_commit_sha: str | None = None
    url: str = ""
    updated_at: str = ""
    labels: tuple[str, ...] | None = None  # None: the answer did not say

    @classmethod
    @_readable
    def from_json(cls, data: dict[str, Any]) -> PullRecord:
        head = data.get("head") or {}
        base = data.get("base") or {}
        merged_at = data.get("merged_at")
        labels = data.get("labels")
        return cls(
            number=int(data["number"]),
            title=str(data.get("title") or ""),
            body=str(data.get("body") or ""),
            state=str(data.get("state") or "open"),
            head_ref=str(head.get("ref") or ""),
            head_sha=str(head.get("sha") or ""),
            base_ref=str(base.get("ref") or ""),
            merged=bool(data.get("merged") or merged_at),
            merged_at=str(merged_at) if merged_at else None,
            merge_commit_sha=data.get("merge_commit_sha") or None,
            url=str(data.get("html_url") or ""),
            updated_at=str(data.get("updated_at") or ""),
            labels=(
                tuple(str(label.get("name") or "") for label in labels)
                if isinstance(labels, list) and all(isinstance(x, dict) for x in labels)
                else None
            ),
        )


@dataclass(frozen=True)
class CommentRecord:
    """One issue comment."""

    id: int
    body: str
    created_at: str = ""

    @classmethod
    @_readable
    def from_json(cls, data: dict[str, Any]) -> CommentRecord:
        return cls(
            id=int(data["id"]),
            body=str(data.get("body") or ""),
            created_at=str(data.get("created_at") or ""),
        )


@dataclass(frozen=True)
class CommitRecord:
    """One commit of a branch, as the commits listing reports it."""

    sha: str
    message: str
    date: str  # committer date, ISO 8601
    parents: tuple[str, ...] = ()

    @classmethod
    @_readable
    def from_json(cls, data: dict[str, Any]) -> CommitRecord:
        commit = data.get("commit") or {}
        committer = commit.get("committer") or {}
        return cls(
            sha=str(data["sha"]),
            message=str(commit.get("message") or ""),
            date=str(committer.get("date") or ""),
            parents=tuple(str(p["sha"]) for p in data.get("parents") or () if "sha" in p),
        )


@dataclass(frozen=True)
class PullFeedback:
    """What CI, reviewers and people said about an open pull request's head, in one read:
    failing checks (name, conclusion, summary or text), reviews (id, state, body, commit),
    line comments (id, path, line, body, commit), issue comments' bodies, labels, and
    whether it merges (`mergeable_state`: clean, behind, dirty, unstable, unknown)."""

    number: int
    head_sha: str
    base_ref: str
    mergeable_state: str
    head_ref: str = ""
    labels: tuple[str, ...] = ()
    checks: tuple[tuple[str, str, str], ...] = ()  # (name, conclusion, summary/text), latest
    reviews: tuple[tuple[int, str, str, str], ...] = ()  # (id, state, body, commit)
    line_comments: tuple[tuple[int, str, int | None, str, str], ...] = ()
    comments: tuple[str, ...] = ()

    def failing(self) -> list[tuple[str, str, str]]:
        """The checks a change to the code can answer: failed, or out of time."""
        return [c for c in self.checks if c[1] in FIXABLE_CONCLUSIONS]

    def passing(self) -> bool:
        """Every check finished green. A check that waits on a person (`action_required`), was
        `cancelled`, went `stale` or could not start (`startup_failure`) is not green, and is
        no work for the agent either: it holds the pull request until someone acts."""
        return bool(self.checks) and all(c[1] in GREEN_CONCLUSIONS for c in self.checks)


# A check's conclusions (a commit status's state read as one): those that pass, and those an
# agent's change can answer. Any other (action_required, cancelled, stale, startup_failure, a
# word GitHub adds later) waits on a person; none yet (pending) waits on the check.
GREEN_CONCLUSIONS = frozenset({"success", "neutral", "skipped"})
FIXABLE_CONCLUSIONS = frozenset({"failure", "timed_out"})


T = TypeVar("T")


@dataclass(frozen=True)
class Listing(Generic[T]):
    """A listing read with a conditional request: `not_modified` means GitHub answered 304.

    `etag` is the first page's validator, to send back next time; `complete` is False when the
    caller's stop condition ended the listing before its last page.
    """

    items: tuple[T, ...]
    etag: str | None
    not_modified: bool = False
    complete: bool = True


@dataclass(frozen=True)
class IssueDraft:
    """What an issue should say: the fields the sync writes."""

    title: str
    body: str
    labels: tuple[str, ...] = ()
    milestone: str | None = None


@dataclass
class RequestTally:
    """Requests and writes one tracker client made, counted where they are sent."""

    requests: int = 0
    writes: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def count(self, kind: str, write: bool) -> None:
        self.requests += 1
        if write:
            self.writes += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1


class Tracker(Protocol):
    """An issue tracker scoped to one repository."""

    repo: str
    tally: RequestTally
    write_pace: Pace  # how a create whose answer was lost is confirmed (see tracker.writes)

    def ensure_repo(self, create: bool = False, auto_init: bool = True) -> None:
        """Check the repository exists (creating it when `create` and it is missing; with
        `auto_init` the new repository gets a first commit, as GitHub's option does)."""

    def list_issues(self) -> list[IssueRecord]:
        """Every issue in the repository, open and closed, pull requests excluded."""

    def recent_issues(self, count: int = 30) -> list[IssueRecord]:
        """The newest issues, one request: to check whether an uncertain write landed."""

    def create_issue(self, draft: IssueDraft) -> IssueRecord: ...

    def update_issue(self, number: int, draft: IssueDraft) -> IssueRecord:
        """Rewrite title, body, labels and milestone; never the state."""

    def list_labels(self) -> list[str]: ...

    def create_label(self, name: str, color: str = "ededed") -> None: ...

    def list_milestones(self) -> dict[str, int]:
        """Milestone title -> number, open and closed."""

    def create_milestone(self, title: str) -> int: ...

    def repo_info(self) -> RepoInfo: ...

    def find_pull(self, head_branch: str) -> PullRecord | None:
        """The newest pull request (any state) whose head is `head_branch` in this repo."""

    def create_pull(self, title: str, body: str, head: str, base: str) -> PullRecord: ...

    def update_pull(self, number: int, title: str, body: str) -> PullRecord: ...

    def close_pull(self, number: int) -> PullRecord:
        """Close pull request `number` without merging it."""

    # -- what the reconciler reads and writes ------------------------------------------------
    def pulls_by_update(
        self, stop_before: str | None = None, etag: str | None = None
    ) -> Listing[PullRecord]:
        """Pull requests (any state), most recently updated first, stopping at the first one
        updated before `stop_before` (ISO time). With `etag` of an earlier first page, an
        unchanged repository answers 304 and the listing is `not_modified` and empty."""

    def commits_since(
        self, branch: str, since: str, etag: str | None = None
    ) -> Listing[CommitRecord]:
        """Commits reachable from `branch` committed at or after `since`, newest first."""

    def get_pull(self, number: int) -> PullRecord: ...

    def get_issue(self, number: int) -> IssueRecord: ...

    def list_comments(self, number: int) -> list[CommentRecord]: ...

    def create_comment(self, number: int, body: str) -> CommentRecord: ...

    def set_labels(self, number: int, labels: tuple[str, ...]) -> tuple[str, ...]:
        """Replace the issue's labels with exactly `labels`; the labels it now has."""

    # -- after the pull request: what CI and reviewers said, and merging ---------------------
    def pull_feedback(self, number: int) -> PullFeedback:
        """The pull request, its head's checks and statuses, reviews, line and issue comments."""

    def pull_untouched(self, number: int) -> bool:
        """True when nobody has reviewed the pull request or commented on it, in its lines or
        on its conversation (one read of its timeline, where all three are listed)."""

    def pulls_with_status(self, state: str, etag: str | None = None) -> Listing[int]:
        """Open pull requests whose head's checks are `state` (failure, success): one search,
        answered 304 when unchanged."""

    def branch_head(self, branch: str, etag: str | None = None) -> Listing[str]:
        """The branch's head sha (one item; none when the branch is not there), or
        not_modified when the ETag still holds."""

    def merge_pull(self, number: int, sha: str) -> str:
        """Merge with a method the repository allows, only if the head is still `sha`; the
        merge commit. A refusal (405, 409, protection) raises TrackerError with its status."""
