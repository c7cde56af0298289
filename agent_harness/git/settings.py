"""The git settings and hooks the harness's own git obeys, held to what they were at its start.

An agent works in a worktree of the user's clone, and a worktree's git directory is the
clone's: whatever the agent writes into the clone's settings or hooks applies to every git
command the harness runs there afterwards (commit, push, the next item's worktree), in the
harness's environment and with the user's push credentials. A hook would run the agent's
program; `core.fsmonitor`, `core.sshCommand`, a credential helper or a filter the same; a push
URL or `insteadOf` would send the branch elsewhere. So `SettingsWatch` remembers, before any
agent runs, the files git reads its settings from (the clone's, the user's and what they
include) and the hooks folder, and `check()` compares them before each of the harness's git
commands that follow an agent. A change is read setting by setting: one of the few an agent
may harmlessly write (`user.name`, a branch's upstream, colours) is taken as the new normal;
any other raises `GitSettingsChanged`, naming the file and the setting but never its value.

Checking costs a few `stat` calls; a file is read (and parsed by `git config`) only when its
size, times or inode moved.
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from agent_harness.errors import HarnessError
from agent_harness.git.runner import GitError, run_git

# Settings an agent may write without giving git a program to run or a place to send to.
HARMLESS_SECTIONS = frozenset(
    {"user", "branch", "color", "advice", "column", "help", "i18n", "log", "status", "init"}
)

_Stat = tuple[int, int, int, int] | None


class GitSettingsChanged(HarnessError):
    """A git setting or hook the harness's git obeys changed while agents ran."""

    exit_code = 4  # a person must look


def _stat(path: Path) -> _Stat:
    try:
        st = os.stat(path)
    except OSError:
        return None
    # The change time cannot be set back by the file's owner (`touch -d` moves only mtime).
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


@dataclass
class _File:
    """One settings file as last accepted: its stat, its bytes (None: absent)."""

    path: Path
    stat: _Stat
    content: bytes | None


@dataclass
class _Hooks:
    """The hooks folder as last accepted: its stat, and each hook's stat and digest."""

    path: Path
    stat: _Stat
    hooks: dict[str, tuple[_Stat, str]]


class SettingsWatch:
    """The settings files and hooks of the clone at `repo`, as they were when made."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._lock = threading.Lock()
        common, hooks = self._locate(repo)
        self._files = [_File(path, _stat(path), _read(path)) for path in self._paths(repo, common)]
        self._hooks = self._read_hooks(hooks)

    @staticmethod
    def _locate(repo: Path) -> tuple[Path, Path]:
        out = run_git(repo, "rev-parse", "--git-common-dir", "--git-path", "hooks").stdout
        common, hooks = out.splitlines()[:2]
        return (repo / common).resolve(), (repo / hooks).resolve()

    @staticmethod
    def _paths(repo: Path, common: Path) -> list[Path]:
        """Every file git may take a setting from here, existing or not yet: the clone's, the
        user's (and the system's), and every file they include."""
        candidates = [common / "config", common / "config.worktree"]
        home = os.environ.get("HOME")  # as git finds the user's files: no HOME, none of them
        if home:
            xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path(home, ".config"))
            candidates.append(xdg / "git" / "config")
            candidates.append(Path(os.environ.get("GIT_CONFIG_GLOBAL") or Path(home, ".gitconfig")))
        done = run_git(repo, "config", "--list", "--show-origin", "--includes", "-z", check=False)
        for entry in done.stdout.split("\0")[::2]:
            if entry.startswith("file:"):
                candidates.append(Path(entry.removeprefix("file:")))
        seen: dict[Path, None] = {}
        for path in candidates:
            seen.setdefault(path if path.is_absolute() else (repo / path).resolve(), None)
        return list(seen)

    @staticmethod
    def _read_hooks(folder: Path) -> _Hooks:
        hooks: dict[str, tuple[_Stat, str]] = {}
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        for name in names:
            if name.endswith(".sample"):
                continue  # git never runs these
            path = folder / name
            data = _read(path) if path.is_file() else None
            mode = "x" if os.access(path, os.X_OK) else "-"
            digest = hashlib.sha256(data).hexdigest() if data is not None else "not a file"
            hooks[name] = (_stat(path), f"{mode}{digest}")
        return _Hooks(folder, _stat(folder), hooks)

    def check(self) -> None:
        """Raise `GitSettingsChanged` when a setting other than a harmless one, or a hook,
        changed since this watch was made (or last accepted a harmless change)."""
        with self._lock:
            found: list[str] = []
            for known in self._files:
                if _stat(known.path) != known.stat:
                    found += self._file_changes(known)
            if self._hooks_moved():
                found += self._hook_changes()
        if found:
            raise GitSettingsChanged(
                f"git settings of the clone at {self.repo} changed during the run: "
                + "; ".join(found)
                + ". An agent may have written them, and the harness's own git would obey them "
                "(run a program, push elsewhere), so it runs no more git there: check them "
                "(`git config --list --show-origin`, the hooks), then start the run again"
            )

    def _file_changes(self, known: _File) -> list[str]:
        stat, content = _stat(known.path), _read(known.path)
        if content != known.content:
            changed = sorted(
                key
                for key in _changed_keys(self.repo, known.content, content)
                if key.split(".", 1)[0] not in HARMLESS_SECTIONS
            )
            if changed:
                return [f"{self._shown(known.path)}: {', '.join(changed)}"]
        known.stat, known.content = stat, content
        return []

    def _hooks_moved(self) -> bool:
        hooks = self._hooks
        if _stat(hooks.path) != hooks.stat:
            return True
        return any(_stat(hooks.path / name) != stat for name, (stat, _) in hooks.hooks.items())

    def _hook_changes(self) -> list[str]:
        now = self._read_hooks(self._hooks.path)
        before = self._hooks.hooks
        found = []
        for name in sorted(set(before) | set(now.hooks)):
            if name not in now.hooks:
                found.append(f"{self._shown(self._hooks.path / name)} (removed)")
            elif name not in before:
                found.append(f"{self._shown(self._hooks.path / name)} (added)")
            elif now.hooks[name][1] != before[name][1]:
                found.append(f"{self._shown(self._hooks.path / name)} (changed)")
        if not found:
            self._hooks = now
        return found

    def _shown(self, path: Path) -> str:
        """A path as a person finds it: inside the clone relative to it, else as it is."""
        try:
            return str(path.relative_to(self.repo.resolve()))
        except ValueError:
            return str(path)


def _changed_keys(repo: Path, before: bytes | None, after: bytes | None) -> set[str]:
    """The settings (`section.key` as git lowercases them) whose values differ between two
    contents of one settings file. Unreadable content counts as every setting changed."""
    old, new = _settings(repo, before), _settings(repo, after)
    if old is None or new is None:
        return {"(the file no longer reads as git settings)"}
    return {key for key in old.keys() | new.keys() if old.get(key) != new.get(key)}


def _settings(repo: Path, content: bytes | None) -> dict[str, list[str]] | None:
    if content is None:
        return {}
    try:
        done = run_git(repo, "config", "--file", "-", "--list", "-z", input=content, check=False)
    except GitError:
        return None
    if not done.ok:
        return None
    values: dict[str, list[str]] = {}
    for entry in filter(None, done.stdout.split("\0")):
        key, _, value = entry.partition("\n")
        values.setdefault(key, []).append(value)
    return values
