"""Reconcile against the embedded forge over HTTP, with real git merges, reverts and clones."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from agent_harness.forge import FaultKind
from agent_harness.plan.markdown import parse_plan
from agent_harness.queue import items as queue_items
from agent_harness.queue import leases
from agent_harness.queue.retries import retry
from agent_harness.store.database import Store, open_store
from agent_harness.testing.clock import FakeClock
from agent_harness.testing.forge import READ_ONLY_TOKEN
from agent_harness.tracker.reconcile import ReconcileReport, reconcile

from .conftest import PROJECT, REPO, Scene, git

pytestmark = pytest.mark.integration


def queue(store: Store, *items: str) -> None:
    """Put items in the queue and carry each to pr_open, as the run pipeline would."""
    plan = parse_plan("\n".join(f"### {item}: work\n" for item in items))
    queue_items.enqueue(store, PROJECT, plan)
    for _ in items:
        lease = leases.claim_next(store, PROJECT, "w1", 60.0)
        assert lease is not None
        leases.complete(store, lease)


def states(report: ReconcileReport) -> dict[str, str]:
    return {t.item: t.state for t in report.transitions}


def labels(scene: Scene, number: int) -> list[str]:
    return sorted(label.name for label in scene.repo.get_issue(number).labels)


def comments(scene: Scene, number: int) -> list[str]:
    return [c.body for c in scene.repo.get_issue(number).get_comments()]


def test_merge_is_recorded_once_label_comment_queue_event(scene: Scene, store: Store) -> None:
    queue(store, "T1")
    issue = scene.issue("T1", labels=("feature", "agent-harness:pr-open"))
    pr = scene.open_pr("T1", issue)
    sha = scene.merge(pr)
    report = reconcile(scene.tracker(), store=store)
    assert report.ok, report.problems
    assert report.stateless
    [transition] = report.transitions
    assert (transition.item, transition.state, transition.pr) == ("T1", "merged", pr)
    assert transition.evidence["sha"] == sha and transition.evidence["merged_at"]
    assert labels(scene, issue) == ["agent-harness:merged", "feature"]
    [said] = comments(scene, issue)
    assert f"#{pr} was merged" in said and "agent-harness-reconcile" in said
    assert queue_items.get_item(store, PROJECT, "T1").state == "merged"
    events = [e for e in store.all_events(project=PROJECT, item="T1") if e.kind == "outcome"]
    assert [e.payload.as_dict()["evidence"]["sha"] for e in events] == [sha]

    mark = scene.rf.forge.mark()
    again = reconcile(scene.tracker(), store=store)
    assert again.transitions == [] and again.ok and not again.stateless
    assert scene.writes(mark) == {}
    # Nothing changed: the pull and commit listings were conditional and answered 304.
    assert again.requests == 2 and again.pulls_listed == 0


def test_passes_started_at_once_record_a_merge_once_and_say_it_once(
    scene: Scene, store: Store, tmp_path: Path
) -> None:
    # Four at once each saw the merge as new: each commented, and each said it recorded it.
    queue(store, "T1")
    issue = scene.issue("T1", labels=("agent-harness:pr-open",))
    pr = scene.open_pr("T1", issue)
    scene.merge(pr)
    start = threading.Barrier(4)
    reports: list[ReconcileReport] = []

    def one() -> None:
        with open_store(str(tmp_path / "harness.sqlite")) as own:
            start.wait()
            reports.append(reconcile(scene.tracker(), store=own))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(reports) == 4 and all(r.ok for r in reports)
    assert sorted(len(r.transitions) for r in reports) == [0, 0, 0, 1]
    assert len(comments(scene, issue)) == 1
    events = [e for e in store.all_events(project=PROJECT, item="T1") if e.kind == "outcome"]
    assert len(events) == 1


def test_closed_unmerged_is_marked_closed(scene: Scene, store: Store) -> None:
    queue(store, "T1")
    pr = scene.open_pr("T1")
    scene.close(pr)
    report = reconcile(scene.tracker(), store=store)
    assert states(report) == {"T1": "closed"}
    assert queue_items.get_item(store, PROJECT, "T1").state == "closed"
    assert "agent-harness:closed" in labels(scene, 1)


def test_open_pull_requests_change_nothing(scene: Scene) -> None:
    scene.open_pr("T1")
    mark = scene.rf.forge.mark()
    report = reconcile(scene.tracker())
    assert report.transitions == [] and report.tracked == 1
    assert scene.writes(mark) == {}


def test_revert_button_then_revert_of_the_revert(scene: Scene, store: Store) -> None:
    queue(store, "T1")
    issue = scene.issue("T1")
    pr = scene.open_pr("T1", issue)
    scene.merge(pr)
    reconcile(scene.tracker(), store=store)
    revert = scene.revert_pr(pr)
    report = reconcile(scene.tracker(), store=store)
    assert states(report) == {"T1": "reverted"}
    assert report.transitions[0].evidence["revert_pr"] == revert
    assert labels(scene, issue) == ["agent-harness:reverted", "feature"]
    assert queue_items.get_item(store, PROJECT, "T1").state == "reverted"
    assert "flagged for a person" in comments(scene, issue)[-1]

    scene.revert_pr(revert)  # "Revert "Revert ..."": the change is back
    back = reconcile(scene.tracker(), store=store)
    assert states(back) == {"T1": "merged"}
    assert labels(scene, issue) == ["agent-harness:merged", "feature"]
    assert len(comments(scene, issue)) == 3
    assert queue_items.get_item(store, PROJECT, "T1").state == "merged"  # reapplied: merged again


def test_merged_and_reverted_between_two_looks_is_recorded_merged_then_reverted(
    scene: Scene, store: Store
) -> None:
    queue(store, "T1")
    pr = scene.open_pr("T1", scene.issue("T1"))
    scene.revert_on_main(scene.merge(pr))  # nobody reconciled while it was merged
    report = reconcile(scene.tracker(), store=store)
    assert states(report) == {"T1": "reverted"}
    assert queue_items.get_item(store, PROJECT, "T1").state == "reverted"
    outcomes = [e for e in store.all_events(project=PROJECT, item="T1") if e.kind == "outcome"]
    moves = [(e.payload.as_dict()["from"], e.payload.as_dict()["to"]) for e in outcomes]
    assert moves == [("pr_open", "merged"), ("merged", "reverted")]
    retry(store, PROJECT, "T1")  # and a person can try it again
    assert queue_items.get_item(store, PROJECT, "T1").state == "pending"


def test_git_revert_on_main_and_reapply(scene: Scene, store: Store) -> None:
    pr = scene.open_pr("T1")
    merge_sha = scene.merge(pr)
    reconcile(scene.tracker(), store=store)
    revert_sha = scene.revert_on_main(merge_sha)
    report = reconcile(scene.tracker(), store=store)
    assert states(report) == {"T1": "reverted"}
    assert report.transitions[0].evidence["revert_commit"] == revert_sha
    assert any("not in the queue" in note for note in report.notes)
    scene.revert_on_main(revert_sha)
    back = reconcile(scene.tracker(), store=store)
    assert states(back) == {"T1": "merged"}
    assert "reapplied_after" in back.transitions[0].evidence
    assert "agent-harness:merged" in labels(scene, 1)


def test_squash_merge_reverted_by_commit_and_branch_deleted(scene: Scene) -> None:
    pr = scene.open_pr("T1")
    squash = scene.merge(pr, method="squash")
    head = scene.repo.get_pull(pr).head.ref
    scene.repo.get_git_ref(f"heads/{head}").delete()
    report = reconcile(scene.tracker())
    assert states(report) == {"T1": "merged"} and report.ok
    scene.revert_on_main(squash)
    later = reconcile(scene.tracker())
    assert states(later) == {"T1": "reverted"}


def test_stateless_ci_run_twice_writes_nothing_the_second_time(scene: Scene) -> None:
    merged, closed = scene.open_pr("T1"), scene.open_pr("T2")
    scene.open_pr("T3")
    scene.merge(merged)
    scene.close(closed)
    first = reconcile(scene.tracker(), store=None)
    assert states(first) == {"T1": "merged", "T2": "closed"} and first.stateless
    mark = scene.rf.forge.mark()
    second = reconcile(scene.tracker(), store=None)
    assert second.transitions == [] and second.ok
    assert scene.writes(mark) == {}
    # With no memory: one listing of pulls, of commits and of issues; nothing per item.
    assert sorted(scene.rf.forge.request_counts(mark)) == [
        "GET /repos/{owner}/{repo}",
        "GET /repos/{owner}/{repo}/commits",
        "GET /repos/{owner}/{repo}/issues",
        "GET /repos/{owner}/{repo}/pulls",
    ]


def test_dry_run_reports_and_writes_nothing(scene: Scene, store: Store) -> None:
    queue(store, "T1")
    scene.merge(scene.open_pr("T1"))
    mark = scene.rf.forge.mark()
    report = reconcile(scene.tracker(), store=store, dry_run=True)
    assert states(report) == {"T1": "merged"}
    assert scene.writes(mark) == {}
    assert queue_items.get_item(store, PROJECT, "T1").state == "pr_open"
    assert store.get_meta("reconcile:octo/app") is None
    assert states(reconcile(scene.tracker(), store=store)) == {"T1": "merged"}


def test_a_dropped_comment_post_is_checked_not_repeated(scene: Scene) -> None:
    scene.merge(scene.open_pr("T1"))
    scene.rf.forge.faults.inject("drop_after", "POST", "*/comments")
    report = reconcile(scene.tracker())
    assert report.ok, report.problems
    assert len(comments(scene, 1)) == 1
    assert "agent-harness:merged" in labels(scene, 1)


def test_bad_inputs_are_reported_and_the_rest_carries_on(scene: Scene) -> None:
    gone = scene.open_pr("T1")
    scene.merge(gone)
    edited = scene.open_pr("T2")
    scene.merge(edited)
    scene.repo.get_issue(3).edit(body="a person rewrote this issue")  # T2's issue, marker gone
    # A revert commit naming a commit nobody tracks, and a Revert PR naming a PR that is gone.
    git(scene.clone, "fetch", "-q", "origin")
    git(scene.clone, "checkout", "-q", "-B", "main", "origin/main")
    git(
        scene.clone,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "Revert x\n\nThis reverts commit " + "1" * 40 + ".",
    )
    git(scene.clone, "push", "-q", "origin", "main")
    scene.push_branch("revert-999", "r.txt", "r\n")
    ghost = scene.repo.create_pull(
        base="main", head="revert-999", title='Revert "Old thing"', body="Reverts octo/app#999"
    )
    scene.merge(ghost.number)
    report = reconcile(scene.tracker())
    assert states(report) == {"T1": "merged", "T2": "merged"}
    assert report.unknown_reverts == 1
    assert any("#999" in p and "deleted" in p for p in report.problems)
    assert any("issue #3" in p and "marker" in p for p in report.problems)
    assert "agent-harness:merged" in labels(scene, 1)
    assert "agent-harness:merged" not in labels(scene, 3)


def test_token_without_write_permission_is_reported_per_item(scene: Scene) -> None:
    scene.merge(scene.open_pr("T1"))
    scene.close(scene.open_pr("T2"))
    report = reconcile(scene.tracker(token=READ_ONLY_TOKEN))
    assert states(report) == {"T1": "merged", "T2": "closed"}
    assert len(report.problems) == 2
    assert all("not updated" in p for p in report.problems)
    assert comments(scene, 1) == []
    fixed = reconcile(scene.tracker())
    assert states(fixed) == {"T1": "merged", "T2": "closed"} and fixed.ok


def test_force_pushed_default_branch_is_reported_not_reverted(scene: Scene, store: Store) -> None:
    pr = scene.open_pr("T1")
    scene.merge(pr)
    reconcile(scene.tracker(), store=store)
    git(scene.clone, "fetch", "-q", "origin")
    first = git(scene.clone, "rev-list", "--max-parents=0", "origin/main")
    git(scene.clone, "checkout", "-q", "-B", "main", first)
    git(scene.clone, "commit", "-q", "--allow-empty", "-m", "rewritten history")
    git(scene.clone, "push", "-q", "-f", "origin", "main")
    report = reconcile(scene.tracker(), store=store)
    assert report.transitions == []
    assert any("not among the commits on main" in p for p in report.problems)


def test_a_revert_still_standing_is_never_called_undone_when_the_merge_commit_is_unlisted(
    scene: Scene, store: Store
) -> None:
    # The commits listing asks `since` the merge: a merge commit stamped a second before its
    # `merged_at` (or a pull request merged by pushing its older commits) is left out of it.
    # The reconciler then said "no longer on main (force-pushed?)" and, with the revert PR
    # still standing, posted "The revert was itself undone; T1 is merged again".
    queue(store, "T1")
    issue = scene.issue("T1")
    pr = scene.open_pr("T1", issue)
    merge_sha = scene.merge(pr)
    reconcile(scene.tracker(), store=store)
    revert = scene.revert_pr(pr)
    listed = scene.tracker()._call("GET", f"/repos/{REPO}/commits", "x", params={"sha": "main"})
    unlisted = [commit for commit in listed[1] if commit["sha"] != merge_sha]
    scene.rf.forge.faults.inject(FaultKind.REPLY, "GET", f"/repos/{REPO}/commits", status=200,
                                 body=unlisted)  # fmt: skip
    report = reconcile(scene.tracker(), store=store)
    assert states(report) == {"T1": "reverted"}
    assert report.transitions[0].evidence["revert_pr"] == revert
    assert not any("merged again" in said for said in comments(scene, issue))
    assert queue_items.get_item(store, PROJECT, "T1").state == "reverted"


def test_plan_key_scopes_the_run_and_old_merges_leave_the_revert_window(scene: Scene) -> None:
    merge_sha = scene.merge(scene.open_pr("T1"))
    scene.revert_on_main(merge_sha)
    other = scene.open_pr("T2")
    body = scene.repo.get_pull(other).body.replace('"plan": "PLAN"', '"plan": "OTHER"')
    scene.repo.get_pull(other).edit(body=body)
    scene.close(other)
    only_other = reconcile(scene.tracker(), plan_key="OTHER", dry_run=True)
    assert states(only_other) == {"T2": "closed"}
    # Forty days on, a 30-day window no longer reads commits: the revert goes unseen.
    forty_days_on = FakeClock(start=time.time() + 40 * 86400)
    later = reconcile(scene.tracker(), plan_key="PLAN", dry_run=True, clock=forty_days_on)
    assert states(later) == {"T1": "merged"} and later.commits_read == 0
    now = reconcile(scene.tracker(), plan_key="PLAN", dry_run=True)
    assert states(now) == {"T1": "reverted"} and now.commits_read >= 2


def test_requeue_of_a_reverted_item_is_reported_when_the_queue_refuses(
    scene: Scene, store: Store
) -> None:
    queue(store, "T1")
    merge_sha = scene.merge(scene.open_pr("T1"))
    reconcile(scene.tracker(), store=store, requeue_reverted=True)
    scene.revert_on_main(merge_sha)
    report = reconcile(scene.tracker(), store=store, requeue_reverted=True)
    assert states(report) == {"T1": "reverted"}
    said = comments(scene, 1)[-1]
    if "requeued" in report.transitions[0].done:
        assert "re-queued" in said and queue_items.get_item(store, PROJECT, "T1").state == "pending"
    else:  # the queue does not allow reverted -> pending: say so, and never claim it happened
        assert any("not re-queued" in p for p in report.problems)
        assert "flagged for a person" in said


def test_a_local_queue_catches_up_after_ci_labelled_the_merge(scene: Scene, store: Store) -> None:
    # CI reconciled statelessly first (label + comment on the issue); then a local store with
    # no memory of it must still move its own queue, without announcing the merge twice.
    queue(store, "T1")
    issue = scene.issue("T1")
    pr = scene.open_pr("T1", issue)
    scene.merge(pr)
    ci = reconcile(scene.tracker())
    assert states(ci) == {"T1": "merged"}
    local = reconcile(scene.tracker(), store=store)
    assert queue_items.get_item(store, PROJECT, "T1").state == "merged"
    assert states(local) == {"T1": "merged"}
    assert len(comments(scene, issue)) == 1
