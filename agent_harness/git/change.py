"""One commit's change since its base, asked of git once and read three ways.

The run needs the same change three times per item: the paths it touches (the protected-path
gate), the text the secret scan reads (every added line, binary files' content included) and
the diff the reviewer reads. One `git diff --numstat --patch -z` gives all three: the paths
(both sides of a rename), which files git takes as binary, and the patch. Only a binary file
costs one more process, for its content, which the reviewer is not shown but the scan reads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from agent_harness.git.runner import GitError, run_git

# A rename is reported as one, with both paths (`-c diff.renames=true`: copies are not looked
# for, whatever the user's configuration says, so copying a protected file is not touching it).
# The prefixes are fixed, because the scan reads `+++ b/<path>` whatever `diff.noprefix` says.
_DIFF = (
    "-c", "core.quotePath=false", "-c", "diff.renames=true",
    "diff", "--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/",
    "--numstat", "--patch", "-z",
)  # fmt: skip


@dataclass(frozen=True)
class Change:
    """What commit `sha` changes since `base`."""

    paths: list[str]  # every path it touches, both sides of a rename, sorted
    binary: list[str]  # paths git shows no text for, as they are at `sha`
    patch: str  # the unified diff, as a reviewer reads it
    base: str = ""  # the commit it is measured from

    def scan_text(self, worktree: Path, sha: str) -> str:
        """The patch; each binary file's content at `sha` as if every line were added (a key is
        a key in an image's metadata too); and what a push publishes beside the content: the
        paths, and each commit's message and names (`(file names)`, `(commits)`), all for the
        secret scan."""
        parts = [self.patch]
        for path in self.binary:
            done = run_git(worktree, "cat-file", "blob", f"{sha}:{path}", check=False)
            if not done.ok:  # deleted at `sha`: nothing of it leaves
                continue
            parts.append(_added(path, done.stdout.split("\n")))
        parts.append(_added(PATHS_PART, self.paths))
        if self.base:
            log = ("log", "--no-color", "--format=%an <%ae> %cn <%ce>%n%B", f"{self.base}..{sha}")
            done = run_git(worktree, *log, check=False, errors="surrogateescape")
            if done.ok:
                parts.append(_added(COMMITS_PART, done.stdout.split("\n")))
        return "\n".join(part.removesuffix("\n") for part in parts if part) + "\n"


# The names the scan gives what a push publishes beside the files' content.
PATHS_PART = "(file names)"
COMMITS_PART = "(commits)"


def _added(name: str, lines: list[str]) -> str:
    """`lines` as a file `name` a diff adds whole, as the scan reads one."""
    if not lines:
        return ""
    head = f"+++ {_quoted('b/' + name)}\n@@ -0,0 +1,{len(lines)} @@\n"
    return head + "".join(f"+{line}\n" for line in lines)


def read_change(worktree: Path, base: str, sha: str) -> Change:
    """The change of commit `sha` since `base`, from one git process; raises `GitError`."""
    done = run_git(worktree, *_DIFF, base, sha, "--", errors="surrogateescape")
    return dataclasses.replace(parse_change(done.stdout), base=base)


def parse_change(out: str) -> Change:
    """Read `git diff --numstat --patch -z`: per file `added<TAB>deleted<TAB>path<NUL>` (for a
    rename, an empty path and then `old<NUL>new<NUL>`; `-` counts for a binary file), a NUL,
    and the patch."""
    paths: set[str] = set()
    binary: list[str] = []
    pos = 0
    while pos < len(out) and out[pos] != "\0":
        end = out.find("\0", pos)
        if end < 0:
            raise GitError(f"git diff's listing ends inside an entry: {out[pos : pos + 80]!r}")
        added, _, rest = out[pos:end].partition("\t")
        _, _, name = rest.partition("\t")
        pos = end + 1
        names = [name]
        if not name:  # a rename: its two paths follow
            old_end = out.find("\0", pos)
            new_end = out.find("\0", old_end + 1) if old_end >= 0 else -1
            if new_end < 0:
                raise GitError("git diff's listing ends inside a rename")
            names = [out[pos:old_end], out[old_end + 1 : new_end]]
            pos = new_end + 1
        paths.update(names)
        if added == "-":
            binary.append(names[-1])
    return Change(sorted(paths), binary, out[pos + 1 :])


def _quoted(path: str) -> str:
    """A path as git writes it in a diff header: in double quotes, C-escaped, when it must be."""
    if not any(char in path for char in '"\\\n\t') and not path.startswith(" "):
        return path
    escaped = path.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t") + '"'


def save_uncommitted(cwd: Path, save_to: Path, pins: tuple[str, ...] = ()) -> bool:
    """Write the tracked files' changes since HEAD in `cwd` to `save_to`, as a patch `git
    apply` takes (binary files and text that is not UTF-8 included); False when there are
    none. `pins` are the options every git command of ours in that clone runs with. Git
    writes the file itself, so a large change is never held in memory. Raises `GitError`
    when the copy could not be made: then nothing may be reset."""
    try:
        save_to.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GitError(f"cannot keep a copy of the changes in {save_to.parent}: {exc}") from exc
    options = ("diff", "HEAD", "--binary", "--no-color", "--no-ext-diff", "--no-textconv")
    run_git(cwd, *pins, *options, f"--output={save_to}")
    if save_to.stat().st_size == 0:
        save_to.unlink()
        return False
    return True
