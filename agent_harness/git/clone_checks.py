"""What the user's clone must be before any agent runs: no work in progress of the person's on
its default branch, a remote that is the tracker's repository (the items' branches are pushed
there, and only there can a pull request name them), and a state folder whose worktrees are its
own."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from agent_harness.git.errors import CloneUnusable
from agent_harness.git.naming import local_path, relative_path_url, repo_named
from agent_harness.plan.model import shell_word
from agent_harness.secrets.shapes import mask_url


def refuse_work_in_progress(
    clone: Path, branch: str, status: str, allow: Sequence[Path] = ()
) -> None:
    """Refuse the changes `git status --porcelain -z` lists on the default branch `branch`,
    naming the files, but those to the files in `allow` (the plan, read as it is)."""
    allowed = {path.resolve() for path in allow}
    changed = [p for p in status_paths(status) if (clone / p).resolve() not in allowed]
    if changed:
        named = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if changed[5:] else "")
        raise CloneUnusable(
            f"--work {clone} has uncommitted changes on {branch} ({named}); commit or stash them"
        )


def refuse_other_remote(clone: Path, remote: str, url: str, full_name: str, clone_url: str) -> None:
    """Refuse a push URL `url` of `remote` that is not the tracker's repository `full_name`
    (which clones from `clone_url`)."""
    if relative_path_url(url):
        # git reads it from where it runs, and the harness pushes from each item's worktree
        # (so a pre-push hook checks the branch pushed): there it names nothing.
        absolute = (clone / url).resolve()
        raise CloneUnusable(
            f"--work {clone} pushes to {remote} {url}, a path relative to the clone, which "
            "names nothing from an item's worktree; make it absolute "
            f"(`git remote set-url {remote} {shell_word(str(absolute))}`)"
        )
    wanted = local_path(clone_url)
    if wanted is not None:
        # A tracker whose repositories are local paths (the embedded forge): the remote must
        # be that very path. One elsewhere of the same owner/name (GitHub's, say) would get
        # every branch, and the forge could open no pull request of them.
        found = local_path(url)
        if found is None or not _same_place(found, wanted):
            raise CloneUnusable(
                f"--work {clone} pushes to {remote} {mask_url(url)}, which is not the local "
                f"forge's {full_name}: its branches would go there; point it at the forge "
                f"(`git remote set-url {remote} {clone_url}`), or run against the tracker that "
                "remote belongs to"
            )
        return
    if repo_named(url) != full_name.lower():
        raise CloneUnusable(
            f"--work {clone} pushes to {remote} {mask_url(url)}, which is not {full_name}: its "
            "branches would go there; point it at the tracker's repository "
            f"(`git remote set-url {remote} {mask_url(clone_url)}`)"
        )


def worktree_links(worktrees: Path) -> list[tuple[str, Path]]:
    """Each linked worktree in the folder `worktrees` (a `.git` file naming its folder in a
    clone's git directory), by name, with that folder resolved."""
    found: list[tuple[str, Path]] = []
    if not worktrees.is_dir():
        return found
    for entry in sorted(worktrees.iterdir()):
        try:
            text = (entry / ".git").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # not a worktree (or not one any more)
        if text.startswith("gitdir:"):
            found.append((entry.name, (entry / text[len("gitdir:") :].strip()).resolve()))
    return found


def clone_of(admin: Path) -> Path:
    """The clone whose git directory holds a worktree's folder (`<clone>/.git/worktrees/T1`)."""
    return admin.parents[2] if len(admin.parents) > 2 else admin


def refuse_shared_worktrees(worktrees: Path, common_dir: Path) -> None:
    """Refuse a state folder whose item worktrees belong to another clone (another repository
    run from the same folder): an item of the same id would be worked in the other's worktree,
    and its branch pushed from there."""
    ours = common_dir.resolve()
    others: dict[Path, list[str]] = {}
    for name, admin in worktree_links(worktrees):
        if not admin.is_relative_to(ours):
            others.setdefault(clone_of(admin), []).append(name)
    if others:
        owner, names = next(iter(others.items()))
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if names[3:] else "")
        raise CloneUnusable(
            f"the state folder {worktrees.parent} holds worktrees of another clone, {owner} "
            f"({shown}): this run's items would be worked in them; run it from a folder of its "
            "own, or give it one with AGENT_HARNESS_STATE_DIR"
        )


def status_paths(status: str) -> list[str]:
    """The paths `git status --porcelain -z` names: each entry's, and a rename's old one too."""
    paths: list[str] = []
    fields = iter(status.split("\0"))
    for entry in fields:
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":  # a rename or copy: its source follows
                paths.append(next(fields, ""))
    return [path for path in paths if path]


def _same_place(one: Path, other: Path) -> bool:
    """Whether two paths name one repository (links and `..` resolved)."""
    try:
        return one.resolve() == other.resolve() or os.path.samefile(one, other)
    except OSError:
        return False
