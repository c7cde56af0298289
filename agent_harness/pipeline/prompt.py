"""The prompt an implementer gets for one item: the item, the repo's rules, and feedback.

It is written to a file and passed by path, never through shell quoting. On a retry it carries
what went wrong last time (the failing check's output, or the reviewer's reasons), so the next
attempt starts from the evidence rather than from scratch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent_harness.plan.model import WorkItem, check_command

MAX_AGENTS_MD = 20_000
MAX_FEEDBACK = 8_000


@dataclass(frozen=True)
class Feedback:
    """What the previous attempt of an item ran into."""

    kind: str  # "checks" | "review" | "agent" | "protected" | "pr_<trigger>" | "retry"
    summary: str
    detail: str = ""

    def text(self) -> str:
        """The feedback as an implementer that keeps its own plan reads it."""
        detail = self.detail.strip()
        return f"{self.summary}\n{detail}" if detail else self.summary


def build_prompt(
    item: WorkItem,
    *,
    checks: list[str],
    agents_md: str | None,
    feedback: Feedback | None,
    attempt: int,
) -> str:
    parts = [f"# Work item {item.id}: {item.title}", ""]
    if item.body.strip():
        parts += [item.body.strip(), ""]
    parts += ["## How success is checked", ""]
    parts.append(item.success_check or "No observable check was given; the checks below decide.")
    parts.append("")
    commands = list(checks)
    own = check_command(item.success_check)
    if own and own not in commands:
        commands.append(own)
    if commands:
        parts += ["The harness runs these commands in this directory after you finish:", ""]
        parts += [f"- `{command}`" for command in commands]
        parts.append("")
    if item.files:
        parts += ["## Files you may change", ""]
        parts += [f"- `{path}`" for path in item.files]
        parts += ["", "A change outside these files stops the item before review.", ""]
    if agents_md:
        text = agents_md.strip()
        if len(text) > MAX_AGENTS_MD:
            text = text[:MAX_AGENTS_MD] + "\n\n(AGENTS.md truncated)"
        parts += ["## Rules of this repository (its AGENTS.md)", "", text, ""]
    if feedback is not None:
        detail = feedback.detail.strip()
        if len(detail) > MAX_FEEDBACK:
            detail = "…" + detail[-MAX_FEEDBACK:]
        if feedback.kind.startswith("pr_"):  # a round: the same branch and pull request
            said = (
                "Your pull request came back for another round, on the same branch: "
                f"{feedback.summary}"
            )
        elif feedback.kind == "retry":
            said = f"{feedback.summary}."
        else:
            said = f"This is attempt {attempt}. The previous attempt ended with: {feedback.summary}"
        parts += ["## Feedback from the previous attempt", "", said, ""]
        if detail:
            parts += ["```", detail, "```", ""]
    parts += [
        "## How to finish",
        "",
        "Work only inside this directory, on the branch that is checked out. Do not push, do not "
        "switch branches and do not touch the default branch. You may commit; whatever you leave "
        "uncommitted is committed for you. Then the checks run and a reviewer reads the diff.",
        "",
    ]
    return "\n".join(parts)


def read_agents_md(worktree: Path) -> str | None:
    path = worktree / "AGENTS.md"
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    except OSError:
        return None
