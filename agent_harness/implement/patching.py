"""Apply a model's edit to a git worktree through a ladder of ever more tolerant rungs.

Models emit diffs with wrong line numbers, lost whitespace and markdown around them, or use other
formats altogether. Every rung settles the whole edit before it writes a byte (git's own
`--check`, or all new contents computed in memory), so an edit lands completely on exactly one
rung or not at all, and a refusal names the file, the hunk and the nearest match it found.
"""

from __future__ import annotations

import difflib
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from math import gcd
from pathlib import Path

from agent_harness.errors import HarnessError

RUNG_GIT_STRICT = "git-apply"
RUNG_GIT_3WAY = "git-apply-3way"
RUNG_GIT_TOLERANT = "git-apply-tolerant"
RUNG_FUZZY = "fuzzy-hunks"
RUNG_BLOCKS = "edit-blocks"
RUNGS: tuple[str, ...] = (
    RUNG_GIT_STRICT,
    RUNG_GIT_3WAY,
    RUNG_GIT_TOLERANT,
    RUNG_FUZZY,
    RUNG_BLOCKS,
)

# Below this, a window of the file is too unlike the hunk to be the place the model meant.
MIN_SIMILARITY = 0.7


@dataclass(frozen=True)
class RungAttempt:
    """One rung tried on an edit: whether it applied it, and why not or what it did."""

    rung: str
    succeeded: bool
    detail: str


@dataclass(frozen=True)
class ApplyResult:
    """What became of one edit. `reason` is feedback fit to hand back to the implementer."""

    applied: bool
    rung: str | None
    files: list[str]
    reason: str | None
    already_applied_hunks: int
    attempts: list[RungAttempt]


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


class _NotThisFormat(Exception):
    """The rung does not understand the edit's format at all (as opposed to refusing it)."""


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


@dataclass
class _Text:
    """A file's lines without endings, plus the line ending and final newline to write back."""

    lines: list[str]
    eol: str = "\n"
    final_newline: bool = True

    @classmethod
    def from_bytes(cls, data: bytes) -> _Text:
        text = data.decode("utf-8")
        if not text:
            return cls([], "\n", False)
        eol = "\r\n" if text.count("\r\n") * 2 > text.count("\n") else "\n"
        final = text.endswith("\n")
        body = text[:-1] if final else text
        lines = body.split("\n")
        if eol == "\r\n":
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        return cls(lines, eol, final)

    @classmethod
    def from_content(cls, content: str) -> _Text:
        return cls.from_bytes(content.encode("utf-8"))

    def to_bytes(self) -> bytes:
        if not self.lines:
            return b""
        text = self.eol.join(self.lines) + (self.eol if self.final_newline else "")
        return text.encode("utf-8")


def _key(line: str) -> str:
    """A line as compared when whitespace is not trusted: runs collapsed, ends stripped."""
    return " ".join(line.split())


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


def _render_unified(edits: list[FileEdit], worktree: Path) -> str:
    """A clean git diff of the parsed edit, in each target file's line endings and indent."""
    out: list[str] = []
    for edit in edits:
        a = edit.old_path or edit.new_path
        b = edit.new_path or edit.old_path
        out.append(f"diff --git a/{a} b/{b}")
        if edit.old_path is None:
            out.append("new file mode 100644")
        elif edit.new_path is None:
            out.append("deleted file mode 100644")
        elif edit.old_path != edit.new_path:
            out += [f"rename from {edit.old_path}", f"rename to {edit.new_path}"]
        out.append(f"--- a/{edit.old_path}" if edit.old_path else "--- /dev/null")
        out.append(f"+++ b/{edit.new_path}" if edit.new_path else "+++ /dev/null")
        target = _read_text(worktree, edit.old_path) if edit.old_path else None
        eol = target.eol if target else "\n"
        restyle = _indent_restyler(target.lines if target else [], edit.hunks)
        for hunk in edit.hunks:
            start = hunk.old_start or 1
            n_old, n_new = len(hunk.old_lines), len(hunk.new_lines)
            out.append(f"@@ -{start},{n_old} +{start},{n_new} @@")
            for n, (op, text) in enumerate(hunk.ops):
                out.append(op + restyle(text) + (eol[:-1] if eol != "\n" else ""))
                is_last_old = all(o == "+" for o, _ in hunk.ops[n + 1 :])
                is_last_new = all(o == "-" for o, _ in hunk.ops[n + 1 :])
                if (op != "+" and is_last_old and hunk.old_no_eol) or (
                    op != "-" and is_last_new and hunk.new_no_eol
                ):
                    out.append("\\ No newline at end of file")
    return "\n".join(out) + "\n"


