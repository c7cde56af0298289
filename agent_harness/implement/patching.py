"""Apply a model's edit to a git worktree through a ladder of ever more tolerant rungs.

Models emit diffs with wrong line numbers, lost whitespace and markdown around them, or use other
formats altogether. Every rung settles the whole edit before it writes a byte (git's own
`--check`, or all new contents computed in memory), so an edit lands completely on exactly one
rung or not at all, and a refusal names the file, the hunk and the nearest match it found.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from agent_harness.git.runner import run_git
from agent_harness.implement.edits import (
    EditRefused,
    FileEdit,
    Hunk,
    NotThisFormat,
    UnsafeEditPath,
    parse_codex_patch,
    parse_search_replace,
    parse_unified_diff,
    parse_whole_files,
)
from agent_harness.implement.placement import (
    FileText,
    HunkMatch,
    apply_hunk,
    describe_hunk,
    find_all,
    indent_restyler,
    line_key,
    place_hunk,
    read_file_text,
)

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
        target = read_file_text(worktree, edit.old_path) if edit.old_path else None
        eol = target.eol if target else "\n"
        restyle = indent_restyler(target.lines if target else [], edit.hunks)
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


# --------------------------------------------------------------------------- in-memory rungs


@dataclass
class _Plan:
    writes: dict[str, bytes | None] = field(default_factory=dict)
    already: int = 0


def _plan_edits(worktree: Path, edits: list[FileEdit], tree: _Tree) -> _Plan:
    """Every file's new bytes (None: delete), computed before anything is written."""
    space = _Workspace(worktree, tree)
    for edit in edits:
        if edit.new_path is None:
            assert edit.old_path is not None
            space.delete(edit, edit.old_path)
        elif edit.old_path is None:
            space.create(edit, edit.new_path)
        else:
            space.change(edit, edit.old_path, edit.new_path)
    return _Plan(space.writes(), space.already)


class _Workspace:
    """The worktree's files as the edit would leave them, kept in memory (None: deleted).

    Later edits of one answer see what earlier ones did, so two edits of the same file
    compose; `already` counts hunks whose change the file holds already.
    """

    def __init__(self, worktree: Path, tree: _Tree) -> None:
        self.worktree = worktree
        self.tree = tree
        self.files: dict[str, FileText | None] = {}
        self.already = 0

    def load(self, path: str) -> FileText | None:
        if path not in self.files:
            self.files[path] = read_file_text(self.worktree, path)
        return self.files[path]

    def delete(self, edit: FileEdit, path: str) -> None:
        current = self.load(path)
        if current is None:
            self.already += max(len(edit.hunks), 1)
            return
        _check_deletion(edit, current)
        self.files[path] = None

    def create(self, edit: FileEdit, path: str) -> None:
        current = self.load(path)
        wanted = FileText.from_content(
            edit.content
            if edit.content is not None
            else "".join(t + "\n" for h in edit.hunks for t in h.new_lines)
        )
        if current is None:
            self.files[path] = wanted
        elif [line_key(x) for x in current.lines] == [line_key(x) for x in wanted.lines]:
            self.already += max(len(edit.hunks), 1)
        else:
            raise EditRefused(
                f"{edit.path}: the edit creates this file but it already exists with "
                "different content",
                path=edit.path,
            )

    def change(self, edit: FileEdit, old_path: str, new_path: str) -> None:
        if edit.hunks and old_path == new_path and self.load(old_path) is None:
            old_path = new_path = self.tree.the_one(old_path) or old_path
        source = old_path
        current = self.load(source)
        if current is None and old_path != new_path and self.load(new_path):
            source = new_path  # renamed already; its hunks may be applied too
            current = self.load(source)
        if current is None:
            if edit.content is None:
                raise EditRefused(f"{edit.path}: no such file in the worktree", path=edit.path)
            self.files[new_path] = FileText.from_content(edit.content)
            return
        text = FileText(list(current.lines), current.eol, current.final_newline)
        if edit.content is not None:
            wanted = FileText.from_content(edit.content)
            if wanted.lines == text.lines:
                self.already += 1
            text.lines, text.final_newline = wanted.lines, wanted.final_newline
        for hunk in edit.hunks:
            label = describe_hunk(hunk, edit, len(edit.hunks))
            placed, match = _place(hunk, text, label, edit.path)
            if match is None:
                self.already += 1
            else:
                apply_hunk(placed, text, match)
        if source != new_path:
            self.files[source] = None
        self.files[new_path] = text

    def writes(self) -> dict[str, bytes | None]:
        """The files whose bytes differ from the worktree's, with their new bytes."""
        changed: dict[str, bytes | None] = {}
        for path, final in self.files.items():
            full = self.worktree / path
            before = full.read_bytes() if full.is_file() else None
            after = final.to_bytes() if final is not None else None
            if before != after:
                changed[path] = after
        return changed


