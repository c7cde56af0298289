"""After the pull request, end to end: the forge's check runs, reviews and base branch send the
item back to its scripted agent on the same branch and pull request, within bounds."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from agent_harness.forge import FaultKind
from agent_harness.pipeline.rounds import HELD_LOOK_S
from agent_harness.pipeline.run import Pipeline
from agent_harness.pipeline.settings import RunSettings
from agent_harness.queue.items import get_item
from agent_harness.testing.forge import collaborator_pull

from .conftest import REPO, Harness

pytestmark = pytest.mark.integration

PLAN = (
    "### T1: Write notes\nWrite NOTES.md.\n\n"
    "check: `python -c \"import pathlib; assert pathlib.Path('NOTES.md').exists()\"`\n"
)

# The scripted agent: a first version, then, with a PR round's feedback in its prompt, it
# answers every line comment and failed check it was given, and resolves conflict markers.
AGENT = """
import pathlib, sys
prompt = pathlib.Path(sys.argv[-1]).read_text()
for path in pathlib.Path(".").glob("*.txt"):
    text = path.read_text()
    if "<<<<<<<" in text:
        marks = ("<<<<<<<", "=======", ">>>>>>>")
        kept = [line for line in text.splitlines() if not line.startswith(marks)]
        path.write_text("\\n".join(kept) + "\\n")
notes = pathlib.Path("NOTES.md")
if "PR #" not in prompt:
    notes.write_text("first version\\nsecond line\\n")
    pathlib.Path("shared.txt").write_text("from the item\\n")
else:
    feedback = prompt.split("## Feedback from the previous attempt", 1)[1]
    answered = [l for l in feedback.splitlines() if l.startswith("- ") or "concluded" in l]
    notes.write_text(notes.read_text() + "addressed:\\n" + "\\n".join(answered) + "\\n")
