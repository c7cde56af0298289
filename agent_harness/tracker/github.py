"""The tracker over GitHub's REST API, through PyGithub, with GitHub's rules on pacing.

Every request goes through PyGithub's `Requester` (auth, base URL, error types), but we choose
each request ourselves: nothing lazy fetches behind our back, so requests are counted where they
are sent, writes are spaced, `retry-after` is honoured and a write that may already have landed
is never blindly repeated. Works against api.github.com, GitHub Enterprise and the embedded forge.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent_harness.errors import UsageError
from agent_harness.plan.model import shown_path
from agent_harness.secrets.shapes import TRACKER_TOKEN_ENV
from agent_harness.tracker.answers import REDIRECTS, json_of, redirected, validation_error
from agent_harness.tracker.connection import read_environment_once
from agent_harness.tracker.github_pulls import MAX_PAGES, PullReads
from agent_harness.tracker.protocol import (
    AuthError,
    CommentRecord,
    CommitRecord,
    IssueDraft,
    IssueRecord,
    Listing,
    PermissionDenied,
    PullRecord,
    RateLimited,
    RepoInfo,
    RepoMoved,
    RepoNotFound,
    RequestTally,
    TrackerError,
    Unreachable,
    ValidationFailed,
    WriteUncertain,
)
from agent_harness.tracker.writes import Pace

if TYPE_CHECKING:
    from github.Requester import Requester

DEFAULT_API_URL = "https://api.github.com"
MAX_BODY = 65_536


class _Transient(Exception):
    """Internal: a failure worth another try, with the wait the server asked for."""

    def __init__(
        self, reason: str, wait: float | None, may_have_landed: bool, answered: bool = False
    ) -> None:
        super().__init__(reason)
        self.wait = wait
        self.may_have_landed = may_have_landed
        self.answered = answered  # the server answered (a 5xx): nothing of it is still running


class NoToken(AuthError):
    """No token was given at all: nothing was asked of the tracker (the API's 409, since the
    server, not the request, lacks it)."""


def resolve_token(env: Mapping[str, str], run: Callable[[], str | None] | None = None) -> str:
    """Find a token the way `gh` does: GH_TOKEN, GITHUB_TOKEN, then `gh auth token`."""
    for name in TRACKER_TOKEN_ENV:
        value = env.get(name, "").strip()
        if value:
            return value
    found = (run or _gh_auth_token)()
    if found:
        return found
    raise NoToken("no GitHub token: set GH_TOKEN or GITHUB_TOKEN, or log in with `gh auth login`")


def _gh_auth_token() -> str | None:
    if shutil.which("gh") is None:
        return None
    try:
        done = subprocess.run(
            ["gh", "auth", "token"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def resolve_api_url(flag: str | None, env: Mapping[str, str]) -> str:
    from urllib.parse import urlparse

    url = (flag or env.get("GITHUB_API_URL") or DEFAULT_API_URL).strip().rstrip("/")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        source = "--github-url" if flag else "GITHUB_API_URL"
        raise UsageError(
            f"{source} '{url}' is not an http(s) URL (e.g. https://api.github.com, or "
            "https://HOST/api/v3 for GitHub Enterprise)"
        )
    return url


_OWNER = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


def check_repo_name(repo: str) -> str:
    """`repo` when it names a repository as GitHub spells one (`owner/name`); else UsageError.

    Checked before any token lookup or request, so a typo costs nothing and says what is wrong."""
    shown = shown_path(repo)[:200]  # a byte that is not UTF-8 is spelt out, as \\xff
    owner, slash, name = shown.partition("/")
    if not slash or "/" in name or not owner or not name:
        raise UsageError(f"--repo '{shown}' must be OWNER/NAME, with exactly one '/'")
    if not _OWNER.fullmatch(owner):
        raise UsageError(
            f"--repo '{shown}' has owner '{owner}', which may hold only letters, digits and '-' "
            "(not first), at most 39 characters"
        )
    if name in (".", ".."):
        raise UsageError(f"--repo '{shown}' has name '{name}', which names no repository")
    if not _NAME.fullmatch(name):
        raise UsageError(
            f"--repo '{shown}' has name '{name}', which may hold only letters, digits, '.', '-' "
            "and '_'"
        )
    if shown != repo:
        raise UsageError(f"--repo '{shown}' is not UTF-8 text")
    return repo


class GitHubTracker(PullReads):
    """A `Tracker` for one repository on GitHub (or anything that speaks its REST API)."""

    def __init__(
        self,
        repo: str,
        token: str,
        api_url: str = DEFAULT_API_URL,
        *,
        write_spacing_s: float = 1.0,
        max_rate_wait_s: float = 900.0,
        timeout_s: float = 30.0,
        attempts: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        check_repo_name(repo)
        from github import Auth, Github

        self.repo = repo
        self.api_url = api_url
        self._rng = rng or random.Random()
        self.tally = RequestTally()
        self._gh = Github(
            auth=Auth.Token(token),
            base_url=api_url,
            timeout=int(max(1, timeout_s)),
            retry=None,  # we retry ourselves, so a write that may have landed is never resent
            seconds_between_requests=None,
            seconds_between_writes=None,
            per_page=100,
        )
        self._token = token
        self._requester: Requester = self._gh.requester
        read_environment_once(self._requester)
        # A create whose answer was lost is looked for after the client's own timeout: by then
        # the server has either done it or dropped it.
        self.write_pace = Pace(settle_s=timeout_s, sleep=sleep, rng=self._rng)
        self._write_spacing = write_spacing_s
        self._max_rate_wait = max_rate_wait_s
        self._attempts = attempts
        self._sleep = sleep
        self._clock = clock
        self._last_write: float | None = None
        self._reached = False  # has the server ever answered this client?
        self._milestones: dict[str, int] | None = None

    def close(self) -> None:
        self._gh.close()

    def secret_values(self) -> tuple[str, ...]:
        """The credential this client holds, for scanning what the harness sends elsewhere
        (check environments, pushed diffs). Never log or show it."""
        return (self._token,)

    # -- the one door every request goes through -------------------------------------------
    def _call(
        self,
        verb: str,
        path: str,
        kind: str,
        *,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[dict[str, Any], Any]:
        from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

        write = verb != "GET"
        idempotent = verb in ("GET", "PATCH", "PUT", "DELETE")

        def wait(state: RetryCallState) -> float:
            # Full jitter, and never sooner than the server asked (retry-after, a reset).
            failure = state.outcome.exception() if state.outcome else None
            asked = failure.wait if isinstance(failure, _Transient) and failure.wait else 0.0
            backoff = self._rng.uniform(0, min(60.0, 2.0**state.attempt_number))
            return max(asked, backoff)

        retrying = Retrying(
            stop=stop_after_attempt(self._attempts),
            wait=wait,
            sleep=self._sleep,
            retry=retry_if_exception_type(_Transient),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._once(verb, path, kind, write, idempotent, params, body, headers)
        except _Transient as failure:
            raise TrackerError(
                f"{verb} {path} failed {self._attempts} times; last: {failure}"
            ) from None
        raise AssertionError("unreachable")  # tenacity either returns or raises

    def _once(
        self,
        verb: str,
        path: str,
        kind: str,
        write: bool,
        idempotent: bool,
        params: dict[str, Any] | None,
        body: dict[str, Any] | None,
        headers: dict[str, str] | None,
    ) -> tuple[dict[str, Any], Any]:
        """One request, counted and (for a write) spaced from the last one."""
        if write:
            self._space_write()
        try:
            self.tally.count(kind, write)
            return self._send(verb, path, params, body, headers)
        except _Transient as failure:
            # A write that may have landed is never resent blindly: the caller must look first.
            if failure.may_have_landed and not idempotent:
                raise WriteUncertain(
                    f"{verb} {path} may or may not have been applied ({failure})",
                    in_flight=not failure.answered,
                ) from None
            raise
        finally:
            if write:
                self._last_write = self._clock()

    def _space_write(self) -> None:
        if self._last_write is None or self._write_spacing <= 0:
            return
        wait = self._last_write + self._write_spacing - self._clock()
        if wait > 0:
            self._sleep(wait)

    def _send(
        self,
        verb: str,
        path: str,
        params: dict[str, Any] | None,
        body: dict[str, Any] | None,
        headers: dict[str, str] | None,
    ) -> tuple[dict[str, Any], Any]:
        import requests
        from github.GithubException import GithubException

        try:
            status, answered, output = self._requester.requestJson(
                verb, path, parameters=params, headers=headers, input=body
            )
            self._reached = True
            data = json_of(output, verb, path, status)
            if status >= 400:
                said = data.get("message") if isinstance(data, dict) else None
                if not isinstance(said, str | None):  # PyGithub reads it as text
                    data = {**data, "message": str(said)[:200]}
                elif not isinstance(data, dict):
                    data = {"message": str(data)[:200]} if data is not None else None
                raise self._requester.createException(status, answered, data)
            if status in REDIRECTS:  # not followed: nothing was done (a 307 on a write)
                raise redirected(status, answered, data, verb, path)
            return answered, data
        except GithubException as exc:
            self._reached = True
            raise self._classify(exc, verb, path) from None
        except RuntimeError as exc:  # PyGithub's refusal of a redirect to another host
            raise TrackerError(f"{verb} {path}: {exc}") from None
        except requests.exceptions.ConnectTimeout as exc:
            raise _Transient(f"connect timeout ({exc})", None, may_have_landed=False) from None
        except requests.exceptions.ConnectionError as exc:
            reason = connection_failure(exc)
            if reason and not self._reached:
                # Nothing here has ever answered: a wrong URL or a server that is down, which
                # five more tries over twenty seconds would not change.
                raise Unreachable(f"cannot reach {self.api_url}: {reason}") from None
            # Refused before sending cannot have landed; a reset after sending might have.
            landed = reason is None
            raise _Transient(reason or f"connection error: {_short(exc)}", None, landed) from None
        except requests.exceptions.Timeout as exc:
            raise _Transient(f"timeout ({_short(exc)})", None, may_have_landed=True) from None
        except (ValueError, requests.exceptions.RequestException) as exc:
            raise TrackerError(f"{verb} {path}: unreadable answer ({_short(exc)})") from None

    def _classify(self, exc: Any, verb: str, path: str) -> Exception:
        status = int(exc.status)
        data = exc.data if isinstance(exc.data, dict) else {}
        headers = {str(k).lower(): str(v) for k, v in (exc.headers or {}).items()}
        message = str(data.get("message") or "")
        if status == 401:
            return AuthError(f"bad credentials for {self.api_url} (check GH_TOKEN / GITHUB_TOKEN)")
        # GitHub's docs: a 429, or a 403 that says when to come back (`retry-after`) or that the
        # limit is spent, is a rate limit, whatever its message says ("abuse detection").
        if status == 429 or (
            status == 403
            and (
                "rate limit" in message.lower()
                or "retry-after" in headers
                or headers.get("x-ratelimit-remaining") == "0"
            )
        ):
            return self._rate_limit(headers, message)
        if status == 403:
            return PermissionDenied(f"{self.repo}: {message or 'forbidden'}", status)
        if status == 404:
            return RepoNotFound(
                f"{self.repo}: not found at {self.api_url} ({verb} {path}); "
                "check the name and that the token can see it",
                status,
            )
        if status == 422:
            errors = data.get("errors") or []
            errors = errors if isinstance(errors, list) else [errors]
            first = errors[0] if errors and isinstance(errors[0], dict) else {}
            detail = "; ".join(validation_error(e) for e in errors[:5] if e)
            text = f"GitHub refused {verb} {path}: {message}" + (f" ({detail})" if detail else "")
            return ValidationFailed(text, first.get("field"), first.get("code"))
        if status >= 500:
            return _Transient(
                f"HTTP {status} {message}".strip(), None, may_have_landed=True, answered=True
            )
        return TrackerError(f"{verb} {path}: HTTP {status} {message}".strip(), status)

    def _rate_limit(self, headers: dict[str, str], message: str) -> Exception:
        retry_after = headers.get("retry-after")
        if retry_after is not None:
            wait = _number(retry_after)
            if wait is not None and wait <= self._max_rate_wait:
                return _Transient("secondary rate limit", wait, may_have_landed=False)
        reset = _number(headers.get("x-ratelimit-reset", ""))
        if headers.get("x-ratelimit-remaining") == "0" and reset is not None:
            wait = max(0.0, reset - self._clock()) + 1.0
            if wait <= self._max_rate_wait:
                return _Transient("primary rate limit", wait, may_have_landed=False)
            when = datetime.fromtimestamp(reset, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            return RateLimited(
                f"GitHub rate limit spent; it resets at {when}, later than the "
                f"{self._max_rate_wait:.0f} s we may wait (tracker.max_rate_wait_s)",
                reset,
            )
        if retry_after is None:
            return _Transient("secondary rate limit", 60.0, may_have_landed=False)
        return RateLimited(f"rate limited: {message} (retry after {retry_after} s)", None)

    # -- Tracker ---------------------------------------------------------------------------
    def ensure_repo(self, create: bool = False, auto_init: bool = True) -> None:
        try:
            _, data = self._call("GET", f"/repos/{self.repo}", "get_repo")
            # GitHub matches owner/name without regard to case; keep its own spelling, so
            # `--repo Owner/App` and `--repo owner/app` name one project, not two.
            full_name = data.get("full_name") if isinstance(data, dict) else None
            if isinstance(full_name, str) and full_name.lower() == self.repo.lower():
                self.repo = full_name
            elif isinstance(full_name, str) and full_name:
                # Renamed or transferred: the old name answers through redirects, which drop a
                # request's query (`state=all`, `page=2`), so every read would be wrong.
                raise RepoMoved(
                    f"{self.repo} is now {full_name} on {self.api_url} (renamed or moved); "
                    f"run with --repo {full_name}"
                )
        except RepoNotFound:
            if not create:
                raise
            owner, name = self.repo.split("/")
            _, me = self._call("GET", "/user", "get_user")
            login = me.get("login") if isinstance(me, dict) else None
            mine = isinstance(login, str) and login.lower() == owner.lower()  # logins ignore case
            path = "/user/repos" if mine else f"/orgs/{owner}/repos"
            _, made = self._call(
                "POST", path, "create_repo", body={"name": name, "auto_init": auto_init}
            )
            full_name = made.get("full_name") if isinstance(made, dict) else None
            if isinstance(full_name, str) and full_name.lower() == self.repo.lower():
                self.repo = full_name  # GitHub's own spelling, as for one that exists

    def _list(
        self, path: str, kind: str, params: dict[str, Any], field: str | None = None
    ) -> list[dict[str, Any]]:
        """Every entry of a listing, page by page while GitHub links a next one. With `field`,
        the pages are objects holding the entries under that name (`{"total_count": n,
        "check_runs": [...]}`), and entries that are no objects are left out."""
        out: list[dict[str, Any]] = []
        for page in range(1, MAX_PAGES + 1):
            headers, data = self._call(
                "GET", path, kind, params={**params, "per_page": 100, "page": page}
            )
            held = data if field is None else data.get(field) if isinstance(data, dict) else None
            if not isinstance(held, list):
                raise TrackerError(
                    f"GET {path}: expected a list, got {type(data).__name__}"
                    if field is None
                    else f"GET {path}: the answer has no list of {field}"
                )
            out.extend(held if field is None else (e for e in held if isinstance(e, dict)))
            if not held or 'rel="next"' not in headers.get("link", ""):
                return out
        raise TrackerError(f"GET {path}: more than {MAX_PAGES} pages")

    def list_issues(self) -> list[IssueRecord]:
        raw = self._list(
            f"/repos/{self.repo}/issues",
            "list_issues",
            {"state": "all", "sort": "created", "direction": "asc"},
        )
        return [IssueRecord.from_json(item) for item in raw if "pull_request" not in item]

    def recent_issues(self, count: int = 30) -> list[IssueRecord]:
        _, data = self._call(
            "GET",
            f"/repos/{self.repo}/issues",
            "list_issues",
            params={"state": "all", "sort": "created", "direction": "desc", "per_page": count},
        )
        return [IssueRecord.from_json(item) for item in data if "pull_request" not in item]

    def _issue_payload(self, draft: IssueDraft) -> dict[str, Any]:
        if len(draft.body) > MAX_BODY:
            raise TrackerError(
                f"issue body is {len(draft.body)} characters; GitHub allows {MAX_BODY}"
            )
        payload: dict[str, Any] = {
            "title": draft.title,
            "body": draft.body,
            "labels": list(draft.labels),
            "milestone": None,
        }
        if draft.milestone:
            milestones = self.list_milestones() if self._milestones is None else self._milestones
            if draft.milestone not in milestones:
                raise TrackerError(f"milestone '{draft.milestone}' does not exist in {self.repo}")
            payload["milestone"] = milestones[draft.milestone]
        return payload

    def create_issue(self, draft: IssueDraft) -> IssueRecord:
        payload = self._issue_payload(draft)
        if payload["milestone"] is None:
            del payload["milestone"]
        _, data = self._call("POST", f"/repos/{self.repo}/issues", "create_issue", body=payload)
        return IssueRecord.from_json(data)

    def update_issue(self, number: int, draft: IssueDraft) -> IssueRecord:
        payload = self._issue_payload(draft)
        _, data = self._call(
            "PATCH", f"/repos/{self.repo}/issues/{number}", "update_issue", body=payload
        )
        return IssueRecord.from_json(data)

    def list_labels(self) -> list[str]:
        raw = self._list(f"/repos/{self.repo}/labels", "list_labels", {})
        return [str(label["name"]) for label in raw]

    def create_label(self, name: str, color: str = "ededed") -> None:
        self._call(
            "POST",
            f"/repos/{self.repo}/labels",
            "create_label",
            body={"name": name, "color": color},
        )

    def list_milestones(self) -> dict[str, int]:
        raw = self._list(f"/repos/{self.repo}/milestones", "list_milestones", {"state": "all"})
        self._milestones = {str(m["title"]): int(m["number"]) for m in raw}
        return dict(self._milestones)

    def create_milestone(self, title: str) -> int:
        _, data = self._call(
            "POST", f"/repos/{self.repo}/milestones", "create_milestone", body={"title": title}
        )
        number = int(data["number"])
        if self._milestones is not None:
            self._milestones[title] = number
        return number

    # -- pull requests -----------------------------------------------------------------------
    def repo_info(self) -> RepoInfo:
        _, data = self._call("GET", f"/repos/{self.repo}", "get_repo")
        return RepoInfo(
            full_name=str(data.get("full_name") or self.repo),
            default_branch=str(data.get("default_branch") or "main"),
            clone_url=str(data.get("clone_url") or ""),
            archived=bool(data.get("archived")),
        )

    def find_pull(self, head_branch: str) -> PullRecord | None:
        owner = self.repo.split("/")[0]
        _, data = self._call(
            "GET",
            f"/repos/{self.repo}/pulls",
            "list_pulls",
            params={
                "state": "all",
                "head": f"{owner}:{head_branch}",
                "sort": "created",
                "direction": "desc",
                "per_page": 10,
            },
        )
        pulls = [PullRecord.from_json(item) for item in data if isinstance(item, dict)]
        # Prefer an open one; a closed or merged one still tells the caller what happened.
        for pull in pulls:
            if pull.state == "open" and pull.head_ref == head_branch:
                return pull
        for pull in pulls:
            if pull.head_ref == head_branch:
                return pull
        return None

    def create_pull(self, title: str, body: str, head: str, base: str) -> PullRecord:
        _, data = self._call(
            "POST",
            f"/repos/{self.repo}/pulls",
            "create_pull",
            body={"title": title, "body": body, "head": head, "base": base},
        )
        return PullRecord.from_json(data)

    def update_pull(self, number: int, title: str, body: str) -> PullRecord:
        _, data = self._call(
            "PATCH",
            f"/repos/{self.repo}/pulls/{number}",
            "update_pull",
            body={"title": title, "body": body},
        )
        return PullRecord.from_json(data)

    def close_pull(self, number: int) -> PullRecord:
        _, data = self._call(
            "PATCH", f"/repos/{self.repo}/pulls/{number}", "update_pull", body={"state": "closed"}
        )
        return PullRecord.from_json(data)

    # -- reconcile: conditional listings and issue status --------------------------------------
    def _pages(
        self,
        path: str,
        kind: str,
        params: dict[str, Any],
        etag: str | None,
        stop: Callable[[dict[str, Any]], bool] | None = None,
    ) -> tuple[list[dict[str, Any]], str | None, bool, bool]:
        """(items, first page's etag, not_modified, complete). A 304 costs no rate limit, and an
        unchanged first page of a newest-first listing means nothing in it changed."""
        out: list[dict[str, Any]] = []
        first_etag: str | None = None
        for page in range(1, MAX_PAGES + 1):
            headers = {"If-None-Match": etag} if etag and page == 1 else None
            reply_headers, data = self._call(
                "GET", path, kind, params={**params, "per_page": 100, "page": page}, headers=headers
            )
            if page == 1:
                first_etag = reply_headers.get("etag")
                if data is None and etag:
                    return [], etag, True, True
            if not isinstance(data, list):
                raise TrackerError(f"GET {path}: expected a list, got {type(data).__name__}")
            for item in data:
                if stop is not None and stop(item):
                    return out, first_etag, False, False
                out.append(item)
            if not data or 'rel="next"' not in reply_headers.get("link", ""):
                return out, first_etag, False, True
        raise TrackerError(f"GET {path}: more than {MAX_PAGES} pages")

    def pulls_by_update(
        self, stop_before: str | None = None, etag: str | None = None
    ) -> Listing[PullRecord]:
        def older(item: dict[str, Any]) -> bool:
            return stop_before is not None and str(item.get("updated_at") or "") < stop_before

        raw, new_etag, unchanged, complete = self._pages(
            f"/repos/{self.repo}/pulls",
            "list_pulls",
            {"state": "all", "sort": "updated", "direction": "desc"},
            etag,
            older,
        )
        pulls = tuple(PullRecord.from_json(item) for item in raw)
        return Listing(pulls, new_etag, unchanged, complete)

    def commits_since(
        self, branch: str, since: str, etag: str | None = None
    ) -> Listing[CommitRecord]:
        raw, new_etag, unchanged, complete = self._pages(
            f"/repos/{self.repo}/commits", "list_commits", {"sha": branch, "since": since}, etag
        )
        return Listing(tuple(CommitRecord.from_json(c) for c in raw), new_etag, unchanged, complete)

    def get_pull(self, number: int) -> PullRecord:
        _, data = self._call("GET", f"/repos/{self.repo}/pulls/{number}", "get_pull")
        return PullRecord.from_json(data)

    def get_issue(self, number: int) -> IssueRecord:
        _, data = self._call("GET", f"/repos/{self.repo}/issues/{number}", "get_issue")
        return IssueRecord.from_json(data)

    def list_comments(self, number: int) -> list[CommentRecord]:
        raw = self._list(f"/repos/{self.repo}/issues/{number}/comments", "list_comments", {})
        return [CommentRecord.from_json(item) for item in raw]

    def create_comment(self, number: int, body: str) -> CommentRecord:
        if len(body) > MAX_BODY:
            raise TrackerError(f"comment is {len(body)} characters; GitHub allows {MAX_BODY}")
        _, data = self._call(
            "POST",
            f"/repos/{self.repo}/issues/{number}/comments",
            "create_comment",
            body={"body": body},
        )
        return CommentRecord.from_json(data)

    def set_labels(self, number: int, labels: tuple[str, ...]) -> tuple[str, ...]:
        _, data = self._call(
            "PUT",
            f"/repos/{self.repo}/issues/{number}/labels",
            "set_labels",
            body={"labels": list(labels)},
        )
        return tuple(str(label["name"]) for label in data or () if isinstance(label, dict))


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def connection_failure(exc: BaseException) -> str | None:
    """`connection refused` or `host name not found` when that is what happened (nothing was
    sent), in words instead of urllib3's; None for any other connection error."""
    text = str(exc).lower()
    if "refused" in text:
        return "connection refused"
    names = ("name or service not known", "nodename nor servname", "name resolution", "getaddrinfo")
    if any(part in text for part in names):
        return "host name not found"
    return None


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) < 160 else text[:157] + "..."
