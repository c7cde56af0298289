"""What a run's agents may have changed outside their worktrees: the person's clone and the
plan file.

An agent runs as the person's user, so it can write anywhere they can: into the clone's default
checkout, or into the plan, whose next run would then mirror and work whatever it added. The
run cannot stop that (a container can), but it looks when it ends and says what changed, so a
person reads it before anything acts on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from agent_harness.errors import HarnessError
from agent_harness.git.workspace import Workspace
from agent_harness.plan.model import Plan


def plan_files(plan: Plan) -> list[Path]:
    """The plan's file, whose changes in the clone are no work in progress of the person's
    (the plan is read as it is, committed or not)."""
    source = plan.source
    return [Path(source)] if source and source != "-" else []


def digests(paths: Sequence[Path]) -> dict[Path, str | None]:
    """Each file's content digest (None when it cannot be read), to compare at the end."""
    return {path: _digest(path) for path in paths}


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def changed_outside(repo: Workspace, before: dict[Path, str | None]) -> list[str]:
    """What changed during the run where no agent of it should have written: each plan file
    whose content differs from `before`, and work in progress on the clone's default branch
    (which was clean when the run began)."""
    said = [
        f"the plan {path} changed during the run: read it before the next run mirrors and works "
        "what it says (an agent may have written it)"
        for path, digest in before.items()
        if _digest(path) != digest
    ]
    try:
        repo.check_clean_default(allow=list(before))
    except HarnessError as exc:
        said.append(f"{exc.message} (it was clean when the run began: an agent may have written "
                    "outside its worktree; nothing of it was pushed)")  # fmt: skip
    return said