"""


@pytest.fixture
def h(harness: Harness) -> Harness:
    return harness


def settings(**overrides: Any) -> RunSettings:
    base = RunSettings(checks=[], check_timeout_s=30.0, lease_s=30.0, idle_poll_s=0.02)
    for name, value in overrides.items():
        setattr(base, name, value)
    return base


def pipeline(h: Harness, clock: Callable[[], float] = time.time, **overrides: Any) -> Pipeline:
    script = h.tmp / "round_agent.py"
    script.write_text(AGENT)
    command = shlex.join([sys.executable, str(script)]) + " {prompt_file}"
    return h.pipeline(PLAN, agent=command, settings=settings(**overrides), clock=clock)


def gh_repo(h: Harness) -> Any:
    return h.forge.github.get_repo(REPO)


def first_pull(h: Harness) -> Any:
    pipeline(h).run()
    [pull] = h.pulls()
    return pull


def rounds(h: Harness, p: Pipeline) -> list[dict[str, Any]]:
    events = h.store.all_events(project=p.project, item="T1")
    return [e.payload.as_dict() for e in events if e.kind == "pr_round"]


def branch_file(h: Harness, pull: Any, path: str) -> str:
    subprocess.run(["git", "fetch", "-q"], cwd=h.work, check=True)
    ref = f"origin/{pull.head.ref}:{path}"
    return subprocess.run(
        ["git", "show", ref], cwd=h.work, capture_output=True, text=True, check=True
    ).stdout


def harness_comments(pull: Any) -> list[str]:
    return [c.body for c in pull.get_issue_comments() if "agent-harness-round" in c.body]


def test_a_failing_check_goes_back_to_the_agent_then_green_merges(h: Harness) -> None:
    pull = first_pull(h)
    output = {"title": "ci", "summary": "1 test failed", "text": "AssertionError: want 3"}
    gh_repo(h).create_check_run("ci", pull.head.sha, conclusion="failure", output=output)

    second = pipeline(h, merge_when_green=True)
    report = second.run()
    assert [(i.id, i.state) for i in report.items] == [("T1", "pr_open")]
    [one] = rounds(h, second)
    assert (one["trigger"], one["action"], one["round"]) == ("check_run", "agent", 1)
    assert "AssertionError: want 3" in one["detail"]
    [same] = h.pulls()
    assert same.number == pull.number and same.head.sha != pull.head.sha  # updated, not new
    assert "check `ci` concluded failure" in branch_file(h, same, "NOTES.md")
    [comment] = harness_comments(same)
    assert "Round 1** (check_run)" in comment and same.head.sha[:12] in comment

    gh_repo(h).create_check_run("ci", same.head.sha, conclusion="success")
    second.reconcile()  # green, approved by the harness's reviewer, clean: merged
    assert gh_repo(h).get_pull(pull.number).merged
    second.reconcile()  # and the merge comes back into the queue
    assert get_item(h.store, second.project, "T1").state == "merged"


def test_requested_changes_with_two_line_comments_are_answered_in_one_round(
    h: Harness,
) -> None:
    pull = first_pull(h)
    collaborator_pull(h.forge, pull).create_review(  # a person: its author may not
        body="Say more.",
        event="REQUEST_CHANGES",
        comments=[
            {"path": "NOTES.md", "line": 1, "body": "name the version"},
            {"path": "NOTES.md", "line": 2, "body": "why a second line?"},
        ],
    )
    second = pipeline(h)
    second.run()
    [one] = rounds(h, second)
    assert one["trigger"] == "review" and len(one["keys"]) == 3
    notes = branch_file(h, pull, "NOTES.md")
    assert "- NOTES.md:1: name the version" in notes
    assert "- NOTES.md:2: why a second line?" in notes
    assert len(harness_comments(gh_repo(h).get_pull(pull.number))) == 1
    # The same review on the old head is not answered twice.
    writes_before = second.tracker.tally.writes
    second.reconcile()
    assert rounds(h, second) == [one] and second.tracker.tally.writes == writes_before


def push_to_main(h: Harness, name: str, content: str) -> None:
    other = h.tmp / "person"
    if not other.exists():
        url = h.forge.forge.clone_url("octo", "tally")
        subprocess.run(["git", "clone", "-q", url, str(other)], check=True)
    run = ["git", "-c", "user.name=P", "-c", "user.email=p@x"]
    subprocess.run([*run[:1], "checkout", "-q", "main"], cwd=other, check=True)
    subprocess.run([*run[:1], "pull", "-q", "origin", "main"], cwd=other, check=True)
    (other / name).write_text(content)
    subprocess.run([*run[:1], "add", name], cwd=other, check=True)
    subprocess.run([*run, "commit", "-q", "-m", f"person: {name}"], cwd=other, check=True)
    subprocess.run([*run[:1], "push", "-q", "origin", "main"], cwd=other, check=True)


def test_a_base_that_moved_is_rebased_without_the_agent_a_conflict_goes_to_it(
    h: Harness,
) -> None:
    pull = first_pull(h)
    p = pipeline(h)
    p.reconcile()  # the first look: remembers where main is
    gh_repo(h).get_branch("main").edit_protection(strict=True, contexts=[])
    push_to_main(h, "other.txt", "unrelated\n")
    p.reconcile()
    [rebase] = rounds(h, p)
    assert (rebase["trigger"], rebase["action"]) == ("behind", "rebase")
    fresh = gh_repo(h).get_pull(pull.number)
    assert fresh.mergeable_state == "clean"
    assert not [
        e for e in h.store.all_events(project=p.project, item="T1") if e.kind == "agent_started"
    ][1:], "no agent for a clean rebase"

    push_to_main(h, "shared.txt", "from a person\n")
    p.run()
    conflict = rounds(h, p)[-1]
    assert (conflict["trigger"], conflict["action"]) == ("conflict", "agent")
    assert "shared.txt" in conflict["detail"] or "shared.txt" in str(
        [
            e.payload.as_dict()
            for e in h.store.all_events(project=p.project, item="T1")
            if e.kind == "feedback"
        ][-1]
    )
    resolved = branch_file(h, fresh, "shared.txt")
    assert "from the item" in resolved and "from a person" in resolved
    assert "<<<<<<<" not in resolved
    assert gh_repo(h).get_pull(pull.number).mergeable


# An agent that, sent a conflict, leaves its markers in place; told they are still there, it
# resolves them.
LAZY_AGENT = """
import pathlib, sys
prompt = pathlib.Path(sys.argv[-1]).read_text()
notes = pathlib.Path("NOTES.md")
if "still holds merge conflict markers" in prompt:
    text = pathlib.Path("shared.txt").read_text()
    kept = [l for l in text.splitlines() if not l.startswith(("<<<<<<<", "=======", ">>>>>>>"))]
    pathlib.Path("shared.txt").write_text("\\n".join(kept) + "\\n")
    notes.write_text(notes.read_text() + "resolved\\n")
