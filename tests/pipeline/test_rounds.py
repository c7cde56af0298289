"""PR rounds over the in-memory fakes: which feedback sends an item back, in what order, and
what stops it; the same rules the forge end-to-end tests drive over real git and HTTP."""

from __future__ import annotations

import pytest

from agent_harness.pipeline.run import Pipeline
from agent_harness.queue.items import get_item
from agent_harness.store.events import Pushed
from agent_harness.testing.scripted import ScriptedImplementer, ScriptedReviewer, Step, verdict
from agent_harness.tracker.protocol import PullFeedback

from .conftest import Rig

pytestmark = pytest.mark.unit

ONE = "### T1: Count words\n"


def opened(rig: Rig, *steps: Step) -> tuple[Pipeline, int, str]:
    rig.implementer = ScriptedImplementer([Step(files={"words.py": "N = 1\n"}), *steps])
    rig.reviewer = ScriptedReviewer([verdict(True)] * 4)
    pipeline = rig.pipeline(ONE)
    pipeline.run()
    [number] = rig.tracker.pulls
    events = rig.store.all_events(project=pipeline.project, item="T1")
    head = [e.payload for e in events if isinstance(e.payload, Pushed)][-1].sha
    return pipeline, number, head


def said(rig: Rig, number: int, head: str, **facts: object) -> None:
    base = {"mergeable_state": "clean", "base_ref": "main"}
    rig.tracker.feedback[number] = PullFeedback(number, head, **(base | facts))  # type: ignore[arg-type]


def kinds(rig: Rig, p: Pipeline) -> list[dict[str, object]]:
    events = rig.store.all_events(project=p.project, item="T1")
    return [e.payload.as_dict() | {"kind": e.kind} for e in events if e.kind.startswith("pr_")]


def test_a_failed_check_outranks_a_review_and_the_fix_answers_on_the_same_pull(rig: Rig) -> None:
    p, number, _ = opened(rig, Step(files={"words.py": "N = 2\n"}))
    # The fake does not follow the branch: an empty head says "whatever the head is now".
    said(
        rig,
        number,
        "",
        checks=(("ci", "failure", "1 failed: test_words"),),
        reviews=((7, "CHANGES_REQUESTED", "rename N", ""),),
    )
    p.run()
    [round_one] = [k for k in kinds(rig, p) if k["kind"] == "pr_round"]
    assert round_one["trigger"] == "check_run" and "1 failed: test_words" in str(
        round_one["detail"]
    )
    assert list(rig.tracker.pulls) == [number]  # the same pull request, updated
    [comment] = rig.tracker.comments[number]
    assert "**Round 1** (check_run)" in comment.body
    assert get_item(rig.store, p.project, "T1").state == "pr_open"


def test_the_hold_label_stops_rounds_and_so_does_a_foreign_head(rig: Rig) -> None:
    p, number, head = opened(rig)
    said(rig, number, head, labels=("agent-harness:hold",), checks=(("ci", "failure", ""),))
    p.reconcile()
    said(rig, number, "f" * 40, checks=(("ci", "failure", ""),))
    p.reconcile()
    stops = [k["key"] for k in kinds(rig, p) if k["kind"] == "pr_rounds_stopped"]
    assert stops == [f"hold:{number}", "foreign:" + "f" * 40]
    assert get_item(rig.store, p.project, "T1").state == "pr_open"
    held, told = rig.tracker.comments[number]  # each brake is said on the pull request, once
    assert "the label `agent-harness:hold` holds it. Take the label off" in held.body
    assert "did not make" in told.body


def test_with_no_round_left_the_item_fails_saying_why(rig: Rig) -> None:
    rig.settings.max_pr_rounds = 0
    p, number, head = opened(rig)
    said(rig, number, head, checks=(("lint", "timed_out", ""),))
    p.reconcile()
    item = get_item(rig.store, p.project, "T1")
    assert item.state == "failed"
    assert "budget of 0 PR rounds is spent" in (item.reason or "")
    assert "lint (timed_out)" in (item.reason or "")


def test_a_persons_standing_request_for_changes_holds_merge_when_green(rig: Rig) -> None:
    rig.settings.merge_when_green = True
    p, number, head = opened(rig)
    # The harness's reviewer approved; a person asked for changes and has not approved since.
    person = ((8, "CHANGES_REQUESTED", "not like this", "0" * 40),)
    said(rig, number, head, checks=(("ci", "success", ""),), reviews=person)
    rig.settings.max_pr_rounds = 0  # no round either: only the merge is in question
    p.reconcile()
    assert not [k for k in kinds(rig, p) if k["kind"] == "pr_merge"]
    assert rig.tracker.tally.by_kind.get("merge_pull", 0) == 0
    [held] = p.rounds[-1].merged  # said in the pass's report, so the hold is not silent
    assert held["merged"] is False and held["detail"] == "a person's request for changes stands"
    # Once that person approves, their request no longer stands: merged.
    said(rig, number, head, checks=(("ci", "success", ""),), reviews=((9, "APPROVED", "", head),))
    p.reconcile()
    [merge] = [k for k in kinds(rig, p) if k["kind"] == "pr_merge"]
    assert merge["merged"] is True


