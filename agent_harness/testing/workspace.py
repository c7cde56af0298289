"""An in-memory git for tests that must not start a process: real directories, remembered commits.

`MemoryWorkspace` implements the pipeline's `Workspace` protocol. Each item's worktree is a real
directory (so an implementer can write files into it), but a commit is a snapshot of its files
kept in memory under a made-up sha, and a push only records the branch and its head. The same
guard as the real one refuses the default branch.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import shutil
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_harness.git.errors import DefaultBranchGuard, WorktreeError
from agent_harness.git.naming import (
    branch_name,
    branch_prefix,
    of_a_longer_id,
    worktree_dir_name,
)
from agent_harness.git.worktrees import Worktree, guard_refspec

Snapshot = dict[str, bytes]


@dataclass
class _Branch:
    base: str
    commits: list[str] = field(default_factory=list)

    @property
    def head(self) -> str:
        return self.commits[-1] if self.commits else self.base


class MemoryWorkspace:
    """A repository whose default branch holds `files`, with item worktrees under `root`."""

    def __init__(self, root: Path, files: Snapshot | None = None, default: str = "main") -> None:
        self.root = Path(root)
        self._default = default
        self._snapshots: dict[str, Snapshot] = {}
        self.main_sha = self._store(dict(files or {"README.md": b"a project\n"}))
        self._branches: dict[str, _Branch] = {}
        self.pushed: dict[str, str] = {}  # branch -> the head it was pushed at
        self._paths: dict[str, Path] = {}  # branch -> the worktree it was checked out in
        self.dirty_default = False  # set by a test to make check_clean_default refuse

    def _store(self, snapshot: Snapshot) -> str:
        digest = hashlib.sha1(repr(sorted(snapshot.items())).encode()).hexdigest()
        self._snapshots[digest] = dict(snapshot)
        return digest

    def default_branch(self) -> str:
        return self._default

    def set_default_branch(self, name: str) -> None:
        self._default = name

    def check_clean_default(self, allow: Sequence[Path] = ()) -> None:
        del allow  # the plan is no file of this workspace
        if self.dirty_default:
            raise WorktreeError(f"the default branch {self._default} has uncommitted changes")

    def check_remote(self, full_name: str, clone_url: str) -> None:
        del full_name, clone_url  # no remote here: the branches stay in memory

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
        del guard_private, ours  # every branch here is the harness's own: none is a person's
        del others  # and a branch is found by its exact name, never by its item's prefix
        branch = branch_name(item_id, title, namespace, generation)
        prefix = branch_prefix(item_id, namespace, generation)
        if known is not None and known.startswith(prefix) and known in self._branches:
            branch = known  # as the real repository: this generation's branch, if still there
        path = self.root / "worktrees" / worktree_dir_name(item_id, namespace, generation)
        reused = branch in self._branches and path.is_dir()
        state = self._branches.setdefault(branch, _Branch(self.main_sha))
        if not reused:
            self._checkout(path, self._snapshots[state.head])
        self._paths[branch] = path
        return Worktree(item_id, path, branch, state.base, reused)

    def worktree_of(self, branch: str) -> Path | None:
        path = self._paths.get(branch)
        return path if path is not None and path.is_dir() else None

    def discard(
        self,
        item_id: str,
        namespace: str = "",
        generation: int = 0,
        others: Iterable[str] = (),
    ) -> list[str]:
        path = self.root / "worktrees" / worktree_dir_name(item_id, namespace, generation)
        stem = branch_prefix(item_id, namespace, generation)
        gone = [
            name
            for name in self._branches
            if name.startswith(stem) and not of_a_longer_id(name, item_id, namespace, others)
        ]
        for name in gone:
            del self._branches[name]
        if path.exists():
            shutil.rmtree(path)
            gone.insert(0, str(path))
        return gone

    def _checkout(self, path: Path, snapshot: Snapshot) -> None:
        path.mkdir(parents=True, exist_ok=True)
        for old in self._files(path):
            (path / old).unlink()
        for name, data in snapshot.items():
            target = path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    @staticmethod
    def _files(path: Path) -> list[str]:
        return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())

    def _read(self, tree: Worktree) -> Snapshot:
        return {name: (tree.path / name).read_bytes() for name in self._files(tree.path)}

    def verify_branch(self, tree: Worktree) -> None:
        if not tree.path.is_dir():
            raise WorktreeError(f"the agent deleted its worktree {tree.path}")
        if tree.branch == self._default:
            raise DefaultBranchGuard(f"refusing to work on the default branch {tree.branch}")

    def commit_all(self, tree: Worktree, message: str) -> str | None:
        state = self._branches[tree.branch]
        snapshot = self._read(tree)
        if snapshot == self._snapshots[state.head]:
            return None
        sha = self._store(snapshot)
        state.commits.append(sha)
        return sha

    def head(self, tree: Worktree) -> str:
        return self._branches[tree.branch].head

    def has_uncommitted(self, tree: Worktree) -> bool:
        return self._read(tree) != self._snapshots[self.head(tree)]

    def discard_uncommitted(self, tree: Worktree, save_to: Path | None = None) -> list[str]:
        now, committed = self._read(tree), self._snapshots[self.head(tree)]
        differ = sorted(n for n in {*now, *committed} if now.get(n) != committed.get(n))
        tracked = {n: data for n, data in now.items() if n in committed}
        if differ and save_to is not None and tracked != committed:
            save_to.parent.mkdir(parents=True, exist_ok=True)
            save_to.write_text(_unified(committed, {**committed, **tracked}, context=3))
        if differ:
            self._checkout(tree.path, committed)
        return differ

    def diff(self, tree: Worktree, sha: str) -> str:
        return _unified(
            self._snapshots[tree.base_sha], self._snapshots[sha], context=3, binary_as_text=False
        )

    def committed_diff(self, tree: Worktree) -> str:
        head = self._snapshots[self.head(tree)]
        return _unified(self._snapshots[tree.base_sha], head, context=0)

    def large_files(self, tree: Worktree, sha: str, limit: int) -> list[tuple[str, int]]:
        now = self._snapshots[sha]
        return [(name, len(now[name])) for name in self.changed_paths(tree, sha)
                if name in now and len(now[name]) > limit]  # fmt: skip

    def changed_paths(self, tree: Worktree, sha: str | None = None) -> list[str]:
        base = self._snapshots[tree.base_sha]
        now = self._snapshots[sha] if sha else self._read(tree)
        return sorted(name for name in set(base) | set(now) if base.get(name) != now.get(name))

    def attributes(
        self, tree: Worktree, names: list[str], paths: list[str]
    ) -> dict[str, dict[str, str]]:
        """From the base commit's top `.gitattributes` only, read as git reads its lines (a
        pattern, then `name`, `-name` or `name=value`; a later line wins)."""
        text = self._snapshots[tree.base_sha].get(".gitattributes", b"").decode("utf-8", "replace")
        found: dict[str, dict[str, str]] = {}
        for line in text.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            pattern, *said = line.split()
            for path in paths:
                if not said or not fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], pattern):
                    continue
                for word in said:
                    name, _, value = word.lstrip("-").partition("=")
                    if name in names:
                        how = "unset" if word.startswith("-") else value or "set"
                        found.setdefault(path, {})[name] = how
        return found

    def push(self, tree: Worktree, sha: str | None = None) -> None:
        refspec = f"{sha or f'refs/heads/{tree.branch}'}:refs/heads/{tree.branch}"
        guard_refspec(refspec, self._default)
        self.pushed[tree.branch] = sha or self.head(tree)

    def update_from_base(self, branch: str, expected: str) -> tuple[list[str], str] | None:
        return None  # no base moves in memory: a conflict always goes to the agent

    def files_at(self, sha: str) -> Snapshot:
        """What a commit holds (for assertions)."""
        return dict(self._snapshots[sha])


def _unified(
    before: Snapshot, after: Snapshot, *, context: int, binary_as_text: bool = True
) -> str:
    """A unified diff of two snapshots; a file holding a NUL byte is binary, as git judges, and
    is shown as text only with `binary_as_text` (the scan reads it, a reviewer is not shown it)."""
    out: list[str] = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        if not binary_as_text and any(b"\0" in (side or b"")[:8000] for side in (old, new)):
            names = [f"a/{name}" if old is not None else "/dev/null"]
            names.append(f"b/{name}" if new is not None else "/dev/null")
            out += [
                f"diff --git a/{name} b/{name}\n",
                f"Binary files {' and '.join(names)} differ\n",
            ]
            continue
        a = (old or b"").decode("utf-8", "replace").splitlines(keepends=True)
        b = (new or b"").decode("utf-8", "replace").splitlines(keepends=True)
        out.append(f"diff --git a/{name} b/{name}\n")
        out += difflib.unified_diff(
            a,
            b,
            fromfile=f"a/{name}" if old is not None else "/dev/null",
            tofile=f"b/{name}" if new is not None else "/dev/null",
            n=context,
        )
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)
