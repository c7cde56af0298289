"""A model's edit, read from whichever format it wrote: unified diff, `*** Begin Patch`,
SEARCH/REPLACE blocks or whole files, into one model of per-file hunks.

The readers are forgiving about what models get wrong (markdown fences, missing a/ b/
prefixes, a context line that lost its leading space) and strict about what they cannot
guess: a block that names no file or never closes is refused, not applied somewhere.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from agent_harness.errors import HarnessError


class EditRefused(HarnessError):
    """The edit could not be applied."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        hunk: int | None = None,
        nearest_line: int | None = None,
        similarity: float | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.hunk = hunk
        self.nearest_line = nearest_line
        self.similarity = similarity


class UnsafeEditPath(EditRefused):
    """The edit names a path outside the worktree."""


class NotThisFormat(Exception):
    """A reader or rung does not recognise the edit's format at all (as opposed to refusing it)."""


# --------------------------------------------------------------------------- edit model


@dataclass
class Hunk:
    """One change: lines as (op, text) with op in ' ', '-', '+'; text has no line ending."""

    number: int
    header: str
    ops: list[tuple[str, str]]
    old_start: int | None = None
    anchor: str | None = None
    old_no_eol: bool = False
    new_no_eol: bool = False

    @property
    def old_lines(self) -> list[str]:
        return [text for op, text in self.ops if op != "+"]

    @property
    def new_lines(self) -> list[str]:
        return [text for op, text in self.ops if op != "-"]


@dataclass
class FileEdit:
    """The change to one file. No old path: a new file. No new path: a deletion."""

    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)
    content: str | None = None

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or "?"


# --------------------------------------------------------------------------- text cleanup

_FENCE = re.compile(r"^\s*(```+|~~~+)")
_DIFF_MARKERS = ("diff --git ", "--- ", "@@ ")


def _normalise_newlines(text: str) -> str:
    text = text.replace("\r\n", "\n")
    return text if text.endswith("\n") else text + "\n"


def _unfenced_diff(text: str) -> str:
    """The diff inside markdown fences when the model wrapped it in prose; else the text."""
    lines = text.split("\n")
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in lines:
        if _FENCE.match(line) and (current is None or line.strip().strip("`~") == ""):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
            continue
        if current is not None:
            current.append(line)
    if current:  # an unclosed fence: the model was cut off, keep what it wrote
        blocks.append(current)
    diffs = [b for b in blocks if any(line.startswith(_DIFF_MARKERS) for line in b)]
    if not diffs:
        return text
    return "\n".join(line for block in diffs for line in block) + "\n"


# --------------------------------------------------------------------------- unified diffs

_HUNK_HEADER = re.compile(r"^@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@+")


def _raw_path(spec: str) -> str | None:
    spec = spec.split("\t")[0].rstrip()
    if spec.startswith('"') and spec.endswith('"') and len(spec) > 1:
        # git quotes unusual names C-style, non-ASCII as octal escapes of UTF-8 bytes.
        escaped = spec[1:-1].encode("utf-8").decode("unicode_escape")
        spec = escaped.encode("latin-1").decode("utf-8", "replace")
    # Some tools append a timestamp after spaces instead of a tab.
    spec = re.sub(r"\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d.*$", "", spec)
    if spec == "/dev/null":
        return None
    return spec


def _strip_prefix(path: str) -> str:
    return path.split("/", 1)[1] if "/" in path else path


def _resolve_pair(
    old: str | None, new: str | None, exists: Callable[[str], bool]
) -> tuple[str | None, str | None]:
    """Drop git's a/ b/ prefixes, which models sometimes leave out."""
    a_b = (old is None or old.startswith("a/")) and (new is None or new.startswith("b/"))
    if a_b and (old or new):
        return (_strip_prefix(old) if old else None, _strip_prefix(new) if new else None)
    probe = old or new
    assert probe is not None
    if not exists(probe) and "/" in probe and exists(_strip_prefix(probe)):
        return (_strip_prefix(old) if old else None, _strip_prefix(new) if new else None)
    return old, new


def _is_hunk_line(line: str) -> bool:
    return line == "" or line[0] in " -+\\"