def _indent_unit(counts: list[int], default: int) -> int:
    unit = 0
    for n in counts:
        unit = gcd(unit, n)
    return unit if unit in (2, 4, 8) else default


def _indent_restyler(file_lines: list[str], hunks: list[Hunk]) -> Callable[[str], str]:
    """Swap tab/space indentation of patch lines when the file consistently uses the other."""
    file_ws = [ln[: len(ln) - len(ln.lstrip())] for ln in file_lines if ln.strip()]
    patch_ws = [t[: len(t) - len(t.lstrip())] for h in hunks for _, t in h.ops if t.strip()]
    file_tabs = any("\t" in w for w in file_ws) and not any(w.startswith(" ") for w in file_ws)
    file_spaces = any(w for w in file_ws) and not any("\t" in w for w in file_ws)
    patch_spaces = any(w for w in patch_ws) and not any("\t" in w for w in patch_ws)
    patch_tabs = any("\t" in w for w in patch_ws) and not any(w.startswith(" ") for w in patch_ws)
    if file_tabs and patch_spaces:
        unit = _indent_unit([len(w) for w in patch_ws if w], 4)

        def to_tabs(text: str) -> str:
            n = len(text) - len(text.lstrip(" "))
            return "\t" * (n // unit) + " " * (n % unit) + text[n:]

        return to_tabs
    if file_spaces and patch_tabs:
        unit = _indent_unit([len(w) for w in file_ws if w], 4)

        def to_spaces(text: str) -> str:
            n = len(text) - len(text.lstrip("\t"))
            return " " * (n * unit) + text[n:]

        return to_spaces
    return lambda text: text


# --------------------------------------------------------------------------- other formats

_PATH_LINE = re.compile(
    r"^\s*(?:#+\s*|[-*]\s+)?(?:(?:file|path)\s*:\s*)?[`*]*(?P<path>[\w.\-/\\]+)[`*]*:?\s*$",
    re.IGNORECASE,
)


def _path_from_line(line: str) -> str | None:
    m = _PATH_LINE.match(line)
    if not m:
        return None
    path = m.group("path")
    if "." not in path and "/" not in path:
        return None
    return path


def parse_codex_patch(text: str) -> list[FileEdit]:
    """Read the `*** Begin Patch` format: Add / Update / Delete File sections."""
    lines = _normalise_newlines(text).split("\n")
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "*** Begin Patch")
    except StopIteration:
        raise _NotThisFormat("no *** Begin Patch block") from None
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


def parse_search_replace(text: str) -> list[FileEdit]:
    """Read aider-style SEARCH/REPLACE blocks, each after a line naming its file."""
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
        named = _path_from_line(lines[j]) if j >= 0 else None
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
        raise _NotThisFormat("no SEARCH/REPLACE blocks")
    return list(by_path.values())


def _looks_like_an_edit(body: list[str]) -> bool:
    """A fenced diff or block must never be taken for the new content of the file it edits."""
    markers = ("@@", "diff --git ", "--- ", "+++ ", "<<<<<<< SEARCH", "*** Begin Patch")
    return any(line.startswith(markers) for line in body)


def parse_whole_files(text: str) -> list[FileEdit]:
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
        path = _path_from_line(lines[j]) if j >= 0 else None
        end = next((k for k in range(i + 1, len(lines)) if lines[k].strip() == fence), len(lines))
        body = lines[i + 1 : end]
        if path is not None and not _looks_like_an_edit(body):
            edits.append(FileEdit(path, path, content="\n".join(body) + "\n"))
        i = end + 1
    if not edits:
        raise _NotThisFormat("no fenced whole-file blocks after a path line")
    return edits


# --------------------------------------------------------------------------- paths


def _check_path(worktree: Path, path: str) -> None:
    norm = path.replace("\\", "/")
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm) or ".." in parts or not parts:
        raise UnsafeEditPath(f"refused: path {path!r} is outside the worktree", path=path)
    if any(part.lower() == ".git" for part in parts):
        raise UnsafeEditPath(f"refused: path {path!r} is inside .git", path=path)
    root = worktree.resolve()
    target = (root / "/".join(parts)).resolve()
    if target != root and root not in target.parents:
        raise UnsafeEditPath(
            f"refused: path {path!r} leads outside the worktree through a symlink", path=path
        )


