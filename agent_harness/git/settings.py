"""The git settings and hooks the harness's own git obeys, held to what they were at its start.

An agent works in a worktree of the user's clone, and a worktree's git directory is the
clone's: whatever the agent writes into the clone's settings or hooks applies to every git
command the harness runs there afterwards (commit, push, the next item's worktree), in the
harness's environment and with the user's push credentials. Two defences:

- **Pinned on the command line** (`pins`, which wins over every settings file and cannot be
  raced): hooks run from the clone's own hooks folder, as found before any agent ran, named
  absolute, and `core.fsmonitor` is off. A hooks path an agent sets (husky's) changes nothing,
  and the user's own hooks (Git LFS's `pre-push`) run from where they are.
- **Watched** (`SettingsWatch.check`), for what a pin cannot hold: every file git takes
  settings from here (the clone's, the user's, and what they include, existing or not yet),
  the hooks folder by content, and the worktree's link to the clone's git directory. The
  harness compares them before each of its git commands that can follow an agent. A change is
  read setting by setting: one an agent may harmlessly write (`user.name`, a branch's
  upstream, colours, a hooks path), or a hook the harness never runs (`pre-commit`), is taken
  as the new normal; any other (a push URL, `insteadOf`, a credential helper,
  `core.sshCommand`, a filter, an include, a hook it runs) raises `GitSettingsChanged`, naming
  the file and the setting but never its value.

Checking costs a few `stat` calls; a file is read (and parsed by `git config`) only when its
size, times or inode moved.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from agent_harness.errors import HarnessError
from agent_harness.git.runner import GitError, run_git

# Settings an agent may write without giving the harness's git a program to run or a place to
# send to (`core.hooksPath` is pinned on the command line).
HARMLESS_SECTIONS = frozenset(
    {"user", "branch", "color", "advice", "column", "help", "i18n", "log", "status"}
)
HARMLESS_KEYS = frozenset(
    {
        "core.hookspath",  # pinned
        "init.defaultbranch",
        "core.sparsecheckout",  # which files a worktree checks out
        "core.sparsecheckoutcone",
        "extensions.relativeworktrees",  # git 2.48's worktree.useRelativePaths writes it
    }
)
# Git LFS writes these itself, from inside a push, about the server it talked to.
HARMLESS_KEY = re.compile(r"lfs\..*\.(?:access|locksverify)")
# Hooks no git command of the harness runs (its commits are `--no-verify`): `pre-commit
# install` writes one, and nothing of the harness's changes for it.
HOOKS_NEVER_RUN = frozenset(
    {
        "pre-commit",
        "pre-applypatch",
        "applypatch-msg",
        "post-applypatch",
        "pre-receive",
        "update",
        "proc-receive",
        "post-receive",
        "post-update",
        "push-to-checkout",
        "sendemail-validate",
    }
)
MAX_SETTINGS_BYTES = 1 << 20  # a settings file larger than this is compared by its stat only
MAX_INCLUDES = 64

_Stat = tuple[int, int, int, int] | None
_Settings = dict[str, list[str]]


class GitSettingsChanged(HarnessError):
    """A git setting the harness's git obeys changed while agents ran."""

    exit_code = 4  # a person must look


# A file changed this recently may change again within the same tick of the clock its times
# come from, keeping every stat field: its stat is not trusted to stand for its content yet
# (git's own rule for its index, "racy git").
RACY_NS = 2_000_000_000


def _settled(found: _Stat) -> _Stat:
    """`found`, or None while the file it describes changed too recently to be judged by it."""
    if found is None or time.time_ns() - max(found[2], found[3]) > RACY_NS:
        return found
    return None


def _xdg_config() -> str | None:
    """Where the user's git settings folder lies (`$XDG_CONFIG_HOME`, else `~/.config`)."""
    home = os.environ.get("HOME")
    return os.environ.get("XDG_CONFIG_HOME") or (str(Path(home, ".config")) if home else None)


def _admin_stats(admin: Path) -> tuple[_Stat, _Stat]:
    """The stats of a worktree's folder's `commondir` and `config.worktree`."""
    return _stat(admin / "commondir"), _stat(admin / "config.worktree")


