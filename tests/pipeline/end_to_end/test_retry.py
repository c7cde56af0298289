"""A retried item can succeed: it starts over from the current default branch, not its old one."""

from __future__ import annotations

import shlex

import pytest

from agent_harness.pipeline.settings import RunSettings
from agent_harness.queue import items, retries
from agent_harness.testing.agents import write_scripted_agent
from tests.shared.git import git

from .conftest import REPO, Harness

pytestmark = pytest.mark.integration


def notes_agent(h: Harness) -> str:
    """An agent command that writes NOTES.md and exits 0."""
    agent = write_scripted_agent(
        h.tmp / "agents",
        {"steps": [{"write_file": {"path": "NOTES.md", "content": "counted\n"}}], "exit": 0},
    )
    return shlex.join(agent) + " {prompt_file}"


def test_merged_reverted_then_retried_the_item_opens_a_second_pr_that_reapplies_it(
    harness: Harness,
) -> None:
    h = harness
    settings = RunSettings(checks=[], lease_s=60.0, idle_poll_s=0.02, max_attempts=1)
    plan = "### T1: Write the notes\n"
    first = h.pipeline(plan, agent=notes_agent(h), settings=settings)
    [done] = first.run().items
    assert done.state == "pr_open" and done.pr_number is not None
    h.merge(done.pr_number)
    merged = h.forge.github.get_repo(REPO).get_pull(done.pr_number)

    person = h.tmp / "person"
    git(h.tmp, "clone", "-q", h.forge.forge.clone_url("octo", "tally"), str(person))
    git(person, "revert", "--no-edit", "-m", "1", merged.merge_commit_sha)
    git(person, "push", "-q", "origin", "main")

    second = h.pipeline(plan, agent=notes_agent(h), settings=settings)
    moved = second.reconcile()
    assert items.get_item(h.store, second.project, "T1").state == "reverted", moved
    retries.retry(h.store, second.project, "T1")
    [again] = second.run().items
    assert again.state == "pr_open", again.reason
    assert again.pr_number is not None and again.pr_number != done.pr_number
    pull = h.forge.github.get_repo(REPO).get_pull(again.pr_number)
    assert pull.head.ref == "agent-harness/T1.r1-write-the-notes"
    git(person, "fetch", "-q", "origin")
    # Built on today's main (which has the revert), and it puts the change back.
    assert git(person, "merge-base", "origin/main", f"origin/{pull.head.ref}") == git(
        person, "rev-parse", "origin/main"
    )
    assert "+counted" in git(
        person, "diff", "origin/main", f"origin/{pull.head.ref}", "--", "NOTES.md"
    )
    # The first branch is kept as it was: nothing of the earlier attempt is lost.
    assert "agent-harness/T1-write-the-notes" in git(h.work, "branch", "--list", "agent-harness/*")


def test_a_budget_given_on_a_later_run_applies_to_items_already_queued(harness: Harness) -> None:
    h = harness
    crash = write_scripted_agent(h.tmp / "agents", "crash")
    command = shlex.join(crash) + " {prompt_file}"
    plan = "### T1: Anything\n"
    one = RunSettings(checks=[], lease_s=60.0, idle_poll_s=0.02, max_attempts=1)
    [first] = h.pipeline(plan, agent=command, settings=one).run().items
    assert (first.state, first.attempts) == ("failed", 1)
    project = f"{REPO}:PLAN"
    retries.retry(h.store, project, "T1")
    three = RunSettings(checks=[], lease_s=60.0, idle_poll_s=0.02, max_attempts=3)
    [second] = h.pipeline(plan, agent=command, settings=three).run().items
    assert (second.state, second.attempts) == ("failed", 3)
    assert items.get_item(h.store, project, "T1").max_attempts == 3


def test_a_check_whose_program_is_not_installed_stops_the_run_and_spends_no_attempt(
    harness: Harness,
) -> None:
    # The program comes after a word the shell runs itself, so no look before the run can
    # judge it: the first check to run finds it missing. No agent's next attempt can install
    # it, so it must not cost the item an attempt, nor the next item an agent run.
    from agent_harness.pipeline.settings import RunRefused

    h = harness
    check = "cd . && no-such-linter-xyz --strict"
    settings = RunSettings(checks=[check], lease_s=60.0, idle_poll_s=0.02, max_attempts=3)
    plan = "### T1: Write the notes\n### T2: Write more notes\n"
    pipeline = h.pipeline(plan, agent=notes_agent(h), settings=settings)
    with pytest.raises(RunRefused) as stopped:
        pipeline.run()
    assert f"check `{check}`: no-such-linter-xyz is not found on the checks' PATH" in str(
        stopped.value.message
    )
    records = {r.id: r for r in items.list_items(h.store, pipeline.project)}
    # T1 waits for a person, its attempt given back; T2 was never claimed.
    assert (records["T1"].state.value, records["T1"].attempts) == ("waiting", 0)
    assert "the run stops: check `cd . && no-such-linter-xyz" in str(records["T1"].reason)
    assert (records["T2"].state.value, records["T2"].attempts) == ("pending", 0)
    started = [e for e in h.store.all_events(project=pipeline.project) if e.kind == "agent_started"]
    assert len(started) == 1  # T2's agent was never paid for
