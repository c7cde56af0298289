"""One git worktree and branch per item, made from the latest default branch, never lost.

A worktree lives at `<state>/worktrees/<item>` on branch `agent-harness/<item>-<slug>`. A re-run
reuses a healthy worktree and rebuilds a broken one from its branch, so commits are never thrown
away. Pushes go through one guard that refuses any refspec naming the default branch.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_harness.git import runner
from agent_harness.git.attributes import attributes_at
from agent_harness.git.catchup import catch_up, foreign_head
from agent_harness.git.change import Change, read_change, save_uncommitted
from agent_harness.git.clone_checks import (
    refuse_other_remote,
    refuse_shared_worktrees,
    refuse_work_in_progress,
    status_paths,
)
from agent_harness.git.errors import (
    CloneUnusable,
    DefaultBranchGuard,
    RepoRefused,
    WorktreeError,
    refused_or_not,
)
from agent_harness.git.ignore import exclude_from
from agent_harness.git.naming import (
    BRANCH_PREFIX,
    branch_name,
    branch_prefix,
    find_branch,
    of_a_longer_id,
    worktree_dir_name,
)
from agent_harness.git.protect import ChangedPathsUnknown, changed_paths
from agent_harness.git.refs import RefFiles, Unreadable
from agent_harness.git.remote_lock import RemoteRefsLock
from agent_harness.git.settings import SettingsWatch
from agent_harness.git.submodules import check_out_submodules
from agent_harness.plan.model import shell_word


@dataclass(frozen=True)
class Worktree:
    item_id: str
    path: Path
    branch: str
    base_sha: str  # the default-branch commit the work started from
    reused: bool = False
    # A ref keeping this clone's own commits that could not be put on top of the branch as
    # another clone pushed it (the branch now holds the pushed work); None when nothing was set
    # aside.
    kept: str | None = None
    # The branch's pushed head, left alone because it is none of `prepare`'s `ours` (a commit a
    # person pushed to the branch): None when there is none such.
    foreign: str | None = None


def _checked_out(path: Path) -> str | None:
    """The branch a worktree has checked out; None when it has none, or is not there."""
    return _safe(lambda: _git(path, "symbolic-ref", "--short", "HEAD")) if path.exists() else None


GIT_TIMEOUT_S = runner.GIT_TIMEOUT_S  # the longest any one git command here may take


def repo_git(
    cwd: Path,
    *args: str,
    check: bool = True,
    timeout_s: float = GIT_TIMEOUT_S,
    input: bytes | None = None,
) -> runner.GitResult:
    """`run_git` for work repositories and their worktrees: a failure is a `WorktreeError`.

    Output is decoded with "surrogateescape", so a file name that is not UTF-8 survives the
    round trip back to the file system."""
    try:
        return runner.run_git(
            cwd, *args, check=check, timeout_s=timeout_s, input=input, errors="surrogateescape"
        )
    except runner.GitError as exc:
        raise WorktreeError(exc.message) from exc


def _git(repo_dir: Path, *args: str) -> str:
    # Only the final newline goes: a diff whose last line is blank must keep that line.
    return repo_git(repo_dir, *args).stdout.removesuffix("\n")


class WorkRepo:
    """The user's clone (`--work`), its remote, and the worktrees the harness keeps beside it."""

    def __init__(
        self,
        path: Path,
        state_dir: Path,
        remote: str = "origin",
        clone_url: str | Callable[[], str | None] | None = None,
    ) -> None:
        self.path = path.resolve()
        self.state_dir = state_dir
        self.remote = remote
        if not self.path.is_dir():
            raise CloneUnusable(f"--work {path} is not a directory")
        inside = _safe(lambda: _git(self.path, "rev-parse", "--is-inside-work-tree"))
        if inside != "true":
            bare = _safe(lambda: _git(self.path, "rev-parse", "--is-bare-repository")) == "true"
            raise CloneUnusable(
                f"--work {path} is a bare repository; give a clone with a work tree"
                if bare
                else f"--work {path} is not a git repository"
            )
        top = Path(_git(self.path, "rev-parse", "--show-toplevel")).resolve()
        if top != self.path:
            raise CloneUnusable(f"--work {path} is inside the repository at {top}; pass the top")
        if _safe(lambda: _git(self.path, "rev-parse", "--verify", "-q", "HEAD")) is None:
            raise CloneUnusable(f"--work {path} has no commits yet; commit something first")
        if _safe(lambda: _git(self.path, "remote", "get-url", remote)) is None:
            clone_url = clone_url() if callable(clone_url) else clone_url  # asked only now
            raise CloneUnusable(
                f"--work {path} has no remote '{remote}' to push branches to; add the "
                f"repository's clone URL: git -C {shell_word(str(path))} remote add {remote} "
                f"{shell_word(clone_url) if clone_url else 'URL'}"
            )
        self._default: str | None = None
        self._default_at_start: str | None = None  # the local default branch, at the run's start
        self._fetched_at: float | None = None
        # (worktree, base, sha) -> that commit's change: asked of git once for the gates and
        # the review alike (a commit's change since a given base never changes).
        self._changes: dict[tuple[str, str, str], Change] = {}
        self._changes_lock = threading.Lock()
        self.remote_refs = RemoteRefsLock()  # shared by every worker using this clone
        # Before any agent runs: the clone's git settings and hooks, and the pins our git runs
        # with. Each git command of ours that may follow an agent's work checks them first
        # (see git/settings.py).
        self.settings = SettingsWatch(self.path)
        self._exclude_state_dir()
        self.fetch_max_age_s = 5.0  # items started together share one fetch of the remote

    def _git(self, cwd: Path, *args: str) -> str:
        """`_git` with the pins every git command of ours in this clone runs with."""
        return _git(cwd, *self.settings.pins, *args)

    def _repo_git(
        self, cwd: Path, *args: str, check: bool = True, input: bytes | None = None
    ) -> runner.GitResult:
        return repo_git(cwd, *self.settings.pins, *args, check=check, input=input)

    def _exclude_state_dir(self) -> None:
        """With `--work .` the state lands inside the clone: keep it out of `git status`."""
        if not self.state_dir.resolve().is_relative_to(self.path):
            return
        info = Path(self._git(self.path, "rev-parse", "--git-path", "info/exclude"))
        exclude_from(self.path, self.state_dir, info if info.is_absolute() else self.path / info)

    @property
    def worktrees_dir(self) -> Path:
        return self.state_dir / "worktrees"

    def default_branch(self) -> str:
        if self._default is None:
            head = _safe(
                lambda: self._git(
                    self.path, "symbolic-ref", "--short", f"refs/remotes/{self.remote}/HEAD"
                )
            )
            if head:
                self._default = head.split("/", 1)[1]
            else:
                listing = self._git(self.path, "ls-remote", "--symref", self.remote, "HEAD")
                match = re.search(r"ref: refs/heads/(\S+)\s+HEAD", listing)
                if not match:
                    raise WorktreeError(f"cannot tell the default branch of remote '{self.remote}'")
                self._default = match.group(1)
        return self._default

    def set_default_branch(self, name: str) -> None:
        self._default = name

    def fetch(self, max_age_s: float = 0.0) -> None:
        """Fetch the remote, unless it was fetched less than `max_age_s` seconds ago."""
        now = time.monotonic()
        if self._fetched_at is not None and now - self._fetched_at < max_age_s:
            return
        with self.remote_refs.fetch():
            self._git(self.path, "fetch", "--quiet", "--prune", self.remote)
        self._fetched_at = time.monotonic()

    def remote_sha(self, branch: str) -> str | None:
        return _safe(
            lambda: self._git(
                self.path, "rev-parse", "--verify", "-q", f"refs/remotes/{self.remote}/{branch}"
            )
        )

    def check_clean_default(self, allow: Sequence[Path] = ()) -> None:
        """A dirty checkout of the default branch is the user's work in progress: refuse, naming
        the files; changes to the files in `allow` (the plan, read as it is) excepted. Where
        the local default branch stands at the first check is kept: commits of the user's own
        on it, not pushed, are not an agent's (items branch from the remote's). A later check
        (a plan's run ending beside another) leaves it, or an agent's commit would pass."""
        if self._default_at_start is None:
            self._default_at_start = _safe(
                lambda: self._git(self.path, "rev-parse", "--verify", "-q", self.default_branch())
            )
        current = _safe(lambda: self._git(self.path, "symbolic-ref", "--short", "HEAD"))
        if current == self.default_branch():
            status = self._git(self.path, "status", "--porcelain", "-z", "--untracked-files=no")
            refuse_work_in_progress(self.path, current, status, allow)

    def push_url(self) -> str | None:
        """Where the clone's remote pushes; None without one."""
        return _safe(lambda: self._git(self.path, "remote", "get-url", "--push", self.remote))

    def check_remote(self, full_name: str, clone_url: str) -> None:
        """Refuse a clone whose remote is another repository than the tracker's: the items'
        branches would be pushed there, and no pull request could name them."""
        url = self.push_url()
        if url is not None:
            refuse_other_remote(self.path, self.remote, url, full_name, clone_url)
        common = Path(self._git(self.path, "rev-parse", "--git-common-dir"))
        refuse_shared_worktrees(self.worktrees_dir, self.path / common)

    # -- worktrees -----------------------------------------------------------------------------
    def prepare(
        self,
        item_id: str,
        title: str,
        namespace: str = "",
        generation: int = 0,
        *,
        pushed: bool = False,
        known: str | None = None,
        guard_private: bool = False,
        ours: Collection[str] | None = None,
        others: Callable[[], Iterable[str]] = tuple,
    ) -> Worktree:
        """The item's worktree: reused when healthy, rebuilt when broken, new otherwise (see
        `Workspace.prepare` for the arguments). With `guard_private` (a run's claim), a branch
        in the item's name that `known` does not name and that holds unpushed commits is
        someone's own, and refused (`RepoRefused`); `ours`: see `catchup.foreign_head`."""
        # An item keeps the branch it started on, even if its title is edited later: a new
        # name would orphan pushed work and open a second pull request.
        self.settings.check()  # `worktree add` runs hooks, and another agent may have run
        default = self.default_branch()
        self.fetch(0.0 if pushed else self.fetch_max_age_s)
        prefix = branch_prefix(item_id, namespace, generation)
        refs = self._item_refs(prefix, default)
        named = branch_name(item_id, title, namespace, generation)
        path = self.worktrees_dir / worktree_dir_name(item_id, namespace, generation)
        current = _checked_out(path)

        wanted = (known, named, current)
        branch = find_branch(refs, self.remote, item_id, namespace, generation, wanted, others)
        branch = branch or named
        base = refs.get(f"refs/remotes/{self.remote}/{default}") or self._git(
            self.path, "rev-parse", default
        )
        local = refs.get(f"refs/heads/{branch}")
        pushed_sha = refs.get(f"refs/remotes/{self.remote}/{branch}")
        if guard_private and local is not None and branch != known:
            self._refuse_private(branch, local, base, pushed_sha)
        existing = local or pushed_sha
        foreign = foreign_head(self._repo_git, self.path, pushed_sha, local, ours)
        if path.exists() and current == branch:
            kept = None if foreign else self._catch_up(path, branch, pushed_sha)
            merge_base = _safe(lambda: self._git(path, "merge-base", "HEAD", base)) or base
            return Worktree(item_id, path, branch, merge_base, True, kept, foreign)
        if path.exists():
            # Broken: remove the directory and the stale registration, keep the branch.
            shutil.rmtree(path, ignore_errors=True)
            self.forget_worktree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        made_at_base, local = self._add_once_listed(path, branch, local, existing, base)
        kept = self._catch_up(path, branch, pushed_sha) if local and not foreign else None
        if made_at_base:
            # A new branch made at the base: the base is its merge base, no need to ask.
            return Worktree(item_id, path, branch, base, reused=False)
        merge_base = _safe(lambda: self._git(path, "merge-base", "HEAD", base)) or base
        reused = existing is not None
        return Worktree(item_id, path, branch, merge_base, reused, kept, foreign)

    def _item_refs(self, prefix: str, default: str) -> dict[str, str]:
        """One look at every ref that matters to an item's worktree (its branches, here and
        pushed, and the default branch's), instead of a git call per question. A branch named
        like the harness's folder of branches blocks every branch in it: refused, said once."""
        folder = BRANCH_PREFIX.rstrip("/")
        refs = self._refs(
            f"refs/heads/{prefix}*",
            f"refs/remotes/{self.remote}/{prefix}*",
            f"refs/heads/{default}",
            f"refs/remotes/{self.remote}/{default}",
            f"refs/heads/{folder}",
        )
        if f"refs/heads/{folder}" in refs:
            raise RepoRefused(
                f"the clone has a branch '{folder}', which blocks every branch under "
                f"'{BRANCH_PREFIX}' the harness makes; rename it (`git branch -m {folder} <other>`)"
            )
        return refs

    def _refuse_private(self, branch: str, local: str, base: str, pushed: str | None) -> None:
        """A branch in the item's name that its history does not know, holding commits that
        are neither on the base nor pushed: someone's own work (`agent-harness/T1-wip`), which
        the harness must neither build on nor push."""
        private = self._commits_beyond(local, base, pushed)
        if private:
            raise RepoRefused(
                f"branch '{branch}' is in the item's name but not in its history, and holds "
                f"{private} commit(s) that are not pushed: the harness will not build on it or "
                f"push it; rename it (`git branch -m {branch} <other>`), or start the item on "
                "a new branch with `agent-harness work retry --fresh`"
            )

    def _add_once_listed(
        self, path: Path, branch: str, local: str | None, existing: str | None, base: str
    ) -> tuple[bool, str | None]:
        """`_add`, and when git refuses because it still lists a deleted worktree there, that
        listing cleared and `_add` again; with the local branch, if there is one by then."""
        try:
            return self._add(path, branch, local, existing, base), local
        except WorktreeError:
            if not self._registered(path):
                raise
        # A failed `add -b` may have made the branch already: it is used, not made twice.
        self.forget_worktree(path)
        local = local or self._refs(f"refs/heads/{branch}").get(f"refs/heads/{branch}")
        return self._add(path, branch, local, existing, base), local

    def _add(
        self, path: Path, branch: str, local: str | None, existing: str | None, base: str
    ) -> bool:
        """`git worktree add` for the item's branch: the local one, else one made from the
        remote's (pushed earlier from another clone), else a new one at `base` (True)."""
        if local:
            self._git(self.path, "worktree", "add", "--quiet", str(path), branch)
            self.settings.note_worktree(path)
            check_out_submodules(self.path, path, self.settings.pins)
            return False
        start = f"{self.remote}/{branch}" if existing else base
        # No upstream: the branch is pushed by name, and the clone's settings stay as they were.
        self._git(
            self.path, "worktree", "add", "--quiet", "--no-track", "-b", branch, str(path), start
        )
        self.settings.note_worktree(path)
        check_out_submodules(self.path, path, self.settings.pins)
        return not existing

    def _catch_up(self, path: Path, branch: str, pushed_sha: str | None) -> str | None:
        return catch_up(self._git, self._repo_git, path, branch, pushed_sha)

    def _refs(self, *patterns: str) -> dict[str, str]:
        """Full ref name -> sha for the refs matching `patterns` (for-each-ref globs), read
        from the ref files where they read plainly."""
        with contextlib.suppress(Unreadable):
            return RefFiles(self.path).matching(*patterns)
        listing = self._git(
            self.path, "for-each-ref", "--format=%(objectname) %(refname)", *patterns
        )
        refs: dict[str, str] = {}
        for line in listing.splitlines():
            sha, _, name = line.partition(" ")
            if name:
                refs[name] = sha
        return refs

    @staticmethod
    def _refs_in(where: Path, *patterns: str) -> tuple[dict[str, str], str | None]:
        """`_refs`, asked in the worktree `where`, and the listed ref its HEAD is on (None when
        it is on none of them, is detached, or git cannot say)."""
        listing = _safe(
            lambda: _git(
                where, "for-each-ref", "--format=%(HEAD)%(objectname) %(refname)", *patterns
            )
        )
        refs: dict[str, str] = {}
        head: str | None = None
        for line in (listing or "").splitlines():
            sha, _, name = line[1:].partition(" ")
            if name:
                refs[name] = sha
                head = name if line.startswith("*") else head
        return refs, head

    def _commits_beyond(self, tip: str, *known: str | None) -> int:
        """How many commits `tip` has that none of the `known` commits (None: left out) has."""
        others = [sha for sha in known if sha]
        counted = self._git(self.path, "rev-list", "--count", tip, "--not", *others).strip()
        return int(counted or 0)

    def forget_worktree(self, path: Path) -> None:
        """Drop git's record of the harness's worktree at `path` (its directory gone or going),
        and only that one: `git worktree prune` would also forget a worktree of the user's
        whose disk is not mounted at the time."""
        self._repo_git(
            self.path, "worktree", "remove", "--force", "--force", str(path), check=False
        )

    def _registered(self, path: Path) -> bool:
        listing = self._git(self.path, "worktree", "list", "--porcelain")
        return f"worktree {path.resolve()}" in listing

    # -- what the agent did ------------------------------------------------------------------
    def verify_branch(self, tree: Worktree) -> None:
        """Refuse work an agent committed to the default branch, or a worktree it broke."""
        self.settings.check(tree.path)
        if not tree.path.is_dir():
            raise WorktreeError(f"the agent deleted its worktree {tree.path}")
        default = self.default_branch()
        # One git call in the worktree answers both: which branch its HEAD is on (the one
        # marked `*`), and where the default branch and its remote-tracking ref are.
        wanted = (
            f"refs/heads/{tree.branch}",
            f"refs/heads/{default}",
            f"refs/remotes/{self.remote}/{default}",
        )
        try:  # from the ref files, when they read plainly: no process
            files = RefFiles(tree.path)
            on, _ = files.head()
            head = on if on is not None and files.resolve(on) is not None else None
            local_default = files.resolve(wanted[1])
            remote_default = files.resolve(wanted[2])
        except Unreadable:
            refs, head = self._refs_in(tree.path, *wanted)
            local_default, remote_default = refs.get(wanted[1]), refs.get(wanted[2])
        if head != wanted[0]:
            current = _safe(lambda: self._git(tree.path, "symbolic-ref", "--short", "HEAD"))
            raise DefaultBranchGuard(
                f"the agent left its worktree on '{current or 'a detached HEAD'}' instead of "
                f"{tree.branch}; its work is refused"
            )
        start = self._default_at_start
        if local_default and remote_default and local_default not in (remote_default, start):
            # Commits on the local default branch that are neither the remote's nor there when
            # the run started: an agent's (worktrees share the clone's branches).
            ahead = self._commits_beyond(local_default, remote_default, start)
            if ahead:
                raise DefaultBranchGuard(
                    f"the local {default} branch gained {ahead} commit(s) during the run: "
                    f"an agent committed to the default branch; refused"
                )

    def commit_all(self, tree: Worktree, message: str) -> str | None:
        """Commit whatever the agent left uncommitted; the sha, or None when nothing changed."""
        self.settings.check(tree.path)
        added = self._repo_git(tree.path, "add", "--all", check=False)
        if not added.ok:
            raise refused_or_not(runner.failure(tree.path, ("add", "--all"), added).message)
        # Asking git to commit is cheaper than asking first whether to; "nothing to commit"
        # comes back on stdout with exit status 1.
        args = (
            "-c",
            "user.name=agent-harness",
            "-c",
            "user.email=agent-harness@localhost",
            "commit",
            "--quiet",
            "--no-verify",
            "-m",
            message,
        )
        done = self._repo_git(tree.path, *args, check=False)
        if not done.ok:
            said = done.stdout + done.stderr
            if "nothing to commit" in said or "nothing added to commit" in said:
                return None
            raise refused_or_not(runner.failure(tree.path, args, done).message)
        return self.head(tree)

    def has_uncommitted(self, tree: Worktree) -> bool:
        self.settings.check(tree.path)
        return bool(self._git(tree.path, "status", "--porcelain").strip())

    def discard_uncommitted(self, tree: Worktree, save_to: Path | None = None) -> list[str]:
        if tree.path.resolve() == self.path:  # never the person's own checkout
            raise WorktreeError(f"refusing to reset {tree.path}: it is the clone, no worktree")
        self.settings.check(tree.path)
        status = self._git(tree.path, "status", "--porcelain", "-z", "--untracked-files=all")
        differ = sorted(set(status_paths(status)))
        if differ and save_to is not None:
            save_uncommitted(tree.path, save_to, self.settings.pins)
        if differ:
            self._git(tree.path, "reset", "--hard", "--quiet", "HEAD")
            self._git(tree.path, "clean", "-d", "--force", "--quiet")
        return differ

    def diff(self, tree: Worktree, sha: str) -> str:
        """What commit `sha` changes since the base, as one unified diff: what is reviewed is
        the commit that is pushed, never what else the worktree holds."""
        patch = self._change(tree, sha).patch.removesuffix("\n")
        # Bytes that are not UTF-8 (a Latin-1 file, an odd file name) are shown as such to the
        # reviewer, whose request must be valid UTF-8; the scan reads them as they are.
        return patch.encode("utf-8", "surrogateescape").decode("utf-8", "replace")

    def committed_diff(self, tree: Worktree) -> str:
        """What the item's commits add since the base, binary files' content included, for a
        scan."""
        sha = self.head(tree)
        try:
            return self._change(tree, sha).scan_text(tree.path, sha)
        except runner.GitError as exc:
            raise WorktreeError(exc.message) from exc

    def large_files(self, tree: Worktree, sha: str, limit: int) -> list[tuple[str, int]]:
        """The files commit `sha` holds, among those its change touches, of more than `limit`
        bytes, with their sizes. Sizes are asked of git only when the change has a binary file
        or a patch that large (a text file that size makes one)."""
        change = self._change(tree, sha)
        if not change.binary and len(change.patch) <= limit:
            return []
        paths = [path for path in change.paths if "\n" not in path]
        asked = "".join(f"{sha}:{path}\n" for path in paths).encode("utf-8", "surrogateescape")
        done = self._repo_git(tree.path, "cat-file", "--batch-check=%(objectsize)", input=asked)
        sizes = done.stdout.split("\n")
        return [
            (path, int(size))
            for path, size in zip(paths, sizes, strict=False)
            if size.isdigit() and int(size) > limit  # "… missing": deleted at `sha`
        ]

    def _change(self, tree: Worktree, sha: str) -> Change:
        key = (str(tree.path), tree.base_sha, sha)
        with self._changes_lock:
            known = self._changes.get(key)
        if known is not None:
            return known
        try:
            change = read_change(tree.path, tree.base_sha, sha)
        except runner.GitError as exc:
            raise WorktreeError(exc.message) from exc
        with self._changes_lock:
            while len(self._changes) >= 32:  # about one per worker is ever read again
                del self._changes[next(iter(self._changes))]
            self._changes[key] = change
        return change

    def discard(
        self,
        item_id: str,
        namespace: str = "",
        generation: int = 0,
        others: Iterable[str] = (),
    ) -> list[str]:
        """Remove one generation's worktree and local branch (`work retry --fresh`); the
        remote branch, a pull request's history, is left alone, and so are the branches of
        `others` (the plan's other item ids) whose ids go on from this one's. Returns what was
        removed."""
        self.settings.check()
        removed: list[str] = []
        path = self.worktrees_dir / worktree_dir_name(item_id, namespace, generation)
        if path.exists() or self._registered(path):
            shutil.rmtree(path, ignore_errors=True)
            self.forget_worktree(path)
            removed.append(str(path))
        prefix = f"refs/heads/{branch_prefix(item_id, namespace, generation)}"
        for ref in self._refs(prefix + "*"):
            name = ref.removeprefix("refs/heads/")
            if not of_a_longer_id(name, item_id, namespace, others):
                self._git(self.path, "branch", "-D", name)
                removed.append(name)
        return removed

    def changed_paths(self, tree: Worktree, sha: str | None = None) -> list[str]:
        """Every path that differs from the base, or that commit `sha` changes (see
        `protect.changed_paths`)."""
        if sha is None:
            return changed_paths(tree.path, tree.base_sha)
        try:
            return list(self._change(tree, sha).paths)
        except WorktreeError as exc:
            raise ChangedPathsUnknown(tree.path, tree.base_sha, exc.message) from exc

    def attributes(
        self, tree: Worktree, names: list[str], paths: list[str]
    ) -> dict[str, dict[str, str]]:
        """The git attributes `names` of each of `paths` as the item's base commit gives them
        (`set`, `unset`, a value; `unspecified` left out)."""
        self.settings.check(tree.path)
        try:
            return attributes_at(tree.path, tree.base_sha, names, paths, self.settings.pins)
        except runner.GitError as exc:
            raise WorktreeError(exc.message) from exc

    def head(self, tree: Worktree) -> str:
        """The worktree's head commit, read from its ref files where they read plainly."""
        with contextlib.suppress(Unreadable):
            sha = RefFiles(tree.path).head()[1]
            if sha is not None:
                return sha
        return self._git(tree.path, "rev-parse", "HEAD")

    def push(self, tree: Worktree, sha: str | None = None) -> None:
        """Push the item branch, and only it: the guard refuses the default branch. With `sha`,
        the branch is pushed as that commit (the one reviewed), whatever its head is now."""
        default = self.default_branch()
        if tree.branch in (default, f"refs/heads/{default}") or not tree.branch.startswith(
            BRANCH_PREFIX
        ):
            raise DefaultBranchGuard(f"refusing to push {tree.branch}: not an agent-harness branch")
        refspec = f"{sha or f'refs/heads/{tree.branch}'}:refs/heads/{tree.branch}"
        guard_refspec(refspec, default)
        self.settings.check(tree.path)  # after the checks and the review (the agent's code)
        with self.remote_refs.push():
            # From the worktree: a pre-push hook of the user's checks the branch pushed.
            self._git(tree.path, "push", "--quiet", self.remote, refspec)

    def update_from_base(self, branch: str, expected: str) -> tuple[list[str], str] | None:
        """Bring the item branch up to date with the default branch, in its worktree.

        A rebase first: when it applies, the branch is pushed over `expected` only (a lease, so
        a commit someone else pushed since is never overwritten). When it does not, the base is
        merged instead and left with its conflict markers for the agent. Returns (the files in
        conflict, the head), or None when the branch has no clean worktree here at `expected`."""
        path = self.worktree_of(branch)
        if path is None:
            return None
        self.settings.check(path)
        if self._git(path, "rev-parse", "HEAD") != expected:
            return None
        if self._git(path, "status", "--porcelain").strip():
            return None
        self.fetch()
        base = f"{self.remote}/{self.default_branch()}"
        who = ("-c", "user.name=agent-harness", "-c", "user.email=agent-harness@localhost")
        if self._repo_git(path, *who, "rebase", "--quiet", base, check=False).ok:
            refspec = f"refs/heads/{branch}:refs/heads/{branch}"
            guard_refspec(refspec, self.default_branch())
            lease = f"--force-with-lease=refs/heads/{branch}:{expected}"
            with self.remote_refs.push():
                self._git(path, "push", "--quiet", lease, self.remote, refspec)
            return [], self._git(path, "rev-parse", "HEAD")
        self._repo_git(path, "rebase", "--abort", check=False)
        self._repo_git(path, *who, "merge", "--no-edit", "--quiet", base, check=False)
        conflicts = self._git(path, "diff", "--name-only", "--diff-filter=U").splitlines()
        return conflicts, self._git(path, "rev-parse", "HEAD")

    def worktree_of(self, branch: str) -> Path | None:
        """The worktree that has `branch` checked out, if any; one whose directory was removed
        by hand is forgotten and counts as none (git would refuse every command in it)."""
        listing = self._git(self.path, "worktree", "list", "--porcelain")
        path: Path | None = None
        for line in listing.splitlines():
            if line.startswith("worktree "):
                path = Path(line.removeprefix("worktree "))
            elif line == f"branch refs/heads/{branch}" and path is not None:
                if path.is_dir():
                    return path
                self.forget_worktree(path)
                return None
        return None

    def unpushed(self, tree: Worktree) -> int:
        remote = self.remote_sha(tree.branch)
        if remote is None:
            return int(self._git(tree.path, "rev-list", "--count", f"{tree.base_sha}..HEAD"))
        return int(self._git(tree.path, "rev-list", "--count", f"{remote}..HEAD"))


def guard_refspec(refspec: str, default_branch: str) -> None:
    """Raise unless `refspec` leaves the default branch alone (source and destination)."""
    parts = refspec.lstrip("+").split(":")
    for part in parts:
        name = part.removeprefix("refs/heads/")
        if name in (default_branch, "HEAD") or part == "" or name == f"{default_branch}":
            raise DefaultBranchGuard(
                f"refusing to push '{refspec}': it would touch the default branch {default_branch}"
            )
    destination = parts[-1].removeprefix("refs/heads/")
    if destination == default_branch:
        raise DefaultBranchGuard(f"refusing to push to {default_branch}")


def _safe(call: object) -> str | None:
    assert callable(call)
    try:
        value = call()
    except WorktreeError:
        return None
    return str(value) if value is not None else None
