"""What a person does by hand on the local forge: merge a pull request, close one or an issue.

On GitHub these are buttons; here they are `agent-harness forge merge|close`, working on a
forge's data directory directly. Both go through the forge's own REST operations as its user,
so a merge is the same real merge in the bare repository that `PUT .../merge` makes, and the
harness later reads it back (reconcile) exactly as it would read a merge made on GitHub.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_harness.errors import HarnessError, UsageError
from agent_harness.forge.errors import ApiError
from agent_harness.forge.local import existing_forge, split_repo

if TYPE_CHECKING:
    from agent_harness.forge.core import Forge

MERGE_METHODS = ("merge", "squash", "rebase")


class Refused(HarnessError):
    """The forge would not do it (already merged, closed, or in conflict)."""


@dataclass(frozen=True)
class Merged:
    repo: str
    number: int
    title: str
    method: str
    head: str
    base: str
    sha: str

    def as_json(self) -> dict[str, Any]:
        return {
            "repo": self.repo,
            "number": self.number,
            "title": self.title,
            "merged": True,
            "method": self.method,
            "head": self.head,
            "base": self.base,
            "sha": self.sha,
        }


@dataclass(frozen=True)
class Closed:
    repo: str
    number: int
    title: str
    is_pull: bool

    def as_json(self) -> dict[str, Any]:
        kind = "pull_request" if self.is_pull else "issue"
        return {"repo": self.repo, "number": self.number, "kind": kind, "state": "closed"}


def merge_pull(data_dir: Path, repo: str, number: int, method: str = "merge") -> Merged:
    """Merge pull request `number` of `repo` as its page's button would."""
    if method not in MERGE_METHODS:
        raise UsageError(f"merge method must be one of {', '.join(MERGE_METHODS)}, not {method}")
    with existing_forge(data_dir) as forge:
        base_path = _repo_path(forge, data_dir, repo)
        name = f"{repo}#{number}"
        pull = _get(forge, f"{base_path}/pulls/{number}")
        if pull is None:
            if _get(forge, f"{base_path}/issues/{number}") is not None:
                raise UsageError(f"{name} is an issue, not a pull request")
            raise UsageError(f"{repo} has no pull request #{number}")
        head, base = pull["head"]["ref"], pull["base"]["ref"]
        _refuse_finished(name, pull)
        if pull["mergeable"] is False:
            raise Refused(f"{name} conflicts with {base}; merge {base} into {head} first")
        body = {"merge_method": method, "sha": pull["head"]["sha"]}
        try:
            reply = forge.perform("PUT", f"{base_path}/pulls/{number}/merge", body)
        except ApiError as exc:
            raise Refused(f"{name} was not merged: {exc.api_message}") from None
        return Merged(repo, number, pull["title"], method, head, base, reply.body["sha"])


def close(data_dir: Path, repo: str, number: int) -> Closed:
    """Close issue or pull request `number` of `repo` (a pull request closes unmerged)."""
    with existing_forge(data_dir) as forge:
        base_path = _repo_path(forge, data_dir, repo)
        name = f"{repo}#{number}"
        issue = _get(forge, f"{base_path}/issues/{number}")
        if issue is None:
            raise UsageError(f"{repo} has no issue or pull request #{number}")
        is_pull = "pull_request" in issue
        if is_pull:
            pull = _get(forge, f"{base_path}/pulls/{number}")
            assert pull is not None
            _refuse_finished(name, pull)
        elif issue["state"] == "closed":
            raise Refused(f"{name} is already closed")
        path = f"{base_path}/{'pulls' if is_pull else 'issues'}/{number}"
        forge.perform("PATCH", path, {"state": "closed"})
        return Closed(repo, number, issue["title"], is_pull)


def _repo_path(forge: Forge, data_dir: Path, repo: str) -> str:
    owner, name = split_repo(repo)
    with forge.db.transaction():
        if forge.repo_row(owner, name) is None:
            raise UsageError(f"no repository {repo} on the local forge in {data_dir}")
    return f"/repos/{owner}/{name}"


def _get(forge: Forge, path: str) -> dict[str, Any] | None:
    try:
        body = forge.perform("GET", path).body
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    assert isinstance(body, dict)
    return body


def _refuse_finished(name: str, pull: dict[str, Any]) -> None:
    if pull["merged"]:
        raise Refused(f"{name} is already merged")
    if pull["state"] == "closed":
        raise Refused(f"{name} is closed; it was not merged")