def _same(one: Path, other: Path) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def _stat(path: Path) -> _Stat:
    try:
        st = os.stat(path)
    except OSError:
        return None
    # The change time cannot be set back by the file's owner (`touch -d` moves only mtime).
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _opened(path: Path) -> int | str | None:
    """A descriptor of the regular file at `path`, opened without blocking (a FIFO or a device
    would block or never end); None when nothing is there; else a few words for what is."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        return f"unreadable ({exc.strerror})"
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    return "a folder" if stat.S_ISDIR(mode) else "not a regular file"


def _read(path: Path) -> bytes | str | None:
    """A settings file's bytes; None when absent; a few words when it cannot be read as one
    (see `_opened`; a huge file is not a settings file)."""
    fd = _opened(path)
    if not isinstance(fd, int):
        return fd
    try:
        size = os.fstat(fd).st_size
        if size > MAX_SETTINGS_BYTES:
            return f"{size} bytes"
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_SETTINGS_BYTES + 1)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    finally:
        os.close(fd)


@dataclass
class _File:
    """One settings file as last accepted: its stat, its content and its settings."""

    path: Path
    stat: _Stat
    content: bytes | str | None
    settings: _Settings | None


class SettingsWatch:
    """The settings files and hooks of the clone at `repo` as they were when made, and the
    pins its git runs with."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._lock = threading.Lock()
        self.common, hooks = self._locate(repo)
        # The clone's hooks folder as found now, absolute (a relative `core.hooksPath`, as
        # husky sets, would be read in each worktree, from the agent's own files).
        self.pins = ("-c", f"core.hooksPath={hooks}", "-c", "core.fsmonitor=false")
        self._hooks = _read_hooks(hooks)
        self._files: dict[Path, _File] = {}
        # Attributes files are not settings, but every git command of ours here reads them:
        # which files go through a filter's or a merge driver's program. Any change to one
        # is a change (`_changes`).
        self._attribute_files = self._attributes_read()
        for path in self._candidates():
            self._watch(path)
        self._worktrees: dict[Path, _Settings | None] = {}
        # A worktree's links as last found sound: the stats of its `.git` file and of its
        # folder's `commondir` and `config.worktree`, taken before they were read. While all
        # three stay the same, nothing there can have changed (a write moves the change time,
        # which no owner can set back), and the links are not read and resolved again.
        self._sound: dict[Path, tuple[tuple[_Stat, ...], Path]] = {}

    @staticmethod
    def _locate(repo: Path) -> tuple[Path, Path]:
        out = run_git(repo, "rev-parse", "--git-common-dir", "--git-path", "hooks").stdout
        common, hooks = out.splitlines()[:2]
        return (repo / common).resolve(), (repo / hooks).resolve()

    def _candidates(self) -> list[Path]:
        """The files git reads settings from here, existing or not yet (the system's file is
        root's to write, not an agent's)."""
        found = [self.common / "config", self.common / "config.worktree"]
        env = os.environ
        home = env.get("HOME")
        xdg = _xdg_config()
        if xdg:
            found.append(Path(xdg, "git", "config"))
        found += sorted(self._attribute_files)
        if env.get("GIT_CONFIG_GLOBAL"):
            found.append(Path(env["GIT_CONFIG_GLOBAL"]))
        elif home:
            found.append(Path(home, ".gitconfig"))
        return found

    def _watch(self, path: Path) -> None:
        """Watch `path`, and every file its settings include, as they are now."""
        if path in self._files or len(self._files) >= MAX_INCLUDES:
            return
        content = _read(path)
        known = _File(path, _settled(_stat(path)), content, _settings(self.repo, content))
        self._files[path] = known
        for target in _included(path, known.settings or {}):
            self._watch(target)

    def check(self, worktree: Path | None = None) -> None:
        """Raise `GitSettingsChanged` when a setting other than a harmless one changed since
        this watch was made (or last accepted a harmless change), or when `worktree` no longer
        leads to the clone's git directory."""
        with self._lock:
            found: list[str] = []
            for known in list(self._files.values()):
                if _stat(known.path) != known.stat:
                    found += self._changes(known)
            if self._hooks.moved():
                found += self._hook_changes()
            if worktree is not None:
                found += self._link_changes(worktree)
        if found:
            raise GitSettingsChanged(
                f"git settings of the clone at {self.repo} changed during the run: "
                + "; ".join(found)
                + ". An agent may have written them, and the harness's own git would obey them "
                "(run a program, push elsewhere), so it runs no more git there: check them "
                "(`git config --list --show-origin`), then start the run again"
            )

    def _attributes_read(self) -> set[Path]:
        """The attributes files git reads here: the clone's, and the user's own."""
        xdg = _xdg_config()
        own = {Path(xdg, "git", "attributes")} if xdg else set()
        return {self.common / "info" / "attributes", *own}

    def _changes(self, known: _File) -> list[str]:
        stat_now, content = _stat(known.path), _read(known.path)
        if content != known.content:
            if known.path in self._attribute_files:
                return [f"{self._shown(known.path)}: changed"]
            settings = _settings(self.repo, content)
            changed = _risky(_changed_keys(known.settings, settings))
            if changed:
                return [f"{self._shown(known.path)}: {', '.join(changed)}"]
            known.content, known.settings = content, settings
        known.stat = _settled(stat_now)
        return []

    def _link_changes(self, worktree: Path) -> list[str]:
        """A worktree's `.git` file names its own folder in the clone's git directory, which
        names the clone's git directory back; the agent can rewrite either (its worktree is
        its own) to make the harness's git read settings of its choosing."""
        if not worktree.is_dir():
            return []  # gone: git will not run there, and the caller says so
        sound = self._sound.get(worktree)
        if sound is not None and self._link_stats(worktree, sound[1]) == sound[0]:
            return []
        found = self._read_links(worktree)
        if isinstance(found, list):
            return found
        stats, admin = found
        if all(_settled(each) == each for each in stats):
            self._sound[worktree] = (stats, admin)
        return []

    @staticmethod
    def _link_stats(worktree: Path, admin: Path) -> tuple[_Stat, ...]:
        return (_stat(worktree / ".git"), *_admin_stats(admin))

    def _read_links(self, worktree: Path) -> list[str] | tuple[tuple[_Stat, ...], Path]:
        """What is wrong with the worktree's links; else, when they are sound, their stats
        as taken before they were read, and the worktree's folder in the git directory."""
        before = _stat(worktree / ".git")
        link = _read(worktree / ".git")
        text = os.fsdecode(link) if isinstance(link, bytes) else ""
        if not text.startswith("gitdir: "):
            return [f"{worktree / '.git'}: no longer a link to the clone's git directory"]
        # Compared by what the paths are (device and inode), as resolving them would, at a
        # few stats instead of a look at every folder on the way.
        admin = worktree / text.removeprefix("gitdir: ").strip()
        if not _same(admin.parent, self.common / "worktrees"):
            return [f"{worktree / '.git'}: leads outside the clone's git directory"]
        stats = (before, *_admin_stats(admin))
        back = _read(admin / "commondir")
        common = os.fsdecode(back).strip() if isinstance(back, bytes) else ""
        if not common or not _same(admin / common, self.common):
            return [f"{self._shown(admin / 'commondir')}: leads away from the clone"]
        content = _read(admin / "config.worktree")
        now = _settings(self.repo, content)
        first = self._worktrees.setdefault(worktree.resolve(), now)
        changed = _risky(_changed_keys(first, now))
        if changed:
            return [f"{self._shown(admin / 'config.worktree')}: {', '.join(changed)}"]
        return stats, admin

    def note_worktree(self, worktree: Path) -> None:
        """Take a worktree's own settings as they are, right after our `git worktree add`
        (which copies the clone's sparse-checkout settings into it)."""
        with self._lock:
            self._worktrees.pop(worktree.resolve(), None)
            self._sound.pop(worktree, None)
        self.check(worktree)

    def _hook_changes(self) -> list[str]:
        now = _read_hooks(self._hooks.path)
        changed = [
            f"{self._shown(self._hooks.path / name)} ({how})"
            for name, how in self._hooks.differences(now)
            if name not in HOOKS_NEVER_RUN
        ]
        if not changed:
            self._hooks = now
        return changed

    def _shown(self, path: Path) -> str:
        """A path as a person finds it: inside the clone relative to it, else as it is."""
        try:
            return str(path.relative_to(self.repo.resolve()))
        except ValueError:
            return str(path)


