"""What git work in a user's clone can fail with, and which of those failures another attempt
would meet again."""

from __future__ import annotations

from agent_harness.errors import HarnessError


class WorktreeError(HarnessError):
    """A git operation on a work repository failed."""


class CloneUnusable(WorktreeError):
    """The clone given as `--work` cannot be worked in as it is (not a clone, bare, dirty, no
    commits, its remote another repository): input to fix, said before any work starts."""

    exit_code = 2


class RepoRefused(WorktreeError):
    """The clone refuses the work as it is set up: another attempt would meet the same, so the
    item fails, saying what a person must change (`FailureClass.REPOSITORY`)."""


class DefaultBranchGuard(WorktreeError):
    """Refused: harness code must never push to or commit on the default branch."""

    exit_code = 5


# What a clone's own setup says when it refuses a commit another attempt would meet again: a
# signature gpg cannot make, `core.safecrlf`, a clean filter that fails (Git LFS missing).
_SETUP_REFUSALS = (
    # "gpg failed to sign the data"; "CRLF would be replaced by LF" and the other way round
    ("failed to sign", "turn signing off for this clone (`git config commit.gpgsign false`)"),
    ("lf would be replaced", "relax `core.safecrlf` or `core.autocrlf` for this clone"),
    ("external filter", "install the filter's program, or remove it from .gitattributes"),
    ("clean filter", "install the filter's program, or remove it from .gitattributes"),
)


def refused_or_not(message: str) -> WorktreeError:
    """A failed `git add` or `git commit` of the agent's work: `RepoRefused` when the clone's
    own setup refused it (see _SETUP_REFUSALS), which another attempt would meet again; any
    other failure (a full disk, an index another git held, something the agent did in its
    worktree) stays a `WorktreeError`, tried again."""
    lowered = message.lower()
    for words, fix in _SETUP_REFUSALS:
        if words in lowered:
            return RepoRefused(
                f"{message}; the clone's git setup refuses the agent's commit, and another "
                f"attempt would meet the same: {fix}, then `agent-harness work retry`"
            )
    return WorktreeError(message)