class _Tree:
    """The worktree's files as git lists them (read once, when first asked): what a bare file
    name in a block may stand for."""

    def __init__(self, worktree: Path) -> None:
        self.worktree = worktree
        self._files: list[str] | None = None

    def files(self) -> list[str]:
        if self._files is None:
            listed = run_git(
                self.worktree, "ls-files", "-z", "-co", "--exclude-standard", check=False
            )
            self._files = [p for p in listed.stdout.split("\0") if p] if listed.ok else []
        return self._files

    def has(self, name: str) -> bool:
        """Does the worktree hold `name`, or exactly one file whose path ends with it?"""
        return (self.worktree / name).is_file() or bool(self._ending_with(name))

    def the_one(self, name: str) -> str | None:
        """The one file `name` (a bare name or a path's tail, itself no file) stands for; None
        when no file fits. Two or more that fit are refused, never guessed between."""
        fits = self._ending_with(name)
        if len(fits) > 1:
            shown = ", ".join(fits[:5])
            raise EditRefused(
                f"{name}: no such file, and the name fits {len(fits)} files in the worktree "
                f"({shown}); name the one to edit by its path",
                path=name,
            )
        if fits:
            _check_path(self.worktree, fits[0])
        return fits[0] if fits else None

    def _ending_with(self, name: str) -> list[str]:
        tail = "/" + name.replace("\\", "/").strip("/")
        return [path for path in self.files() if path.endswith(tail)]


def _place(hunk: Hunk, text: FileText, label: str, path: str) -> tuple[Hunk, HunkMatch | None]:
    """Place the hunk; one that misses only for blank lines it starts with (a stray blank first
    line in a SEARCH block) is placed without them. Ambiguity is refused either way."""
    try:
        return hunk, place_hunk(hunk, text, label, path)
    except EditRefused as missed:
        lead = 0
        while lead < len(hunk.ops) and hunk.ops[lead][0] != "+" and not hunk.ops[lead][1].strip():
            lead += 1
        rest = hunk.ops[lead:]
        if not lead or not any(op != "+" and line.strip() for op, line in rest):
            raise
        trimmed = replace(hunk, ops=rest)
        try:
            return trimmed, place_hunk(trimmed, text, label, path)
        except EditRefused:
            raise missed from None


def _check_deletion(edit: FileEdit, current: FileText) -> None:
    if not edit.hunks:
        return
    removed = [line_key(t) for h in edit.hunks for op, t in h.ops if op == "-"]
    present = [line_key(t) for t in current.lines]
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
    """`git apply` the patch after a `--check` dry run, so a refused patch changes nothing."""
    for extra in (["--check"], []):
        result = run_git(worktree, "apply", *extra, *options, "-", check=False, input=patch)
        if not result.ok:
            lines = result.stderr.strip().splitlines()
            errors = [ln for ln in lines if ln.startswith("error:")] or lines or ["failed"]
            raise EditRefused("git apply: " + "; ".join(e.removeprefix("error: ") for e in errors))