@dataclass
class _Hooks:
    """The hooks folder as last accepted: its stat, and each entry's stat and digest."""

    path: Path
    stat: _Stat
    entries: dict[str, tuple[_Stat, str]]

    def moved(self) -> bool:
        if _stat(self.path) != self.stat:
            return True
        return any(_stat(self.path / name) != stat for name, (stat, _) in self.entries.items())

    def differences(self, now: _Hooks) -> list[tuple[str, str]]:
        found = []
        for name in sorted(self.entries.keys() | now.entries.keys()):
            if name not in now.entries:
                found.append((name, "removed"))
            elif name not in self.entries:
                found.append((name, "added"))
            elif now.entries[name][1] != self.entries[name][1]:
                found.append((name, "changed"))
        return found


def _read_hooks(folder: Path) -> _Hooks:
    """Every entry of the hooks folder but git's samples, by digest (a hook may source a
    helper beside it, as husky's do, so every file counts, not only those named as hooks)."""
    entries: dict[str, tuple[_Stat, str]] = {}
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        names = []
    for name in names:
        if name.endswith(".sample"):
            continue
        path = folder / name
        entries[name] = (_stat(path), _digest(path))
    return _Hooks(folder, _stat(folder), entries)


def _digest(path: Path) -> str:
    """What a hook is: its mode and content, read in chunks (see `_opened`); a folder, by
    what it lists."""
    fd = _opened(path)
    if fd == "a folder":
        try:
            return f"folder {sorted(os.listdir(path))}"
        except OSError as exc:
            return f"unreadable ({exc.strerror})"
    if not isinstance(fd, int):
        return fd or "gone"
    try:
        digest = hashlib.sha256(f"{os.fstat(fd).st_mode & 0o777}\0".encode())
        while chunk := os.read(fd, 1 << 16):
            digest.update(chunk)
        return digest.hexdigest()
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    finally:
        os.close(fd)


