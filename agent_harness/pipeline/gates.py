"""The gates a change passes before anything is sent on: paths it may not touch, secrets it
holds, and merge conflicts it left unresolved.

Both are decided from git alone, before any check runs or any reviewer is paid. A protected
path touched ends the attempt: the next one is told which paths and why, and starts on a new
branch from the default branch, so the rejected commit is not built on (it stays on its own
branch for a person to read). A secret written down ends the item for good: the agent was
handed it or made it, and another attempt would meet the same key.
"""

from __future__ import annotations

from collections.abc import Mapping

from agent_harness.failures import FailureClass
from agent_harness.git.protect import protection_violations
from agent_harness.git.worktrees import Worktree
from agent_harness.pipeline.history import ItemHistory
from agent_harness.pipeline.parts import RunParts
from agent_harness.pipeline.prompt import Feedback
from agent_harness.plan.model import WorkItem
from agent_harness.queue.leases import Lease
from agent_harness.secrets.scan import added_lines, scan_diff
from agent_harness.secrets.shapes import known_values
from agent_harness.store.events import ProtectedPaths, SecretFound


def touches_protected(
    parts: RunParts,
    item: WorkItem,
    lease: Lease,
    tree: Worktree,
    history: ItemHistory,
    sha: str | None = None,
) -> bool:
    """End the attempt when its change (commit `sha`, or the worktree as it is) touches a
    protected path or leaves its declared files; the reason goes into the next attempt's
    prompt."""
    protected = parts.settings.protected
    changed = parts.repo.changed_paths(tree, sha)
    violations = protection_violations(changed, protected, item.files)
    if not violations:
        return False
    parts.emit(item.id, ProtectedPaths(violations=violations), history)
    rules = [f"Protected paths (never to be changed): {', '.join(protected) or 'none'}."]
    if item.files:
        rules.append(f"This item may change only: {', '.join(item.files)}.")
    detail = "\n".join(
        [*violations, "", *rules, "This attempt starts again from the default branch."]
    )
    summary = "the change touched paths it may not, so it was not checked or reviewed"
    parts.remember(item.id, Feedback("protected", summary, detail), history)
    parts.fail(lease, "; ".join(violations), FailureClass.PROTECTED_PATH)
    return True


def leaks_secret(
    parts: RunParts, item: WorkItem, lease: Lease, tree: Worktree, history: ItemHistory
) -> bool:
    """Fail the item when its change holds a secret: the reviewer (of another vendor) would read
    it in the diff, and a push would publish it. Names file and line, never the value."""
    findings = scan_diff(
        parts.repo.committed_diff(tree),
        known_values(parts.env, parts.known_secrets),
        shapes_ignored_in=parts.settings.secret_shapes_ignored_in,
    )
    if not findings:
        return False
    where = [finding.describe() for finding in findings]
    parts.emit(item.id, SecretFound(findings=where, sha=parts.repo.head(tree)), history)
    shown = "; ".join(where[:3]) + (f" (and {len(where) - 3} more)" if len(where) > 3 else "")
    reason = f"a secret is in the change, so it was not sent on: {shown}"
    parts.fail(lease, reason, FailureClass.SECRET_IN_CHANGE)
    return True


# What git writes around a conflict it could not resolve (`<<<<<<< HEAD`, `>>>>>>> main`),
# seven of each unless a file's `conflict-marker-size` attribute says otherwise; a line of
# `=======` alone is a Markdown heading's underline as often as a conflict's middle.
MARKER_SIZE = 7


def conflicted_files(
    diff: str, sizes: Mapping[str, int] | None = None, *, any_size: bool = False
) -> list[str]:
    """The files a unified diff adds both a conflict's opening and closing markers to, each
    of its `sizes` (git's `conflict-marker-size`; 7 where none is given), or, with
    `any_size`, of any size from 7 up."""
    found: dict[str, set[str]] = {}
    for path, _number, text in added_lines(diff):
        mark = text[:1]
        if mark not in ("<", ">"):
            continue
        run = len(text) - len(text.lstrip(mark))
        size = (sizes or {}).get(path, MARKER_SIZE)
        fits = run >= MARKER_SIZE if any_size else run == size
        if fits and text[run : run + 1] in ("", " "):
            found.setdefault(path, set()).add(mark)
    return sorted(path for path, marks in found.items() if marks == {"<", ">"})


def _conflicts_git_would_write(parts: RunParts, tree: Worktree, sha: str) -> list[str]:
    """The files whose added lines are a conflict as git would write it there: a file the
    repository says holds longer markers (`conflict-marker-size`, as for text that shows
    conflicts on purpose) or is never merged as text (`-merge`, `merge=binary`) is judged by
    that. The attributes are the item's base commit's: none an agent writes (committed,
    ignored or kept out of git's sight) can wave its own markers through."""
    diff = parts.repo.diff(tree, sha)
    files = conflicted_files(diff, any_size=True)  # a file given longer markers has those
    if not files:
        return files
    said = parts.repo.attributes(tree, ["conflict-marker-size", "merge"], files)
    # Git writes no text markers into a file it never merges as text: none is a conflict.
    never = {p for p in files if said.get(p, {}).get("merge") in ("unset", "binary")}
    sizes = {
        p: int(size)
        for p in files
        if (size := said.get(p, {}).get("conflict-marker-size", "")).isdigit()
    }
    return [p for p in conflicted_files(diff, sizes) if p not in never]


def leaves_conflicts(
    parts: RunParts, item: WorkItem, lease: Lease, tree: Worktree, history: ItemHistory, sha: str
) -> bool:
    """End the attempt when commit `sha`'s change holds a merge conflict's markers (the agent
    was sent a conflict with the default branch and left it): pushed, a pull request with them
    would merge clean. The next attempt is told the files. Read from the diff the reviewer
    reads (already at hand): binary files hold no conflict markers git wrote."""
    files = _conflicts_git_would_write(parts, tree, sha)
    if not files:
        return False
    shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    summary = f"the change still holds merge conflict markers in {shown}"
    detail = (
        f"These files still hold `<<<<<<<`, `=======` and `>>>>>>>` lines: {', '.join(files)}. "
        "Resolve each conflict, keeping what both sides meant, and remove the markers."
    )
    parts.remember(item.id, Feedback("agent", summary, detail), history)
    parts.fail(lease, summary, FailureClass.CONFLICT_LEFT)
    return True


def _size(count: int) -> str:
    return f"{count / 1024 / 1024:.0f} MiB" if count >= 1024 * 1024 else f"{count} bytes"


def carries_huge_file(
    parts: RunParts, item: WorkItem, lease: Lease, tree: Worktree, history: ItemHistory, sha: str
) -> bool:
    """End the attempt when commit `sha` holds a file larger than a push may carry (caught here,
    before the checks and the reviewer are paid, not at the push); the next attempt is told
    which, and how large."""
    limit = parts.settings.largest_file_bytes  # GitHub's: 100 MiB
    large = parts.repo.large_files(tree, sha, limit)
    if not large:
        return False
    shown = ", ".join(f"{path} ({_size(size)})" for path, size in large[:5])
    summary = f"the change holds files larger than a push may carry ({_size(limit)}): {shown}"
    detail = (
        f"{shown}: a push holding a file over {_size(limit)} is refused (GitHub refuses any "
        "over 100 MiB). Leave such files out of the change (generate them, or list them in "
        ".gitignore), or keep them smaller."
    )
    parts.remember(item.id, Feedback("agent", summary, detail), history)
    parts.fail(lease, summary, FailureClass.CHECK_FAILED)
    return True