@pytest.mark.parametrize("where", ["review", "line comment"])
def test_the_stop_command_in_a_review_or_a_line_comment_stops_rounds(rig: Rig, where: str) -> None:
    p, number, head = opened(rig)
    stop = "/agent-harness stop\nI will finish this one myself."
    if where == "review":
        feedback: dict[str, object] = {"reviews": ((7, "CHANGES_REQUESTED", stop, head),)}
    else:
        feedback = {"line_comments": ((5, "words.py", 1, stop, head),)}
    said(rig, number, head, **feedback)
    p.reconcile()
    stops = [k["key"] for k in kinds(rig, p) if k["kind"] == "pr_rounds_stopped"]
    assert stops == [f"stop:{number}"]
    assert not [k for k in kinds(rig, p) if k["kind"] == "pr_round"]  # nothing sent back


def test_a_pass_without_the_clone_leaves_a_conflict_for_one_with_it_and_spends_no_round(
    rig: Rig,
) -> None:
    from agent_harness.pipeline.rounds import watch_all

    p, number, head = opened(rig)
    said(rig, number, head, mergeable_state="dirty")
    watched = watch_all(rig.tracker, rig.store, [number], plan_key=p.plan_key, repo=None)
    assert [(x["item"], x["pr"]) for x in watched.left] == [("T1", number)]
    assert "conflicts with its base `main`: left for a pass with the clone" in str(
        watched.left[0]["reason"]
    )
    assert watched.rounds == [] and get_item(rig.store, p.project, "T1").state == "pr_open"
    p.reconcile()  # the run's own pass has the clone: it takes the conflict up
    assert [k["trigger"] for k in kinds(rig, p) if k["kind"] == "pr_round"] == ["conflict"]


def test_a_spent_round_budget_is_in_the_watchs_report(rig: Rig) -> None:
    from agent_harness.pipeline.rounds import watch_all

    p, number, head = opened(rig)
    said(rig, number, head, checks=(("ci", "failure", "boom"),))
    watched = watch_all(rig.tracker, rig.store, [number], plan_key=p.plan_key, max_rounds=0)
    [failed] = watched.failed
    assert failed["item"] == "T1" and "budget of 0 PR rounds is spent" in str(failed["reason"])
    assert watched.as_json()["failed"] == [failed]


def test_a_retried_item_closes_its_old_pull_request_and_no_stranger_is_seen_on_it(
    rig: Rig,
) -> None:
    from agent_harness.queue.retries import retry

    rig.settings.max_pr_rounds = 0
    p, old, head = opened(rig, Step(files={"words.py": "N = 3\n"}))
    said(rig, old, head, checks=(("ci", "failure", "boom"),))
    p.reconcile()  # no round left: the item fails, its pull request stays open
    assert get_item(rig.store, p.project, "T1").state == "failed"
    retry(rig.store, p.project, "T1")
    rig.reviewer = ScriptedReviewer([verdict(True)])
    p.run()  # started over on a new branch: a new pull request
    new = max(rig.tracker.pulls)
    assert new != old and rig.tracker.pulls[old].state == "closed"
    assert rig.tracker.pulls[new].head_ref != rig.tracker.pulls[old].head_ref
    assert any(f"Superseded by #{new}" in c.body for c in rig.tracker.comments[old])
    said(rig, new, "")  # nothing asked of the new one
    p.reconcile()
    stops = [k for k in kinds(rig, p) if k["kind"] == "pr_rounds_stopped"]
    assert stops == []


def test_a_retried_items_new_pull_request_has_its_own_round_budget_counted_from_one(
    rig: Rig,
) -> None:
    from agent_harness.queue.retries import retry

    rig.settings.max_pr_rounds = 1
    p, old, _head = opened(
        rig,
        Step(files={"words.py": "N = 3\n"}),
        Step(files={"w.py": "1\n"}),
        Step(files={"w.py": "2\n"}),  # the new pull request's round changes something too
    )
    said(rig, old, "", checks=(("ci", "failure", "boom"),))
    p.run()  # round 1 of 1 on the first pull request
    events = rig.store.all_events(project=p.project, item="T1")
    fixed = [e.payload for e in events if isinstance(e.payload, Pushed)][-1].sha
    said(rig, old, fixed, checks=(("ci", "failure", "again"),))
    p.reconcile()  # none left: failed
    assert get_item(rig.store, p.project, "T1").state == "failed"
    retry(rig.store, p.project, "T1")
    rig.reviewer = ScriptedReviewer([verdict(True)] * 2)
    p.run()
    new = max(rig.tracker.pulls)
    events = rig.store.all_events(project=p.project, item="T1")
    new_head = [e.payload for e in events if isinstance(e.payload, Pushed)][-1].sha
    said(rig, new, new_head, checks=(("ci", "failure", "on the new one"),))
    p.run()  # the new pull request's first round, within its own budget
    rounds = [(k["pr"], k["round"], k["action"]) for k in kinds(rig, p) if k["kind"] == "pr_round"]
    assert rounds == [(old, 1, "agent"), (old, 2, "failed"), (new, 1, "agent")]
    assert get_item(rig.store, p.project, "T1").state == "pr_open"