def parse_unified_diff(text: str, exists: Callable[[str], bool]) -> list[FileEdit]:
    """Read a (possibly sloppy) unified diff; `exists` says whether a worktree path exists."""
    lines = _unfenced_diff(_normalise_newlines(text)).split("\n")
    edits: list[FileEdit] = []
    raw: list[tuple[str | None, str | None]] = []
    current: FileEdit | None = None
    from_git_header = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            parts = line[len("diff --git ") :]
            cut = parts.find(" b/")
            old, new = (parts[:cut], parts[cut + 1 :]) if cut >= 0 else (parts, parts)
            current = FileEdit(_raw_path(old), _raw_path(new))
            edits.append(current)
            raw.append((current.old_path, current.new_path))
            from_git_header = True
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old_p, new_p = _raw_path(line[4:]), _raw_path(lines[i + 1][4:])
            if current is not None and from_git_header and not current.hunks:
                raw[-1] = (old_p, new_p)
            else:
                current = FileEdit(old_p, new_p)
                edits.append(current)
                raw.append((old_p, new_p))
            from_git_header = False
            i += 2
            continue
        elif current is not None and from_git_header and line.startswith("new file mode"):
            raw[-1] = (None, raw[-1][1])
        elif current is not None and from_git_header and line.startswith("deleted file mode"):
            raw[-1] = (raw[-1][0], None)
        elif current is not None and line.startswith("rename from "):
            raw[-1] = ("a/" + line[len("rename from ") :], raw[-1][1])
        elif current is not None and line.startswith("rename to "):
            raw[-1] = (raw[-1][0], "b/" + line[len("rename to ") :])
        elif current is not None and line.startswith("@@"):
            i = _read_hunk(lines, i, current)
            from_git_header = False
            continue
        i += 1
    for edit, (old_p, new_p) in zip(edits, raw, strict=True):
        edit.old_path, edit.new_path = _resolve_pair(old_p, new_p, exists)
    return [e for e in edits if e.hunks or e.old_path != e.new_path or e.new_path is None]


def _read_hunk(lines: list[str], i: int, edit: FileEdit) -> int:
    header = lines[i]
    match = _HUNK_HEADER.match(header)
    hunk = Hunk(number=len(edit.hunks) + 1, header=header.strip(), ops=[])
    if match:
        hunk.old_start = int(match.group(1))
    i += 1
    trailing_empty = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("@@", "diff --git ")):
            break
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            break
        if not _is_hunk_line(line):
            # Models drop the leading space of a context line; more hunk lines after it give
            # that away, whereas prose after a diff is not followed by +/- lines.
            following = lines[i + 1] if i + 1 < len(lines) else ""
            if following[:1] not in (" ", "-", "+") or following.startswith(("--- ", "+++ ")):
                break
            line = " " + line
        if line.startswith("\\"):
            last = hunk.ops[-1][0] if hunk.ops else " "
            hunk.old_no_eol |= last in " -"
            hunk.new_no_eol |= last in " +"
        elif line == "":
            hunk.ops.append((" ", ""))
        else:
            hunk.ops.append((line[0], line[1:]))
        trailing_empty = trailing_empty + 1 if line == "" else 0
        i += 1
    # Empty lines after a hunk are the model's spacing; a " " line is real blank context.
    del hunk.ops[len(hunk.ops) - trailing_empty :]
    if hunk.ops:
        edit.hunks.append(hunk)
    return i


# --------------------------------------------------------------------------- other formats

_PATH_LINE = re.compile(
    r"^\s*(?:#+\s*|[-*]\s+)?(?:(?:file|path)\s*:\s*)?[`*]*(?P<path>[\w.\-/\\]+)[`*]*:?\s*$",
    re.IGNORECASE,
)


# Files that commonly have no extension; any other bare word names a file only when the
# worktree has it (a line saying `python` or `Here` is not a file name).
_NO_EXTENSION = frozenset(
    {
        "Makefile", "makefile", "GNUmakefile", "Dockerfile", "Containerfile", "LICENSE",
        "LICENCE", "COPYING", "NOTICE", "AUTHORS", "README", "CHANGELOG", "CODEOWNERS",
        "Gemfile", "Rakefile", "Procfile", "Vagrantfile", "Jenkinsfile", "Brewfile", "Pipfile",
    }
)  # fmt: skip
Known = Callable[[str], bool]


def _path_from_line(line: str, known: Known | None = None) -> str | None:
    """The file a line names, if it is nothing but a path. A line of dots (`...`, the model
    eliding what lies between two blocks) names nothing; a bare word with no extension names
    a file only when it is a usual extension-less name or `known` says the worktree has it."""
    m = _PATH_LINE.match(line)
    if not m:
        return None
    path = m.group("path")
    if not re.search(r"[A-Za-z0-9_]", path):
        return None
    if "." not in path and "/" not in path:
        bare = path in _NO_EXTENSION or (known is not None and known(path))
        return path if bare else None
    return path


