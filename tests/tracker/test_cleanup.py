"""Worktree cleanup over real git: finished and fully pushed goes, anything unpushed stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_harness.git.cleanup import WorktreeInfo, list_worktrees, prune, remove
from agent_harness.git.errors import WorktreeError
from agent_harness.git.naming import plan_namespace
from agent_harness.git.worktrees import WorkRepo, Worktree
from agent_harness.tracker.markers import PullMarker
from agent_harness.tracker.reconcile import reconcile

from .conftest import PLAN, Scene, git

pytestmark = pytest.mark.integration


def delivered(
    scene: Scene, repo: WorkRepo, item: str, plan: str = PLAN, generation: int = 0
) -> tuple[Worktree, int]:
    """A worktree with one commit, pushed, and its marked PR (as the run pipeline leaves it)."""
    tree = repo.prepare(item, f"{item} work", plan_namespace(plan), generation)
    (tree.path / f"{item}.txt").write_text(f"{item}\n")
    repo.commit_all(tree, f"{item}: work")
    repo.push(tree)
    issue = scene.issue(item)
    body = f"Closes #{issue}\n\n{PullMarker(item, plan, issue).render()}"
    pull = scene.repo.create_pull(base="main", head=tree.branch, title=f"{item}: work", body=body)
    return tree, int(pull.number)


def test_reconcile_removes_finished_pushed_worktrees_and_keeps_unpushed(scene: Scene) -> None:
    repo = WorkRepo(scene.clone, scene.tmp / "state")
    t1, pr1 = delivered(scene, repo, "T1")
    t2, pr2 = delivered(scene, repo, "T2")
    t3, pr3 = delivered(scene, repo, "T3")
    (t2.path / "later.txt").write_text("never pushed\n")
    repo.commit_all(t2, "T2: more, not pushed")
    scene.merge(pr1)
    scene.merge(pr3, method="squash")
    scene.repo.get_git_ref(f"heads/{t3.branch}").delete()  # squash merged, branch deleted
    scene.close(pr2)
    report = reconcile(scene.tracker(), work=repo)
    assert {t.item: t.state for t in report.transitions} == {
        "T1": "merged",
        "T2": "closed",
        "T3": "merged",
    }
    assert sorted(report.cleaned) == ["T1", "T3"]
    assert report.kept == ["T2"]
    assert any("T2" in n and "1 commit(s) not on the remote" in n for n in report.notes)
    assert not t1.path.exists() and not t3.path.exists() and t2.path.exists()
    branches = git(scene.clone, "branch", "--format=%(refname:short)").split()
    assert t1.branch not in branches and t3.branch not in branches and t2.branch in branches


def test_a_merge_recorded_by_a_pass_without_the_clone_is_cleaned_by_the_next_with_it(
    scene: Scene,
) -> None:
    # The run's own hint reconciles without --work; later passes with it removed only the
    # worktrees of merges they saw happen themselves, so that one stayed for good.
    repo = WorkRepo(scene.clone, scene.tmp / "state")
    t1, pr1 = delivered(scene, repo, "T1")
    scene.merge(pr1)
    first = reconcile(scene.tracker())  # no clone: the merge is recorded, nothing removed
    assert [t.item for t in first.transitions] == ["T1"] and first.cleaned == []
    assert t1.path.exists()
    later = reconcile(scene.tracker(), work=repo)
    assert later.transitions == [] and later.cleaned == ["T1"]
    assert not t1.path.exists()


def test_worktrees_named_apart_from_their_ids_are_cleaned_like_any_other(scene: Scene) -> None:
    """A dotted id (`2.1`, spelled `2-1` on disk), a retried item (`T4.r1`) and an item of a
    second plan (`tasks--T1`) are each found again as their item's, and go once merged."""
    repo = WorkRepo(scene.clone, scene.tmp / "state")
    dotted, pr_dotted = delivered(scene, repo, "2.1")
    retried, pr_retried = delivered(scene, repo, "T4", generation=1)
    other, pr_other = delivered(scene, repo, "T1", plan="tasks")
    assert (dotted.path.name, retried.path.name, other.path.name) == ("2-1", "T4.r1", "tasks--T1")
    for number in (pr_dotted, pr_retried, pr_other):
        scene.merge(number)
    report = reconcile(scene.tracker(), work=repo)
    assert sorted((t.plan, t.item) for t in report.transitions) == [
        ("PLAN", "2.1"),
        ("PLAN", "T4"),
        ("tasks", "T1"),
    ]
    assert sorted(report.cleaned) == ["2.1", "T1", "T4"] and report.kept == []
    assert not dotted.path.exists() and not retried.path.exists() and not other.path.exists()
    # The listing names each by its item, and knows only the plan it is given the states of.
    mine = delivered(scene, repo, "3.1")[0]
    listed = {i.path.name: (i.item_id, i.state) for i in list_worktrees(repo, {"3.1": "pr_open"})}
    assert listed == {mine.path.name: ("3.1", "pr_open")}


def test_listing_sizes_states_and_prune(scene: Scene) -> None:
    repo = WorkRepo(scene.clone, scene.tmp / "state")
    done, _ = delivered(scene, repo, "T1")
    busy = repo.prepare("T2", "T2 work")
    (busy.path / "wip.txt").write_text("x" * 5000)
    infos = {i.item_id: i for i in list_worktrees(repo, {"T1": "merged", "T2": "merged"})}
    assert infos["T1"].safe and infos["T1"].size_bytes > 0
    assert not infos["T2"].safe and infos["T2"].reason == "uncommitted changes in the worktree"
    assert infos["T2"].size_bytes >= 5000
    unknown = list_worktrees(repo, {})
    assert not any(i.safe for i in unknown)
    assert {i.reason for i in unknown} == {"item state unknown (not in the queue)"}
    dry = prune(repo, list(infos.values()), dry_run=True)
    assert [i.item_id for i in dry.removed] == ["T1"] and done.path.exists()
    real = prune(repo, list(infos.values()))
    assert [i.item_id for i in real.removed] == ["T1"] and not done.path.exists()
    assert [i.item_id for i in real.kept] == ["T2"] and Path(busy.path).exists()


def test_a_removal_git_refuses_is_an_error_in_git_s_words(tmp_path: Path) -> None:
    bare = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(bare))
    git(tmp_path, "clone", "-q", str(bare), "work")
    work = tmp_path / "work"
    git(work, "commit", "-q", "--allow-empty", "-m", "first")
    git(work, "push", "-q", "origin", "main")
    repo = WorkRepo(work, tmp_path / "state")
    gone = repo.worktrees_dir / "T9"
    branch = "agent-harness/T9-gone"
    info = WorktreeInfo("T9", gone, branch, 0, "merged", 0, False, True, "merged")
    with pytest.raises(WorktreeError) as failed:
        remove(repo, info)
    assert failed.value.message == (
        f"git branch -D failed in {repo.path}: branch '{branch}' not found."
    )