def _git_ambiguity(worktree: Path, edits: list[FileEdit]) -> str | None:
    """Why git must not place these hunks: git would silently pick the nearest of equals."""
    for edit in edits:
        if not edit.old_path:
            continue
        try:
            text = read_file_text(worktree, edit.old_path)
        except EditRefused:
            continue
        if text is None:
            continue
        fkeys = [line_key(ln) for ln in text.lines]
        for hunk in edit.hunks:
            okeys = [line_key(ln) for ln in hunk.old_lines]
            if not okeys:
                continue
            spots = find_all(fkeys, okeys)
            stated = (hunk.old_start or 0) - 1
            if len(spots) > 1 and stated not in spots:
                where = " and ".join(str(s + 1) for s in spots[:3])
                return (
                    f"{describe_hunk(hunk, edit, len(edit.hunks))} matches at lines {where}, "
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
    ladder = _Ladder(Path(worktree), edit_text)
    attempts: list[RungAttempt] = []
    try:
        ladder.check_paths()
    except UnsafeEditPath as exc:
        attempts.append(RungAttempt("paths", False, exc.message))
        return ApplyResult(False, None, [], exc.message, 0, attempts)
    reason: str | None = None
    for name, rung in ladder.rungs():
        try:
            files, already = rung()
        except NotThisFormat as exc:
            attempts.append(RungAttempt(name, False, str(exc)))
            continue
        except EditRefused as exc:
            attempts.append(RungAttempt(name, False, exc.message))
            # The in-memory rungs explain a miss best (file, hunk, nearest line): theirs wins.
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


Rung = Callable[[], tuple[list[str], int]]


class _Ladder:
    """One edit, read as a unified diff and as the first block format that fits, with the
    rungs that may land it; each rung returns the files it changed and the hunks it found
    already applied."""

    def __init__(self, worktree: Path, edit_text: str) -> None:
        self.worktree = worktree
        self.edit_text = edit_text
        self.tree = _Tree(worktree)
        self.diff_edits = parse_unified_diff(edit_text, lambda path: (worktree / path).exists())
        self.block_edits: list[FileEdit] = []
        self.block_error: Exception | None = None
        parsers: list[Callable[[str], list[FileEdit]]] = [
            parse_codex_patch,
            lambda text: parse_search_replace(text, self.tree.has),
            lambda text: parse_whole_files(text, self.tree.has),
        ]
        for parser in parsers:
            try:
                self.block_edits = parser(edit_text)
                break
            except (NotThisFormat, EditRefused) as exc:
                # A block that is recognisably broken says more than "not this format".
                if not isinstance(self.block_error, EditRefused):
                    self.block_error = exc

    def check_paths(self) -> None:
        for path in _touched(self.diff_edits) + _touched(self.block_edits):
            _check_path(self.worktree, path)

    def rungs(self) -> list[tuple[str, Rung]]:
        no_diff = NotThisFormat("no unified diff")
        return [
            (RUNG_GIT_STRICT, lambda: self.by_git([], clean=False)),
            (RUNG_GIT_3WAY, lambda: self.by_git(["--3way"], clean=False)),
            (
                RUNG_GIT_TOLERANT,
                lambda: self.by_git(["--recount", "--ignore-whitespace"], clean=True),
            ),
            (RUNG_FUZZY, lambda: self.in_memory(self.diff_edits, no_diff)),
            (RUNG_BLOCKS, lambda: self.in_memory(self.block_edits, self.block_error)),
        ]

    def by_git(self, options: list[str], clean: bool) -> tuple[list[str], int]:
        if not self.diff_edits:
            raise NotThisFormat("no unified diff in the edit")
        ambiguity = _git_ambiguity(self.worktree, self.diff_edits)
        if ambiguity:
            raise EditRefused("not tried: " + ambiguity)
        patch = _render_unified(self.diff_edits, self.worktree) if clean else self.edit_text
        _git_apply(self.worktree, patch, options)
        return _touched(self.diff_edits), 0

    def in_memory(self, edits: list[FileEdit], error: Exception | None) -> tuple[list[str], int]:
        if not edits:
            raise error or NotThisFormat("nothing this rung can read")
        plan = _plan_edits(self.worktree, edits, self.tree)
        _write(self.worktree, plan.writes)
        return list(plan.writes), plan.already


__all__ = [
    "RUNGS",
    "ApplyResult",
    "RungAttempt",
    "apply_edit",
]