elif "PR #" in prompt:
    notes.write_text(notes.read_text() + "looked; the conflict left as it was\\n")
else:
    notes.write_text("first version\\n")
    pathlib.Path("shared.txt").write_text("from the item\\n")
"""


def test_conflict_markers_left_by_the_agent_are_never_pushed_and_go_back_to_it(
    h: Harness,
) -> None:
    # They were committed, pushed and read as a clean pull request, which merge-when-green
    # would have merged into main.
    script = h.tmp / "lazy_agent.py"
    script.write_text(LAZY_AGENT)
    command = shlex.join([sys.executable, str(script)]) + " {prompt_file}"
    p = h.pipeline(PLAN, agent=command, settings=settings())
    p.run()
    [pull] = h.pulls()
    p.reconcile()
    push_to_main(h, "shared.txt", "from a person\n")
    p = h.pipeline(PLAN, agent=command, settings=settings())
    p.run()
    events = h.store.all_events(project=p.project, item="T1")
    failed = [e.payload.as_dict() for e in events if e.kind == "attempt_failed"]
    assert [f["failure"] for f in failed] == ["conflict_left"]
    assert "merge conflict markers in shared.txt" in failed[0]["reason"]
    for pushed in [e.payload.as_dict()["sha"] for e in events if e.kind == "pushed"]:
        shown = subprocess.run(
            ["git", "show", f"{pushed}:shared.txt"], cwd=h.work, capture_output=True, text=True
        )
        assert "<<<<<<<" not in shown.stdout
    resolved = branch_file(h, pull, "shared.txt")
    assert "from the item" in resolved and "from a person" in resolved
    assert "<<<<<<<" not in resolved and gh_repo(h).get_pull(pull.number).mergeable


def test_a_conflict_whose_worktree_was_removed_by_hand_is_merged_in_a_new_one(
    h: Harness,
) -> None:
    import shutil

    pull = first_pull(h)
    p = pipeline(h)
    p.reconcile()  # the first look: remembers where main is
    [ready] = [e for e in h.store.all_events(project=p.project, item="T1") if e.kind == "worktree"]
    worktree = ready.payload.as_dict()["path"]
    shutil.rmtree(worktree)  # a person tidied up
    push_to_main(h, "shared.txt", "from a person\n")
    # Before, every reconcile failed here ("cannot run git in …: no such directory"), and the
    # agent was then sent a conflict it had no copy of: the same head pushed again, for ever.
    p.run()
    conflict = rounds(h, p)[-1]
    assert (conflict["trigger"], conflict["action"]) == ("conflict", "agent")
    resolved = branch_file(h, gh_repo(h).get_pull(pull.number), "shared.txt")
    assert "from the item" in resolved and "from a person" in resolved
    assert gh_repo(h).get_pull(pull.number).mergeable


def test_a_conflict_github_was_still_computing_is_read_again_and_answered(h: Harness) -> None:
    # After the base moves, GitHub answers `mergeable: null, mergeable_state: "unknown"` while
    # it computes; the watch read that once, said nothing, and never read the pull again, so
    # the conflict that followed got no round and the item sat in pr_open.
    pull = first_pull(h)
    p = pipeline(h)
    p.reconcile()  # the first look: remembers where main is
    push_to_main(h, "shared.txt", "from a person\n")
    computing = h.tracker()._call("GET", f"/repos/{REPO}/pulls/{pull.number}", "get_pull")[1]
    computing |= {"mergeable": None, "mergeable_state": "unknown", "rebaseable": None}
    h.forge.forge.faults.inject(
        FaultKind.REPLY, "GET", f"/repos/{REPO}/pulls/{pull.number}", status=200, body=computing
    )
    h.clock.advance(60)  # read well after the pull's last update: no re-read for its second
    p.reconcile()
    assert rounds(h, p) == []  # nothing known yet: nothing said
    h.clock.advance(60)
    p.reconcile()  # GitHub has computed it by now: the conflict is seen and answered
    [conflict] = rounds(h, p)
    assert conflict["trigger"] == "conflict"


def test_merge_when_green_respects_branch_protection_and_says_so_once(h: Harness) -> None:
    pull = first_pull(h)
    repo = gh_repo(h)
    repo.get_branch("main").edit_protection(strict=False, contexts=["security-scan"])
    repo.create_check_run("ci", pull.head.sha, conclusion="success")
    p = pipeline(h, merge_when_green=True)
    p.reconcile()
    events = h.store.all_events(project=p.project, item="T1")
    [refused] = [e.payload.as_dict() for e in events if e.kind == "pr_merge"]
    assert refused["merged"] is False and "security-scan" in refused["detail"]
    assert not repo.get_pull(pull.number).merged
    merges = p.tracker.tally.by_kind.get("merge_pull", 0)
    p.reconcile()
    assert p.tracker.tally.by_kind.get("merge_pull", 0) == merges  # not retried blindly


def test_merge_when_green_with_no_check_at_all_says_why_it_waits(h: Harness) -> None:
    # A repository with no CI: an approved, clean pull request got no word in any pass.
    pull = first_pull(h)
    # A pass that does not merge reads it after its last change, as `run`'s own pass does a
    # moment after it opened it; and the repository moves on (an issue filed seconds later), so
    # the listing no longer names the pull request as changed. The first merging pass then
    # never read it, and said nothing.
    h.clock.advance(60)
    pipeline(h).reconcile()
    later = h.clock.now + 60
    h.forge.forge.clock = lambda: later
    gh_repo(h).create_issue("something else, filed later")
    # Each merging pass says so, not only the first: those within HELD_LOOK_S of the read that
    # held it from what that read said, a later one from a new read.
    for ahead in (0.0, 1.0, HELD_LOOK_S + 1):
        p = pipeline(h, lambda ahead=ahead: time.time() + ahead, merge_when_green=True)
        p.reconcile()
        [held] = [m for r in p.rounds for m in r.merged if m["pr"] == pull.number]
        assert held["merged"] is False
        assert held["detail"] == "no check has reported on its head, and green needs one"
    assert not gh_repo(h).get_pull(pull.number).merged
    gh_repo(h).create_check_run("ci", pull.head.sha, conclusion="success")
    p.reconcile()
    assert gh_repo(h).get_pull(pull.number).merged


def test_an_item_that_fails_in_a_round_says_so_on_its_open_pull_request(h: Harness) -> None:
    # It failed with its attempts spent and the pull request stayed open, on a head CI had
    # failed, with no word (a spent round budget did comment).
    pull = first_pull(h)
    gh_repo(h).create_check_run("ci", pull.head.sha, conclusion="failure")
    p = pipeline(h, checks=["false"], max_attempts=1)
    p.run()
    item = get_item(h.store, p.project, "T1")
    assert item.state == "failed"
    [said] = [c for c in harness_comments(gh_repo(h).get_pull(pull.number)) if "failed" in c]
    assert said.startswith("The item failed, so this pull request gets no more rounds: check ")
    assert "nothing has checked or reviewed a change since" in said


def test_the_round_budget_spent_fails_the_item_with_its_reason(h: Harness) -> None:
    pull = first_pull(h)
    repo = gh_repo(h)
    repo.create_check_run("ci", pull.head.sha, conclusion="failure")
    p = pipeline(h, max_pr_rounds=1)
    p.run()  # round 1 of 1
    head = repo.get_pull(pull.number).head.sha
    repo.create_check_run(
        "ci", head, conclusion="failure", output={"title": "ci", "summary": "again"}
    )
    p.reconcile()
    item = get_item(h.store, p.project, "T1")
    assert item.state == "failed"
    assert "budget of 1 PR round is spent" in (item.reason or "")
    assert any("No more rounds" in c.body for c in repo.get_pull(pull.number).get_issue_comments())


def push_to_the_pull(h: Harness, pull: Any, notes: str) -> str:
    """A person's commit to the pull request's branch, from a clone of their own (NOTES.md made
    `notes`); the branch's new head."""
    person = h.tmp / "person"
    url = h.forge.forge.clone_url("octo", "tally")
    subprocess.run(["git", "clone", "-q", "-b", pull.head.ref, url, str(person)], check=True)
    (person / "NOTES.md").write_text(notes)
    git = ["git", "-c", "user.name=P", "-c", "user.email=p@x"]
    subprocess.run([*git, "commit", "-q", "-am", "a person's commit"], cwd=person, check=True)
    subprocess.run(["git", "push", "-q", "origin", pull.head.ref], cwd=person, check=True)
    return str(gh_repo(h).get_pull(pull.number).head.sha)


