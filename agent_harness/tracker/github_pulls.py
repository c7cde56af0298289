"""GitHubTracker's reads and writes after a pull request opened: its head's check runs and
statuses, reviews, line comments, issue comments, the search for failing heads, and merging.

A mixin over the tracker's one request path (`_call`, `_list`), so every request here is
counted, retried and classified like the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_harness.tracker.protocol import (
    MISREAD,
    Listing,
    PullFeedback,
    RepoNotFound,
    TrackerError,
    unreadable,
)

_Call = Callable[..., tuple[dict[str, Any], Any]]
# Timeline events that carry a person's word on a pull request: an issue comment, a review, a
# line comment (GitHub lists each line comment's thread as one `line-commented` event).
_PEOPLES_WORD = frozenset({"commented", "reviewed", "line-commented"})
_TIMELINE_PAGE = 100
# The most pages one listing is read to: a server that always links a next page stops here.
MAX_PAGES = 10_000


class PullReads:
    """Mixed into GitHubTracker, which provides `repo`, `_call` and `_list`."""

    repo: str
    _call: _Call
    _list: Callable[..., list[dict[str, Any]]]  # (path, kind, params, field=None)

    def pull_feedback(self, number: int) -> PullFeedback:
        base = f"/repos/{self.repo}"
        _, pull = self._call("GET", f"{base}/pulls/{number}", "get_pull")
        if not isinstance(pull, dict):
            raise TrackerError(f"the tracker's answer about pull request #{number} is no object")
        head = str((pull.get("head") or {}).get("sha") or "")
        # Both listings come in pages (GitHub's own page of statuses is 30): a failure past the
        # first page was missed, and the head judged green.
        runs = self._list(f"{base}/commits/{head}/check-runs", "list_check_runs", {}, "check_runs")
        statuses = self._list(f"{base}/commits/{head}/status", "combined_status", {}, "statuses")
        reviews = _standing(self._list(f"{base}/pulls/{number}/reviews", "list_reviews", {}))
        # The pull request counts its line comments and issue comments: a listing it says is
        # empty is not asked for. One added after the pull was read moves its updated_at past
        # the watch's mark, so the next look reads it.
        lines = (
            self._list(f"{base}/pulls/{number}/comments", "list_review_comments", {})
            if _may_hold(pull, "review_comments")
            else []
        )
        talk = (
            self._list(f"{base}/issues/{number}/comments", "list_comments", {})
            if _may_hold(pull, "comments")
            else []
        )
        try:
            return _feedback(number, pull, head, runs, statuses, reviews, lines, talk)
        except MISREAD as exc:
            raise unreadable(f"about pull request #{number} is not readable", exc) from None

    def pull_untouched(self, number: int) -> bool:
        # One read of the pull request's timeline, where GitHub lists its comments, reviews
        # and line comments alike (three listings before). A page it fills may hold more.
        _, events = self._call(
            "GET",
            f"/repos/{self.repo}/issues/{number}/timeline",
            "list_timeline",
            params={"per_page": _TIMELINE_PAGE},
        )
        if not isinstance(events, list) or len(events) >= _TIMELINE_PAGE:
            return False  # an answer it cannot read, or more than a page: look closer
        return not any(
            not isinstance(event, dict) or event.get("event") in _PEOPLES_WORD for event in events
        )

    def pulls_with_status(self, state: str, etag: str | None = None) -> Listing[int]:
        query = f"repo:{self.repo} is:pr is:open status:{state}"
        headers = {"If-None-Match": etag} if etag else None
        reply, data = self._call(
            "GET",
            "/search/issues",
            "search_issues",
            params={"q": query, "per_page": 100},
            headers=headers,
        )
        if data is None and etag:
            return Listing((), etag, not_modified=True)
        numbers = tuple(int(item["number"]) for item in (data or {}).get("items") or [])
        return Listing(numbers, reply.get("etag"))

    def branch_head(self, branch: str, etag: str | None = None) -> Listing[str]:
        headers = {"If-None-Match": etag} if etag else None
        try:
            reply, data = self._call(
                "GET", f"/repos/{self.repo}/git/ref/heads/{branch}", "get_ref", headers=headers
            )
        except RepoNotFound:  # the repository answered: it is the branch that is not there
            return Listing((), None)
        if data is None and etag:
            return Listing((), etag, not_modified=True)
        return Listing((str((data.get("object") or {}).get("sha") or ""),), reply.get("etag"))

    def merge_pull(self, number: int, sha: str) -> str:
        _, repo = self._call("GET", f"/repos/{self.repo}", "get_repo")
        allowed = [
            method
            for method, flag in (
                ("squash", "allow_squash_merge"),
                ("merge", "allow_merge_commit"),
                ("rebase", "allow_rebase_merge"),
            )
            if repo.get(flag, True)
        ]
        if not allowed:
            raise TrackerError(f"{self.repo} allows no merge method", status=405)
        _, data = self._call(
            "PUT",
            f"/repos/{self.repo}/pulls/{number}/merge",
            "merge_pull",
            body={"sha": sha, "merge_method": allowed[0]},
        )
        return str(data.get("sha") or "")


def _feedback(
    number: int,
    pull: dict[str, Any],
    head: str,
    runs: list[dict[str, Any]],
    statuses: list[dict[str, Any]],
    reviews: list[dict[str, Any]],
    lines: list[dict[str, Any]],
    talk: list[dict[str, Any]],
) -> PullFeedback:
    """One pull request's feedback from GitHub's answers (KeyError and the like when they lack
    what they must hold)."""
    checks = [
        (str(run["name"]), str(run.get("conclusion") or ""), _output(run.get("output") or {}))
        for run in runs
    ]
    checks += [
        (str(s["context"]), _status_word(str(s["state"])), str(s.get("description") or ""))
        for s in statuses
    ]
    return PullFeedback(
        number=number,
        head_sha=head,
        base_ref=str((pull.get("base") or {}).get("ref") or ""),
        mergeable_state=str(pull.get("mergeable_state") or "unknown"),
        head_ref=str((pull.get("head") or {}).get("ref") or ""),
        labels=tuple(str(label["name"]) for label in pull.get("labels") or ()),
        checks=tuple(checks),
        reviews=tuple(
            (int(r["id"]), str(r["state"]), str(r.get("body") or ""), str(r["commit_id"]))
            for r in reviews
        ),
        line_comments=tuple(
            (
                int(c["id"]),
                str(c["path"]),
                c.get("line"),
                str(c.get("body") or ""),
                str(c["commit_id"]),
            )
            for c in lines
        ),
        comments=tuple(str(c.get("body") or "") for c in talk),
    )


def _standing(reviews: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reviews that still stand, as GitHub decides a pull request's review state: of one
    reviewer's approvals, change requests and dismissals only the latest counts, so a request
    for changes followed by an approval asks for nothing, and an approval followed by a request
    for changes approves nothing. Comments stay as they are; a review
    by a deleted account (no user) stands on its own. GitHub lists reviews oldest first."""
    decisive = ("APPROVED", "CHANGES_REQUESTED", "DISMISSED")
    latest: dict[str, int] = {}
    for index, review in enumerate(reviews):
        if review.get("state") in decisive:
            latest[_reviewer(review, index)] = index
    return [
        review
        for index, review in enumerate(reviews)
        if review.get("state") not in decisive or latest[_reviewer(review, index)] == index
    ]


def _reviewer(review: dict[str, Any], index: int) -> str:
    user = review.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    return f"user:{login}" if isinstance(login, str) and login else f"review:{index}"


def _may_hold(pull: dict[str, Any], count: str) -> bool:
    """False only when the pull request says that count is 0; a server that leaves the count
    out (or sends something else) is asked for the listing."""
    said = pull.get(count)
    return not (type(said) is int and said == 0)


def _output(output: dict[str, Any]) -> str:
    summary = str(output.get("summary") or "")
    text = str(output.get("text") or "")
    return "\n".join(part for part in (summary, text[-3000:]) if part)


def _status_word(state: str) -> str:
    """A commit status as a check conclusion: pending has none yet."""
    return {"success": "success", "pending": "", "error": "failure"}.get(state, state)