def test_merge_when_green_waits_while_a_dependency_is_no_longer_merged(rig: Rig) -> None:
    from agent_harness.queue.items import record_outcome

    rig.implementer = ScriptedImplementer(
        [Step(files={"words.py": "N = 1\n"}), Step(files={"lines.py": "L = 1\n"})]
    )
    rig.reviewer = ScriptedReviewer([verdict(True)] * 2)
    p = rig.pipeline("### T1: Count words\n\n### T2: Count lines\ndepends on: T1\n")
    p.run()
    [first] = rig.tracker.pulls
    rig.tracker.merge(first)
    p.run()  # T1 merged: T2 is worked and its pull request opened
    second = max(rig.tracker.pulls)
    assert get_item(rig.store, p.project, "T2").state == "pr_open"
    record_outcome(rig.store, p.project, "T1", "reverted", {"by": "test"})  # undone on main
    rig.settings.merge_when_green = True
    events = rig.store.all_events(project=p.project, item="T2")
    head = [e.payload for e in events if isinstance(e.payload, Pushed)][-1].sha
    said(rig, second, head, checks=(("ci", "success", ""),))
    p.reconcile()
    assert not rig.tracker.pulls[second].merged  # built on a change that is gone
    record_outcome(rig.store, p.project, "T1", "merged", {"by": "test"})
    p.reconcile()
    assert rig.tracker.pulls[second].merged


def test_a_dry_pass_says_what_each_pull_request_would_bring_and_does_nothing(rig: Rig) -> None:
    from agent_harness.pipeline.rounds import watch_all

    p, number, head = opened(rig, Step(files={"words.py": "N = 2\n"}))
    said(rig, number, head, checks=(("ci", "failure", "1 failed"),))
    writes = rig.tracker.tally.writes
    dry = watch_all(rig.tracker, rig.store, [number], plan_key=p.plan_key, dry_run=True)
    assert [(r["pr"], r["trigger"], r["would"]) for r in dry.rounds] == [
        (number, "check_run", "send back")
    ]
    assert rig.tracker.tally.writes == writes  # nothing said on the pull request
    assert not [k for k in kinds(rig, p) if k["kind"] == "pr_round"]
    assert get_item(rig.store, p.project, "T1").state == "pr_open"
    p.run()  # the real pass still sees it, and does it
    assert [k["trigger"] for k in kinds(rig, p) if k["kind"] == "pr_round"] == ["check_run"]


def test_a_conflict_left_for_the_clone_is_taken_up_by_the_next_pass_with_it_unprompted(
    rig: Rig,
) -> None:
    # Neither the pull request nor its base changes again after the pass without the clone:
    # the next pass with the clone once skipped it for good (the listing said "unchanged").
    from agent_harness.pipeline.rounds import watch_all

    p, number, head = opened(rig)
    said(rig, number, head, mergeable_state="dirty")
    left = watch_all(rig.tracker, rig.store, [number], plan_key=p.plan_key, repo=None)
    assert [x["pr"] for x in left.left] == [number]
    again = watch_all(rig.tracker, rig.store, [], plan_key=p.plan_key, repo=None)
    assert again.rounds == []  # still no clone: still left, nothing spent
    taken = watch_all(rig.tracker, rig.store, [], plan_key=p.plan_key, repo=p.parts.repo)
    assert [k["trigger"] for k in kinds(rig, p) if k["kind"] == "pr_round"] == ["conflict"]
    assert taken.left == []


def test_a_round_the_agent_leaves_unchanged_is_not_said_to_be_answered(rig: Rig) -> None:
    p, number, head = opened(rig, Step())  # in the round, the agent changes nothing
    said(rig, number, head, reviews=((7, "CHANGES_REQUESTED", "add a docstring", head),))
    p.run()
    # No "Pushed ... to the same branch" for a push of the same commit, and no pull request
    # handed back as if the review were answered: the attempt failed, saying why (and, its
    # attempts spent, the item's failure is the one word on the pull request).
    [comment] = rig.tracker.comments.get(number, [])
    assert comment.body.startswith("The item failed, so this pull request gets no more rounds")
    events = rig.store.all_events(project=p.project, item="T1")
    assert [e.payload.sha for e in events if isinstance(e.payload, Pushed)] == [head]
    item = get_item(rig.store, p.project, "T1")
    assert item.state == "failed"
    assert f"left pull request #{number} as it was" in (item.reason or "")