def test_brakes_a_stop_comment_then_a_commit_the_harness_did_not_make(h: Harness) -> None:
    pull = first_pull(h)
    p = pipeline(h)
    pull.create_issue_comment("/agent-harness stop")
    gh_repo(h).create_check_run("ci", pull.head.sha, conclusion="failure")
    p.reconcile()
    assert rounds(h, p) == []
    events = h.store.all_events(project=p.project, item="T1")
    stopped = [e.payload.as_dict()["key"] for e in events if e.kind == "pr_rounds_stopped"]
    assert stopped == [f"stop:{pull.number}"]
    assert get_item(h.store, p.project, "T1").reason == (
        "its pull request's rounds stopped: a person asked `/agent-harness stop`"
    )
    [heard] = harness_comments(gh_repo(h).get_pull(pull.number))  # the stop is answered
    assert "stops its rounds here: a person asked `/agent-harness stop`" in heard
    # The person takes the stop back (a new item round would follow) and pushes a commit.
    comment = next(c for c in pull.get_issue_comments() if c.body == "/agent-harness stop")
    comment.edit("resumed by a person")
    head = push_to_the_pull(h, pull, "a person's edit\n")
    gh_repo(h).create_check_run("ci", head, conclusion="failure")
    p.reconcile()
    assert rounds(h, p) == []
    [_stop, said] = harness_comments(gh_repo(h).get_pull(pull.number))
    assert "did not make" in said and head[:12] in said
    p.reconcile()  # said once
    assert len(harness_comments(gh_repo(h).get_pull(pull.number))) == 2


