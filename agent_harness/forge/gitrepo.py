"""A bare git repository on disk, driven through the `git` CLI.

The forge keeps no copy of git state: branches, commits and comparisons are read from the bare
repository on every request, so a `git push` is visible to the API at once. Merges are computed
with `git merge-tree --write-tree` and written with `commit-tree`, so no worktree is needed.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agent_harness.forge.errors import ForgeError
from agent_harness.git.refs import RefFiles, Unreadable
from agent_harness.git.runner import GitResult, run_git

_SEP = "\x1f"
_END = "\x1e"
_LOG_FORMAT = _SEP.join(["%H", "%P", "%an", "%ae", "%aI", "%cn", "%ce", "%cI", "%T", "%B"]) + _END


@dataclass(frozen=True)
class Identity:
    """Who a commit is attributed to, and when (an ISO 8601 date git accepts)."""

    name: str
    email: str
    date: str


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parents: list[str]
    author_name: str
    author_email: str
    author_date: str
    committer_name: str
    committer_email: str
    committer_date: str
    tree: str
    message: str


@dataclass(frozen=True)
class TreeEntry:
    """One entry of a tree as `git ls-tree` lists it: `kind` is blob, tree or commit (a
    submodule), `size` a blob's bytes (None for the others), `path` relative to the tree
    listed, decoded with surrogateescape (a name that is not UTF-8 keeps its bytes)."""

    mode: str
    kind: str
    sha: str
    size: int | None
    path: str


@dataclass(frozen=True)
class FileChange:
    filename: str
    status: str
    additions: int
    deletions: int


class GitCommandError(ForgeError):
    """A git command run by the forge failed."""

    def __init__(self, args: list[str], stderr: str) -> None:
        self.args_run = args
        self.stderr = stderr
        super().__init__(f"git {' '.join(args)} failed: {stderr.strip().splitlines()[-1:]}")


_T = TypeVar("_T")
_FULL_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


class _CommitFacts:
    """What git says about two commits named by their full shas: their merge base, whether
    they merge, the files and commits between them. Commits never change, so each is asked
    once: a pull request's page is read far more often than its head or base moves."""

    def __init__(self, limit: int = 4096) -> None:
        self._known: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self._lock = threading.Lock()
        self._limit = limit

    def get(self, key: tuple[str, ...], compute: Callable[[], _T]) -> _T:
        if not all(_FULL_SHA.fullmatch(sha) for sha in key[2:]):
            return compute()  # a branch name moves: never remembered
        with self._lock:
            if key in self._known:
                self._known.move_to_end(key)
                return self._known[key]  # type: ignore[no-any-return]
        value = compute()
        with self._lock:
            self._known[key] = value
            while len(self._known) > self._limit:
                self._known.popitem(last=False)
        return value


_FACTS = _CommitFacts()
# Bare repository path -> the reader of its ref files (see BareRepo._ref_files).
_REF_FILES: dict[str, RefFiles] = {}