def parse_codex_patch(text: str) -> list[FileEdit]:
    """Read the `*** Begin Patch` format: Add / Update / Delete File sections."""
    lines = _normalise_newlines(text).split("\n")
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "*** Begin Patch")
    except StopIteration:
        raise NotThisFormat("no *** Begin Patch block") from None
    edits: list[FileEdit] = []
    current: FileEdit | None = None
    adding: list[str] | None = None
    hunk: Hunk | None = None
    for line in lines[start + 1 :]:
        if line.strip() == "*** End Patch":
            break
        if line.startswith("*** Add File: "):
            adding = []
            current = FileEdit(None, line[len("*** Add File: ") :].strip(), content="")
            edits.append(current)
            continue
        if line.startswith("*** Delete File: "):
            current, adding, hunk = None, None, None
            edits.append(FileEdit(line[len("*** Delete File: ") :].strip(), None))
            continue
        if line.startswith("*** Update File: "):
            path = line[len("*** Update File: ") :].strip()
            current, adding, hunk = FileEdit(path, path), None, None
            edits.append(current)
            continue
        if line.startswith("*** Move to: ") and current is not None:
            current.new_path = line[len("*** Move to: ") :].strip()
            continue
        if line.startswith("*** "):  # "*** End of File" and friends carry nothing we need
            continue
        if current is None:
            continue
        if adding is not None:
            adding.append(line[1:] if line.startswith("+") else line)
            current.content = "\n".join(adding) + "\n"
            continue
        if line.startswith("@@"):
            anchor = line[2:].strip() or None
            hunk = Hunk(len(current.hunks) + 1, line.strip(), [], anchor=anchor)
            current.hunks.append(hunk)
            continue
        if hunk is None:
            hunk = Hunk(len(current.hunks) + 1, "@@", [])
            current.hunks.append(hunk)
        hunk.ops.append((line[0], line[1:]) if line and line[0] in " -+" else (" ", line))
    for edit in edits:
        for h in edit.hunks:
            while h.ops and h.ops[-1] == (" ", ""):
                h.ops.pop()
        edit.hunks = [h for h in edit.hunks if h.ops]
    return edits


def _ops_between(old: list[str], new: list[str]) -> list[tuple[str, str]]:
    ops: list[tuple[str, str]] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            ops += [(" ", t) for t in old[i1:i2]]
        else:
            ops += [("-", t) for t in old[i1:i2]]
            ops += [("+", t) for t in new[j1:j2]]
    return ops


def parse_search_replace(text: str, known: Known | None = None) -> list[FileEdit]:
    """Read aider-style SEARCH/REPLACE blocks, each after a line naming its file (see
    `_path_from_line` for what `known` is)."""
    lines = _normalise_newlines(text).split("\n")
    by_path: dict[str, FileEdit] = {}
    path: str | None = None
    i = 0
    found = False
    while i < len(lines):
        if lines[i].strip() != "<<<<<<< SEARCH":
            i += 1
            continue
        found = True
        j = i - 1
        while j >= 0 and (not lines[j].strip() or _FENCE.match(lines[j])):
            j -= 1
        named = _path_from_line(lines[j], known) if j >= 0 else None
        path = named or path
        try:
            mid = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == "=======")
            end = next(
                k for k in range(mid + 1, len(lines)) if lines[k].startswith(">>>>>>> REPLACE")
            )
        except StopIteration:
            raise EditRefused(f"SEARCH block at line {i + 1} of the edit is not closed") from None
        if path is None:
            raise EditRefused(f"SEARCH block at line {i + 1} of the edit names no file")
        search, replace = lines[i + 1 : mid], lines[mid + 1 : end]
        edit = by_path.setdefault(path, FileEdit(path, path))
        if not search:
            edit.content = "\n".join(replace) + "\n"
        else:
            number = len(edit.hunks) + 1
            hunk = Hunk(number, f"SEARCH block {number}", _ops_between(search, replace))
            edit.hunks.append(hunk)
        i = end + 1
    if not found:
        raise NotThisFormat("no SEARCH/REPLACE blocks")
    return list(by_path.values())


def _looks_like_an_edit(body: list[str]) -> bool:
    """A fenced diff or block must never be taken for the new content of the file it edits."""
    markers = ("@@", "diff --git ", "--- ", "+++ ", "<<<<<<< SEARCH", "*** Begin Patch")
    return any(line.startswith(markers) for line in body)


def parse_whole_files(text: str, known: Known | None = None) -> list[FileEdit]:
    """Read fenced blocks that each follow a line naming the file they replace."""
    lines = _normalise_newlines(text).split("\n")
    edits: list[FileEdit] = []
    i = 0
    while i < len(lines):
        opener = _FENCE.match(lines[i])
        if not opener:
            i += 1
            continue
        fence = opener.group(1)
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        path = _path_from_line(lines[j], known) if j >= 0 else None
        end = next((k for k in range(i + 1, len(lines)) if lines[k].strip() == fence), len(lines))
        body = lines[i + 1 : end]
        if path is not None and not _looks_like_an_edit(body):
            edits.append(FileEdit(path, path, content="\n".join(body) + "\n"))
        i = end + 1
    if not edits:
        raise NotThisFormat("no fenced whole-file blocks after a path line")
    return edits