def test_a_commit_a_person_pushes_after_a_round_is_sent_back_stops_the_rounds_unbuilt_on(
    h: Harness,
) -> None:
    # The worker moved its worktree up to the person's commit, and the agent's round was pushed
    # on top of it, undoing the person's edit.
    pull = first_pull(h)
    collaborator_pull(h.forge, pull).create_review(body="Say more.", event="REQUEST_CHANGES")
    p = pipeline(h)
    p.reconcile()  # the round is sent back to the agent
    [one] = rounds(h, p)
    assert one["action"] == "agent"
    head = push_to_the_pull(h, pull, "the person answered the review themselves\n")

    report = pipeline(h).run()
    assert [(i.id, i.state) for i in report.items] == [("T1", "pr_open")]
    assert gh_repo(h).get_pull(pull.number).head.sha == head  # nothing pushed over it
    assert branch_file(h, pull, "NOTES.md") == "the person answered the review themselves\n"
    events = h.store.all_events(project=p.project, item="T1")
    stopped = [e.payload.as_dict()["key"] for e in events if e.kind == "pr_rounds_stopped"]
    assert stopped == [f"foreign:{head}"]
    assert [e.kind for e in events].count("agent_started") == 1  # the first attempt's only
    # Said where `work` and the API show the item, not only in that pass's output.
    reason = get_item(h.store, p.project, "T1").reason
    assert reason is not None and reason.startswith("its pull request's rounds stopped: the branch")
    [said] = harness_comments(gh_repo(h).get_pull(pull.number))
    assert "did not make" in said and head[:12] in said
    p.reconcile()  # said once, whoever looks next
    assert len(harness_comments(gh_repo(h).get_pull(pull.number))) == 1