def _read_text(worktree: Path, path: str) -> _Text | None:
    full = worktree / path
    if not full.is_file():
        return None
    try:
        return _Text.from_bytes(full.read_bytes())
    except UnicodeDecodeError:
        raise EditRefused(f"{path}: not a UTF-8 text file", path=path) from None


# --------------------------------------------------------------------------- placement


@dataclass
class _Match:
    start: int
    end: int
    score: float
    pairs: dict[int, int]  # index into the hunk's old side -> file line index


def _find_all(haystack: list[str], needle: list[str], lo: int = 0) -> list[int]:
    n = len(needle)
    return [s for s in range(lo, len(haystack) - n + 1) if haystack[s : s + n] == needle]


def _similar_windows(fkeys: list[str], okeys: list[str], lo: int) -> list[_Match]:
    wanted = {k for k in okeys if k}
    slack = max(2, len(okeys) // 2)
    found: list[_Match] = []
    for s in range(lo, len(fkeys)):
        if fkeys[s] not in wanted:
            continue
        window = fkeys[s : s + len(okeys) + slack]
        blocks = difflib.SequenceMatcher(None, okeys, window, autojunk=False).get_matching_blocks()
        pairs = {b.a + k: s + b.b + k for b in blocks for k in range(b.size)}
        if not pairs or min(pairs.values()) != s:
            continue
        end = max(pairs.values()) + 1
        score = 2 * len(pairs) / (len(okeys) + end - s)
        found.append(_Match(s, end, score, pairs))
    return found


def _nearest_by_characters(fkeys: list[str], okeys: list[str]) -> _Match | None:
    """The window most like the hunk letter by letter: feedback when no line matches whole."""
    wanted = "\n".join(okeys)
    best: _Match | None = None
    for s in range(max(1, len(fkeys) - len(okeys) + 1)):
        window = fkeys[s : s + len(okeys)]
        if not window:
            break
        matcher = difflib.SequenceMatcher(None, wanted, "\n".join(window), autojunk=False)
        if best is not None and matcher.real_quick_ratio() <= best.score:
            continue
        score = matcher.ratio()
        if best is None or score > best.score:
            best = _Match(s, s + len(window), score, {})
    return best


def _describe(hunk: Hunk, edit: FileEdit, count: int) -> str:
    return f"{edit.path}: hunk {hunk.number} of {count} ({hunk.header})"


def _place(hunk: Hunk, text: _Text, label: str, path: str) -> _Match | None:
    """Where the hunk's old side is in the file; None when its new side is already there."""
    fkeys = [_key(ln) for ln in text.lines]
    okeys = [_key(ln) for ln in hunk.old_lines]
    nkeys = [_key(ln) for ln in hunk.new_lines]
    lo = 0
    if hunk.anchor:
        anchors = _find_all(fkeys, [_key(hunk.anchor)])
        lo = anchors[0] + 1 if anchors else 0
    if not okeys:
        if not text.lines:
            return _Match(0, 0, 1.0, {})
        if nkeys and _find_all(fkeys, nkeys):
            return None
        raise EditRefused(f"{label} has no context lines to place it by", path=path)
    exact = _find_all(fkeys, okeys, lo)
    new_at = _find_all(fkeys, nkeys, lo) if nkeys != okeys and nkeys else []
    if exact and new_at:
        within = [q for q in exact for p in new_at if p <= q and q + len(okeys) <= p + len(nkeys)]
        if within:
            return None
    if len(exact) == 1:
        s = exact[0]
        return _Match(s, s + len(okeys), 1.0, {k: s + k for k in range(len(okeys))})
    if len(exact) > 1:
        where = " and ".join(str(s + 1) for s in exact[:3])
        raise EditRefused(
            f"{label} is ambiguous: its lines match equally well at lines {where}; "
            "include more surrounding context",
            path=path,
            nearest_line=exact[0] + 1,
            similarity=1.0,
        )
    if new_at:
        return None
    candidates = _similar_windows(fkeys, okeys, lo)
    removed = {n for n, (op, _) in enumerate(o for o in hunk.ops if o[0] != "+") if op == "-"}
    acceptable = [m for m in candidates if removed <= m.pairs.keys()]
    best = max(acceptable or candidates, key=lambda m: m.score, default=None)
    if best is None or not acceptable or best.score < MIN_SIMILARITY:
        why = "does not match"
        if best is None:
            best = _nearest_by_characters(fkeys, okeys)
            why = "does not match: none of its old lines is in the file"
        elif not acceptable:
            why = "does not match: lines it removes are not in the file"
        if best is None:
            raise EditRefused(f"{label} does not match anything in the file", path=path)
        raise EditRefused(
            f"{label} {why}; nearest is line {best.start + 1} with similarity "
            f"{best.score:.2f} ({text.lines[best.start].strip()!r})",
            path=path,
            nearest_line=best.start + 1,
            similarity=round(best.score, 2),
        )
    rivals = [m for m in acceptable if m.start != best.start and abs(m.score - best.score) < 1e-9]
    if rivals:
        raise EditRefused(
            f"{label} is ambiguous: lines {best.start + 1} and {rivals[0].start + 1} match "
            f"equally (similarity {best.score:.2f}); include more surrounding context",
            path=path,
            nearest_line=best.start + 1,
            similarity=round(best.score, 2),
        )
    return best


def _indent_fixer(hunk: Hunk, text: _Text, match: _Match) -> Callable[[str], str]:
    """Re-indent added lines the way the matched file lines differ from the hunk's lines.

    Either a constant shift (the model lost a level of nesting) or a constant ratio (the model
    indented by 2 where the file uses 4); anything less regular is left as the model wrote it.
    """
    old = hunk.old_lines
    pairs = [(old[i], text.lines[j]) for i, j in match.pairs.items() if old[i].strip()]
    if all(a == b for a, b in pairs):
        return lambda line: line
    restyle = _indent_restyler([b for _, b in pairs], [hunk])

    def indent(line: str) -> int:
        return len(line) - len(line.lstrip())

    sizes = [(indent(restyle(a)), indent(b)) for a, b in pairs]
    fill = next((b[0] for _, b in pairs if b[:1] in (" ", "\t")), " ")
    deltas = {f - h for h, f in sizes}
    ratios = (
        {Fraction(f, h) for h, f in sizes if h}
        if all(bool(h) == bool(f) for h, f in sizes)
        else set()
    )
    if len(deltas) == 1:
        delta = deltas.pop()

        def new_size(n: int) -> int:
            return max(n + delta, 0)
    elif len(ratios) == 1:
        ratio = ratios.pop()

        def new_size(n: int) -> int:
            return int(n * ratio)
    else:
        return restyle

    def fix(line: str) -> str:
        line = restyle(line)
        if not line.strip():
            return line
        n = indent(line)
        size = new_size(n)
        if size == n:
            return line
        return (fill * size if size > n else line[:size]) + line[n:]

    return fix


def _apply_hunk(hunk: Hunk, text: _Text, match: _Match) -> None:
    fix = _indent_fixer(hunk, text, match)
    out: list[str] = []
    cursor = match.start
    old_index = 0
    for op, line in hunk.ops:
        if op == "+":
            out.append(fix(line))
            continue
        j = match.pairs.get(old_index)
        old_index += 1
        if j is None:
            continue  # context the model remembered but the file does not have
        out.extend(text.lines[cursor:j])  # context the model left out stays
        if op == " ":
            out.append(text.lines[j])
        cursor = j + 1
    cursor = max(cursor, match.end)
    at_eof = cursor == len(text.lines)
    text.lines[match.start : cursor] = out
    if at_eof and (hunk.old_no_eol or hunk.new_no_eol):
        text.final_newline = not hunk.new_no_eol


# --------------------------------------------------------------------------- in-memory rungs


@dataclass
class _Plan:
    writes: dict[str, bytes | None] = field(default_factory=dict)
    already: int = 0


def _plan_edits(worktree: Path, edits: list[FileEdit]) -> _Plan:
    """Every file's new bytes (None: delete), computed before anything is written."""
    state: dict[str, _Text | None] = {}
    plan = _Plan()

    def load(path: str) -> _Text | None:
        if path not in state:
            state[path] = _read_text(worktree, path)
        return state[path]

    for edit in edits:
        count = len(edit.hunks)
        if edit.new_path is None:
            assert edit.old_path is not None
            current = load(edit.old_path)
            if current is None:
                plan.already += max(count, 1)
                continue
            _check_deletion(edit, current)
            state[edit.old_path] = None
            continue
        if edit.old_path is None:
            current = load(edit.new_path)
            wanted = _Text.from_content(
                edit.content
                if edit.content is not None
                else "".join(t + "\n" for h in edit.hunks for t in h.new_lines)
            )
            if current is not None:
                if [_key(x) for x in current.lines] == [_key(x) for x in wanted.lines]:
                    plan.already += max(count, 1)
                    continue
                raise EditRefused(
                    f"{edit.path}: the edit creates this file but it already exists with "
                    "different content",
                    path=edit.path,
                )
            state[edit.new_path] = wanted
            continue
        source = edit.old_path
        current = load(source)
        if current is None and edit.old_path != edit.new_path and load(edit.new_path):
            source = edit.new_path  # renamed already; its hunks may be applied too
            current = load(source)
        if current is None:
            if edit.content is not None:
                state[edit.new_path] = _Text.from_content(edit.content)
                continue
            raise EditRefused(f"{edit.path}: no such file in the worktree", path=edit.path)
        text = _Text(list(current.lines), current.eol, current.final_newline)
        if edit.content is not None:
            wanted = _Text.from_content(edit.content)
            if wanted.lines == text.lines:
                plan.already += 1
            text.lines, text.final_newline = wanted.lines, wanted.final_newline
        for hunk in edit.hunks:
            match = _place(hunk, text, _describe(hunk, edit, count), edit.path)
            if match is None:
                plan.already += 1
            else:
                _apply_hunk(hunk, text, match)
        if source != edit.new_path:
            state[source] = None
        state[edit.new_path] = text
    for path, final in state.items():
        before = (worktree / path).read_bytes() if (worktree / path).is_file() else None
        after = final.to_bytes() if final is not None else None
        if before != after:
            plan.writes[path] = after
    return plan


def _check_deletion(edit: FileEdit, current: _Text) -> None:
    if not edit.hunks:
        return
    removed = [_key(t) for h in edit.hunks for op, t in h.ops if op == "-"]
    present = [_key(t) for t in current.lines]
    ratio = difflib.SequenceMatcher(None, removed, present, autojunk=False).ratio()
    if ratio < 1.0 and [k for k in removed if k] != [k for k in present if k]:
        raise EditRefused(
            f"{edit.path}: the edit deletes this file but its content differs from what the "
            f"edit removes (similarity {ratio:.2f})",
            path=edit.path,
            nearest_line=1,
            similarity=round(ratio, 2),
        )


def _write(worktree: Path, writes: dict[str, bytes | None]) -> None:
    """Write all files, or restore every one already written if any write fails."""
    done: list[tuple[Path, bytes | None]] = []
    try:
        for path, data in writes.items():
            full = worktree / path
            before = full.read_bytes() if full.is_file() else None
            done.append((full, before))
            if data is None:
                full.unlink(missing_ok=True)
            else:
                full.parent.mkdir(parents=True, exist_ok=True)
                full.write_bytes(data)
    except OSError as exc:
        for full, before in reversed(done):
            if before is None:
                full.unlink(missing_ok=True)
            else:
                full.write_bytes(before)
        raise EditRefused(f"could not write {exc.filename}: {exc.strerror}") from exc


# --------------------------------------------------------------------------- git rungs


def _git_apply(worktree: Path, patch: str, options: list[str]) -> None:
    data = patch.encode("utf-8")
    for extra in (["--check"], []):
        proc = subprocess.run(
            ["git", "apply", *extra, *options, "-"],
            cwd=worktree,
            input=data,
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            lines = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            errors = [ln for ln in lines if ln.startswith("error:")] or lines or ["failed"]
            raise EditRefused("git apply: " + "; ".join(e.removeprefix("error: ") for e in errors))


def _git_ambiguity(worktree: Path, edits: list[FileEdit]) -> str | None:
    """Why git must not place these hunks: git would silently pick the nearest of equals."""
    for edit in edits:
        if not edit.old_path:
            continue
        try:
            text = _read_text(worktree, edit.old_path)
        except EditRefused:
            continue
        if text is None:
            continue
        fkeys = [_key(ln) for ln in text.lines]
        for hunk in edit.hunks:
            okeys = [_key(ln) for ln in hunk.old_lines]
            if not okeys:
                continue
            spots = _find_all(fkeys, okeys)
            stated = (hunk.old_start or 0) - 1
            if len(spots) > 1 and stated not in spots:
                where = " and ".join(str(s + 1) for s in spots[:3])
                return (
                    f"{_describe(hunk, edit, len(edit.hunks))} matches at lines {where}, "
                    "none of them the stated line"
                )
    return None


# --------------------------------------------------------------------------- the ladder


def _touched(edits: list[FileEdit]) -> list[str]:
    files: list[str] = []
    for edit in edits:
        for p in (edit.old_path, edit.new_path):
            if p and p not in files:
                files.append(p)
    return files


def apply_edit(worktree: Path, edit_text: str) -> ApplyResult:
    """Apply a model's edit to `worktree` on the first rung that takes all of it.

    Never raises for a bad edit: a refusal is an `ApplyResult` whose `reason` names the file,
    the hunk and the nearest match. Rung 2 (`git apply --3way`) also stages what it applies, as
    git does; the other rungs touch only the working tree.
    """
    worktree = Path(worktree)

    def exists(path: str) -> bool:
        return (worktree / path).exists()

    diff_edits = parse_unified_diff(edit_text, exists)
    block_edits: list[FileEdit] = []
    block_error: Exception | None = None
    for parser in (parse_codex_patch, parse_search_replace, parse_whole_files):
        try:
            block_edits = parser(edit_text)
            break
        except (_NotThisFormat, EditRefused) as exc:
            block_error = block_error if isinstance(block_error, EditRefused) else exc
    attempts: list[RungAttempt] = []
    try:
        for p in _touched(diff_edits) + _touched(block_edits):
            _check_path(worktree, p)
    except UnsafeEditPath as exc:
        attempts.append(RungAttempt("paths", False, exc.message))
        return ApplyResult(False, None, [], exc.message, 0, attempts)

    def run_git(options: list[str], clean: bool) -> tuple[list[str], int]:
        if not diff_edits:
            raise _NotThisFormat("no unified diff in the edit")
        ambiguity = _git_ambiguity(worktree, diff_edits)
        if ambiguity:
            raise EditRefused("not tried: " + ambiguity)
        patch = _render_unified(diff_edits, worktree) if clean else edit_text
        _git_apply(worktree, patch, options)
        return _touched(diff_edits), 0

    def run_memory(edits: list[FileEdit], error: Exception | None) -> tuple[list[str], int]:
        if not edits:
            raise error or _NotThisFormat("nothing this rung can read")
        plan = _plan_edits(worktree, edits)
        _write(worktree, plan.writes)
        return list(plan.writes), plan.already

    rungs: list[tuple[str, Callable[[], tuple[list[str], int]]]] = [
        (RUNG_GIT_STRICT, lambda: run_git([], False)),
        (RUNG_GIT_3WAY, lambda: run_git(["--3way"], False)),
        (RUNG_GIT_TOLERANT, lambda: run_git(["--recount", "--ignore-whitespace"], True)),
        (RUNG_FUZZY, lambda: run_memory(diff_edits, _NotThisFormat("no unified diff"))),
        (RUNG_BLOCKS, lambda: run_memory(block_edits, block_error)),
    ]
    reason: str | None = None
    for name, rung in rungs:
        try:
            files, already = rung()
        except _NotThisFormat as exc:
            attempts.append(RungAttempt(name, False, str(exc)))
            continue
        except EditRefused as exc:
            attempts.append(RungAttempt(name, False, exc.message))
            if name in (RUNG_FUZZY, RUNG_BLOCKS) or reason is None:
                reason = exc.message
            continue
        detail = f"changed {len(files)} file(s)"
        if already:
            detail += f"; {already} hunk(s) were already applied"
        attempts.append(RungAttempt(name, True, detail))
        return ApplyResult(True, name, files, None, already, attempts)
    return ApplyResult(
        False,
        None,
        [],
        reason
        or "the edit holds no unified diff, SEARCH/REPLACE block, *** Begin Patch or "
        "whole-file block",
        0,
        attempts,
    )


__all__ = [
    "RUNGS",
    "ApplyResult",
    "EditRefused",
    "FileEdit",
    "Hunk",
    "RungAttempt",
    "UnsafeEditPath",
    "apply_edit",
    "parse_codex_patch",
    "parse_search_replace",
    "parse_unified_diff",
    "parse_whole_files",
]