class BareRepo:
    """One bare repository: `<data>/git/<owner>/<name>.git`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _git(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        ok: tuple[int, ...] = (0,),
        input: str | None = None,
        errors: str = "replace",
    ) -> GitResult:
        """`git --git-dir <this repo> <args>` through the harness's one git runner; output
        read with `errors="surrogateescape"` gives its bytes back with `_bytes`."""
        path = self.path.absolute()  # run_git starts git in the repository itself
        proc = run_git(
            path, "--git-dir", str(path), *args, check=False, env=env, input=input, errors=errors
        )
        if proc.returncode not in ok:
            raise GitCommandError(list(args), proc.stderr)
        return proc

    @classmethod
    def create(
        cls, path: Path, default_branch: str, auto_init: bool, who: Identity, readme: str
    ) -> BareRepo:
        path.parent.mkdir(parents=True, exist_ok=True)
        init = ("init", "--bare", "--quiet", "--initial-branch", default_branch)
        proc = run_git(path.parent, *init, str(path.absolute()), check=False)
        if proc.returncode != 0:
            raise GitCommandError(["init", str(path)], proc.stderr)
        repo = cls(path)
        # Pushes over file:// must be accepted into the checked-out-less bare repo as-is.
        repo._git("config", "receive.denyNonFastForwards", "false")
        if auto_init:
            blob_sha = repo._hash_blob(readme)
            tree = repo._mktree([("100644", "blob", blob_sha, "README.md")])
            sha = repo.commit_tree(tree, [], "Initial commit", who, who)
            repo.update_ref(f"refs/heads/{default_branch}", sha)
        return repo

    def _hash_blob(self, content: str) -> str:
        return self._git("hash-object", "-w", "--stdin", input=content).stdout.strip()

    def _mktree(self, entries: list[tuple[str, str, str, str]]) -> str:
        text = "".join(f"{mode} {kind} {sha}\t{name}\n" for mode, kind, sha, name in entries)
        return self._git("mktree", input=text).stdout.strip()

    def _ref_files(self) -> RefFiles:
        """The repository's ref files; `Unreadable` when git must be asked instead. Its
        layout is looked at once per path (a request makes a BareRepo of its own)."""
        key = str(self.path)
        reader = _REF_FILES.get(key)
        if reader is None:
            reader = _REF_FILES[key] = RefFiles(self.path, bare=True)
        return reader

    def resolve(self, ref: str) -> str | None:
        """The commit a branch name, full ref or sha points at, or None."""
        if not ref or ref.startswith("-") or "\x00" in ref:
            return None  # an option to git, or no argument a process can be given
        candidates = [ref] if ref.startswith("refs/") else [f"refs/heads/{ref}", ref]
        if candidates[0].startswith("refs/heads/"):
            # A branch is read from its file, as git would (no process); a sha, a tag or an
            # unusual layout is asked of git.
            with contextlib.suppress(Unreadable):
                sha = self._ref_files().resolve(candidates[0])
                if sha is not None or ref.startswith("refs/"):
                    return sha
                candidates = candidates[1:]
        for candidate in candidates:
            proc = self._git(
                "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}", ok=(0, 1, 128)
            )
            if proc.returncode == 0:
                return proc.stdout.strip()
        return None

    def refs(self, prefix: str = "refs/heads/") -> dict[str, str]:
        """Full ref name -> sha for every ref `prefix` names, as `git for-each-ref` lists them:
        those in a folder (`refs/heads/`), or a ref by its full name and any in a folder of
        that name (`refs/heads/main`; not `refs/heads/mainline`)."""
        if "\x00" in prefix:
            return {}  # no ref is named so, and no process can be given it
        with contextlib.suppress(Unreadable):
            if prefix.endswith("/"):
                return self._ref_files().under(prefix)
            # Named as its folder lists it, never opened by its name: a file system that
            # ignores case would take `refs/heads/MAIN` for main's file.
            listed = self._ref_files().under(prefix.rpartition("/")[0] + "/")
            inside = prefix + "/"
            return {k: v for k, v in listed.items() if k == prefix or k.startswith(inside)}
        out = self._git("for-each-ref", "--format=%(refname) %(objectname)", prefix).stdout
        pairs = (line.split(" ", 1) for line in out.splitlines() if line)
        return {name: sha for name, sha in pairs}

    def branches(self) -> dict[str, str]:
        return {name.removeprefix("refs/heads/"): sha for name, sha in self.refs().items()}

    def set_head(self, branch: str) -> None:
        """The branch a clone checks out: the repository's default."""
        self._git("symbolic-ref", "HEAD", f"refs/heads/{branch}")

    def update_ref(self, ref: str, new: str, old: str | None = None) -> None:
        self._git("update-ref", ref, new, *([old] if old is not None else []))

    def delete_ref(self, ref: str) -> None:
        self._git("update-ref", "-d", ref)

    def log(
        self,
        tip: str,
        since: str | None = None,
        until: str | None = None,
        exclude: str | None = None,
        path: str | None = None,
    ) -> list[CommitInfo]:
        """Commits reachable from `tip` (newest first), optionally not from `exclude`."""
        args = ["log", f"--format={_LOG_FORMAT}", tip]
        if exclude:
            args.append(f"^{exclude}")
        if since:
            args.append(f"--since={since}")
        if until:
            args.append(f"--until={until}")
        if path:
            args += ["--", path]
        return [_parse_commit(rec) for rec in self._git(*args).stdout.split(_END) if rec.strip()]

    def commit(self, sha: str) -> CommitInfo:
        out = self._git("log", "-1", f"--format={_LOG_FORMAT}", sha).stdout
        return _parse_commit(out.split(_END)[0])

    def _key(self, what: str, a: str, b: str) -> tuple[str, ...]:
        return (str(self.path.absolute()), what, a, b)

    def merge_base(self, a: str, b: str) -> str | None:
        def ask() -> str | None:
            return self._git("merge-base", a, b, ok=(0, 1)).stdout.strip() or None

        return _FACTS.get(self._key("merge-base", a, b), ask)

    def count(self, exclude: str, tip: str) -> int:
        def ask() -> int:
            return int(self._git("rev-list", "--count", tip, f"^{exclude}").stdout.strip())

        return _FACTS.get(self._key("count", exclude, tip), ask)

    def merges_cleanly(self, base: str, head: str) -> bool:
        """Whether `head` merges into `base` without conflict (the merged tree is not kept:
        a tree remembered here could be pruned from the repository later)."""
        return _FACTS.get(
            self._key("merges", base, head), lambda: self.merged_tree(base, head) is not None
        )

    def merged_tree(self, base: str, head: str) -> str | None:
        """The tree of merging `head` into `base`, or None when they conflict."""
        proc = self._git("merge-tree", "--write-tree", base, head, ok=(0, 1))
        return proc.stdout.splitlines()[0].strip() if proc.returncode == 0 else None

    def tree_of(self, sha: str) -> str:
        return self._git("rev-parse", f"{sha}^{{tree}}").stdout.strip()

    def commit_tree(
        self, tree: str, parents: list[str], message: str, author: Identity, committer: Identity
    ) -> str:
        args = ["commit-tree", tree, "-m", message]
        for parent in parents:
            args += ["-p", parent]
        return self._git(*args, env=_identity_env(author, committer)).stdout.strip()

    def changes(self, base: str, head: str) -> list[FileChange]:
        """Files changed between two commits, with line counts."""
        return list(_FACTS.get(self._key("changes", base, head), lambda: self._changes(base, head)))

    def _changes(self, base: str, head: str) -> tuple[FileChange, ...]:
        status = self._git("diff", "--name-status", "--no-renames", base, head).stdout
        kinds = {"A": "added", "D": "removed", "M": "modified"}
        by_name: dict[str, str] = {}
        for line in status.splitlines():
            code, _, name = line.partition("\t")
            by_name[name] = kinds.get(code[:1], "changed")
        numstat = self._git("diff", "--numstat", "--no-renames", base, head).stdout
        out = []
        for line in numstat.splitlines():
            added, deleted, name = line.split("\t", 2)
            out.append(
                FileChange(
                    filename=name,
                    status=by_name.get(name, "modified"),
                    additions=int(added) if added.isdigit() else 0,
                    deletions=int(deleted) if deleted.isdigit() else 0,
                )
            )
        return tuple(out)

    def diff(self, base: str, head: str) -> str:
        """The unified diff from `base` to `head`, as `git diff` prints it without colour."""
        return self._git("diff", "--no-color", "--no-ext-diff", base, head).stdout

    def format_patch(self, base: str, head: str) -> str:
        """The commits from `base` to `head` as mail, oldest first (`git format-patch`)."""
        return self._git("format-patch", "--stdout", "--no-color", f"{base}..{head}").stdout

    # -- objects read whole: the git data and contents endpoints --------------------------------
    def object_kind(self, sha: str) -> str | None:
        """`commit`, `tree`, `blob` or `tag` for a full sha of an object here, else None."""
        if not _FULL_SHA.fullmatch(sha):
            return None
        proc = self._git("cat-file", "-t", sha, ok=(0, 128))
        return proc.stdout.strip() if proc.returncode == 0 else None

    def tree(self, tree_ish: str, recursive: bool = False) -> list[TreeEntry] | None:
        """The entries of a tree (a tree's or commit's sha, or `<commit>:<dir>`), every level
        with `recursive` (subtrees listed too, as GitHub does); None when it names no tree."""
        deep = ["-r", "-t"] if recursive else []
        proc = self._git("ls-tree", "-z", *deep, tree_ish, ok=(0, 128), errors=_RAW)
        if proc.returncode != 0:
            return None
        listed = []
        for record in proc.stdout.split("\0"):
            meta, tab, path = record.partition("\t")
            if tab:
                listed.append((*meta.split(" ", 2), path))
        # Sizes asked once per distinct blob (`ls-tree -l` looks each entry up: a second for
        # a tree of 100,000 entries that share a few blobs).
        sizes = self._sizes({sha for _, kind, sha, _ in listed if kind == "blob"})
        return [
            TreeEntry(mode, kind, sha, sizes.get(sha), path) for mode, kind, sha, path in listed
        ]

    def _sizes(self, blobs: set[str]) -> dict[str, int]:
        if not blobs:
            return {}
        asked = "".join(f"{sha}\n" for sha in blobs)
        out = self._git("cat-file", "--batch-check=%(objectname) %(objectsize)", input=asked)
        pairs = (line.split(" ") for line in out.stdout.splitlines())
        return {sha: int(size) for sha, size in pairs if size.isdigit()}

    def entry(self, commit: str, path: str) -> TreeEntry | None:
        """What `path` names in `commit` (a full sha), or None: also for a path that is not a
        plain relative one (`..`, `.`, an empty or absolute part), so that nothing but the
        repository's own objects is ever read."""
        parts = path.split("/")
        if any(part in ("", ".", "..") or "\x00" in part for part in parts):
            return None
        parent, _, name = path.rpartition("/")
        listed = self.tree(f"{commit}:{parent}" if parent else f"{commit}^{{tree}}") or []
        return next((found for found in listed if found.path == name), None)

    def blob(self, sha: str) -> bytes:
        """A blob's bytes, exactly."""
        return _bytes(self._git("cat-file", "blob", sha, errors=_RAW).stdout)

    def blob_size(self, sha: str) -> int:
        return int(self._git("cat-file", "-s", sha).stdout.strip())

    def submodule_url(self, commit: str, path: str) -> str | None:
        """Where `.gitmodules` of `commit` says the submodule at `path` comes from (read
        whole by git from the blob; nothing the file holds reaches git's command line)."""
        proc = self._git(
            "config", "--blob", f"{commit}:.gitmodules", "--null", "--list", ok=(0, 1, 128)
        )
        pairs = dict(item.split("\n", 1) for item in proc.stdout.split("\0") if "\n" in item)
        for key, value in pairs.items():
            if key.startswith("submodule.") and key.endswith(".path") and value == path:
                return pairs.get(key.removesuffix(".path") + ".url")
        return None

    def tags(self) -> list[tuple[str, str]]:
        """(name, commit sha) of every tag that leads to a commit, newest version first."""
        fields = "%(refname:strip=2)", "%(objecttype)", "%(objectname)", "%(*objecttype)"
        fmt = _SEP.join([*fields, "%(*objectname)"])
        out = self._git("for-each-ref", "--sort=-v:refname", f"--format={fmt}", "refs/tags/")
        tags = []
        for line in out.stdout.splitlines():
            name, kind, sha, peeled_kind, peeled = line.split(_SEP)
            if peeled_kind == "commit" or (not peeled_kind and kind == "commit"):
                tags.append((name, peeled or sha))
        return tags

    def rebase(self, base: str, head: str, committer: Identity) -> str | None:
        """Replay base..head onto base with a new committer; None on conflict.

        Uses a throwaway worktree because git 2.39's merge-tree cannot pick its merge base.
        """
        work = Path(tempfile.mkdtemp(prefix="forge-rebase-"))
        try:
            self._git("worktree", "add", "--detach", "--quiet", str(work / "w"), base)
            env = _identity_env(None, committer)
            commits = self._git("rev-list", "--reverse", "--no-merges", head, f"^{base}").stdout
            for sha in commits.split():
                picked = run_git(
                    work / "w", "cherry-pick", "--allow-empty", sha, check=False, env=env
                )
                if picked.returncode != 0:
                    return None
            return run_git(work / "w", "rev-parse", "HEAD").stdout.strip()
        finally:
            self._git("worktree", "remove", "--force", str(work / "w"), ok=(0, 128))
            shutil.rmtree(work, ignore_errors=True)
            self._git("worktree", "prune", ok=(0, 128))


# How output holding file names or contents is read: every byte kept (see `_bytes`).
_RAW = "surrogateescape"


def _bytes(text: str) -> bytes:
    """Output read with `errors=_RAW` as the bytes git wrote."""
    return text.encode("utf-8", _RAW)


def _identity_env(author: Identity | None, committer: Identity) -> dict[str, str]:
    env = {
        "GIT_COMMITTER_NAME": committer.name,
        "GIT_COMMITTER_EMAIL": committer.email,
        "GIT_COMMITTER_DATE": committer.date,
    }
    if author is not None:
        env |= {
            "GIT_AUTHOR_NAME": author.name,
            "GIT_AUTHOR_EMAIL": author.email,
            "GIT_AUTHOR_DATE": author.date,
        }
    return env


def _parse_commit(record: str) -> CommitInfo:
    fields = record.lstrip("\n").split(_SEP)
    return CommitInfo(
        sha=fields[0],
        parents=fields[1].split(),
        author_name=fields[2],
        author_email=fields[3],
        author_date=fields[4],
        committer_name=fields[5],
        committer_email=fields[6],
        committer_date=fields[7],
        tree=fields[8],
        message=fields[9].rstrip("\n"),
    )
