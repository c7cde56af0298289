"""Delivering approved work: push the item branch, then open (or update) its pull request.

The lease is checked before the first outside write, so a worker whose lease lapsed stops here
instead of racing the new holder; an open pull request of the branch is updated, never opened
twice; and the body tells the truth about checks, review and cost (unknown is shown as unknown).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from agent_harness.git.worktrees import Worktree
from agent_harness.pipeline.budgets import format_usd
from agent_harness.pipeline.gates import leaks_secret
from agent_harness.pipeline.history import ItemHistory
from agent_harness.pipeline.parts import RunParts
from agent_harness.pipeline.rounds import round_comment
from agent_harness.plan.model import WorkItem, check_command
from agent_harness.queue import leases
from agent_harness.queue.items import ItemState
from agent_harness.queue.leases import Lease
from agent_harness.store.events import AgentFinished, PullOpened, Pushed, Reviewed
from agent_harness.tracker.markers import PullMarker, defuse_markers
from agent_harness.tracker.protocol import PullRecord, TrackerError
from agent_harness.tracker.sync import item_title
from agent_harness.tracker.writes import create_once

if TYPE_CHECKING:
    from agent_harness.pipeline.checks import CheckRun


def deliver(
    parts: RunParts,
    item: WorkItem,
    lease: Lease,
    tree: Worktree,
    checks: CheckRun | None,
    verdict: Reviewed,
    history: ItemHistory,
    *,
    scanned: bool = False,
) -> None:
    """Push and open the pull request that closes the item's issue; the lease ends pr_open.
    `scanned`: this attempt's gates already found no secret in the approved commit."""
    # Fencing before the first outside write: a worker whose lease lapsed while it worked
    # (a long agent, a suspended laptop) stops here instead of racing the new holder.
    leases.heartbeat(parts.store, lease)
    if not scanned and leaks_secret(parts, item, lease, tree, history):
        return  # a resumed delivery skipped the gates: scanned here, before the push
    # Pushes of different items run side by side: the work repo keeps a fetch apart from them.
    # The commit the reviewer approved is the one pushed, so the push says which it was.
    sha = verdict.sha or parts.repo.head(tree)
    parts.repo.push(tree, sha)
    parts.emit(item.id, Pushed(branch=tree.branch, sha=sha), history)
    body = pull_body(parts, item, checks, verdict, lease.attempt, history.implementer_run())
    title, _ = item_title(item)
    with parts.tracker_lock:
        pull = parts.tracker.find_pull(tree.branch)
        if pull is not None and pull.state == "open":
            pull = parts.tracker.update_pull(pull.number, title, body)
            reused = True
        else:
            base = parts.repo.default_branch()
            pull = create_once(
                lambda: parts.tracker.create_pull(title, body, tree.branch, base),
                lambda: _open_pull(parts, tree.branch),
                f"the pull request of {item.id}",
                parts.tracker.write_pace,
            )
            reused = False
    answered = history.answering_round()
    if answered is not None and answered.action == "agent" and reused:
        # One comment per round, once its fix is on the pull request.
        sha = parts.repo.head(tree)
        text = round_comment(answered, sha, "\n".join(_checks_section(checks)))
        with parts.tracker_lock:
            parts.tracker.create_comment(pull.number, text)
    earlier = {p.number: p.branch for p in history.all(PullOpened) if p.number != pull.number}
    opened = PullOpened(number=pull.number, url=pull.url, reused=reused, branch=tree.branch)
    parts.emit(item.id, opened, history)
    if not reused:
        _supersede(parts, item, earlier, pull)
    leases.complete(parts.store, lease, ItemState.PR_OPEN)


def _supersede(
    parts: RunParts, item: WorkItem, earlier: dict[int, str | None], new: PullRecord
) -> None:
    """The item started over (`work retry`) on a branch of its own while an earlier pull
    request of it stayed open: close that one, saying which replaces it, so a person cannot
    merge the old work by mistake and the watch reads only the new one. Only a pull request
    still on the branch its event names (not a number reused since); closed first, so the
    comment is true. A tracker that refuses leaves it open; the new one stands all the same."""
    for number, branch in sorted(earlier.items()):
        text = (
            f"Superseded by #{new.number}: **{item.id}** started over on a new branch, whose "
            "pull request replaces this one. Closed by agent-harness."
        )
        with parts.tracker_lock, contextlib.suppress(TrackerError):
            old = parts.tracker.get_pull(number)
            if old.state != "open" or (branch is not None and old.head_ref != branch):
                continue
            parts.tracker.close_pull(number)
            parts.tracker.create_comment(number, text)


def _open_pull(parts: RunParts, branch: str) -> PullRecord | None:
    found = parts.tracker.find_pull(branch)
    return found if found is not None and found.state == "open" else None


def pull_body(
    parts: RunParts,
    item: WorkItem,
    checks: CheckRun | None,
    verdict: Reviewed,
    attempt: int,
    implementer_run: AgentFinished | None,
) -> str:
    """What the pull request says: the issue it closes, the checks, the review, the cost."""
    issue = parts.issues.get(item.id)
    lines = [f"Closes #{issue}", ""] if issue else []
    lines += [f"**{item.id}: {item.title}** (plan `{parts.plan_key}`, attempt {attempt})", ""]
    if item.success_check and check_command(item.success_check) is not None:
        lines += [f"Success check (run with the checks below): {item.success_check}", ""]
    elif item.success_check:  # words for the reviewer, not a command: nothing ran it
        lines += [
            f"Success criterion (for the reviewer; no check runs it): {item.success_check}",
            "",
        ]
    lines += ["### Checks", "", *_checks_section(checks), "", "### Review", ""]
    who = verdict.vendor or parts.reviewer.vendor
    mark = "approved" if verdict.approved else "not approved"
    lines.append(f"{mark} by {who}" + (f" ({verdict.model})" if verdict.model else ""))
    lines += [f"- {reason}" for reason in verdict.reasons]
    if parts.same_vendor_note:
        lines += ["", f"**Note:** {parts.same_vendor_note}"]
    lines += [
        "",
        "### Tokens and cost",
        "",
        "| role | tokens in | tokens out | cost |",
        "|---|---|---|---|",
        _cost_row(f"implementer ({parts.implementer.name})", implementer_run),
        _cost_row(f"reviewer ({who})", verdict),
        "",
        "Unknown figures are shown as unknown, never as zero.",
        "",
    ]
    # The item's own words (title, check) must not pass for the marker appended last.
    return defuse_markers("\n".join(lines)) + PullMarker(item.id, parts.plan_key, issue).render()


def _checks_section(checks: CheckRun | None) -> list[str]:
    if checks is None:
        return ["Checks passed on an earlier attempt of this same commit."]
    if checks.results:
        return [checks.table_markdown()]
    return ["No checks were configured."]


def _cost_row(role: str, usage: AgentFinished | Reviewed | None) -> str:
    def show(value: int | None) -> str:
        return "unknown" if value is None else f"{value:,}"

    if usage is None:
        return f"| {role} | unknown | unknown | unknown |"
    cost = format_usd(usage.cost_usd)
    return f"| {role} | {show(usage.tokens_in)} | {show(usage.tokens_out)} | {cost} |"
