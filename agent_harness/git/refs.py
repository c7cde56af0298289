"""Reading a few refs straight from a repository's files, where git would take a process.

After every commit the run wants the new head, and before it the branch a worktree is on and
where the default branch is: three names, each a file of forty characters (or a line of
`packed-refs`). Reading them costs microseconds; asking git costs a process (1 to 2 ms of CPU
here, more on a busy machine), several per item. Only the plain layouts are read: a loose ref
file, `packed-refs`, a symbolic ref (`ref: ...`). Anything else (the reftable format, a file
that does not read as a ref) answers `Unreadable`, and the caller asks git instead, so this is
never the only way to an answer.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?\Z")
# Refs kept per worktree (in its own git directory), as git's documentation lists them; every
# other ref is shared by all worktrees and lives in the common directory.
_PER_WORKTREE = ("HEAD", "refs/worktree/", "refs/bisect/", "refs/rewritten/")


class Unreadable(Exception):
    """The refs cannot be read from files here; ask git."""


class RefFiles:
    """The ref files of the repository a worktree (or a clone's top) belongs to."""

    def __init__(self, worktree: Path, *, bare: bool = False) -> None:
        """The refs of the repository at `worktree`; with `bare`, `worktree` is the git
        directory itself (a bare repository)."""
        if any(name in os.environ for name in ("GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE")):
            raise Unreadable("git's own directory is set from the environment")
        self.git_dir = Path(worktree) if bare else _git_dir(Path(worktree))
        self.common_dir = _common_dir(self.git_dir)
        if (self.common_dir / "reftable").exists():
            raise Unreadable("the repository keeps its refs in the reftable format")
        if not (self.common_dir / "refs").is_dir():
            raise Unreadable(f"{self.common_dir} is not a git directory")

    def head(self) -> tuple[str | None, str | None]:
        """(the ref HEAD is on, or None when detached; the commit HEAD names, or None on a
        branch with no commit yet)."""
        target = self._read_file("HEAD")
        if target is None:
            raise Unreadable("no HEAD file")
        if target.startswith("ref: "):
            name = target[5:]
            return name, self.resolve(name)
        return None, _checked_sha(target)

    def resolve(self, name: str, depth: int = 0) -> str | None:
        """The commit ref `name` (a full name, `refs/...`) names; None when there is no such ref."""
        if depth > 5:
            raise Unreadable(f"{name}: symbolic refs nested too deep")
        value = self._read_file(name)
        if value is None:
            value = self._packed().get(name)
            return _checked_sha(value) if value is not None else None
        if value.startswith("ref: "):
            return self.resolve(value[5:], depth + 1)
        return _checked_sha(value)

    def matching(self, *patterns: str) -> dict[str, str]:
        """Full ref name -> commit for the refs `patterns` name, as `git for-each-ref` reads
        them: a full name, or one ending in `*` (which, as there, does not cross a `/`)."""
        packed_found: dict[str, str] = {}
        loose: dict[str, str] = {}  # wins over packed-refs, whatever pattern named either
        packed: dict[str, str] | None = None
        for pattern in patterns:
            if "*" not in pattern:
                sha = self.resolve(pattern)  # the loose file first, then packed-refs
                if sha is not None:
                    loose[pattern] = sha
                continue
            prefix = pattern[:-1]
            if any(char in prefix for char in "*?[\\") or not prefix.startswith("refs/"):
                raise Unreadable(f"{pattern}: only a trailing * is read here")
            folder, _, leaf = prefix.rpartition("/")
            loose.update(self._loose_in(folder, starting=leaf, deep=False))
            packed = self._packed() if packed is None else packed
            packed_found.update(
                (name, sha)
                for name, sha in packed.items()
                if name.startswith(prefix) and "/" not in name[len(prefix) :]
            )
        return dict(sorted({**packed_found, **loose}.items()))

    def under(self, prefix: str) -> dict[str, str]:
        """Full ref name -> commit for every ref in folder `prefix` (`refs/heads/`) and the
        folders in it, as `git for-each-ref <prefix>` lists them."""
        if not prefix.startswith("refs/") or not prefix.endswith("/") or ".." in prefix:
            raise Unreadable(f"{prefix}: not a folder of refs")
        loose = self._loose_in(prefix.removesuffix("/"), deep=True)
        found = {name: sha for name, sha in self._packed().items() if name.startswith(prefix)}
        found.update(loose)
        return dict(sorted(found.items()))

    def _loose_in(self, folder: str, *, starting: str = "", deep: bool) -> dict[str, str]:
        """The loose refs in `folder` (`refs/heads`) whose names start with `starting`, and with
        `deep` those in the folders within. Read before packed-refs, as git reads them: a
        `pack-refs` in between writes packed-refs before it deletes the loose files, so a ref
        is always in one of the two."""
        found: dict[str, str] = {}
        folders = [folder]
        while folders:
            current = folders.pop()
            try:
                entries = list(os.scandir(os.path.join(self.common_dir, current)))
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise Unreadable(f"{current}: {exc}") from exc
            for entry in entries:
                name = f"{current}/{entry.name}"
                if entry.is_dir(follow_symlinks=False):
                    if deep:
                        folders.append(name)
                # Not a `.lock` (a ref being written), nor a name git would refuse.
                elif entry.name.startswith(starting) and ref_name_ok(name):
                    sha = self._loose(entry.path, name)
                    if sha is not None:
                        found[name] = sha
        return found

    def _loose(self, path: str, name: str) -> str | None:
        try:
            with open(path, encoding="utf-8") as fh:
                value = fh.read().strip()
        except FileNotFoundError:  # deleted since it was listed
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise Unreadable(f"{name}: {exc}") from exc
        return self.resolve(value[5:]) if value.startswith("ref: ") else _checked_sha(value)

    def _read_file(self, name: str) -> str | None:
        if name != "HEAD" and not ref_name_ok(name):
            raise Unreadable(f"{name!r} is not a name git would take for a ref")
        base = self.git_dir if name.startswith(_PER_WORKTREE) else self.common_dir
        try:
            return (base / name).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            # A folder of that name holds other refs (`refs/heads/agent-harness/T1-x`), and
            # git keeps no loose ref beside it: any there is in packed-refs.
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise Unreadable(f"{name}: {exc}") from exc

    def _packed(self) -> dict[str, str]:
        try:
            text = (self.common_dir / "packed-refs").read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise Unreadable(f"packed-refs: {exc}") from exc
        packed: dict[str, str] = {}
        for line in text.splitlines():
            if line and line[0] not in "#^":
                sha, _, name = line.partition(" ")
                packed[name] = sha
        return packed


_BAD_IN_NAME = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def ref_name_ok(name: str) -> bool:
    """Whether git takes `name` (a full `refs/...` name) for a ref: its rules for a ref's
    name (`git check-ref-format`), so that a file or a path the file system would read the
    same way (`a/./b`, `a//b`, `main/`, `x.lock`) is never answered for it."""
    if not name.startswith("refs/") or name.endswith(("/", ".", ".lock")) or name == "@":
        return False
    if _BAD_IN_NAME.search(name):
        return False
    return all(
        part and not part.startswith(".") and not part.endswith(".lock") for part in name.split("/")
    )


def _git_dir(worktree: Path) -> Path:
    dot_git = worktree / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        line = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(f"{dot_git}: {exc}") from exc
    if not line.startswith("gitdir: "):
        raise Unreadable(f"{dot_git} does not name a git directory")
    return (worktree / line[8:]).resolve()


def _common_dir(git_dir: Path) -> Path:
    try:
        named = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return git_dir
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(f"commondir: {exc}") from exc
    return (git_dir / named).resolve()


def _checked_sha(value: str) -> str:
    if not _SHA.match(value):
        raise Unreadable(f"{value[:50]!r} is not a commit id")
    return value