def test_reads_stay_o_changed_and_a_second_look_with_nothing_new_writes_nothing(
    h: Harness,
) -> None:
    h.forge.forge.clock = h.clock  # the forge's timestamps and the watch's on one clock
    plan = "".join(
        f"### T{n}: Notes {n}\nWrite NOTES.md.\n\n"
        "check: `python -c \"import pathlib; assert pathlib.Path('NOTES.md').exists()\"`\n\n"
        for n in (1, 2, 3)
    )
    script = h.tmp / "round_agent.py"
    script.write_text(AGENT)
    command = shlex.join([sys.executable, str(script)]) + " {prompt_file}"
    p = h.pipeline(plan, agent=command, settings=settings())
    p.parts.clock = h.clock
    p.run()
    pulls = h.pulls()
    assert len(pulls) == 3
    h.clock.advance(2)
    p.reconcile()  # reads each once more: they were read in the second they changed
    h.clock.advance(2)
    gh_repo(h).create_check_run("ci", pulls[0].head.sha, conclusion="failure")
    tally = p.tracker.tally
    before = dict(tally.by_kind)
    p.reconcile()  # one of three open pull requests changed: only it is read
    read = {k: v - before.get(k, 0) for k, v in tally.by_kind.items() if v != before.get(k, 0)}
    assert read.get("get_pull") == 1 and read.get("list_check_runs") == 1, read
    events = h.store.all_events(project=p.project)
    assert [e.payload.as_dict()["pr"] for e in events if e.kind == "pr_round"] == [pulls[0].number]

    forge = h.forge.forge
    mark = forge.mark()
    writes = tally.writes
    p.reconcile()  # nothing new: no write, and no pull request read
    counts = forge.request_counts(mark)
    assert tally.writes == writes
    assert not [k for k in counts if "{pull_number}" in k or "check-runs" in k], counts
    assert sum(counts.values()) <= 4, counts


def test_a_review_landing_in_the_second_the_pull_was_opened_and_read_is_still_answered(
    h: Harness,
) -> None:
    h.forge.forge.clock = h.clock  # the forge's timestamps and the watch's on one clock
    p = pipeline(h)
    p.parts.clock = h.clock
    p.run()  # opens the pull request and reads it, all within one second of the clock
    [pull] = h.pulls()
    assert rounds(h, p) == []
    collaborator_pull(h.forge, pull).create_review(body="not yet", event="REQUEST_CHANGES")
    assert gh_repo(h).get_pull(pull.number).updated_at == pull.updated_at
    # Its updated_at is the second it was opened in, as before the review: the listing alone
    # cannot tell. The watch reads it once more for that reason, and answers the review.
    h.clock.advance(2)
    p.reconcile()
    [one] = rounds(h, p)
    assert one["trigger"] == "review" and "not yet" in one["detail"]


def test_an_untouched_pull_is_looked_at_without_reading_it_whole_a_held_one_is_read(
    h: Harness,
) -> None:
    h.forge.forge.clock = h.clock
    p = pipeline(h)
    p.parts.clock = h.clock
    p.run()
    [pull] = h.pulls()
    h.clock.advance(2)
    tally = p.tracker.tally
    before = dict(tally.by_kind)
    p.reconcile()  # read once more (it was read in the second it changed): nothing is on it
    asked = {k: v - before.get(k, 0) for k, v in tally.by_kind.items() if v != before.get(k, 0)}
    assert p.rounds[-1].read == [pull.number]
    assert "get_pull" not in asked and "list_check_runs" not in asked, asked
    assert asked.get("list_timeline") == 1 and "list_reviews" not in asked, asked
    # A person holds it in the same second: the listing shows the label, so it is read whole.
    gh_repo(h).get_issue(pull.number).add_to_labels("agent-harness:hold")
    before = dict(tally.by_kind)
    p.reconcile()
    asked = {k: v - before.get(k, 0) for k, v in tally.by_kind.items() if v != before.get(k, 0)}
    assert asked.get("get_pull") == 1, asked
    events = h.store.all_events(project=p.project, item="T1")
    held = [e.payload.as_dict()["key"] for e in events if e.kind == "pr_rounds_stopped"]
    assert held == [f"hold:{pull.number}"]