def _included(path: Path, settings: _Settings) -> list[Path]:
    """The files a settings file includes, resolved as git does (`~/` is the home, a relative
    path is relative to the including file), whatever their conditions."""
    found = []
    for key, values in settings.items():
        if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
            for value in values:
                if value.startswith("~/"):
                    target = Path(os.environ.get("HOME") or Path.home(), value[2:])
                else:
                    target = path.parent / value
                found.append(target)
    return found


def _settings(repo: Path, content: bytes | str | None) -> _Settings | None:
    """The settings in a file's content (`section.key` as git lowercases them); {} for no
    file; None when it does not read as settings."""
    if content is None:
        return {}
    if isinstance(content, str):
        return None
    try:
        done = run_git(repo, "config", "--file", "-", "--list", "-z", input=content, check=False)
    except GitError:
        return None
    if not done.ok:
        return None
    values: _Settings = {}
    for entry in filter(None, done.stdout.split("\0")):
        key, _, value = entry.partition("\n")
        values.setdefault(key, []).append(value)
    return values


def _changed_keys(before: _Settings | None, after: _Settings | None) -> set[str]:
    if before is None or after is None:
        return {"(the file does not read as git settings)"}
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


# A key's subsection may hold a URL with a password or token (`url.<base>.insteadOf`).
_USERINFO = re.compile(r"(://)[^/@\s]*@")
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _risky(keys: set[str]) -> list[str]:
    """The changed keys that are not harmless, fit to print: no userinfo, no control
    characters."""
    shown = []
    for key in sorted(keys):
        if key in HARMLESS_KEYS or key.split(".", 1)[0] in HARMLESS_SECTIONS:
            continue
        if HARMLESS_KEY.fullmatch(key):
            continue
        key = _USERINFO.sub(r"\1***@", key)
        shown.append(_UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}", key))
    return shown
