"""After the pull request: the events of PR rounds (CI, reviewers and the base sent an item
back), of a person's brake on them, and of merging when green."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from agent_harness.store.payload import Payload


class RoundKind(StrEnum):
    """The kinds of the events after a pull request opened."""

    PR_ROUND = "pr_round"
    PR_ROUNDS_STOPPED = "pr_rounds_stopped"
    PR_MERGE = "pr_merge"


class PullRound(Payload):
    """The open pull request asked for more work: a failed check or status, a review that
    requested changes or line comments on its head, or a conflict with (or lag behind) its
    base. One round, on the same branch and pull request."""

    KIND = RoundKind.PR_ROUND
    pr: int = Field(description="The pull request.")
    round: int = Field(
        description="Which round of this pull request (1 is the first after it opened)."
    )
    trigger: str = Field(description="check_run, review, conflict or behind.")
    head_sha: str = Field(description="The head the feedback was about.")
    action: str = Field(description="agent (a new attempt), rebase (no agent needed) or failed.")
    summary: str = Field(description="The feedback in one line.")
    detail: str = Field(default="", description="The feedback given to the agent.")
    keys: list[str] = Field(default_factory=list, description="What it answered (ids).")


class PullRoundsStopped(Payload):
    """No more rounds: a person said `/agent-harness stop`, held the pull request with the
    label `agent-harness:hold`, or pushed a commit the harness did not make."""

    KIND = RoundKind.PR_ROUNDS_STOPPED
    pr: int = Field(description="The pull request.")
    reason: str = Field(description="Why the harness stopped.")
    key: str = Field(description="What stopped it (said once per key).")


class PullMerge(Payload):
    """`--merge-when-green` merged the pull request, or the tracker refused the merge (branch
    protection, 405, 409): recorded once per head, never retried blindly."""

    KIND = RoundKind.PR_MERGE
    pr: int = Field(description="The pull request.")
    merged: bool = Field(description="Whether it merged.")
    head_sha: str = Field(description="The head that was green and approved.")
    detail: str = Field(default="", description="The merge commit, or the tracker's refusal.")
