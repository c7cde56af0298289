"""Where a hunk belongs in a file that has moved on since the model read it, and how to put
it there.

A hunk is placed by its old lines compared with whitespace flattened: an exact unique match
first, else the most similar window that still holds every line the hunk removes. Ties and
weak matches are refused with the nearest spot named; added lines are re-indented the way
the matched file lines differ from what the model remembered.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from math import gcd
from pathlib import Path

from agent_harness.implement.edits import EditRefused, FileEdit, Hunk

# Below this, a window of the file is too unlike the hunk to be the place the model meant.
MIN_SIMILARITY = 0.7


@dataclass
class FileText:
    """A file's lines without endings, plus the line ending and final newline to write back."""

    lines: list[str]
    eol: str = "\n"
    final_newline: bool = True

    @classmethod
    def from_bytes(cls, data: bytes) -> FileText:
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
    def from_content(cls, content: str) -> FileText:
        return cls.from_bytes(content.encode("utf-8"))

    def to_bytes(self) -> bytes:
        if not self.lines:
            return b""
        text = self.eol.join(self.lines) + (self.eol if self.final_newline else "")
        return text.encode("utf-8")


def line_key(line: str) -> str:
    """A line as compared when whitespace is not trusted: runs collapsed, ends stripped."""
    return " ".join(line.split())


def read_file_text(worktree: Path, path: str) -> FileText | None:
    """The worktree file at `path` (None when there is none); refused when it is not text."""
    full = worktree / path
    if not full.is_file():
        return None
    try:
        return FileText.from_bytes(full.read_bytes())
    except UnicodeDecodeError:
        raise EditRefused(f"{path}: not a UTF-8 text file", path=path) from None


def _indent_unit(counts: list[int], default: int) -> int:
    unit = 0
    for n in counts:
        unit = gcd(unit, n)
    return unit if unit in (2, 4, 8) else default


def indent_restyler(file_lines: list[str], hunks: list[Hunk]) -> Callable[[str], str]:
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


@dataclass
class HunkMatch:
    """Where a hunk's old side sits in a file, and how closely it matched (1.0: exactly)."""

    start: int
    end: int
    score: float
    pairs: dict[int, int]  # index into the hunk's old side -> file line index


def find_all(haystack: list[str], needle: list[str], lo: int = 0) -> list[int]:
    n = len(needle)
    return [s for s in range(lo, len(haystack) - n + 1) if haystack[s : s + n] == needle]


def _similar_windows(fkeys: list[str], okeys: list[str], lo: int) -> list[HunkMatch]:
    wanted = {k for k in okeys if k}
    slack = max(2, len(okeys) // 2)
    found: list[HunkMatch] = []
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
        found.append(HunkMatch(s, end, score, pairs))
    return found


def _nearest_by_characters(fkeys: list[str], okeys: list[str]) -> HunkMatch | None:
    """The window most like the hunk letter by letter: feedback when no line matches whole."""
    wanted = "\n".join(okeys)
    best: HunkMatch | None = None
    for s in range(max(1, len(fkeys) - len(okeys) + 1)):
        window = fkeys[s : s + len(okeys)]
        if not window:
            break
        matcher = difflib.SequenceMatcher(None, wanted, "\n".join(window), autojunk=False)
        if best is not None and matcher.real_quick_ratio() <= best.score:
            continue
        score = matcher.ratio()
        if best is None or score > best.score:
            best = HunkMatch(s, s + len(window), score, {})
    return best


def describe_hunk(hunk: Hunk, edit: FileEdit, count: int) -> str:
    return f"{edit.path}: hunk {hunk.number} of {count} ({hunk.header})"


def place_hunk(hunk: Hunk, text: FileText, label: str, path: str) -> HunkMatch | None:
    """Where the hunk's old side is in the file; None when its new side is already there."""
    fkeys = [line_key(ln) for ln in text.lines]
    okeys = [line_key(ln) for ln in hunk.old_lines]
    nkeys = [line_key(ln) for ln in hunk.new_lines]
    lo = 0
    if hunk.anchor:
        anchors = find_all(fkeys, [line_key(hunk.anchor)])
        lo = anchors[0] + 1 if anchors else 0
    if not okeys:
        if not text.lines:
            return HunkMatch(0, 0, 1.0, {})
        if nkeys and find_all(fkeys, nkeys):
            return None
        raise EditRefused(f"{label} has no context lines to place it by", path=path)
    exact = find_all(fkeys, okeys, lo)
    new_at = find_all(fkeys, nkeys, lo) if nkeys != okeys and nkeys else []
    if exact and new_at:
        within = [q for q in exact for p in new_at if p <= q and q + len(okeys) <= p + len(nkeys)]
        if within:
            return None
    if len(exact) == 1:
        s = exact[0]
        return HunkMatch(s, s + len(okeys), 1.0, {k: s + k for k in range(len(okeys))})
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
    return _most_similar(hunk, text, fkeys, okeys, lo, label, path)


def _most_similar(
    hunk: Hunk,
    text: FileText,
    fkeys: list[str],
    okeys: list[str],
    lo: int,
    label: str,
    path: str,
) -> HunkMatch:
    """The one window most like the hunk's old side, or a refusal naming the nearest spot.

    A window only counts when it holds every line the hunk removes: removing a line that is
    not there would silently change some other line instead.
    """
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


def _indent_fixer(hunk: Hunk, text: FileText, match: HunkMatch) -> Callable[[str], str]:
    """Re-indent added lines the way the matched file lines differ from the hunk's lines.

    Either a constant shift (the model lost a level of nesting) or a constant ratio (the model
    indented by 2 where the file uses 4); anything less regular is left as the model wrote it.
    """
    old = hunk.old_lines
    pairs = [(old[i], text.lines[j]) for i, j in match.pairs.items() if old[i].strip()]
    if all(a == b for a, b in pairs):
        return lambda line: line
    restyle = indent_restyler([b for _, b in pairs], [hunk])

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


def apply_hunk(hunk: Hunk, text: FileText, match: HunkMatch) -> None:
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
